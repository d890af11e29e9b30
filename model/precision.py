"""Which number type is fast on this machine: fp32, bf16, or int8 weights (CPU inference).

A CPU without bf16 instructions (no AMX, no AVX-512 BF16: an AMD EPYC Zen 3, say) emulates
bf16 and ran autocast ~3x *slower* than fp32 in inference and ~40x slower in training
(docs/TRAINING.md); a CPU with AMX runs it ~2x faster. So the choice is made per machine:
from the CPU's flags where they settle it (no bf16 instructions: int8), else by timing
fp32, bf16 and int8 on a matrix product of the shape this project's models multiply:
int8 linear layers (below) where they are the fastest (a CPU with VNNI and AVX-512 BF16
but no AMX, 0.6x bf16's time) or bf16 is no faster than fp32, else bf16; int8 answers
at the same held-out quality as fp32 (docs/ARCHITECTURE.md, "int8 on the CPU").
`INFILL_DTYPE=fp32|bf16|int8` (or an explicit request) overrides.

int8 (inference on the CPU only): the linear layers' weights are quantised to int8 per
output channel (within -64..63) and their inputs to 8 bits per call at run time (PyTorch's
dynamic quantisation, fbgemm kernels); the MLPs' output layers, whose inputs vary most from
token to token, with a scale per input row (`PER_ROW`); the two whose inputs do not survive
8 bits (`KEEP_FP32`) and the rest of the model stay fp32: inline completion about 2x
faster than fp32 on a 2-core EPYC, with the model's token distributions ~6x closer to
fp32's than with every linear layer in int8 with a scale per call (docs/ARCHITECTURE.md,
"int8 on the CPU").
"""

from __future__ import annotations

import copy
import fnmatch
import functools
import os
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

BF16_FLAGS = frozenset({"amx_bf16", "avx512_bf16"})
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
    int8: bool = False  # linear layers quantised to int8 (dynamic; CPU inference only)

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


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The CPU's feature flags (empty where /proc/cpuinfo is not readable)."""
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("flags"):
                return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def _time_matmul(layer: torch.nn.Module, x: torch.Tensor, dtype: torch.dtype) -> float:
    """Seconds for one call of `layer` on `x` computed in `dtype` (bf16: autocast; qint8:
    `layer` is quantised already)."""
    with (
        torch.no_grad(),
        torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16),
    ):
        t0 = time.perf_counter()
        layer(x)
        return time.perf_counter() - t0


def _best_times(rounds: int = 12) -> tuple[float, float, float]:
    """Best fp32, bf16 and int8 seconds of a (256 x 256) @ (256 x 1024) linear layer, the
    three timed in turn (fp32, bf16, int8, fp32, ...) so that a load that comes or goes
    while timing falls on all alike, on one thread: with two threads and the other core
    busy (a training run, a test suite), both dtypes waited on the busy core, 12 and 27 ms
    per call instead of 0.7 and 0.4, and bf16 looked slower on a CPU where it is 1.6x
    faster."""
    x = torch.randn(256, 256)
    layer = torch.nn.Linear(256, 1024)
    quantised = quantise_int8(torch.nn.Sequential(layer), keep_fp32=(), per_row=())
    fp32 = bf16 = int8 = float("inf")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the kernels' ratio, without threads waiting on a busy core
    try:
        for _ in range(rounds):
            fp32 = min(fp32, _time_matmul(layer, x, torch.float32))
            bf16 = min(bf16, _time_matmul(layer, x, torch.bfloat16))
            int8 = min(int8, _time_matmul(quantised, x, torch.qint8))
    finally:
        torch.set_num_threads(threads)
    return fp32, bf16, int8


@functools.cache
def _fastest_on_cpu() -> Precision:
    if _flags_rule_out_bf16():
        return Precision(
            torch.float32, "CPU has no bf16 instructions: int8 linear layers", int8=True
        )
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
    return Precision(
        torch.float32,
        f"bf16 timed no faster ({bf16 * 1e6:.0f} vs "
        f"{fp32 * 1e6:.0f} us per matmul): int8 linear layers",
        int8=True,
    )


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


