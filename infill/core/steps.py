"""What a denoising job asks of a denoiser each step, and what it records of the step.

Shared by the sampler (infill/core/sampler.py) and its entropy-bound order
(infill/core/entropy_bound.py); `infill.core.sampler` exports both names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from diffusion_infill.infill.core.canvas import Slot, SpanSlots
from diffusion_infill.model.denoiser import CacheHint


class LogitsRequest(NamedTuple):
    canvas: list[int]  # the canvas ids
    positions: list[int]  # the canvas positions whose logits the step needs
    hint: CacheHint | None = None  # context reuse (options.cache_refresh > 0), else None


@dataclass(frozen=True)
class StepRecord:
    """What one step did to one canvas (trace)."""

    step: int  # 1-based, counted per job
    canvas: int  # canvas index in the job
    scored: int  # positions whose logits were requested
    committed: tuple[Slot, ...]  # slots committed, in slot order (null tails included)
    remasked: tuple[Slot, ...]  # slots masked again
    grown: tuple[tuple[int, int], ...]  # (span index, slots appended)
    spans: tuple[tuple[int, tuple[int, ...]], ...]  # (span index, slot ids) after the step
    # per committed slot: (p of its token, the likeliest other token, its p) in that pass
    # (`commit_odds`): what a fill's confidence reads (infill/core/confidence.py)
    odds: tuple[tuple[float, int, float], ...] = ()


def commit_odds(
    slots: Sequence[Slot],
    spans: Mapping[int, SpanSlots],
    masked: Sequence[Slot],
    probs: np.ndarray,
    tokens: np.ndarray,
) -> tuple[tuple[float, int, float], ...]:
    """Per committed slot of `spans` (row r of `probs` and `tokens` is `masked[r]`'s):
    the probability of the token it took, the likeliest other token and that one's
    probability; a slot whose row predicted another token (a null tail, filled by force)
    gets (1.0, -1, 0.0)."""
    rows = {slot: r for r, slot in enumerate(masked)}
    out = []
    for slot in slots:
        r, tok = rows.get(slot), spans[slot[0]].ids[slot[1]]
        if r is None or int(tokens[r]) != tok:
            out.append((1.0, -1, 0.0))
            continue
        row = probs[r]
        own = float(row[tok])
        row[tok] = -1.0  # the likeliest other token: the row's argmax without its own
        second = int(row.argmax())
        row[tok] = own
        out.append((own, second, float(row[second])))
    return tuple(out)
