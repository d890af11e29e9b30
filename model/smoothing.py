"""int8 with the MLPs' output layers smoothed: a model's calibration, stored beside its weights.

Each MLP's output layer `Wo` takes GELU(value) x gate, whose outlier channels (up to 40x
the median) one 8-bit scale per call cannot hold, so plain int8 keeps those layers in fp32
(model/precision.py `KEEP_FP32`), at more CPU time than every int8 layer together.
Smoothing (SmoothQuant) divides input channel j by s_j = max|x_j|^alpha /
max|Wo[:, j]|^(1 - alpha) and multiplies Wo's column j by it; the division is folded into
the gate rows of the MLP's input layer `Wi` (the gate enters the product linearly), so the
fp32 model computes the same function and no operation is added, and both layers then go
int8 per output channel (docs/ARCHITECTURE.md, "The MLPs' output layers in int8 after
smoothing").

max|x_j| comes from one pass over inline-completion canvases cut from training files
(never held-out ones), written once per model to `int8_calibration.json` in its directory:

    python -m diffusion_infill.model.calibrate_int8 --model model/weights --corpus data/corpus_v2

A model directory with that file loads in int8 smoothed; one without it loads the plain
int8 recipe (the MLPs' output layers in fp32), and the log says which.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from diffusion_infill.model.precision import KEEP_FP32, quantise_int8

CALIBRATION = "int8_calibration.json"
FORMAT = 1
ALPHA = 0.8  # chosen on validation holes by KL from fp32 among 0.5 / 0.8 / 0.9 / 1.0
# smoothed, the MLPs' output layers go int8 too; the rest of KEEP_FP32 stays fp32
KEEP_FP32_SMOOTHED: tuple[str, ...] = tuple(p for p in KEEP_FP32 if p != "*.mlp.Wo")
FILES = 64  # training files whose lines calibrate
LINES_PER_FILE = 2
WINDOW = 128  # tokens of a calibration canvas: the server's inline-completion window
HOLE = 16  # most masked slots: the server's one-line completion

Case = tuple[list[int], list[int]]  # (canvas, masked positions)


class CalibrationError(ValueError):
    """An int8_calibration.json that does not fit its model."""


@dataclass(frozen=True)
class Calibration:
    alpha: float
    input_max: dict[str, torch.Tensor]  # MLP module name -> max |input| of each Wo channel
    source: str = ""  # what it was measured on

    def to_json(self) -> dict:
        return {
            "format": FORMAT,
            "what": "max |input| of each MLP output layer's input channel (SmoothQuant)",
            "alpha": self.alpha,
            "source": self.source,
            "input_max": {
                k: [float(f"{x:.6g}") for x in v.tolist()] for k, v in self.input_max.items()
            },
        }


def _mlps(model: torch.nn.Module) -> dict[str, torch.nn.Module]:
    return {
        name: m
        for name, m in model.named_modules()
        if name.endswith(".mlp") and hasattr(m, "Wi") and hasattr(m, "Wo")
    }


def input_max(
    model: torch.nn.Module, run: Callable[[Case], object], cases: Sequence[Case]
) -> dict[str, torch.Tensor]:
    """Per MLP of `model`, the largest |input| of each channel of its `Wo` while `run`
    computes each case."""
    found: dict[str, torch.Tensor] = {}

    def hook(name: str):  # noqa: ANN202 - a forward pre-hook
        def record(_module: torch.nn.Module, args: tuple[torch.Tensor, ...]) -> None:
            x = args[0].detach().abs().reshape(-1, args[0].shape[-1]).amax(0).float()
            found[name] = torch.maximum(found[name], x) if name in found else x

        return record

    handles = [m.Wo.register_forward_pre_hook(hook(n)) for n, m in _mlps(model).items()]
    try:
        for case in cases:
            run(case)
    finally:
        for h in handles:
            h.remove()
    return found


def smooth_mlps(model: torch.nn.Module, calibration: Calibration) -> None:
    """Smooth each calibrated MLP's `Wo` inputs in place (fp32 weights), the division folded
    into `Wi`'s gate rows: the same function, outliers moved into Wo's weights."""
    with torch.no_grad():
        for name, mlp in _mlps(model).items():
            if name not in calibration.input_max:
                continue
            wo, wi = mlp.Wo.weight, mlp.Wi.weight  # (H, I), (2I, H): value rows, gate rows
            inner = wo.shape[1]
            x = calibration.input_max[name].to(wo.device).clamp(min=1e-5)
            w = wo.abs().amax(0).float().clamp(min=1e-5)
            s = (x**calibration.alpha / w ** (1 - calibration.alpha)).to(wo.dtype)
            wo.mul_(s[None, :])
            wi[inner:].div_(s[:, None])


def int8_model(model: torch.nn.Module, calibration: Calibration | None) -> torch.nn.Module:
    """`model` (fp32, CPU) in int8: smoothed with every MLP output layer int8 when
    calibrated, else the plain recipe (`KEEP_FP32`)."""
    if calibration is None:
        return quantise_int8(model)
    smooth_mlps(model, calibration)
    return quantise_int8(model, keep_fp32=KEEP_FP32_SMOOTHED)


def read_calibration(directory: Path, model: torch.nn.Module) -> Calibration | None:
    """The calibration in `directory` checked against `model`; None where there is none.
    Raises CalibrationError naming what does not fit."""
    path = Path(directory) / CALIBRATION
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text())
        alpha, maxima = float(raw["alpha"]), raw["input_max"]
        if raw.get("format") != FORMAT:
            raise CalibrationError(f"{path}: format {raw.get('format')!r}, expected {FORMAT}")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        if isinstance(exc, CalibrationError):
            raise
        raise CalibrationError(f"unreadable {path}: {exc}") from exc
    if not 0 < alpha <= 1:
        raise CalibrationError(f"{path}: alpha must be in (0, 1], got {alpha}")
    mlps = _mlps(model)
    if not isinstance(maxima, dict) or set(maxima) != set(mlps):
        raise CalibrationError(
            f"{path} calibrates {sorted(maxima) if isinstance(maxima, dict) else maxima!r}, "
            f"the model's MLPs are {sorted(mlps)}"
        )
    out = {}
    for name, values in maxima.items():
        width = mlps[name].Wo.in_features
        if not isinstance(values, list) or len(values) != width:
            raise CalibrationError(f"{path}: {name} needs {width} maxima")
        if not all(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0 for v in values):
            raise CalibrationError(f"{path}: {name} has a maximum that is not a finite number >= 0")
        out[name] = torch.tensor(values, dtype=torch.float32)
    return Calibration(alpha, out, str(raw.get("source", "")))


def completion_cases(
    texts: Sequence[str],
    encode: Callable[[str], list[int]],
    mask: int,
    per_text: int = LINES_PER_FILE,
    seed: int = 1,
) -> list[Case]:
    """Inline-completion canvases from `texts`: `per_text` random lines of each, cut after
    the space nearest the middle of their code, the rest of the line masked (1..HOLE
    slots) in a window of WINDOW tokens, the code before taking 3/4 of it."""
    rng = random.Random(seed)
    out = []
    for text in texts:
        lines, s = [], 0
        for line in text.split("\n"):
            if len(line.strip()) >= 8:
                lines.append((s, s + len(line)))
            s += len(line) + 1
        for s, e in rng.sample(lines, min(per_text, len(lines))):
            code = s + len(text[s:e]) - len(text[s:e].lstrip())
            spaces = [i for i in range(code + 1, e - 1) if text[i] == " "]
            cut = (
                min(spaces, key=lambda i: abs(i - (code + e) / 2)) + 1
                if spaces
                else (code + e) // 2
            )
            hole = min(max(len(encode(text[cut:e])), 1), HOLE)
            before, after = encode(text[:cut]), encode(text[e:])
            room = WINDOW - hole
            left = min(len(before), max(room * 3 // 4, room - len(after)))
            right = min(len(after), room - left)
            canvas = before[len(before) - left :] + [mask] * hole + after[:right]
            out.append((canvas, list(range(left, left + hole))))
    return out
