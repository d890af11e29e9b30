"""The numbers behind the commit orders: stable softmax, entropy, token picking, the score
of each order (infill/core/strategies.py names them) and the choice of positions.

Probabilities are the model's softmax over the allowed ids (mask and pad are never
allowed; null is not allowed in exact-length spans), without temperature: temperature
changes which token is drawn, not how sure the model is.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

Scores = Callable[[np.ndarray, np.ndarray], np.ndarray]  # (probs (n, V), tokens (n,)) -> (n,)


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax in float32, stable for large logits and for -inf entries."""
    x = np.asarray(logits, dtype=np.float32)
    x = x - x.max(axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def first_only(x: np.ndarray, row: int, first: tuple[int, ...]) -> None:
    """Logits `x[row]` over the ids `first` alone (a span's first slot after a word's
    head, infill/core/word_starts.py): every other id at -inf."""
    keep = x[row, list(first)].copy()
    x[row, :] = -np.inf
    x[row, list(first)] = keep


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise log-softmax in float64 (scores compared across candidates to 1e-9)."""
    x = np.asarray(logits, dtype=np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


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


# The score of each order that has one (every strategy that is not `sequential`).
SCORES: dict[str, Scores] = {
    "confidence": _confidence,
    "margin": _margin,
    "entropy": _neg_entropy,
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
