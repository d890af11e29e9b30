"""The entropy-bound order: DiffusionGemma's sampler, over the engine's canvases.

    DenoiseJob(canvases, SamplerOptions(order="entropy-bound"), ...)   # drives it

A model trained with uniform random-token noise (no mask token; DiffusionGemma) is
decoded the way transformers' `EntropyBoundSampler` decodes it, with two changes that
infilling needs: only the spans' slots are ever noised (the code around them stays
clean), and a span's length is exact (such a model has no null token).

One step of one canvas:
1. One pass scores every slot of every span. The pass's logits are divided by the step's
   temperature, linearly from 0.8 at the first step to 0.4 at the last (as transformers'
   `LinearTemperatureScheduleLogitsProcessor`: T = 0.4 + 0.4 * remaining / steps).
2. A candidate token is drawn at each slot, and the argmax is kept aside.
3. Slots are accepted in order of entropy while the sum of their entropies minus the
   largest stays within the bound (the threshold option, 0.1 nats by default): accepted
   slots take the drawn token, every other slot is masked again, and the denoiser puts
   fresh uniform noise there. Acceptance is recomputed each step: nothing is frozen.
4. Stop when the argmax slots did not change since the last step and their mean entropy
   is below 0.005 nats, or after `steps` passes (48, or fewer with `max_steps`); the fill is
   the argmax.

Each request carries a CacheHint with the step's temperature and a noise seed, so a
self-conditioning denoiser keeps this pass's logits / temperature for the next one (model/
diffusion_gemma.py), and the noise is the same for the same seed: a fill is repeatable.

Lengths: a span whose length is a guess (`SpanSlots.raced`) races, with `lengths` > 1,
several exact lengths around its allocation (x4, x2, x1, /2, /4 for 5), side by side in
the same passes; the one whose argmax tokens the model scores best (mean log-probability
at the last pass) wins. Which rule picks lengths best needs measuring with real weights.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from diffusion_infill.infill.core.canvas import Canvas, Slot, SpanSlots
from diffusion_infill.infill.core.errors import DenoiserError
from diffusion_infill.infill.core.scoring import (
    entropy,
    first_only,
    log_softmax,
    pick_tokens,
    softmax,
)
from diffusion_infill.infill.core.steps import LogitsRequest, StepRecord
from diffusion_infill.model.denoiser import CacheHint, SpecialIds

NAME = "entropy-bound"
DEFAULT_BOUND = 0.1  # nats: cumulative entropy of the accepted slots minus the largest
T_MAX = 0.8  # temperature at the first step
T_MIN = 0.4  # temperature the schedule falls to at its end
MAX_STEPS = 48  # passes per canvas (transformers' default); `max_steps` may set fewer
STOP_ENTROPY = 0.005  # nats: mean entropy below which a stable canvas is done
STABLE_STEPS = 1  # passes the argmax must stay unchanged to stop


def temperature(step: int, steps: int) -> float:
    """The temperature of 0-based `step` of `steps` (0.8 at the first step)."""
    remaining = steps - step
    return T_MIN + (T_MAX - T_MIN) * remaining / steps


def accepted(entropies: np.ndarray, bound: float) -> np.ndarray:
    """Boolean mask of the rows to accept: lowest entropy first, while the cumulative
    entropy minus the largest accepted stays within `bound` (at least one row)."""
    order = np.argsort(entropies, kind="stable")
    ordered = entropies[order].astype(np.float32)
    ok = np.cumsum(ordered) - ordered <= bound
    mask = np.zeros(len(entropies), dtype=bool)
    mask[order] = ok
    return mask


def noise_seed(seed: int | None, canvas: int, variant: int) -> int:
    """The noise seed of one canvas of a request: `seed` itself for the first."""
    return ((seed or 0) + canvas * 65_537 + variant * 257) % 2**63


def rung_lengths(slots: int, cap: int, lengths: int) -> list[int]:
    """The exact lengths a raced span of `slots` races: x2^k around it, within [1, cap]."""
    top = (lengths - 1) // 2
    out: list[int] = []
    for e in range(top, top - lengths, -1):
        n = max(1, min(cap, slots * 2**e if e >= 0 else slots >> -e))
        if n not in out:
            out.append(n)
    return out


@dataclass
class Variant:
    """One canvas being decoded: a request's canvas, or one raced length of it."""

    origin: int  # the canvas index in the job
    number: int  # 0, 1, ... among the canvas's variants
    canvas: Canvas
    raced: frozenset[int]  # span indices whose length this variant sets
    rng: np.random.Generator
    steps: int = 0
    previous: np.ndarray | None = None  # last pass's argmax over the slots
    done: bool = False
    score: float = float("-inf")
    slots: list[Slot] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)

    def locate(self) -> None:
        """Every slot of every span, and its canvas position."""
        self.slots, self.positions = [], []
        for span, offset in zip(self.canvas.spans, self.canvas.offsets(), strict=True):
            for j in range(len(span.ids)):
                self.slots.append((span.index, j))
                self.positions.append(offset + j)


