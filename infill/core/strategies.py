"""Commit orders of the sampler: a small registry of named strategies.

Every strategy but left-to-right scores the masked positions of a step (higher = surer)
and says which ones pass its threshold; the sampler commits those that pass, at least the
best one per step (threshold-parallel decoding, Fast-dLLM), or exactly the k best with
`tokens_per_step`.

| name | score of a position | commits when | default threshold |
|---|---|---|---|
| confidence (default) | p(chosen token) | p >= threshold | 0.9 |
| margin | p(top 1) - p(top 2) | margin >= threshold | 0.8 |
| entropy | -H(p), H in nats | H <= threshold | 0.5 |
| left-to-right | - | the leftmost masked position, one per step | no threshold |
| entropy-bound | -H(p), at the step's temperature | sum of H - max H <= threshold | 0.1 |

entropy-bound is DiffusionGemma's sampler: the lowest-entropy positions are accepted, the
rest noised again, every step (infill/core/entropy_bound.py).

The registry holds what options need to be validated (names, thresholds, which order is
positional) and nothing numeric, so `SamplerOptions` can be built and checked anywhere,
a language server without numpy included; the score functions of the orders are in
infill/core/scoring.py, under the same names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Strategy:
    name: str
    summary: str
    default_threshold: float | None  # None: takes no threshold
    threshold_range: tuple[float, float] = (0.0, 1.0)  # legal thresholds, inclusive
    # A threshold t on the score: commit when score >= cut(t).
    cut: Callable[[float], float] = float
    sequential: bool = False  # positional: the leftmost masked position, no scores


STRATEGIES: dict[str, Strategy] = {
    s.name: s
    for s in [
        Strategy(
            "confidence",
            "commit every position whose chosen token has probability >= threshold",
            0.9,
        ),
        Strategy(
            "margin",
            "commit every position whose top-1 minus top-2 probability >= threshold",
            0.8,
        ),
        Strategy(
            "entropy",
            "commit every position whose entropy (nats) <= threshold",
            0.5,
            threshold_range=(0.0, float("inf")),
            cut=lambda t: -t,
        ),
        Strategy(
            "left-to-right",
            "commit the leftmost masked position, one per step",
            None,
            sequential=True,
        ),
        Strategy(
            "entropy-bound",
            "DiffusionGemma's sampler: accept the lowest-entropy positions while their summed "
            "entropy minus the largest stays within threshold (nats), noise the rest again; "
            "exact lengths (infill/core/entropy_bound.py)",
            0.1,
            threshold_range=(0.0, float("inf")),
        ),
    ]
}
