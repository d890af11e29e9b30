"""A hole's length read from the model's length head before it is decoded.

The network ends a fill itself (nulls in the tail of its 16 slots, growth when they fill
up), and on held-out one-line holes the length it ends at is the truth's about one time in
five. A denoiser with a length head (model/length_head.py, `length_slots` > 0) answers one
more question, `fill_lengths`: from one pass over a hole's default allocation, how likely
each length is. Where the head is sure enough (its likeliest length, below the allocation,
at least `MIN_PROBABILITY`), the hole is decoded with exactly that many tokens; elsewhere
the network keeps the choice, as before, and should its fill fail its checks, the
lengths raced (`lengths` > 1) are the head's likeliest instead of the allocation's
halvings.

The head reads a one-line hole of the default allocation, all masked: a hole marker with
no hint, or a span given that allocation. A rewrite's own length, a hint, an exact span, a
selection of several lines and a span whose tokens are decided are left as they are.

    chosen, passes = head_lengths(canvases, allocs, frames, denoiser, options)
    spans = sure_spans(spans, chosen.sure) or spans  # exact where sure: plan them again
    set_races(canvases, chosen.race)  # the others race its lengths should they fail

Measured with the shipped network: docs/ARCHITECTURE.md, "A length head read from the first
pass" (part-of-line holes gain most; more holes are left as they were). A model directory
without a head (`python -m benchmarks.fit_length_head` fits one) is never asked.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from diffusion_infill.infill.core.allocation import Allocation
from diffusion_infill.infill.core.canvas import Canvas
from diffusion_infill.infill.core.lines import Frame
from diffusion_infill.infill.core.options import SamplerOptions
from diffusion_infill.infill.core.spans import Span
from diffusion_infill.model.denoiser import Denoiser

MIN_PROBABILITY = 0.5  # the head's likeliest length is taken when it is at least this likely


@dataclass(frozen=True)
class Chosen:
    """What the length head chose, per span index."""

    sure: dict[int, int] = field(default_factory=dict)  # exactly this many tokens
    race: dict[int, tuple[int, ...]] = field(default_factory=dict)  # should its fill fail


def head_lengths(
    canvases: Sequence[Canvas],
    allocs: Sequence[Allocation],
    frames: Sequence[Frame | None],
    denoiser: Denoiser,
    options: SamplerOptions,
) -> tuple[Chosen, int]:
    """What the head chose for each span it reads (its length in tokens where it is sure,
    else the lengths to race should the fill fail, likeliest first), and the forward
    passes that took (0 or 1: one batched call over the canvases that hold one)."""
    slots = getattr(denoiser, "length_slots", 0)
    if not options.length_head or not slots:
        return Chosen(), 0
    mask = denoiser.special.mask
    asked: dict[int, list[tuple[int, list[int]]]] = {}  # canvas -> (span, its slots)
    for ci, canvas in enumerate(canvases):
        for first, span in zip(canvas.offsets(), canvas.spans, strict=True):
            frame = frames[span.index]
            if (
                allocs[span.index].raced
                and len(span.ids) == slots
                and all(t == mask for t in span.ids)
                and span.min_breaks == 0
                and (frame is None or frame.one_line)
            ):
                asked.setdefault(ci, []).append((span.index, list(range(first, first + slots))))
    if not asked:
        return Chosen(), 0
    order = sorted(asked)
    rows = denoiser.fill_lengths(  # type: ignore[attr-defined]
        [canvases[ci].ids() for ci in order], [[p for _, p in asked[ci]] for ci in order]
    )
    chosen = Chosen()
    for ci, logp in zip(order, rows, strict=True):
        for (index, _), row in zip(asked[ci], logp, strict=True):
            length = choose(list(row), slots)
            if length is not None:
                chosen.sure[index] = length
            else:  # the network's own ending; should it fail, the head's lengths race
                ranked = sorted(range(1, slots), key=lambda n: -row[n])
                chosen.race[index] = tuple(ranked[: max(0, options.lengths - 1)])
    return chosen, 1


def choose(logp: list[float], slots: int) -> int | None:
    """The likeliest length when it is 1..slots-1 tokens and at least MIN_PROBABILITY
    likely; None (the network's own ending) otherwise."""
    best = max(range(len(logp)), key=logp.__getitem__)
    if not 1 <= best < slots or math.exp(logp[best]) < MIN_PROBABILITY:
        return None
    return best


def sure_spans(spans: Sequence[Span], sure: dict[int, int]) -> list[Span] | None:
    """`spans` with exactly the head's length where it is sure (`Chosen.sure`), or None
    where it is sure of none."""
    if not sure:
        return None
    return [replace(s, length=sure[i], exact=True) if i in sure else s for i, s in enumerate(spans)]


def set_races(canvases: Sequence[Canvas], race: dict[int, tuple[int, ...]]) -> None:
    """Give each span the head is not sure of the lengths to race should its fill fail."""
    for canvas in canvases:
        for slots in canvas.spans:
            if slots.index in race:
                slots.race = race[slots.index]