def quantise_int8(
    model: torch.nn.Module,
    weight_range: int = 0,
    keep_fp32: Collection[str] | None = None,
    per_row: Collection[str] | None = None,
) -> torch.nn.Module:
    """`model` with its nn.Linear layers replaced by dynamically quantised int8 twins, for
    CPU inference: weights int8 per output channel within -64..63 (-weight_range ..
    weight_range - 1 when given: 128 for the full 8 bits), inputs quantised per call to
    the full 8 bits (`FullRangeLinear`), fbgemm kernels; the rest stays fp32. Linear
    layers whose qualified names match a pattern of `keep_fp32` (fnmatch, e.g. "decoder",
    "*.mlp.Wo", "model.layers.0.*"; default `KEEP_FP32`) stay fp32 too. Those matching a
    pattern of `per_row` (default `PER_ROW`) and not kept quantise each input row with a
    scale of its own (`RowScaled`) instead of one scale for the call. The module tree keeps
    its call signatures (a row-scaled layer's linear layer one level down, `.linear`), so
    the cached forward (model/cache.py) runs on it unchanged; `model` is left as it was.

    Why those ranges: PyTorch's default (weights per tensor, inputs to 7 bits) cost
    held-out exact match; 8-bit inputs with 8-bit weights can overflow the int16 sums of
    AVX2 kernels (CPUs without VNNI), 7-bit weights cannot (docs/ARCHITECTURE.md,
    "int8 on the CPU")."""
    import warnings  # noqa: PLC0415

    from torch.ao.quantization import (  # noqa: PLC0415
        PerChannelMinMaxObserver,
        PlaceholderObserver,
        QConfig,
        quantize_dynamic,
    )

    weight_range = weight_range or WEIGHT_RANGE
    qconfig = QConfig(
        activation=PlaceholderObserver.with_args(dtype=torch.quint8, is_dynamic=True),
        weight=PerChannelMinMaxObserver.with_args(
            dtype=torch.qint8,
            qscheme=torch.per_channel_symmetric,
            quant_min=-weight_range,
            quant_max=weight_range - 1,
        ),
    )
    kept = KEEP_FP32 if keep_fp32 is None else tuple(keep_fp32)
    rows = PER_ROW if per_row is None else tuple(per_row)
    model = copy.deepcopy(model)
    for name in int8_layers(model, kept):
        if any(fnmatch.fnmatchcase(name, p) for p in rows):
            parent, _, leaf = name.rpartition(".")
            owner = model.get_submodule(parent) if parent else model
            setattr(owner, leaf, RowScaled(getattr(owner, leaf)))
    spec = {name: qconfig for name in int8_layers(model, kept)}
    with warnings.catch_warnings():  # torch.ao's notice that torchao is its successor
        warnings.simplefilter("ignore")
        return quantize_dynamic(
            model, spec, mapping={torch.nn.Linear: _full_range_linear()}, inplace=True
        )


class RowScaled(torch.nn.Module):
    """A linear layer whose every input row is divided by its largest |value| before the
    layer and multiplied by it after (the bias added after): quantised dynamically, each
    row then gets a scale of its own (per token) through kernels that take one scale per
    call. Exact in fp32 (the layer is linear)."""

    def __init__(self, linear: torch.nn.Linear) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(linear.in_features, linear.out_features, bias=False)
        self.linear.weight = linear.weight
        self.bias = linear.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        r = x.abs().amax(-1, keepdim=True).clamp_(min=1e-12)
        y = self.linear(x / r).mul_(r)
        return y if self.bias is None else y.add_(self.bias)


def int8_layers(model: torch.nn.Module, keep_fp32: Collection[str] = ()) -> list[str]:
    """Qualified names of the nn.Linear layers of `model` that `quantise_int8` quantises:
    all but those matching a pattern of `keep_fp32`."""
    return [
        name
        for name, module in model.named_modules()
        if name
        and isinstance(module, torch.nn.Linear)
        and not any(fnmatch.fnmatchcase(name, p) for p in keep_fp32)
    ]


# Linear layers int8 leaves in fp32 by default (name patterns): those whose 8-bit inputs
# cost most, measured by how far the model's token distributions move from fp32's
# (benchmarks/int8_study.py --agreement): the first layer's Wqkv (fed by the embeddings'
# norm: that layer has none of its own) and the head's dense layer (run at the masked
# slots only).
KEEP_FP32: tuple[str, ...] = ("model.layers.0.attn.Wqkv", "head.dense")
# Linear layers whose inputs are quantised per row (`RowScaled`): the MLPs' output layers,
# whose inputs (GLU products) vary from token to token far more than a normed layer's:
# with one scale per call they moved the token distributions most of all, so they stayed
# fp32 (docs/ARCHITECTURE.md, "The MLPs' output layers in int8, a scale per token").
PER_ROW: tuple[str, ...] = ("*.mlp.Wo",)
WEIGHT_RANGE = 64  # int8 weights in -64..63: 255 * 64 * 2 fits an int16 (AVX2's vpmaddubsw)


@functools.cache
def _full_range_linear() -> type:
    """A dynamic int8 Linear whose inputs are quantised to 8 bits, not PyTorch's 7."""
    from torch.ao.nn.quantized.dynamic import Linear  # noqa: PLC0415

    class FullRangeLinear(Linear):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            packed = self._packed_params._packed_params
            return torch.ops.quantized.linear_dynamic(x, packed, reduce_range=False).to(x.dtype)

    return FullRangeLinear
