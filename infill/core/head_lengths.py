"""A hole's length read from the model's length head before it is decoded.

The network ends a fill itself (nulls in the tail of its 16 slots, growth when they fill
up), and on held-out one-line holes the length it ends at is the truth's about one time in
five. A denoiser with a length head (model/length_head.py, `length_slots` > 0) answers one
more question from the pass over a hole's default allocation that the decode's first
step makes anyway (`first_pass`): how likely each length is. Where the head is sure
enough (its likeliest length, below the allocation, at least `MIN_PROBABILITY`), the hole
is decoded with exactly that many tokens; elsewhere the network keeps the choice, as
before, and should its fill fail its checks, the lengths raced (`lengths` > 1) are the
head's likeliest instead of the allocation's halvings.

The head reads a one-line hole of the default allocation, all masked: a hole marker with
no hint, or a span given that allocation. A rewrite's own length, a hint, an exact span, a
selection of several lines and a span whose tokens are decided are left as they are.

    asked = asked_holes(canvases, allocs, frames, denoiser, options)
    chosen, passes = first_step(job, canvases, asked, denoiser, options)  # job's step 1
    if sure := sure_spans(spans, chosen.sure):  # exact where sure: plan them again
        ...
        set_races(canvases, chosen.race)  # the others race its lengths should they fail

Asking costs no pass of its own where the head is sure of no hole (about nine requests in
ten); where it is sure of one, that pass is spent and the request planned again.

Measured with the shipped network: docs/log/architecture.md, "A length head read from the first
pass" (part-of-line holes gain most; more holes are left as they were). A model directory
without a head (`python -m benchmarks.fit_length_head` fits one) is never asked.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from weakref import WeakKeyDictionary

from diffusion_infill.infill.core.allocation import Allocation
from diffusion_infill.infill.core.candidates import CandidateJob
from diffusion_infill.infill.core.canvas import Canvas
from diffusion_infill.infill.core.lines import Frame
from diffusion_infill.infill.core.options import SamplerOptions
from diffusion_infill.infill.core.sampler import DenoiseJob, hint_keys
from diffusion_infill.infill.core.spans import Span
from diffusion_infill.model.denoiser import Denoiser

MIN_PROBABILITY = 0.5  # the head's likeliest length is taken when it is at least this likely
# per job, what the head read of its holes (`keep_rows`, `head_rows`)
_ROWS: WeakKeyDictionary[DenoiseJob | CandidateJob, dict[int, tuple[float, ...]]] = (
    WeakKeyDictionary()
)


@dataclass(frozen=True)
class Chosen:
    """What the length head chose, per span index."""

    sure: dict[int, int] = field(default_factory=dict)  # exactly this many tokens
    race: dict[int, tuple[int, ...]] = field(default_factory=dict)  # should its fill fail
    # every hole the head read: its log-probabilities of each length (what a fill's
    # confidence reads, infill/core/evidence.py)
    rows: dict[int, tuple[float, ...]] = field(default_factory=dict)


def asked_holes(
    canvases: Sequence[Canvas],
    allocs: Sequence[Allocation],
    frames: Sequence[Frame | None],
    denoiser: Denoiser,
    options: SamplerOptions,
) -> dict[int, list[tuple[int, list[int]]]]:
    """The holes the head reads: per canvas index, each hole's span index and the canvas
    positions of its slots (a one-line hole of the default allocation, all masked, whose
    length is a guess). Empty when the option is off, the denoiser has no head, or the
    request carries entries from an earlier one (inline completions)."""
    slots = getattr(denoiser, "length_slots", 0)
    if not options.length_head or not slots or options.carry_key:
        return {}
    mask = denoiser.special.mask
    asked: dict[int, list[tuple[int, list[int]]]] = {}
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
    return asked


def first_step(
    job: DenoiseJob | CandidateJob,
    canvases: Sequence[Canvas],
    asked: dict[int, list[tuple[int, list[int]]]],
    denoiser: Denoiser,
    options: SamplerOptions,
) -> tuple[Chosen, int]:
    """The job's first step and the head's lengths from the same pass (`first_pass`);
    nothing, no pass, where no hole is `asked`. Where the head is sure of a hole, the plan
    changes: the step is not applied, the job's kept entries are dropped and the pass is
    counted (1; the caller plans again and sets the races); else the races are set and the
    job has made its first step (0: the job counts it)."""
    if not asked:
        return Chosen(), 0
    requests = job.requests()
    where = {tuple(canvases[ci].ids()): ci for ci in asked}
    held = [where.get(tuple(r.canvas)) for r in requests]
    hints = [r.hint for r in requests]
    logits, lengths = denoiser.first_pass(  # type: ignore[attr-defined]
        [r.canvas for r in requests],
        [r.positions for r in requests],
        hints if any(h is not None for h in hints) else None,
        [[p for _, p in asked[ci]] if ci is not None else [] for ci in held],
    )
    chosen = Chosen()
    for ci, rows in zip(held, lengths, strict=True):
        for (index, _), row in zip(asked[ci] if ci is not None else [], rows, strict=True):
            chosen.rows[index] = tuple(float(v) for v in row)
            length = choose(list(row), len(row) - 1)
            if length is not None:
                chosen.sure[index] = length
                continue
            # the network's own ending; should it fail, the head's likeliest lengths race
            ranked = sorted(range(1, len(row) - 1), key=lambda n: -row[n])
            chosen.race[index] = tuple(ranked[: max(0, options.lengths - 1)])
    if not chosen.sure:
        set_races(canvases, chosen.race)  # before the step: a fill may fail in it
        keep_rows(job, chosen)
        job.advance(logits)
        return chosen, 0
    forget = getattr(denoiser, "forget", None)
    for key in hint_keys(job) if callable(forget) else []:
        forget(key)
    return chosen, 1


def keep_rows(job: DenoiseJob | CandidateJob, chosen: Chosen) -> None:
    """Keep what the head read of each hole for `job` (`head_rows`)."""
    _ROWS[job] = chosen.rows


def head_rows(job: DenoiseJob | CandidateJob) -> dict[int, tuple[float, ...]]:
    """Per hole the length head read for `job`: its log-probability of each length (what
    a fill's confidence reads, infill/core/evidence.py); {} where it read none."""
    return _ROWS.get(job, {})


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
