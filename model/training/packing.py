"""Packing a model's weights to int8: small enough to send to a GPU machine beside its
corpus (within 64 MiB, the shipped weights' 56 MiB of bf16 included), or to ship when its
bf16 weights are over the repository's 64 MiB limit.

Packed, every floating-point matrix is int8 with one bf16 scale per group of 64 values
along its rows (absolute maximum to 127): 29 MiB, a relative error under 1% of each
group's largest value. A warm restart from the unpacked weights repairs that in its first
steps (docs/log/training.md, the GPU runs).

    python -m diffusion_infill.model.training.packing pack model/weights .gpu/init   # here
    python -m diffusion_infill.model.training.packing unpack .gpu/init /tmp/init  # there

A model directory may hold `model.int8.safetensors` instead of `model.safetensors`:
model/weight_files.py's `read_weights` gives the float tensors of either, and the engine
(model/modernbert.py), training's `--init-from` and training/grow.py load through it.
training/release.py packs a model whose bf16 weights would not fit in the repository's
64 MiB (a model grown by training/grow.py).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from diffusion_infill.model.weight_files import GROUP, PACKED, WEIGHTS, unpacked


def quantize(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """int8 values and bf16 scales of a tensor whose size divides into groups of GROUP."""
    groups = t.float().reshape(-1, GROUP)
    scale = groups.abs().amax(dim=1, keepdim=True).clamp_min(1e-12) / 127
    scale = scale.to(torch.bfloat16)
    q = torch.round(groups / scale.float()).clamp(-127, 127).to(torch.int8)
    return q.reshape(t.shape), scale.squeeze(1)


def packable(t: torch.Tensor) -> bool:
    """Matrices only: vectors (norms, biases) are small and travel as they are."""
    return t.is_floating_point() and t.dim() >= 2 and t.numel() % GROUP == 0


def pack_file(src: Path, dst: Path) -> None:
    """Write the packed form of weights file `src` (model.safetensors) to `dst`."""
    tensors = load_file(src)
    out: dict[str, torch.Tensor] = {}
    for name, t in tensors.items():
        if packable(t):
            out[f"{name}.q"], out[f"{name}.scale"] = quantize(t)
        else:
            out[name] = t.contiguous()
    dtype = str(next(iter(tensors.values())).dtype).removeprefix("torch.")
    save_file(out, dst, metadata={"group": str(GROUP), "dtype": dtype})


def pack(src: Path, dst: Path) -> None:
    """Pack model directory `src` into `dst`; weights that are packed already (a shipped
    grown model) are copied as they are."""
    dst.mkdir(parents=True, exist_ok=True)
    if not (src / WEIGHTS).is_file() and (src / PACKED).is_file():
        shutil.copy2(src / PACKED, dst / PACKED)
    else:
        pack_file(src / WEIGHTS, dst / PACKED)
    copy_beside(src, dst)


def unpack(src: Path, dst: Path) -> None:
    if not (src / PACKED).is_file():
        raise FileNotFoundError(
            f"{src}: no {PACKED} (`python -m diffusion_infill.model.training.packing pack` "
            "makes it)"
        )
    out = unpacked(load_file(src / PACKED))
    dst.mkdir(parents=True, exist_ok=True)
    save_file(out, dst / WEIGHTS, metadata={"format": "pt"})
    copy_beside(src, dst)


def copy_beside(src: Path, dst: Path) -> None:
    """The export's other files (config, tokenizer, training history, card)."""
    for f in src.iterdir():
        if f.is_file() and f.name not in (WEIGHTS, PACKED):
            shutil.copy2(f, dst / f.name)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["pack", "unpack"])
    parser.add_argument("src", type=Path, help="an exported model folder (pack) or a packed one")
    parser.add_argument("dst", type=Path)
    args = parser.parse_args(argv)
    (pack if args.action == "pack" else unpack)(args.src, args.dst)
    size = sum(f.stat().st_size for f in args.dst.iterdir()) / 2**20
    print(f"{args.action}ed {args.src} -> {args.dst} ({size:.1f} MiB)")


if __name__ == "__main__":
    main()
