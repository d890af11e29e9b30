"""Commit orders of the sampler: a small registry of named strategies and pure helpers.

Every strategy scores the masked positions of a step (higher = surer) and says which ones
pass its threshold; the sampler commits those that pass, at least the best one per step
(threshold-parallel decoding, Fast-dLLM), or exactly the k best with `tokens_per_step`.

| name | score of a position | commits when | default threshold |
|---|---|---|---|
| confidence (default) | p(chosen token) | p >= threshold | 0.9 |
| margin | p(top 1) - p(top 2) | margin >= threshold | 0.8 |
| entropy | -H(p), H in nats | H <= threshold | 0.5 |
| left-to-right | - | the leftmost masked position, one per step | no threshold |

Probabilities are the model's softmax over the allowed ids (mask and pad are never
allowed; null is not allowed in exact-length spans), without temperature: temperature
changes which token is drawn, not how sure the model is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Scores = Callable[[np.ndarray, np.ndarray], np.ndarray]


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax in float32, stable for large logits and for -inf entries."""
    x = np.asarray(logits, dtype=np.float32)
    x = x - x.max(axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def entropy(probs: np.ndarray) -> np.ndarray:
    """Row-wise entropy in nats (0 * log 0 = 0)."""
    p = np.asarray(probs, dtype=np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * np.log(p), 0.0)
    return (-terms.sum(axis=-1)).astype(np.float32)


def pick_tokens(
    logits: np.ndarray, temperature: float, rng: np.random.Generator | None
) -> np.ndarray:
    """The token at each row: argmax at temperature 0, else a draw from softmax(logits/T)."""
    if temperature == 0:
        return np.asarray(logits).argmax(axis=-1)
    if rng is None:
        raise ValueError("sampling at temperature > 0 needs a Generator")
    probs = softmax(np.asarray(logits, dtype=np.float32) / np.float32(temperature))
    cdf = np.cumsum(probs.astype(np.float64), axis=-1)
    u = rng.random(len(probs))[:, None] * cdf[:, -1:]
    return np.minimum((cdf < u).sum(axis=-1), probs.shape[-1] - 1)


def _confidence(probs: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    return probs[np.arange(len(tokens)), tokens]


def _margin(probs: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    if probs.shape[-1] < 2:
        return probs[:, 0]
    top2 = np.partition(probs, -2, axis=-1)[:, -2:]
    return top2[:, 1] - top2[:, 0]


def _neg_entropy(probs: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    return -entropy(probs)


@dataclass(frozen=True)
class Strategy:
    name: str
    summary: str
    score: Scores | None  # None: positional (left-to-right), no scores
    default_threshold: float | None  # None: takes no threshold
    threshold_range: tuple[float, float] = (0.0, 1.0)  # legal thresholds, inclusive
    # A threshold t on the score: commit when score >= cut(t).
    cut: Callable[[float], float] = float

    @property
    def sequential(self) -> bool:
        return self.score is None


STRATEGIES: dict[str, Strategy] = {
    s.name: s
    for s in [
        Strategy(
            "confidence",
            "commit every position whose chosen token has probability >= threshold",
            _confidence,
            0.9,
        ),
        Strategy(
            "margin",
            "commit every position whose top-1 minus top-2 probability >= threshold",
            _margin,
            0.8,
        ),
        Strategy(
            "entropy",
            "commit every position whose entropy (nats) <= threshold",
            _neg_entropy,
            0.5,
            threshold_range=(0.0, float("inf")),
            cut=lambda t: -t,
        ),
        Strategy("left-to-right", "commit the leftmost masked position, one per step", None, None),
    ]
}


def choose(scores: np.ndarray, *, cut: float | None = None, k: int | None = None) -> np.ndarray:
    """Indices (ascending) of the rows to commit this step.

    With `k`: the k best scores (ties to the leftmost). With `cut`: every row scoring at
    least `cut`, and the best row when none does, so every step makes progress.
    """
    n = len(scores)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    if k is not None:
        return np.sort(order[:k])
    if cut is None:
        raise ValueError("choose() needs a cut or k")
    passing = np.flatnonzero(scores >= cut)
    return passing if len(passing) else order[:1]
