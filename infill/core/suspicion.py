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

from infill.core.results import TokenScore

DEFAULT_MIN_SUSPICION = 0.995  # 1 - p(written token) at least this
DEFAULT_MIN_LIKELY = 0.9  # p(the likeliest other token) at least this


def is_suspicious(score: TokenScore, min_suspicion: float = DEFAULT_MIN_SUSPICION,
                  min_likely: float = DEFAULT_MIN_LIKELY) -> bool:
    """The rule (whitespace is never suspicious)."""
    return (score.suspicion >= min_suspicion and score.p_likely >= min_likely
            and bool(score.text.strip()))
