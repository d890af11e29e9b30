"""int8 with the MLPs' output layers smoothed: `python -m diffusion_infill.model.calibrate_int8`
writes a model's calibration beside its weights; a model directory with one loads in int8
with every MLP output layer quantised (the same function in fp32, folded into the MLP's
input layer), one without loads the plain recipe; a calibration that does not fit its
model is refused by name; a release carries a model's calibration or drops a stale one."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from diffusion_infill.model import smoothing
from diffusion_infill.model.denoiser import ModelLoadError
from diffusion_infill.model.loading import load_denoiser

SAMPLE = "def add(a, b):\n    total = a + b\n    return total\n"


def _calibrate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "diffusion_infill.model.calibrate_int8", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def calibrated(tiny_model_dir: Path, modules_corpus: Path, tmp_path_factory) -> Path:
    """A copy of the tiny model with its int8 calibration, written by the command."""
    out = tmp_path_factory.mktemp("calibrated") / "model"
    shutil.copytree(tiny_model_dir, out)
    corpus = out.parent / "corpus"
    corpus.mkdir()
    (corpus / "train.jsonl").write_text((modules_corpus / "test.jsonl").read_text())
    done = _calibrate("--model", str(out), "--corpus", str(corpus), "--files", "8")
    assert done.returncode == 0, done.stderr
    assert f"wrote {out / smoothing.CALIBRATION}" in done.stderr
    return out


def _linear_names(model: torch.nn.Module) -> set[str]:
    return {n for n, m in model.named_modules() if type(m) is torch.nn.Linear}


def _logits(den, text: str = SAMPLE) -> np.ndarray:
    canvas = den.encode(text)
    canvas[6:10] = [den.special.mask] * 4
    return den.logits([canvas], [list(range(len(canvas)))])[0]


def test_the_command_writes_every_mlps_input_maxima(calibrated: Path) -> None:
    raw = json.loads((calibrated / smoothing.CALIBRATION).read_text())
    assert raw["format"] == smoothing.FORMAT and raw["alpha"] == smoothing.ALPHA
    assert "files of corpus/train.jsonl" in raw["source"]
    model = load_denoiser(calibrated, dtype="fp32").model
    mlps = {n: m for n, m in model.named_modules() if n.endswith(".mlp")}
    assert set(raw["input_max"]) == set(mlps)
    for name, values in raw["input_max"].items():
        assert len(values) == mlps[name].Wo.in_features and min(values) >= 0 and max(values) > 0


def test_a_calibrated_model_runs_its_mlp_output_layers_in_int8(
    calibrated: Path, tiny_model_dir: Path, monkeypatch
) -> None:
    monkeypatch.delenv("INFILL_DTYPE", raising=False)
    fp32 = load_denoiser(calibrated, dtype="fp32")
    plain = load_denoiser(tiny_model_dir, dtype="int8")
    smoothed = load_denoiser(calibrated, dtype="int8")
    assert "MLP outputs smoothed" in smoothed.precision.reason
    assert f"no {smoothing.CALIBRATION}" in plain.precision.reason
    everything = _linear_names(fp32.model)
    assert _linear_names(smoothed.model) == {"model.layers.0.attn.Wqkv", "head.dense"}
    assert {n for n in _linear_names(plain.model) if n.endswith("mlp.Wo")} == {
        n for n in everything if n.endswith("mlp.Wo")
    }
    # fp32 ignores the calibration: the weights as stored
    stored = load_denoiser(tiny_model_dir, dtype="fp32")
    np.testing.assert_array_equal(_logits(fp32), _logits(stored))
    want, got = _logits(fp32), _logits(smoothed)
    assert got.shape == want.shape and np.isfinite(got).all()
    assert np.abs(got - want).max() < 0.1 * np.abs(want).max()


def test_smoothing_moves_the_weights_and_keeps_the_fp32_function(calibrated: Path) -> None:
    den = load_denoiser(calibrated, dtype="fp32")
    calibration = smoothing.read_calibration(calibrated, den.model)
    assert calibration is not None
    before = _logits(den)
    wo = den.model.model.layers[0].mlp.Wo.weight.clone()
    smoothing.smooth_mlps(den.model, calibration)
    assert not torch.equal(wo, den.model.model.layers[0].mlp.Wo.weight)
    np.testing.assert_allclose(_logits(den), before, atol=1e-3)


def _write(path: Path, raw: dict) -> None:
    (path / smoothing.CALIBRATION).write_text(json.dumps(raw))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r.update(format=2), "format 2, expected 1"),
        (lambda r: r.update(alpha=0), "alpha must be in"),
        (lambda r: r.pop("input_max"), "unreadable"),
        (lambda r: r["input_max"].pop("model.layers.0.mlp"), "the model's MLPs are"),
        (lambda r: r["input_max"]["model.layers.0.mlp"].pop(), "needs"),
        (lambda r: r["input_max"]["model.layers.0.mlp"].__setitem__(0, -1.0), "finite number"),
        (lambda r: r["input_max"]["model.layers.0.mlp"].__setitem__(0, "x"), "finite number"),
    ],
)
def test_a_calibration_that_does_not_fit_is_refused_by_name(
    calibrated: Path, tmp_path: Path, change, message: str
) -> None:
    bad = tmp_path / "model"
    shutil.copytree(calibrated, bad)
    raw = json.loads((bad / smoothing.CALIBRATION).read_text())
    change(raw)
    _write(bad, raw)
    with pytest.raises(ModelLoadError, match=message):
        load_denoiser(bad, dtype="int8")
    load_denoiser(bad, dtype="fp32")  # only int8 reads it


def test_a_calibration_that_is_not_json_is_refused(calibrated: Path, tmp_path: Path) -> None:
    bad = tmp_path / "model"
    shutil.copytree(calibrated, bad)
    (bad / smoothing.CALIBRATION).write_text("{not json")
    with pytest.raises(ModelLoadError, match="unreadable .*int8_calibration.json"):
        load_denoiser(bad, dtype="int8")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--corpus", "nowhere"], "no train.jsonl in nowhere"),
        (["--files", "0"], "--files must be at least 1"),
        (["--alpha", "1.5"], "--alpha must be in (0, 1]"),
    ],
)
def test_the_command_names_a_bad_argument(calibrated: Path, args: list[str], message: str) -> None:
    base = {"--model": str(calibrated), "--corpus": str(calibrated.parent / "corpus")}
    base.update(dict(zip(args[::2], args[1::2], strict=True)))
    done = _calibrate(*[x for kv in base.items() for x in kv])
    assert done.returncode == 2 and message in done.stderr


def test_the_command_names_a_missing_model(calibrated: Path, tmp_path: Path) -> None:
    done = _calibrate(
        "--model", str(tmp_path / "none"), "--corpus", str(calibrated.parent / "corpus")
    )
    assert done.returncode == 2 and "model directory not found" in done.stderr
