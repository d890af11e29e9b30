"""The weights file of a model directory: `model.safetensors` as stored, or
`model.int8.safetensors`, its matrices packed to int8 with one bf16 scale per group of
GROUP values along their rows (model/training/packing.py writes that form; the shipped
weights may be in it). `read_weights` gives the float tensors of either."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file

GROUP = 64
WEIGHTS = "model.safetensors"
PACKED = "model.int8.safetensors"


def dequantize(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """float32 values of int8 `q` with its per-group `scale` (what `quantize` returned)."""
    groups = q.float().reshape(-1, GROUP) * scale.float().unsqueeze(1)
    return groups.reshape(q.shape)


def read_weights(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of model directory `path`: from model.safetensors as stored, else
    dequantized (float32) from model.int8.safetensors. FileNotFoundError if neither."""
    if (path / WEIGHTS).is_file():
        return load_file(str(path / WEIGHTS))
    if (path / PACKED).is_file():
        return unpacked(load_file(str(path / PACKED)))
    raise FileNotFoundError(f"{path}: no {WEIGHTS} or {PACKED}")


def has_weights(path: Path) -> bool:
    return (path / WEIGHTS).is_file() or (path / PACKED).is_file()


def unpacked(packed: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Float tensors of a packed file's contents (matrices dequantized to float32)."""
    out: dict[str, torch.Tensor] = {}
    for name, t in packed.items():
        if name.endswith(".scale"):
            continue
        if name.endswith(".q"):
            base = name.removesuffix(".q")
            out[base] = dequantize(t, packed[f"{base}.scale"])
        else:
            out[name] = t.float() if t.is_floating_point() else t
    return out