def _copy(canvas: Canvas, lengths: dict[int, int], mask: int) -> Canvas:
    spans = [
        SpanSlots(
            s.index,
            [mask] * lengths[s.index] if s.index in lengths else list(s.ids),
            lengths.get(s.index, s.cap),
            True,
            forbidden=s.forbidden,
            first=s.first,
        )
        for s in canvas.spans
    ]
    return canvas.with_spans(spans)


def variants(
    canvases: Sequence[Canvas], *, lengths: int, seed: int | None, special: SpecialIds
) -> list[Variant]:
    """The canvases to decode: per canvas, one per raced length (itself if none races)."""
    out: list[Variant] = []
    for ci, canvas in enumerate(canvases):
        raced = [s for s in canvas.spans if s.raced and not s.exact] if lengths > 1 else []
        ladders = {
            s.index: rung_lengths(len(s.ids), max(s.cap, len(s.ids)), lengths) for s in raced
        }
        count = max((len(v) for v in ladders.values()), default=1)
        for k in range(count):
            rung = {i: ladder[min(k, len(ladder) - 1)] for i, ladder in ladders.items()}
            copy = _copy(canvas, rung, special.mask) if raced else canvas
            rng = np.random.default_rng(np.random.SeedSequence(seed or 0, spawn_key=(ci, k)))
            v = Variant(ci, k, copy, frozenset(rung), rng)
            v.locate()
            out.append(v)
    return out


def hint(key: object, v: Variant, steps: int, seed: int | None) -> CacheHint:
    """The request's hint: every slot is active; the step's temperature and noise seed."""
    return CacheHint(
        key=key,
        active=tuple(v.positions),
        refresh=True,
        seed=noise_seed(seed, v.origin, v.number),
        temperature=temperature(v.steps, steps),
    )


def banned_logits(arr: np.ndarray, v: Variant, special: SpecialIds) -> np.ndarray:
    """The pass's logits over the ids a slot may take: never mask, pad or null (the
    lengths are exact), nor a span's forbidden ids; a span's first slot only its `first`
    ids where it has them."""
    x = np.array(arr, dtype=np.float32, copy=True)  # (rows, V)
    x[:, [special.mask, special.pad, special.null]] = -np.inf
    by_index = {s.index: s for s in v.canvas.spans}
    for r, (k, j) in enumerate(v.slots):
        if by_index[k].forbidden:
            x[r, list(by_index[k].forbidden)] = -np.inf
        if j == 0 and by_index[k].first:
            first_only(x, r, by_index[k].first)
    return x


