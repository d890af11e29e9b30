"""int8 linear layers for CPU inference (`INFILL_DTYPE=int8`, and what `auto` picks on a CPU
without fast bf16: model/precision.py).

Each quantised linear layer keeps its weights as int8 codes per output channel within
-64..63 (7 bits) with an fp32 scale per channel, and at every call quantises its input to
8 bits with a scale per row (per token): the rows of a layer's input differ in size from
token to token (a masked slot's against the code's) as much as its channels do. The
integer product runs on oneDNN's int8 kernels, `onednn.qlinear_pointwise` on weights
packed once at load (unsigned 8-bit inputs: the rows' codes shifted by 128), on every CPU:
`torch._int_mm`, the other operation that reaches int8 kernels without torch.ao, ran 40x
slower than fp32 on a CPU without VNNI (a Zen 3; docs/log/architecture.md, "int8 on a Zen
3"), where the prepacked kernel runs 0.8x fp32's time. The sums are rescaled by both
scales and the bias added in fp32. The layers of `KEEP_FP32`, whose inputs 8 bits cannot
hold, and the rest of the model (embeddings, norms, attention) stay fp32.

Why 7-bit weights: a CPU without VNNI (AVX2, a Zen 3) multiplies 8-bit inputs by 8-bit
weights in pairs summed in int16 (vpmaddubsw), which saturates beyond 32,767: 255 x 128 x 2
can, 255 x 64 x 2 cannot (tests/test_precision.py checks that the kernel stays exact,
with oneDNN held to AVX2 too).
Why these layers, and the held-out figures: docs/log/architecture.md, "int8 on the CPU".
"""

from __future__ import annotations

import copy
import fnmatch
from collections.abc import Collection

import torch

# Linear layers int8 leaves in fp32 by default (name patterns): those whose 8-bit inputs
# cost most, measured by how far the model's token distributions move from fp32's
# (docs/log/architecture.md, "int8 on the CPU"): the first layer's Wqkv (fed by the embeddings'
# norm: that layer has none of its own) and the head's dense layer (run at the masked
# slots only).
KEEP_FP32: tuple[str, ...] = ("model.layers.0.attn.Wqkv", "head.dense")
WEIGHT_RANGE = 64  # int8 weights in -64..63: 255 * 64 * 2 fits an int16 (AVX2's vpmaddubsw)
INPUT_LEVELS = 127  # an input row's codes within -127..127 (8 bits, symmetric)


class Int8Linear(torch.nn.Module):
    """A linear layer computed in int8: `linear`'s weights as int8 codes per output channel
    within -`weight_range`..`weight_range` - 1 (scale: the channel's largest |weight| over
    `weight_range` - 0.5), its input quantised per row at every call, the output rescaled
    and the bias added in fp32, on oneDNN's kernel with the weights prepacked. Inputs of
    any leading shape, as nn.Linear's; the output is fp32."""

    def __init__(self, linear: torch.nn.Linear, weight_range: int = WEIGHT_RANGE) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        w = linear.weight.detach().float()
        tiny = torch.finfo(torch.float32).eps
        scale = (w.abs().amax(1) / (weight_range - 0.5)).clamp_(min=tiny)
        codes = torch.round(w / scale[:, None]).clamp_(-weight_range, weight_range - 1)
        self.register_buffer("weight", codes.to(torch.int8))  # (out, in)
        self.register_buffer("weight_scale", scale)
        bias = linear.bias
        self.register_buffer("bias", None if bias is None else bias.detach().float().clone())
        # oneDNN's layout of `weight`, made once
        self.packed = torch.ops.onednn.qlinear_prepack(self.weight, None)
        self.zero_points = torch.zeros(self.out_features, dtype=torch.int64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features).float()
        scale = rows.abs().amax(-1, keepdim=True).clamp_(min=1e-12).div_(INPUT_LEVELS)
        codes = rows.div(scale).round_().to(torch.int8)  # each row's own scale
        y = torch.ops.onednn.qlinear_pointwise(  # unsigned codes: the same bits, shifted by 128
            *(codes.view(torch.uint8).add_(128), 1.0, 128, self.packed, self.weight_scale),
            *(self.zero_points, None, 1.0, 0, torch.float32, "none", [], ""),
        )
        y.mul_(scale)
        if self.bias is not None:
            y.add_(self.bias)
        return y.view(*x.shape[:-1], self.out_features)

    def __deepcopy__(self, memo: dict[int, object]) -> Int8Linear:
        """A copy with its own packed weights (oneDNN's packed tensors cannot be copied)."""
        twin = type(self).__new__(type(self))
        memo[id(self)] = twin
        state = {k: v for k, v in self.__dict__.items() if k != "packed"}
        twin.__dict__.update(copy.deepcopy(state, memo))
        twin.packed = torch.ops.onednn.qlinear_prepack(twin.weight, None)
        return twin

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, onednn prepacked"


def quantise_int8(
    model: torch.nn.Module, weight_range: int = 0, keep_fp32: Collection[str] | None = None
) -> torch.nn.Module:
    """A copy of `model` with its nn.Linear layers replaced by `Int8Linear` twins, for CPU
    inference: weights int8 per output channel within -64..63 (-weight_range ..
    weight_range - 1 when given: 128 for the full 8 bits, which kernels without VNNI can
    overflow), inputs quantised per row to 8 bits at each call. Linear layers whose
    qualified names match a pattern of `keep_fp32` (fnmatch, e.g. "decoder", "*.mlp.Wo",
    "model.layers.0.*"; default `KEEP_FP32`) stay fp32, as does everything else. The
    module tree keeps its names and call signatures, so the cached forward (model/cache.py)
    runs on it unchanged; `model` is left as it was."""
    kept = KEEP_FP32 if keep_fp32 is None else tuple(keep_fp32)
    model = copy.deepcopy(model)
    for name in int8_layers(model, kept):
        parent, _, leaf = name.rpartition(".")
        owner = model.get_submodule(parent) if parent else model
        setattr(owner, leaf, Int8Linear(getattr(owner, leaf), weight_range or WEIGHT_RANGE))
    return model


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
