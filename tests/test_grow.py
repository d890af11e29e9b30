"""A grown model computes what its source computes, keeps its record, and trains on from it;
what cannot be grown is refused with a clear message."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import ModernBertForMaskedLM

from diffusion_infill.model import modernbert
from diffusion_infill.model.training import grow, train


def _logits(path: Path, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(own forward, transformers' forward) of a model directory."""
    loaded = modernbert.load(path)
    assert loaded is not None, "model/modernbert.py runs the grown architecture"
    lib = ModernBertForMaskedLM.from_pretrained(path, dtype=torch.float32).eval()
    with torch.no_grad():
        return loaded[1](ids).logits, lib(ids).logits


@pytest.mark.parametrize("factor", [2, 3])
def test_the_grown_model_has_more_layers_and_the_same_logits(
    tiny_model_dir: Path, tmp_path: Path, factor: int
) -> None:
    src = tmp_path / "src"
    shutil.copytree(tiny_model_dir, src)
    (src / "training.json").write_text(
        json.dumps({"tokens_total": 1234, "history": [{"tokens": 1234, "valid_masked_ce": 5.0}]})
    )
    before = json.loads((src / "config.json").read_text())

    grow.main([str(src), str(tmp_path / "grown"), "--factor", str(factor)])

    config = json.loads((tmp_path / "grown" / "config.json").read_text())
    layers = before["num_hidden_layers"]
    assert config["num_hidden_layers"] == layers * factor
    kinds = before["layer_types"]
    assert config["layer_types"] == [k for k in kinds for _ in range(factor)]
    assert set(kinds) == {"full_attention", "sliding_attention"}, "both kinds are exercised"

    torch.manual_seed(1)
    ids = torch.randint(4, before["vocab_size"], (2, 100))  # longer than the sliding window
    own_src, lib_src = _logits(src, ids)
    own, lib = _logits(tmp_path / "grown", ids)
    assert torch.allclose(own, own_src, atol=1e-5)
    assert torch.allclose(lib, lib_src, atol=1e-5)

    record = json.loads((tmp_path / "grown" / "training.json").read_text())
    assert record["tokens_total"] == 1234 and record["history"][0]["tokens"] == 1234
    assert record["grown"]["layers"] == [layers, layers * factor]
    assert (tmp_path / "grown" / "tokenizer.json").is_file()


@pytest.mark.slow
def test_training_from_a_grown_model_moves_the_new_layers_and_counts_on(
    corpus: Path, tok_dir: Path, tmp_path: Path
) -> None:
    first = tmp_path / "first"
    common = [
        "--preset",
        "tiny",
        "--corpus",
        str(corpus),
        "--batch-size",
        "4",
        "--seq-len",
        "64",
        "--quiet",
        "--dtype",
        "fp32",
        "--max-steps",
        "3",
        "--lr",
        "1e-2",
    ]
    train.main([*common, "--tokenizer", str(tok_dir / "tokenizer.json"), "--out", str(first)])
    grow.grow(first / "export", tmp_path / "grown", 2)
    second = tmp_path / "second"
    train.main([*common, "--init-from", str(tmp_path / "grown"), "--out", str(second)])

    weights = load_file(str(second / "export" / "model.safetensors"))
    new_layer = f"{grow.LAYER}1."  # the copy of layer 0, zero output projections when grown
    for name in grow.ZEROED:
        assert weights[new_layer + name].float().abs().max() > 0, f"{name} did not train"
    before = json.loads((first / "export" / "training.json").read_text())
    after = json.loads((second / "export" / "training.json").read_text())
    assert after["tokens_total"] == before["tokens_total"] + after["tokens"]
    config = json.loads((second / "export" / "config.json").read_text())
    assert config["num_hidden_layers"] == 4


def test_what_cannot_be_grown_is_refused_clearly(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        grow.main([str(tiny_model_dir), str(tmp_path / "out"), "--factor", "1"])
    assert exit_info.value.code == 2
    assert "at least twice the layers" in capsys.readouterr().err

    with pytest.raises(SystemExit):
        grow.main([str(tmp_path), str(tmp_path / "out")])  # no config.json at all
    assert "config.json" in capsys.readouterr().err

    (tmp_path / "bert").mkdir()
    (tmp_path / "bert" / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(SystemExit):
        grow.main([str(tmp_path / "bert"), str(tmp_path / "out")])
    assert "only ModernBERT" in capsys.readouterr().err

    src = tmp_path / "no_weights"
    src.mkdir()
    shutil.copy(tiny_model_dir / "config.json", src / "config.json")
    with pytest.raises(SystemExit):
        grow.main([str(src), str(tmp_path / "out")])
    assert "no model.safetensors" in capsys.readouterr().err
    assert not (tmp_path / "out").exists(), "nothing is written for a refused source"
