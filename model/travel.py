"""An exported model packed small enough to travel to a GPU machine beside its corpus, or to
ship when its bf16 weights are over the 64 MiB limit.

A GPU machine may take at most 64 MiB with each call, the shipped weights (56 MiB of bf16)
included. Packed, every floating-point matrix is int8 with one bf16 scale per group of 64
values along its rows (absolute maximum to 127): 29 MiB, a relative error under 1% of each
group's largest value. A warm restart from the unpacked weights repairs that in its first
steps (docs/TRAINING.md, the GPU runs).

    python -m model.travel pack model/weights .gpu/init      # here
    python -m model.travel unpack .gpu/init /tmp/init         # there; then --init-from

A model directory may hold `model.int8.safetensors` instead of `model.safetensors`:
`read_weights` gives the float tensors of either, and the engine (model/modernbert.py),
model.train's `--init-from` and model.grow load through it. model.ship packs a model whose
bf16 weights would not fit in the repository's 64 MiB (a model grown by model.grow).
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
        raise FileNotFoundError(f"{src}: no {PACKED} (`python -m model.travel pack` makes it)")
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
