"""Which floating-point type is fast on this machine: fp32 or bf16.

A CPU without bf16 instructions (no AMX, no AVX-512 BF16: an AMD EPYC Zen 3, say) emulates
bf16 and ran autocast ~3x *slower* than fp32 in inference and ~40x slower in training
(docs/TRAINING.md); a CPU with AMX runs it ~2x faster. So the choice is made per machine:
from the CPU's flags where they settle it, else by timing both on a matrix product of the
shape this project's models multiply. `INFILL_DTYPE=fp32|bf16` (or an explicit request)
overrides.
"""

from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass
from pathlib import Path

import torch

BF16_FLAGS = frozenset({"amx_bf16", "avx512_bf16"})
NAMES = {"fp32": torch.float32, "float32": torch.float32, "bf16": torch.bfloat16,
         "bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class Precision:
    dtype: torch.dtype
    reason: str  # why it was chosen, for logs and the README

    @property
    def name(self) -> str:
        return "bf16" if self.dtype == torch.bfloat16 else "fp32"


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The CPU's feature flags (empty where /proc/cpuinfo is not readable)."""
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("flags"):
                return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def _time_matmul(dtype: torch.dtype, reps: int = 12) -> float:
    """Seconds for a (256 x 256) @ (256 x 1024) linear layer, best of `reps`."""
    x = torch.randn(256, 256)
    layer = torch.nn.Linear(256, 1024)
    best = float("inf")
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16,
                                         enabled=dtype == torch.bfloat16):
        for _ in range(reps):
            t0 = time.perf_counter()
            layer(x)
            best = min(best, time.perf_counter() - t0)
    return best


@functools.cache
def _fastest_on_cpu() -> Precision:
    flags = cpu_flags()
    if flags and not flags & BF16_FLAGS:
        return Precision(torch.float32, "CPU has no bf16 instructions (amx_bf16/avx512_bf16)")
    fp32, bf16 = _time_matmul(torch.float32), _time_matmul(torch.bfloat16)
    if bf16 < 0.9 * fp32:
        return Precision(torch.bfloat16, f"bf16 timed faster ({bf16 * 1e6:.0f} vs "
                                         f"{fp32 * 1e6:.0f} us per matmul)")
    return Precision(torch.float32, f"fp32 timed as fast ({fp32 * 1e6:.0f} vs "
                                    f"{bf16 * 1e6:.0f} us per matmul)")


def pick_precision(device: torch.device | str = "cpu", requested: str | None = None
                   ) -> Precision:
    """The dtype to compute in on `device`: `requested`, else $INFILL_DTYPE, else measured."""
    wish = (requested or os.environ.get("INFILL_DTYPE") or "auto").lower()
    if wish != "auto":
        if wish not in NAMES:
            raise ValueError(f"unknown dtype {wish!r}: use auto, fp32 or bf16")
        source = "requested" if requested else "INFILL_DTYPE"
        return Precision(NAMES[wish], f"{source}={wish}")
    device = torch.device(device)
    if device.type == "cuda":
        if torch.cuda.is_bf16_supported():
            return Precision(torch.bfloat16, "CUDA device with bf16")
        return Precision(torch.float32, "CUDA device without bf16")
    if device.type != "cpu":
        return Precision(torch.float32, f"{device.type}: fp32")
    return _fastest_on_cpu()
