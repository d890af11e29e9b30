"""An exported model packed small enough to travel to a lent GPU beside its corpus.

The device tool sends at most 64 MiB with each call, the shipped weights (56 MiB of bf16)
included. Packed, every floating-point matrix is int8 with one bf16 scale per group of 64
values along its rows (absolute maximum to 127): 29 MiB, a relative error under 1% of each
group's largest value. A warm restart from the unpacked weights repairs that in its first
steps (docs/TRAINING.md, "Training on a lent GPU"); nothing else is ever loaded from it.

    python -m model.travel pack model/weights .gpu/init      # here
    python -m model.travel unpack .gpu/init /tmp/init         # there; then --init-from
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

GROUP = 64
WEIGHTS = "model.safetensors"
PACKED = "model.int8.safetensors"


def quantize(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """int8 values and bf16 scales of a tensor whose size divides into groups of GROUP."""
    groups = t.float().reshape(-1, GROUP)
    scale = groups.abs().amax(dim=1, keepdim=True).clamp_min(1e-12) / 127
    scale = scale.to(torch.bfloat16)
    q = torch.round(groups / scale.float()).clamp(-127, 127).to(torch.int8)
    return q.reshape(t.shape), scale.squeeze(1)


def dequantize(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """float32 values of int8 `q` with its per-group `scale` (what `quantize` returned)."""
    groups = q.float().reshape(-1, GROUP) * scale.float().unsqueeze(1)
    return groups.reshape(q.shape)


def packable(t: torch.Tensor) -> bool:
    """Matrices only: vectors (norms, biases) are small and travel as they are."""
    return t.is_floating_point() and t.dim() >= 2 and t.numel() % GROUP == 0


def pack(src: Path, dst: Path) -> None:
    tensors = load_file(src / WEIGHTS)
    out: dict[str, torch.Tensor] = {}
    for name, t in tensors.items():
        if packable(t):
            out[f"{name}.q"], out[f"{name}.scale"] = quantize(t)
        else:
            out[name] = t.contiguous()
    dst.mkdir(parents=True, exist_ok=True)
    dtype = str(next(iter(tensors.values())).dtype).removeprefix("torch.")
    save_file(out, dst / PACKED, metadata={"group": str(GROUP), "dtype": dtype})
    copy_beside(src, dst)


def unpack(src: Path, dst: Path) -> None:
    if not (src / PACKED).is_file():
        raise FileNotFoundError(f"{src}: no {PACKED} (`python -m model.travel pack` makes it)")
    packed = load_file(src / PACKED)
    out: dict[str, torch.Tensor] = {}
    for name, t in packed.items():
        if name.endswith(".scale"):
            continue
        if name.endswith(".q"):
            base = name.removesuffix(".q")
            out[base] = dequantize(t, packed[f"{base}.scale"])
        else:
            out[name] = t.float() if t.is_floating_point() else t
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
