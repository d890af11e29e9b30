"""Which number type is fast on this machine: fp32, bf16, or int8 weights (CPU inference).

A CPU without bf16 instructions (no AMX, no AVX-512 BF16: an AMD EPYC Zen 3, say) emulates
bf16 and ran autocast ~3x *slower* than fp32 in inference and ~40x slower in training
(docs/TRAINING.md); a CPU with AMX runs it ~2x faster. So the choice is made per machine,
by timing fp32, bf16 and int8 on a matrix product of the shape this project's models
multiply (bf16 left out where the CPU's flags name no bf16 instructions): int8 linear
layers where they are the fastest (a CPU with VNNI and AVX-512 BF16 but no AMX: 0.6x
bf16's time, when bf16 still cast its weights at every pass; a Zen 3 without bf16, 0.8x
fp32's) or bf16 is no faster than fp32, else bf16;
int8 answers at the same held-out quality as fp32 (docs/ARCHITECTURE.md, "int8 on the CPU").
`INFILL_DTYPE=fp32|bf16|int8` (or an explicit request) overrides.

int8 (inference on the CPU only; model/int8.py): the linear layers' weights int8 per
output channel (within -64..63), their inputs quantised to 8 bits per row (token) at each
call, oneDNN's integer matrix product; the two layers whose inputs do not survive 8 bits
(`KEEP_FP32`) and the rest of the model stay fp32. bf16: the linear layers' weights stored
in bf16 (model/bf16.py), the model run under autocast; timed so too."""

from __future__ import annotations

import copy
import functools
import os
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass

import torch

from diffusion_infill.model.bf16 import bf16_linear_weights
from diffusion_infill.model.cpu import BF16_FLAGS, cpu_flags
from diffusion_infill.model.int8 import quantise_int8

NAMES = {
    "fp32": torch.float32,
    "float32": torch.float32,
    "bf16": torch.bfloat16,
    "bfloat16": torch.bfloat16,
    "int8": torch.float32,
}  # int8: fp32 around int8 layers


@dataclass(frozen=True)
class Precision:
    dtype: torch.dtype  # what activations are computed in
    reason: str  # why it was chosen, for logs and the README
    int8: bool = False  # linear layers in int8 (model/int8.py; CPU inference only)

    @property
    def name(self) -> str:
        if self.int8:
            return "int8"
        return "bf16" if self.dtype == torch.bfloat16 else "fp32"


def cpu_bf16(flags: Collection[str] | None = None, env: Mapping[str, str] = os.environ) -> bool:
    """Whether the CPU has bf16 instructions that torch may use: its flags name them and
    `ONEDNN_MAX_CPU_ISA`, when set, does not cap oneDNN below them (AVX2, say, as when a
    machine without them is emulated)."""
    if not set(cpu_flags() if flags is None else flags) & BF16_FLAGS:
        return False
    cap = env.get("ONEDNN_MAX_CPU_ISA", "").upper()
    return not cap or cap == "ALL" or "BF16" in cap or "AMX" in cap


def _flags_rule_out_bf16() -> bool:
    """The CPU's flags name no bf16 instructions (flags that cannot be read rule out
    nothing: the choice is then timed)."""
    flags = cpu_flags()
    return bool(flags) and not flags & BF16_FLAGS


@functools.cache
def int8_unavailable() -> str | None:
    """Why this torch cannot compute int8 layers on this machine, None where it can: one
    quantised layer is built and run. oneDNN's int8 kernels need not be in a torch build
    (one built without oneDNN, or for another CPU architecture), and where they are missing
    `auto` must still pick a dtype that runs."""
    try:
        layer = quantise_int8(torch.nn.Sequential(torch.nn.Linear(64, 64)), keep_fp32=())
        with torch.no_grad():
            layer(torch.randn(2, 64))
    except Exception as exc:  # the op missing (AttributeError), not built (RuntimeError), ...
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return None


def _time_matmul(layer: torch.nn.Module, x: torch.Tensor, dtype: torch.dtype) -> float:
    """Seconds for one call of `layer` on `x` computed in `dtype` (bf16: autocast; int8:
    `layer` is quantised already)."""
    with (
        torch.no_grad(),
        torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16),
    ):
        t0 = time.perf_counter()
        layer(x)
        return time.perf_counter() - t0


def _best_times(rounds: int = 12, bf16: bool = True) -> tuple[float, float, float]:
    """Best fp32, bf16 and int8 seconds of a (256 x 256) @ (256 x 1024) linear layer, the
    three timed in turn (fp32, bf16, int8, fp32, ...) so that a load that comes or goes
    while timing falls on all alike, on one thread: with two threads and the other core
    busy (a training run, a test suite), both dtypes waited on the busy core, 12 and 27 ms
    per call instead of 0.7 and 0.4, and bf16 looked slower on a CPU where it is 1.6x
    faster. Without `bf16`, bf16 is not timed (its time: infinity); nor is int8 where this
    torch has no int8 kernels (`int8_unavailable`)."""
    x = torch.randn(256, 256)
    layer = torch.nn.Linear(256, 1024)
    # bf16 timed as it runs: weights stored in bf16 (model/bf16.py), not cast at each call
    bf16_layer = bf16_linear_weights(copy.deepcopy(layer))
    quantised = None  # no int8 kernels here: int8 is not timed (its time: infinity)
    if int8_unavailable() is None:
        quantised = quantise_int8(torch.nn.Sequential(layer), keep_fp32=())
    fp32 = int8 = float("inf")
    bf16_time = float("inf")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the kernels' ratio, without threads waiting on a busy core
    try:
        for _ in range(rounds):
            fp32 = min(fp32, _time_matmul(layer, x, torch.float32))
            if bf16:
                bf16_time = min(bf16_time, _time_matmul(bf16_layer, x, torch.bfloat16))
            if quantised is not None:
                int8 = min(int8, _time_matmul(quantised, x, torch.int8))
    finally:
        torch.set_num_threads(threads)
    return fp32, bf16_time, int8


