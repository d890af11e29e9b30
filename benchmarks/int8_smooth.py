"""The MLPs' output layers in int8 after SmoothQuant-style smoothing, for benchmarks/int8_study.py.

`mlp.Wo`'s inputs (GELU(value) x gate) have outlier channels up to 40x the median, which
one 8-bit scale per call could not hold: in int8 as they were they moved the model's token
distributions most (the shipped int8 gives every input row a scale of its own instead,
model/int8.py). Smoothing divides input channel j
by s_j = max|x_j|^alpha / max|W[:, j]|^(1 - alpha) and multiplies Wo's column j by it.
Here the division is folded into the gate half of the MLP's input layer `Wi` (the gate
enters the product linearly), so the fp32 model computes the same function (up to
rounding) and no operation is added; both layers are then quantised per output channel.
max|x_j| comes from one pass over calibration canvases (windows of the training split,
never the held-out ones).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch

from diffusion_infill.model.hf import HFDenoiser
from diffusion_infill.model.precision import Precision

SMOOTH = "int8-smooth:"  # + alpha in (0, 1]


def input_max(
    den: HFDenoiser, cases: Sequence[tuple[list[int], list[int]]]
) -> dict[str, torch.Tensor]:
    """Per MLP (its module name), the largest |input| of each channel of its `Wo` over one
    pass of `den` on each (canvas, positions) case."""
    found: dict[str, torch.Tensor] = {}

    def hook(name: str):  # noqa: ANN202 - a forward pre-hook
        def record(_module: torch.nn.Module, args: tuple[torch.Tensor, ...]) -> None:
            x = args[0].detach().abs().reshape(-1, args[0].shape[-1]).amax(0).float()
            found[name] = torch.maximum(found[name], x) if name in found else x

        return record

    mlps = {n: m for n, m in den.model.named_modules() if n.endswith(".mlp")}
    handles = [m.Wo.register_forward_pre_hook(hook(n)) for n, m in mlps.items()]
    try:
        for canvas, positions in cases:
            den.logits([canvas], [positions])
    finally:
        for h in handles:
            h.remove()
    return found


def smoothed(den: HFDenoiser, maxima: dict[str, torch.Tensor], alpha: float) -> HFDenoiser:
    """A copy of `den` (fp32) with each MLP's `Wo` input channels smoothed by `alpha`, the
    division folded into `Wi`'s gate rows."""
    if not 0 < alpha <= 1:
        raise ValueError(f"alpha must be in (0, 1], got {alpha}")
    model = copy.deepcopy(den.model)
    with torch.no_grad():
        for name, mlp in model.named_modules():
            if name not in maxima:
                continue
            wo, wi = mlp.Wo.weight, mlp.Wi.weight  # (H, I), (2I, H): value rows, gate rows
            inner = wo.shape[1]
            x = maxima[name].clamp(min=1e-5)
            w = wo.abs().amax(0).float().clamp(min=1e-5)
            s = (x**alpha / w ** (1 - alpha)).to(wo.dtype)
            wo.mul_(s[None, :])
            wi[inner:].div_(s[:, None])
    return with_model(den, model, Precision(torch.float32, "fp32, smoothed"))


def with_model(den: HFDenoiser, model: torch.nn.Module, precision: Precision) -> HFDenoiser:
    """`den` with another module tree (its tokenizer, special ids and device)."""
    return HFDenoiser(
        model,
        den.tokenizer,
        den.special,
        den.max_length,
        name=den.name,
        device=den.device,
        precision=precision,
    )


def smooth_alpha(option: str) -> float | None:
    """The alpha of an `int8-smooth:ALPHA` option; None for another option or a bad alpha."""
    if not option.startswith(SMOOTH):
        return None
    try:
        alpha = float(option[len(SMOOTH) :])
    except ValueError:
        return None
    return alpha if 0 < alpha <= 1 else None
