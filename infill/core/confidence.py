"""A fill's confidence: the calibrated probability that it is right, from its `Evidence`.

A small logistic regression over what the decode already knows (infill/core/evidence.py:
the committed tokens' probabilities, the runner-ups' odds, the null that ended the fill,
the checks' first try, a copy, the hole's shape and length). Its weights are fitted on
holes of the training split (`python -m diffusion_infill.model.training.fit_confidence`)
and ship beside the model's weights (`confidence.json`, model/calibration.py), naming the
network they were fitted on; a model directory without them gives no confidence (None).

"Right" is what the held-out figures count: the fill equals the original text (stripped,
or line by line for a whole line). So a confidence of 0.7 means that, of fills given 0.7,
about 7 in 10 are exactly what was there (docs/log/architecture.md, "Confidence").

    calibrator = Calibrator.of(denoiser)  # None without weights
    p = calibrator.probability(evidence)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from diffusion_infill.infill.core.errors import DenoiserError
from diffusion_infill.infill.core.evidence import SHAPES, Evidence

_FLOOR = 1e-9  # probabilities below this count as this (log 0 is no feature)


def _log(p: float) -> float:
    return math.log(max(p, _FLOOR))


def _mean(values: list[float], empty: float = 0.0) -> float:
    return sum(values) / len(values) if values else empty


def _log_odds(e: Evidence) -> list[float]:
    return [_log(p) - _log(p2) for p, (_, p2) in zip(e.probs, e.seconds, strict=True)]


def _forced(e: Evidence) -> float:
    if e.cap is None or not e.steps:
        return 0.0
    return sum(s >= e.cap for s in e.steps) / len(e.steps)


FEATURES: dict[str, Callable[[Evidence], float]] = {
    "mean log p": lambda e: _mean([_log(p) for p in e.probs]),
    "min log p": lambda e: min((_log(p) for p in e.probs), default=0.0),
    "first log p": lambda e: _log(e.probs[0]) if e.probs else 0.0,
    "last log p": lambda e: _log(e.probs[-1]) if e.probs else 0.0,
    "sum log p": lambda e: sum(_log(p) for p in e.probs),
    "mean log odds": lambda e: _mean(_log_odds(e)),
    "min log odds": lambda e: min(_log_odds(e), default=0.0),
    "log tokens": lambda e: math.log1p(len(e.ids)),
    "empty": lambda e: float(not e.ids),
    "first pass share": lambda e: _mean([float(s == 1) for s in e.steps], 1.0),
    "forced share": _forced,
    "end log p": lambda e: _log(e.end) if e.end is not None else 0.0,
    "no end": lambda e: float(e.end is None),
    "retried": lambda e: float(not e.first_try),
    "copied": lambda e: float(e.copied),
    "checked": lambda e: float(e.checked),
    "copy agrees": lambda e: float(e.copy_agrees),
    "gapped": lambda e: float(e.gaps > 0),
    "repeated tokens": lambda e: 1.0 - len(set(e.ids)) / len(e.ids) if e.ids else 0.0,
    "line balanced": lambda e: float(e.line is not None and e.line.depth == 0 and not e.line.dips),
    "line left open": lambda e: float(e.line is not None and e.line.depth > 0),
    "line overclosed": lambda e: float(e.line is not None and e.line.dips),
    "line ends with ':'": lambda e: float(e.line is not None and e.line.colon),
    "log chars": lambda e: math.log1p(e.line.chars) if e.line is not None else 0.0,
    "open before": lambda e: float(e.line is not None and e.line.opened),
    **{f"shape {s}": (lambda e, s=s: float(e.shape == s)) for s in SHAPES},
}


# A fill decoded in a capped number of passes (an inline completion: the last pass commits
# what is left) is another regime than one decoded to the end: these features count again
# there, so that the regression weighs them apart.
CAPPED = (
    "mean log p",
    "min log p",
    "first log p",
    "last log p",
    "sum log p",
    "mean log odds",
    "min log odds",
    "log tokens",
    "end log p",
    "no end",
    "line balanced",
    "line overclosed",
    "line left open",
    "line ends with ':'",
    "log chars",
    "open before",
    "copy agrees",
    "shape cursor",
    "shape inline",
)
FEATURES["capped"] = lambda e: float(e.cap is not None)
FEATURES.update(
    {f"{n}, capped": (lambda e, n=n: FEATURES[n](e) * (e.cap is not None)) for n in CAPPED}
)


def features(e: Evidence, names: tuple[str, ...] | list[str]) -> np.ndarray:
    """The named FEATURES of `e`, in order."""
    return np.array([FEATURES[n](e) for n in names], dtype=np.float64)


class Calibrator:
    """Logistic regression over standardised FEATURES: p = sigmoid(bias + w . (x - mean) /
    scale), from a model directory's calibration (model/calibration.py `Calibration`)."""

    def __init__(self, calibration: Any) -> None:
        names = tuple(calibration.features)
        unknown = [n for n in names if n not in FEATURES]
        if unknown:
            raise DenoiserError(
                f"the model's confidence weights name a feature this engine does not "
                f"compute ({unknown[0]!r}); refit them with "
                "python -m diffusion_infill.model.training.fit_confidence"
            )
        self.names = names
        self.mean = np.asarray(calibration.mean, dtype=np.float64)
        self.scale = np.asarray(calibration.scale, dtype=np.float64)
        self.weights = np.asarray(calibration.weights, dtype=np.float64)
        self.bias = float(calibration.bias)

    @classmethod
    def of(cls, denoiser: Any) -> Calibrator | None:
        """The calibrator of `denoiser`'s calibration (its `calibration` attribute); None
        when it has none."""
        calibration = getattr(denoiser, "calibration", None)
        return None if calibration is None else cls(calibration)

    def probability(self, e: Evidence) -> float:
        """The probability that the fill `e` tells of is right."""
        if e.decided:  # tokens given, not decoded: the model was not asked
            raise ValueError("a fill whose tokens were given has no confidence")
        return self.probability_of(features(e, self.names))

    def probability_of(self, values: Sequence[float] | np.ndarray) -> float:
        """The probability for the feature `values` (in the order of `names`)."""
        x = np.asarray(values, dtype=np.float64)
        z = self.bias + float(self.weights @ ((x - self.mean) / self.scale))
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))