@functools.cache
def _fastest_on_cpu() -> Precision:
    if _flags_rule_out_bf16():  # bf16 emulated: not timed
        fp32, _, int8 = _best_times(bf16=False)
        return _int8_or_fp32(fp32, int8, "CPU has no bf16 instructions")
    fp32, bf16, int8 = _best_times()
    if int8 < 0.9 * min(bf16, fp32):  # VNNI without AMX: int8 beats bf16 (a Zen 4, say)
        return Precision(
            torch.float32,
            f"int8 timed faster ({int8 * 1e6:.0f} vs {bf16 * 1e6:.0f} us per matmul in bf16, "
            f"{fp32 * 1e6:.0f} in fp32): int8 linear layers",
            int8=True,
        )
    if bf16 < 0.9 * fp32:
        return Precision(
            torch.bfloat16,
            f"bf16 timed faster ({bf16 * 1e6:.0f} vs {fp32 * 1e6:.0f} us per matmul)",
        )
    why = f"bf16 timed no faster ({bf16 * 1e6:.0f} vs {fp32 * 1e6:.0f} us per matmul)"
    return _int8_or_fp32(fp32, int8, why)


def _int8_or_fp32(fp32: float, int8: float, why: str) -> Precision:
    """Where bf16 is out (`why`): int8 linear layers where they timed faster than fp32, as
    they do with oneDNN's int8 kernels (AVX2: 0.8x on a Zen 3), else fp32, so that a slow
    int8 kernel (torch._int_mm ran 40x slower than fp32 there, docs/log/architecture.md
    "int8 on a Zen 3") never becomes the default."""
    if (missing := int8_unavailable()) is not None:
        return Precision(torch.float32, f"{why}; no int8 kernels in this torch ({missing})")
    times = f"{int8 * 1e6:.0f} vs {fp32 * 1e6:.0f} us per matmul in fp32"
    if int8 < fp32:
        return Precision(torch.float32, f"{why}; int8 timed faster ({times})", int8=True)
    return Precision(torch.float32, f"{why}; int8 timed slower ({times})")


def pick_precision(device: torch.device | str = "cpu", requested: str | None = None) -> Precision:
    """The dtype to compute in on `device`: `requested`, else $INFILL_DTYPE, else measured."""
    wish = (requested or os.environ.get("INFILL_DTYPE") or "auto").lower()
    device = torch.device(device)
    if wish != "auto":
        if wish not in NAMES:
            raise ValueError(f"unknown dtype {wish!r}: use auto, fp32, bf16 or int8")
        source = "requested" if requested else "INFILL_DTYPE"
        if wish == "int8" and device.type != "cpu":
            raise ValueError(
                f"{source}={wish}: int8 weights are for the CPU; use fp32 or bf16 on {device.type}"
            )
        if wish == "int8" and (missing := int8_unavailable()) is not None:
            raise ValueError(
                f"{source}={wish}: this torch has no int8 kernels on this machine ({missing}); "
                "use fp32 or bf16"
            )
        return Precision(NAMES[wish], f"{source}={wish}", int8=wish == "int8")
    if device.type == "cuda":
        if torch.cuda.is_bf16_supported():
            return Precision(torch.bfloat16, "CUDA device with bf16")
        return Precision(torch.float32, "CUDA device without bf16")
    if device.type != "cpu":
        return Precision(torch.float32, f"{device.type}: fp32")
    return _fastest_on_cpu()


def pick_training_precision(
    device: torch.device | str = "cpu", requested: str | None = None
) -> Precision:
    """The dtype to train (or compute a loss) in on `device`: `pick_precision`'s, but never
    int8 (int8 layers are for inference): where it picks int8, bf16 if the CPU has bf16
    instructions and they time faster than fp32, else fp32."""
    chosen = pick_precision(device, requested)
    if not chosen.int8:
        return chosen
    if _flags_rule_out_bf16():
        return Precision(torch.float32, "CPU has no bf16 instructions: fp32 to train")
    fp32, bf16, _ = _best_times()
    if bf16 < 0.9 * fp32:
        return Precision(
            torch.bfloat16,
            f"bf16 timed faster than fp32 ({bf16 * 1e6:.0f} vs {fp32 * 1e6:.0f} us per "
            "matmul; int8 is for inference)",
        )
    return Precision(torch.float32, f"{chosen.reason.split(':')[0]}: fp32 to train")
