"""The denoising sampler: a state machine over canvases, driven by logits.

    job = DenoiseJob(canvases, options, special=..., vocab_size=...)
    while not job.done:
        batch = job.requests()                  # [(canvas ids, positions to score)]
        job.advance(denoiser.logits(...batch))  # one forward pass per canvas

`denoise(job, denoiser)` is that loop. The job never calls the network itself, so a worker can
put the steps of many jobs into one batched forward pass; it knows nothing about text either.

One step of one canvas:
1. Remask (only with `remask_threshold`): committed, non-null span tokens whose probability
   fell below the threshold are masked again, lowest first, while `remask_budget` lasts.
2. Commit: the order's strategy picks masked positions (infill/core/strategies.py); each gets
   its argmax token, or a draw at temperature > 0. A committed null ends its span (its later
   masked slots become null). The step that reaches `max_steps` commits every masked
   position. With `eager_ends` no pass is spent on nulls alone (infill/core/ends.py). The
   trace keeps each committed token's odds (`StepRecord.odds`).
3. Grow: a span (not exact) whose slots are all committed with no null gets `grow` more
   masked slots, up to `max_span_tokens`, unless `ended` says its fill has ended anyway (it
   writes the code after it again); context at the canvas's outer ends makes room.
4. Stop: a canvas is done when no slot is masked, and, with remasking, one more pass found
   nothing to remask (the fill is stable).

With `cache_refresh=k`, each request carries a CacheHint (active = all span slots) so the
denoiser may reuse the context's keys/values: a full pass first, every k passes, and after
growth moved positions. Call `requests()` once per `advance()`. `order="entropy-bound"`
is DiffusionGemma's sampler (infill/core/entropy_bound.py).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from diffusion_infill.infill.core.canvas import Canvas, Slot, SpanSlots, fill_ids
from diffusion_infill.infill.core.ends import close_ended, with_content
from diffusion_infill.infill.core.entropy_bound import NAME as ENTROPY_BOUND
from diffusion_infill.infill.core.entropy_bound import EntropyBoundRun
from diffusion_infill.infill.core.errors import DenoiserError
from diffusion_infill.infill.core.options import SamplerOptions
from diffusion_infill.infill.core.scoring import SCORES, choose, first_only, pick_tokens, softmax
from diffusion_infill.infill.core.steps import LogitsRequest, StepRecord, commit_odds
from diffusion_infill.infill.core.strategies import STRATEGIES
from diffusion_infill.model.denoiser import CacheHint, Denoiser, SpecialIds

_job_serial = itertools.count()  # makes cache keys unique within a process


@dataclass
class _Pending:
    canvas: int
    masked: list[Slot]  # rows 0..len(masked)-1
    committed: list[Slot]  # the rows after them: committed slots scored for remasking


class DenoiseJob:
    """Denoise the masked slots of some canvases, one forward pass per canvas per step.

    Args:
        canvases: the request's canvases (one per window); their slots are edited in place.
        options: validated sampler options (order, threshold, steps cap, remasking...).
        special: the denoiser's special ids (mask, null, pad).
        vocab_size: width of the logits rows.
        ended: (span index, the span's tokens, nulls dropped) -> True when a span that
            filled up without a null has ended anyway (its fill writes the code after
            it again: infill/core/echo.py); such a span is not grown.

    Attributes: `steps` (calls to advance), `nfe` (forward passes: canvases scored),
    `scored` (logit rows requested), `remasks`, `trace` (one StepRecord per canvas step).
    """

    def __init__(
        self,
        canvases: Sequence[Canvas],
        options: SamplerOptions,
        *,
        special: SpecialIds,
        vocab_size: int,
        ended: Callable[[int, list[int]], bool] | None = None,
    ) -> None:
        self.canvases = list(canvases)
        self.ended = ended
        self.options = options
        self.special = special
        self.vocab_size = vocab_size
        self.strategy = STRATEGIES[options.order]
        threshold = options.effective_threshold
        self._cut = self.strategy.cut(threshold) if threshold is not None else None
        self._rng = np.random.default_rng(options.seed) if options.temperature > 0 else None
        self._remask_left = options.effective_remask_budget
        self._canvas_steps = [0] * len(self.canvases)
        # Context reuse: passes since the canvas's last full pass (None: never had one),
        # and whether its layout moved (growth, trimming) since then.
        self._serial = next(_job_serial)
        self._since_full: list[int | None] = [None] * len(self.canvases)
        self._moved = [False] * len(self.canvases)
        # a canvas whose slots were all decided before any pass has nothing to denoise
        self._done = [not any(special.mask in span.ids for span in c.spans) for c in self.canvases]
        self._pending: list[_Pending] | None = None
        self.steps = self.nfe = self.scored = self.remasks = 0
        self.trace: list[StepRecord] = []
        # DiffusionGemma's sampler (infill/core/entropy_bound.py) drives the canvases itself
        self._bound = EntropyBoundRun(self) if options.order == ENTROPY_BOUND else None

    @property
    def done(self) -> bool:
        return all(self._done)

    def slots(self) -> tuple[int, int]:
        """(slots no longer masked, slots in all) over every canvas; growth adds slots."""
        ids = [t for canvas in self.canvases for span in canvas.spans for t in span.ids]
        return len(ids) - ids.count(self.special.mask), len(ids)

    # -- requests ---------------------------------------------------------------------

    def requests(self) -> list[LogitsRequest]:
        """The canvases that still need a pass, with the positions to score in each."""
        if self.done:
            raise RuntimeError("the job is done")
        if self._bound is not None:
            return self._bound.requests()
        mask, null = self.special.mask, self.special.null
        pending: list[_Pending] = []
        out: list[LogitsRequest] = []
        for ci, canvas in enumerate(self.canvases):
            if self._done[ci]:
                continue
            # The step that reaches max_steps commits everything and remasks nothing.
            last = self.options.max_steps is not None and (
                self._canvas_steps[ci] + 1 >= self.options.max_steps
            )
            check = self._remask_left > 0 and not last
            masked: list[Slot] = []
            committed: list[Slot] = []
            positions: list[int] = []
            committed_pos: list[int] = []
            for span, offset in zip(canvas.spans, canvas.offsets(), strict=True):
                for j, t in enumerate(span.ids):
                    if t == mask:
                        masked.append((span.index, j))
                        positions.append(offset + j)
                    elif t != null and check:
                        committed.append((span.index, j))
                        committed_pos.append(offset + j)
            if self.strategy.sequential and not last:  # only the leftmost slot is decided
                masked, positions = masked[:1], positions[:1]
            pending.append(_Pending(ci, masked, committed))
            out.append(
                LogitsRequest(canvas.ids(), positions + committed_pos, self._hint(ci, canvas))
            )
        self._pending = pending
        return out

    def cache_key(self, ci: int) -> tuple[str, int, int]:
        """The CacheHint key of canvas `ci` (unique per job and canvas in this process)."""
        return ("infill", self._serial, ci)

    def cache_keys(self) -> list[Hashable]:
        """Every CacheHint key this job's requests carry (a raced length's too)."""
        if self._bound is not None:
            return self._bound.keys()
        return [self.cache_key(ci) for ci in range(len(self.canvases))]

    def _hint(self, ci: int, canvas: Canvas) -> CacheHint | None:
        every = self.options.cache_refresh
        if every == 0:
            return None
        since = self._since_full[ci]
        refresh = since is None or since >= every or self._moved[ci]
        self._since_full[ci] = 1 if refresh else since + 1  # type: ignore[operator]
        self._moved[ci] = False
        active = tuple(
            off + j
            for span, off in zip(canvas.spans, canvas.offsets(), strict=True)
            for j in range(len(span.ids))
        )
        # the first pass may start from what the last request of the same carry_key left
        carry = (
            ("carry", self.options.carry_key, ci)
            if since is None and self.options.carry_key
            else None
        )
        return CacheHint(key=self.cache_key(ci), active=active, refresh=refresh, carry=carry)

    # -- advance ----------------------------------------------------------------------

    def advance(self, logits: Sequence[np.ndarray]) -> None:
        """Apply one pass's logits, in the order of the last `requests()`."""
        if self._bound is not None:
            self._bound.advance(logits)
            return
        if self._pending is None:
            raise RuntimeError("advance() without requests()")
        pending, self._pending = self._pending, None
        if len(logits) != len(pending):
            raise DenoiserError(
                f"the denoiser returned {len(logits)} logit arrays for {len(pending)} canvases"
            )
        arrays = [np.asarray(a) for a in logits]
        for p, arr in zip(pending, arrays, strict=True):
            rows = len(p.masked) + len(p.committed)
            if arr.shape != (rows, self.vocab_size):
                raise DenoiserError(
                    f"the denoiser returned logits of shape {arr.shape}, expected "
                    f"{(rows, self.vocab_size)}"
                )
        self.steps += 1
        for p, arr in zip(pending, arrays, strict=True):
            self.nfe += 1
            self.scored += len(p.masked) + len(p.committed)
            self._step(p, arr)

    def _step(self, p: _Pending, arr: np.ndarray) -> None:
        """Remask, commit, grow and maybe finish canvas `p.canvas` with its logits."""
        canvas = self.canvases[p.canvas]
        by_index = {s.index: s for s in canvas.spans}
        self._canvas_steps[p.canvas] += 1
        last = self.options.max_steps is not None and (
            self._canvas_steps[p.canvas] >= self.options.max_steps
        )
        x, probs = self._probabilities(p, arr, by_index)
        remasked = self._remask(p, probs, by_index) if p.committed and not last else []
        committed, odds = self._commit(p, x, probs, by_index, last)
        grown = [] if last else self._grow(p.canvas)
        self._settle(p.canvas, last, changed=bool(committed or remasked))
        self.trace.append(
            StepRecord(
                step=self.steps,
                canvas=p.canvas,
                scored=len(p.masked) + len(p.committed),
                committed=tuple(sorted(committed)),
                remasked=tuple(remasked),
                grown=tuple(grown),
                spans=tuple((s.index, tuple(s.ids)) for s in canvas.spans),
                odds=odds,
            )
        )

    def _probabilities(
        self, p: _Pending, arr: np.ndarray, by_index: dict[int, SpanSlots]
    ) -> tuple[np.ndarray, np.ndarray]:
        """(logits, probabilities) of the rows, over the ids a slot may take: never mask or
        pad, no null where the span may not end there, none of its forbidden ids; a span's
        first slot only its `first` ids where it has them."""
        sp = self.special
        x = arr.astype(np.float32, copy=True)  # (rows, V)
        x[:, [sp.mask, sp.pad]] = -np.inf
        rows = p.masked + p.committed
        no_end = [r for r, (k, j) in enumerate(rows) if not by_index[k].may_end(j)]
        if no_end:
            x[no_end, sp.null] = -np.inf
        for r, (k, j) in enumerate(rows):
            if by_index[k].forbidden:
                x[r, list(by_index[k].forbidden)] = -np.inf
            if j == 0 and by_index[k].first:
                first_only(x, r, by_index[k].first)
        return x, softmax(x)

    def _remask(self, p: _Pending, probs: np.ndarray, by_index: dict[int, SpanSlots]) -> list[Slot]:
        """Mask again the committed slots whose probability fell below the threshold,
        lowest first, while the budget lasts."""
        rows = np.arange(len(p.masked), len(p.masked) + len(p.committed))
        current = np.array([by_index[k].ids[j] for k, j in p.committed])
        prob = probs[rows, current]
        cut = self.options.remask_threshold
        low = [int(i) for i in np.argsort(prob, kind="stable") if prob[i] < cut]
        remasked: list[Slot] = []
        for i in low[: self._remask_left]:
            k, j = p.committed[i]
            by_index[k].ids[j] = self.special.mask
            remasked.append((k, j))
        self._remask_left -= len(remasked)
        self.remasks += len(remasked)
        return remasked

    def _commit(
        self,
        p: _Pending,
        x: np.ndarray,
        probs: np.ndarray,
        by_index: dict[int, SpanSlots],
        last: bool,
    ) -> tuple[list[Slot], tuple[tuple[float, int, float], ...]]:
        """Commit the masked slots the order picks (all of them in the last step); a
        committed null ends its span. With `eager_ends`, a pass also commits a content
        token when the order picked only nulls, and closes every span whose masked slots
        all predict null (the model says the fill has ended). Returns the slots and each
        one's odds (`commit_odds`)."""
        sp, n = self.special, len(p.masked)
        if not n:
            return [], ()
        tokens = pick_tokens(x[:n], self.options.temperature, self._rng)
        if last or self.strategy.sequential:
            chosen = np.arange(n)
        else:
            scores = SCORES[self.strategy.name](probs[:n], tokens)
            chosen = choose(scores, cut=self._cut, k=self.options.tokens_per_step)
            if self.options.eager_ends:
                chosen = with_content(p.masked, chosen, tokens, scores, null=sp.null)
        committed: list[Slot] = []
        for r in chosen:  # ascending rows = slot order, so a null ends its span first
            k, j = p.masked[int(r)]
            span = by_index[k]
            if span.ids[j] != sp.mask:  # nulled by an earlier commit of this step
                continue
            tok = int(tokens[int(r)])
            span.ids[j] = tok
            committed.append((k, j))
            if tok == sp.null:
                for j2 in range(j + 1, len(span.ids)):
                    if span.ids[j2] == sp.mask:
                        span.ids[j2] = sp.null
                        committed.append((k, j2))
        if self.options.eager_ends and not last:
            committed += close_ended(p.masked, tokens, by_index, mask=sp.mask, null=sp.null)
        odds = commit_odds(committed, by_index, p.masked, probs, tokens)
        return committed, odds

    def _grow(self, ci: int) -> list[tuple[int, int]]:
        """Append `grow` masked slots to each span that filled up without a null."""
        o, sp = self.options, self.special
        canvas = self.canvases[ci]
        grown: list[tuple[int, int]] = []
        for span in canvas.spans:
            if (
                span.exact
                or o.grow == 0
                or not span.can_grow
                or len(span.ids) >= span.cap
                or sp.mask in span.ids
                or sp.null in span.ids
                or (self.ended is not None and self.ended(span.index, fill_ids(span.ids, sp)))
            ):
                continue
            n_new = canvas.make_room(min(o.grow, span.cap - len(span.ids)))
            if n_new == 0:
                span.can_grow = False
                continue
            span.ids.extend([sp.mask] * n_new)
            grown.append((span.index, n_new))
            self._moved[ci] = True  # positions after the span shifted
        return grown

    def _settle(self, ci: int, last: bool, *, changed: bool) -> None:
        """Mark canvas `ci` done: after its last step, or when nothing is masked (and,
        with remasking, one more pass found the fill stable)."""
        sp = self.special
        spans = self.canvases[ci].spans
        if last:
            self._done[ci] = True
        elif not any(sp.mask in s.ids for s in spans):
            has_tokens = any(t != sp.null for s in spans for t in s.ids)
            # With remasking, one more pass checks that the finished fill is stable.
            self._done[ci] = not (self._remask_left > 0 and has_tokens and changed)