def step(
    v: Variant, arr: np.ndarray, *, steps: int, bound: float, special: SpecialIds
) -> tuple[list[Slot], list[Slot]]:
    """Apply one pass's logits (rows: `v.slots`) to variant `v`. Returns (slots accepted,
    slots masked again); the variant is done when it stopped or reached `steps`."""
    x = banned_logits(arr, v, special)
    t = temperature(v.steps, steps)
    v.steps += 1
    drawn = pick_tokens(x, t, v.rng)
    best = x.argmax(axis=-1)
    h = entropy(softmax(x / np.float32(t)))
    stable = v.previous is not None and bool(np.array_equal(v.previous, best))
    v.previous = best
    by_index = {s.index: s for s in v.canvas.spans}
    if (stable and STABLE_STEPS > 0 and float(h.mean()) < STOP_ENTROPY) or v.steps >= steps:
        for (k, j), tok in zip(v.slots, best, strict=True):
            by_index[k].ids[j] = int(tok)
        raced = [r for r, (k, _) in enumerate(v.slots) if k in v.raced]
        logp = log_softmax(x)
        v.score = float(np.mean(logp[raced, best[raced]])) if raced else 0.0
        v.done = True
        return list(v.slots), []
    keep = accepted(h, bound)
    taken, renoised = [], []
    for r, (k, j) in enumerate(v.slots):
        if keep[r]:
            by_index[k].ids[j] = int(drawn[r])
            taken.append((k, j))
        else:
            by_index[k].ids[j] = special.mask
            renoised.append((k, j))
    return taken, renoised


def settle(canvas: Canvas, mine: Sequence[Variant]) -> None:
    """Write the best-scoring variant's spans into `canvas` (its variants are done)."""
    if len(mine) == 1 and mine[0].canvas is canvas:
        return
    best = max(mine, key=lambda v: v.score)  # ties: the first, the longest
    chosen = {s.index: s.ids for s in best.canvas.spans}
    for span in canvas.spans:
        span.ids[:] = chosen[span.index]


class EntropyBoundRun:
    """The entropy-bound decoding of a DenoiseJob's canvases: the job delegates its
    `requests()` / `advance()` here and keeps its counters, trace and `done` flags."""

    def __init__(self, job: Any) -> None:  # a DenoiseJob (its module imports this one)
        o = job.options
        self.job = job
        self.steps = min(o.max_steps or MAX_STEPS, MAX_STEPS)
        self.bound = o.effective_threshold if o.effective_threshold is not None else DEFAULT_BOUND
        self.variants = variants(job.canvases, lengths=o.lengths, seed=o.seed, special=job.special)
        self._pending: list[Variant] | None = None
        for v in self.variants:  # nothing masked: decided before any pass
            v.done = job._done[v.origin]

    def key(self, v: Variant) -> Hashable:
        base = self.job.cache_key(v.origin)
        return base if v.number == 0 else (base, v.number)

    def keys(self) -> list[Hashable]:
        return [self.key(v) for v in self.variants]

    def requests(self) -> list[LogitsRequest]:
        self._pending = [v for v in self.variants if not v.done]
        return [
            LogitsRequest(
                v.canvas.ids(),
                list(v.positions),
                hint(self.key(v), v, self.steps, self.job.options.seed),
            )
            for v in self._pending
        ]

    def advance(self, logits: Sequence[np.ndarray]) -> None:
        if self._pending is None:
            raise RuntimeError("advance() without requests()")
        pending, self._pending = self._pending, None
        job = self.job
        if len(logits) != len(pending):
            raise DenoiserError(
                f"the denoiser returned {len(logits)} logit arrays for {len(pending)} canvases"
            )
        arrays = [np.asarray(a) for a in logits]
        for v, arr in zip(pending, arrays, strict=True):
            if arr.shape != (len(v.slots), job.vocab_size):
                raise DenoiserError(
                    f"the denoiser returned logits of shape {arr.shape}, "
                    f"expected {(len(v.slots), job.vocab_size)}"
                )
        job.steps += 1
        for v, arr in zip(pending, arrays, strict=True):
            job.nfe += 1
            job.scored += len(v.slots)
            taken, renoised = step(v, arr, steps=self.steps, bound=self.bound, special=job.special)
            job.trace.append(
                StepRecord(
                    step=job.steps,
                    canvas=v.origin,
                    scored=len(v.slots),
                    committed=tuple(sorted(taken)),
                    remasked=tuple(renoised),
                    grown=(),
                    spans=tuple((s.index, tuple(s.ids)) for s in v.canvas.spans),
                )
            )
        for ci, canvas in enumerate(job.canvases):
            mine = [v for v in self.variants if v.origin == ci]
            if not job._done[ci] and all(v.done for v in mine):
                settle(canvas, mine)
                job._done[ci] = True
