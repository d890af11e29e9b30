"""What a denoising job asks of a denoiser each step, and what it records of the step.

Shared by the sampler (infill/core/sampler.py) and its entropy-bound order
(infill/core/entropy_bound.py); `infill.core.sampler` exports both names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from diffusion_infill.infill.core.canvas import Slot
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
    # per committed slot: its token's log-probability in the pass that committed it (0.0
    # for a null); what infill/core/contest.py sums
    logp: tuple[float, ...] = ()