def denoise(
    job: DenoiseJob, denoiser: Denoiser, progress: Callable[[int, int], None] | None = None
) -> DenoiseJob:
    """Drive `job` to the end with `denoiser`, one batched forward pass per step.

    Args:
        job: a DenoiseJob, fresh or with steps taken.
        denoiser: anything with `logits(canvases, positions)` (the Denoiser protocol).
        progress: called after each step with `job.slots()` (committed, in all).
    Returns the job, done: read its canvases, counters and trace."""
    while not job.done:
        batch = job.requests()
        canvases, positions = [r.canvas for r in batch], [r.positions for r in batch]
        if any(r.hint is not None for r in batch):
            job.advance(denoiser.logits(canvases, positions, [r.hint for r in batch]))
        else:  # denoisers that know nothing of hints keep working
            job.advance(denoiser.logits(canvases, positions))
        if progress is not None:
            progress(*job.slots())
    forget = getattr(denoiser, "forget", None)
    for key in hint_keys(job) if callable(forget) else []:
        forget(key)
    return job


def hint_keys(job: Any) -> list[Hashable]:
    """The CacheHint keys of a job's requests (DenoiseJob, CandidateJob): a denoiser may
    drop what it holds for them once the job is done. None when they carry no hints."""
    if not (job.options.cache_refresh or job.options.order == ENTROPY_BOUND):
        return []
    return list(job.cache_keys())  # a CandidateJob's: every round's
