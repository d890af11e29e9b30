"""The int8 study (benchmarks/int8_study.py): every option runs the same completions, and
bad arguments are named."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch


@pytest.mark.slow
def test_every_int8_option_completes_the_same_lines(
    run_benchmark, tiny_model_dir: Path, modules_corpus: Path, tmp_path: Path
) -> None:
    out = tmp_path / "int8.json"
    corpus = tmp_path / "corpus"  # the held-out files, and training files to calibrate on
    corpus.mkdir()
    (corpus / "test.jsonl").write_text((modules_corpus / "test.jsonl").read_text())
    (corpus / "train.jsonl").write_text((modules_corpus / "test.jsonl").read_text())
    options = [
        "fp32",
        "int8-channels",
        "int8",
        "int8-all",
        "int8-keep:decoder+*.mlp.Wo",
        "int8-smooth:0.8",
    ]
    done = run_benchmark(
        "int8_study",
        "--model",
        str(tiny_model_dir),
        "--corpus",
        str(corpus),
        "--n",
        "3",
        "--agreement",
        "2",
        "--options",
        ",".join(options),
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(out.read_text())
    assert list(got["formats"]) == options
    for r in got["formats"].values():
        assert r["n"] == 3 and len(r["offers"]) == 3
        assert 0 <= r["exact_match"] <= 1 and r["ms_p50"] > 0
        assert all("\n" not in o for o in r["offers"])  # one-line offers, as the server's
        assert r["wins_vs_fp32"] + r["losses_vs_fp32"] <= 3
        assert r["kl_vs_fp32"] >= 0 and 0 <= r["top1_vs_fp32"] <= 1 and r["slots"] >= 2
    formats = got["formats"]
    assert formats["fp32"]["kl_vs_fp32"] == 0 and formats["fp32"]["top1_vs_fp32"] == 1
    assert formats["int8-all"]["fp32_layers"] == []
    assert formats["int8-keep:decoder+*.mlp.Wo"]["fp32_layers"] == [
        "model.layers.0.mlp.Wo",
        "model.layers.1.mlp.Wo",
        "decoder",
    ]
    # smoothed, the MLPs' output layers go int8 too
    assert set(formats["int8-smooth:0.8"]["fp32_layers"]) == {
        "model.layers.0.attn.Wqkv",
        "head.dense",
    }
    # the default keeps KEEP_FP32; every other linear layer is int8
    assert set(formats["int8"]["fp32_layers"]) == {"model.layers.0.attn.Wqkv", "head.dense"}
    assert "model.layers.0.mlp.Wo" in formats["int8"]["int8_layers"]
    assert formats["fp32"]["int8_layers"] == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--options", "int4"], "unknown option(s) int4"),
        (["--options", ","], "unknown option(s) (none)"),
        (["--n", "0"], "--n must be at least 1"),
        (["--options", "int8-keep:"], "unknown option(s) int8-keep:"),
        (["--n", "3", "--agreement", "4"], "--agreement must be within 0..--n"),
        (["--options", "int8-smooth:1.5"], "unknown option(s) int8-smooth:1.5"),
        (["--options", "int8-smooth:x"], "unknown option(s) int8-smooth:x"),
    ],
)
def test_bad_arguments_are_named(capsys, args: list[str], message: str) -> None:
    from benchmarks import int8_study

    with pytest.raises(SystemExit) as done:
        int8_study.main(args)
    assert done.value.code == 2 and message in capsys.readouterr().err


def test_smoothing_folds_into_the_mlp_and_leaves_the_fp32_model_as_it_was(
    tiny_model_dir: Path,
) -> None:
    from benchmarks.int8_smooth import input_max, smoothed
    from diffusion_infill.model.loading import load_denoiser

    den = load_denoiser(tiny_model_dir, device="cpu", dtype="fp32")
    canvas = den.encode("def f(x):\n    return x + 1\n") + [den.special.mask] * 3
    cases = [(canvas, list(range(len(canvas) - 3, len(canvas))))]
    maxima = input_max(den, cases)
    assert maxima and all(m.min() >= 0 for m in maxima.values())
    canvases, positions = [canvas], [cases[0][1]]
    before = den.logits(canvases, positions)[0]
    for alpha in (0.5, 1.0):
        after = smoothed(den, maxima, alpha)
        name = next(n for n, _ in den.model.named_modules() if n.endswith("mlp.Wo"))
        old, new = (dict(d.model.named_modules())[name].weight for d in (den, after))
        assert not torch.equal(old, new)  # the weights moved, the function did not
        assert np.allclose(after.logits(canvases, positions)[0], before, atol=1e-3)
    with pytest.raises(ValueError, match="alpha"):
        smoothed(den, maxima, 0.0)
