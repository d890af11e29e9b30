"""The weights packed to travel to a GPU machine: small, close to the original, and a warm
restart starts from them with the exported model's history."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from diffusion_infill.model.training import packing, train


def test_packed_weights_are_int8_and_unpack_close_to_the_original(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    packed, unpacked = tmp_path / "packed", tmp_path / "unpacked"
    packing.main(["pack", str(tiny_model_dir), str(packed)])
    packing.main(["unpack", str(packed), str(unpacked)])

    stored = load_file(packed / packing.PACKED)
    assert all(t.dtype == torch.int8 for name, t in stored.items() if name.endswith(".q"))
    assert (packed / "config.json").exists() and (packed / "tokenizer.json").exists()
    assert not (packed / packing.WEIGHTS).exists(), "the full-size weights stay behind"

    original = load_file(tiny_model_dir / packing.WEIGHTS)
    back = load_file(unpacked / packing.WEIGHTS)
    assert original.keys() == back.keys()
    for name, t in original.items():
        err = (t.float() - back[name]).abs().max().item()
        assert err <= t.float().abs().max().item() / 127 + 1e-6, name
    matrices = [n for n, t in original.items() if packing.packable(t)]
    assert matrices, "the tiny model has matrices to pack"

    # a folder whose weights are packed already (a shipped grown model) packs as it is
    again = tmp_path / "again"
    packing.main(["pack", str(packed), str(again)])
    assert (again / packing.PACKED).read_bytes() == (packed / packing.PACKED).read_bytes()


def test_a_warm_restart_from_unpacked_weights_carries_the_record(
    corpus: Path, tok_dir: Path, tmp_path: Path
) -> None:
    first = tmp_path / "first"
    train.main(
        [
            "--preset",
            "tiny",
            "--corpus",
            str(corpus),
            "--tokenizer",
            str(tok_dir / "tokenizer.json"),
            "--out",
            str(first),
            "--batch-size",
            "4",
            "--seq-len",
            "64",
            "--quiet",
            "--dtype",
            "fp32",
            "--max-steps",
            "2",
        ]
    )
    packing.pack(first / "export", tmp_path / "packed")
    packing.unpack(tmp_path / "packed", tmp_path / "init")
    second = tmp_path / "second"
    train.main(
        [
            "--preset",
            "tiny",
            "--corpus",
            str(corpus),
            "--init-from",
            str(tmp_path / "init"),
            "--out",
            str(second),
            "--batch-size",
            "4",
            "--seq-len",
            "64",
            "--quiet",
            "--dtype",
            "fp32",
            "--max-steps",
            "2",
        ]
    )
    before = json.loads((first / "export" / "training.json").read_text())
    after = json.loads((second / "export" / "training.json").read_text())
    assert after["tokens_total"] == before["tokens_total"] + after["tokens"]


def test_unpacking_a_folder_with_nothing_packed_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="model.training.packing pack"):
        packing.unpack(tmp_path, tmp_path / "out")
