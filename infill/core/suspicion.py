"""When the fixer calls a token suspicious: the rule and its calibrated thresholds.

A token is suspicious when the model finds the written token improbable (suspicion =
1 - p(written) >= `min_suspicion`) AND is confident of one replacement (p(the likeliest
other token) >= `min_likely`). Suspicion alone is not enough: the shipped model finds
some token of almost every clean file improbable, but seldom with one confident
alternative. `infill fix` (infill/core/repair.py), the worker's `fix` request, the
editor's Fix selection and its diagnostics all use this rule with these defaults.

The defaults are calibrated on the validation split so that the fixer changes at most 1
clean file in 10 (`python -m benchmarks.calibrate_fix`; docs/ARCHITECTURE.md, "Fixer
calibration"). This module stays free of numpy and the engine: clients import it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from diffusion_infill.infill.core.results import TokenScore

DEFAULT_MIN_SUSPICION = 0.998  # 1 - p(written token) at least this
DEFAULT_MIN_LIKELY = 0.6  # p(the likeliest other token) at least this


def preference(score: TokenScore) -> float:
    """How much likelier the model finds its replacement than the written token:
    log p(likely) - log p(written). The fixer, the diagnostics and the evaluation take the
    worst tokens in this order: with the shipped model (fine-tuned on bug-shaped swaps) the
    worst token by it was the bug in 30.0% of 200 validation bug windows, against 22.5%
    for the worst by suspicion alone (docs/log/architecture.md, "Fixer calibration"): a token
    that is merely hard to predict (a new name, a string) has no confident replacement.
    Rows without `p_likely` (0.0) fall back to the suspicion's order."""
    return math.log(max(score.p_likely, 1e-30)) - math.log(max(1.0 - score.suspicion, 1e-30))


def expectation(likely: str) -> str:
    """What the model would write instead, for people: `likely` is the replacement
    (`TokenScore.likely`), "" when the model would delete the token."""
    return (
        f"the model expects {likely.strip() or likely!r}" if likely else "the model would delete it"
    )


def worst_first(
    scores: Iterable[TokenScore], key: Callable[[TokenScore], float] = preference
) -> list[TokenScore]:
    """The non-whitespace tokens, worst first (by `preference` unless told)."""
    return sorted((s for s in scores if s.text.strip()), key=key, reverse=True)


def is_suspicious(
    score: TokenScore,
    min_suspicion: float = DEFAULT_MIN_SUSPICION,
    min_likely: float = DEFAULT_MIN_LIKELY,
) -> bool:
    """The rule (whitespace is never suspicious)."""
    return (
        score.suspicion >= min_suspicion
        and score.p_likely >= min_likely
        and bool(score.text.strip())
    )
