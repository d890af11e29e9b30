"""Fill masked regions of a text: spans -> windows -> canvases -> DenoiseJob -> text + edits.

    result = fill_text("def f(x):\\n    return <mask>\\n", denoiser=den)
    result = fill_spans(text, [Span(10, 24)], denoiser=den)    # rewrite a selection

Both prepare a fill (`prepare_holes` / `prepare_fill`: a `PreparedFill`), denoise its job
and read the result. A worker that batches several requests prepares the fills itself,
drives their jobs together (`job.requests()` / `job.advance()`), and calls
`PreparedFill.result()` when a job is done.

The result is the original text with each span's range replaced by the decoded fill (null
tokens dropped); text outside the spans is copied, never decoded, so it comes back byte
for byte.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from diffusion_infill.infill.core.candidates import CandidateJob, checked_job
from diffusion_infill.infill.core.canvas import Canvas, SpanSlots, fill_ids, render
from diffusion_infill.infill.core.diff import minimal_edits
from diffusion_infill.infill.core.echo import echo_keys, ended
from diffusion_infill.infill.core.errors import InputError, LimitError, SpanError, line_col
from diffusion_infill.infill.core.fills import REPLACEMENT, decoded_fill
from diffusion_infill.infill.core.limits import fill_limits, ids_with
from diffusion_infill.infill.core.lines import (
    Frame,
    framed,
    framed_code,
    line_frames,
    line_keys,
    one_line_limits,
)
from diffusion_infill.infill.core.options import SamplerOptions
from diffusion_infill.infill.core.results import FillResult, FillStats, SpanFill, TraceStep
from diffusion_infill.infill.core.sampler import DenoiseJob, denoise
from diffusion_infill.infill.core.spans import (
    DEFAULT_MARKER,
    Span,
    check_spans,
    find_holes,
    neutralise,
)
from diffusion_infill.infill.core.spans import check_decided as _check_decided
from diffusion_infill.infill.core.window import Layout, Window, plan_windows
from diffusion_infill.model.denoiser import Denoiser

PYTHON = "python"  # the language with scope-aware windows (tree-sitter); others get lines


def check_text(text: str) -> None:
    """Reject text the engine cannot work on: not a str, NUL bytes, lone surrogates."""
    if not isinstance(text, str):
        raise InputError(f"text must be a str, got {type(text).__name__}")
    nul = text.find("\x00")
    if nul >= 0:
        raise InputError(f"{line_col(text, nul)}: the text contains a NUL character (binary?)")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(
            f"{line_col(text, exc.start)}: the text is not valid Unicode (lone surrogate)"
        ) from None


class PreparedFill:
    """A request ready to denoise: its DenoiseJob, and what turns the job's slots into a
    result once it is done."""

    def __init__(self, text: str, spans: list[Span], windows: list[Window],
                 job: DenoiseJob | CandidateJob, denoiser: Denoiser, *, rewrite: bool,
                 started: float, keys: list[str | None],
                 frames: Sequence[Frame | None] | None = None) -> None:
        self.text = text
        self.spans = spans
        self.keys = keys  # per span: its echo key (infill/core/echo.py), None when exact
        #                   (infill/core/echo.py)
        self.windows = windows
        self.job = job
        self.denoiser = denoiser
        self.rewrite = rewrite
        self.started = started
        # per span: what the engine writes around its fill (a selection of whole lines:
        # infill/core/lines.py), None when the model writes it all
        self.frames = list(frames) if frames is not None else [None] * len(spans)

    def span_texts(self) -> list[tuple[int, str]]:
        """Each span's slots as they stand, as text (`░` masked, `∅` null), by span index:
        what a live view shows after a step."""
        canvases = (self.job.primary_canvases if isinstance(self.job, CandidateJob)
                    else self.job.canvases)
        return sorted((s.index, self._render(s.ids)) for c in canvases for s in c.spans)

    def result(self) -> FillResult:
        if not self.job.done:
            raise RuntimeError("the fill's job is not done")
        fills = self._span_fills()
        parts: list[str] = []
        pos = 0
        for f in fills:
            parts += [self.text[pos : f.span.start], f.text]
            pos = f.span.end
        parts.append(self.text[pos:])
        edits = minimal_edits(self.text, [(f.span.start, f.span.end, f.text, self.rewrite)
                                          for f in fills if f.rejected is None])
        return FillResult("".join(parts), self.text, edits, fills, self.windows,
                          self._stats(fills), self._trace())

    def _render(self, ids: Sequence[int]) -> str:
        return render(ids, self.denoiser.special, self.denoiser.decode)

    def _span_fills(self) -> list[SpanFill]:
        """Each span's fill; with the checks on, the winning candidate's, or the span's
        own text and the reason when every candidate failed."""
        if isinstance(self.job, CandidateJob):
            chosen = [c.ids for c in self.job.choices()]
            why = [c.rejected for c in self.job.choices()]
        else:
            slots = {s.index: s for c in self.job.canvases for s in c.spans}
            chosen = [fill_ids(slots[i].ids, self.denoiser.special)
                      for i in range(len(self.spans))]
            why = [None] * len(self.spans)
        fills: list[SpanFill] = []
        for i, (span, ids) in enumerate(zip(self.spans, chosen, strict=True)):
            if ids is None:
                fills.append(SpanFill(span, self.text[span.start:span.end], 0, why[i]))
                continue
            text, n = decoded_fill(ids, self.denoiser.decode, REPLACEMENT in self.text, i,
                                   self.keys[i])
            fills.append(SpanFill(span, framed(text, self.frames[i]), n))
        return fills

    def _stats(self, fills: list[SpanFill]) -> FillStats:
        job = self.job
        tokens = sum(f.tokens for f in fills)
        return FillStats(
            model=getattr(self.denoiser, "name", type(self.denoiser).__name__),
            spans=len(self.spans),
            windows=len(self.windows),
            tokens=tokens,
            nfe=job.nfe,
            steps=job.steps,
            ms=round((time.perf_counter() - self.started) * 1000, 3),
            nfe_per_token=job.nfe / max(tokens, 1),
            scored=job.scored,
            remasks=job.remasks,
            grown=sum(n for r in job.trace for _, n in r.grown),
            trimmed=sum(c.trimmed for c in job.canvases),
            candidates=job.candidates if isinstance(job, CandidateJob) else 0,
            rejected=sum(f.rejected is not None for f in fills),
        )

    def _trace(self) -> list[TraceStep]:
        return [
            TraceStep(step=r.step, canvas=r.canvas, scored=r.scored, committed=r.committed,
                      remasked=r.remasked, grown=r.grown,
                      spans=tuple((k, self._render(ids)) for k, ids in r.spans))
            for r in self.job.trace
        ]


@dataclass(frozen=True)
class _Allocation:
    """How many slots a span starts with and may grow to."""

    slots: int  # allocated at the start
    cap: int  # the most it may grow to
    exact: bool  # exactly `slots`: no null, no growth
    room: int  # growth room its window keeps free
    raced: bool = False  # the length is a guess (a hole's default or hint): may race shorter


def _allocate(text: str, span: Span, options: SamplerOptions, *, rewrite: bool,
              count: Callable[[str], int], frame: Frame | None = None) -> _Allocation:
    """The allocation of one span (the length contract, docs/ARCHITECTURE.md)."""
    o = options
    where = line_col(text, span.start)
    exact = o.exact_length or span.exact
    if exact and span.length is None:
        raise SpanError(
            f"{where}: exact length needs a length for every span (a hint like <mask:8>)"
        )
    guessed = True  # the length is a guess the model may shorten (not the written text's)
    if span.length is not None:
        slots = span.length
    elif rewrite and span.end > span.start:
        # The text being rewritten is the best guess of its replacement's length.
        written = text[span.start : span.end]
        if frame is not None:  # the model writes the code, not the indentation or break
            written = framed_code(written)
        slots = min(max(1, count(written)), o.max_span_tokens)
        guessed = False
    else:
        slots = o.default_span_tokens
    if slots > o.max_span_tokens:
        raise SpanError(
            f"{where}: the span asks for {slots} tokens; max_span_tokens is {o.max_span_tokens}"
        )
    grown = o.max_span_tokens if o.grow_cap is None else min(o.grow_cap, o.max_span_tokens)
    cap = slots if exact else max(slots, grown)
    return _Allocation(slots, cap, exact, 0 if exact else min(o.grow, cap - slots),
                       raced=guessed and not exact)


def _canvas(text: str, spans: list[Span], window: Window, allocs: list[_Allocation], *,
            denoiser: Denoiser, budget: int, forbidden: list[tuple[int, ...]],
            decided: Sequence[list[int] | None], frames: Sequence[Frame | None]) -> Canvas:
    """The window's canvas: its context segments encoded one by one, masked slots (or the
    tokens `decided` for a span); a framed span's indentation and line break are context."""

    def encode(piece: str) -> list[int]:
        return list(denoiser.encode(piece)) if piece else []

    def head(i: int) -> str:
        return frames[i].head if frames[i] is not None else ""

    def tail(i: int) -> str:
        return frames[i].tail if frames[i] is not None else ""

    idx = list(window.spans)
    mask = denoiser.special.mask
    return Canvas(
        left=encode(text[window.start : spans[idx[0]].start] + head(idx[0])),
        spans=[SpanSlots(i, list(decided[i]) if decided[i] is not None
                         else [mask] * allocs[i].slots, allocs[i].cap, allocs[i].exact,
                         forbidden=forbidden[i], raced=allocs[i].raced)
               for i in idx],
        gaps=[encode(tail(a) + text[spans[a].end : spans[b].start] + head(b))
              for a, b in pairwise(idx)],
        right=encode(tail(idx[-1]) + text[spans[idx[-1]].end : window.end]),
        budget=budget,
    )


def _job(text: str, before: str, spans: list[Span], canvases: list[Canvas], *,
         denoiser: Denoiser, options: SamplerOptions, language: str | None,
         keys: list[str | None], frames: Sequence[Frame | None]
         ) -> DenoiseJob | CandidateJob:
    """A plain DenoiseJob, or with the checks or raced lengths on, a CandidateJob
    (infill/core/candidates.py)."""
    # a span whose fill already writes the code after it, or its last line, again has
    # ended: no growth (a span of exact length never grows)
    done = ((lambda i, ids: ended(denoiser.decode(ids), keys[i]))
            if any(k is not None for k in keys) else None)
    if not options.check_kinds and options.lengths == 1:
        return DenoiseJob(canvases, options, special=denoiser.special,
                          vocab_size=denoiser.vocab_size, ended=done)
    allowed = REPLACEMENT in text
    return checked_job(text, before, [(s.start, s.end) for s in spans], canvases, options,
                       special=denoiser.special, vocab_size=denoiser.vocab_size,
                       decode=lambda i, ids: framed(decoded_fill(ids, denoiser.decode,
                                                                 allowed, i, keys[i])[0],
                                                    frames[i]),
                       language=language, kinds=options.check_kinds, ended=done)


def prepare_fill(
    text: str,
    spans: Sequence[Span],
    *,
    denoiser: Denoiser,
    options: SamplerOptions,
    rewrite: bool,
    language: str | None = PYTHON,
    parse_text: str | None = None,
    decided: Sequence[list[int] | None] | None = None,
) -> PreparedFill:
    """Validate spans, choose windows, build canvases and the job. No forward pass yet.

    Args:
        text: the original text.
        spans: the ranges to fill (validated here; overlapping or out of range is an error).
        denoiser: supplies the tokenizer, special ids, vocab size and max_length.
        options: sampler options.
        rewrite: the spans hold code being rewritten (edits are minimised against it), not
            hole markers (each marker is replaced whole).
        language: "python" for scope-aware windows; anything else gets line windows.
        parse_text: the text to parse for scopes, if not `text` (holes neutralised).
        decided: per span (position order), its tokens if already chosen (a repair's
            substitution; exact spans of that length), else None. Nothing masked: no pass.
    """
    started = time.perf_counter()
    check_text(text)
    ordered = check_spans(text, list(spans))
    chosen = _check_decided(ordered, decided)
    budget = denoiser.max_length
    if options.window_tokens is not None:
        budget = min(budget, options.window_tokens)

    def count(piece: str) -> int:
        return len(denoiser.encode(piece)) if piece else 0

    frames = line_frames(text, ordered, decided=chosen, on=options.line_holes)
    allocs = [_allocate(text, s, options, rewrite=rewrite, count=count, frame=f)
              for s, f in zip(ordered, frames, strict=True)]
    layout = Layout(text, count, (parse_text if parse_text is not None else text)
                    if language == PYTHON else None)
    windows = plan_windows(text, ordered, allocs=[a.slots for a in allocs],
                           room=[a.room for a in allocs], budget=budget, count=count,
                           layout=layout)
    limits = one_line_limits(fill_limits(ordered, layout.scopes), frames)
    forbidden = {chars: ids_with(denoiser, chars) for chars in set(limits) if chars}
    canvases = [_canvas(text, ordered, w, allocs, denoiser=denoiser, budget=budget,
                        forbidden=[forbidden.get(chars, ()) for chars in limits],
                        decided=chosen, frames=frames)
                for w in windows]
    keys = line_keys(echo_keys(text, ordered, [a.exact for a in allocs],
                               statements=options.statement_ends
                               and language == PYTHON), frames)
    job = _job(text, parse_text if parse_text is not None else text, ordered, canvases,
               denoiser=denoiser, options=options, language=language, keys=keys,
               frames=frames)
    return PreparedFill(text, ordered, windows, job, denoiser, rewrite=rewrite,
                        started=started, keys=keys, frames=frames)


def prepare_holes(
    text: str,
    *,
    denoiser: Denoiser,
    options: SamplerOptions,
    marker: str = DEFAULT_MARKER,
    language: str | None = PYTHON,
    max_spans: int | None = None,
) -> PreparedFill:
    """`prepare_fill` for every hole marker in `text`; more than `max_spans` holes is a
    LimitError (a worker's limit)."""
    check_text(text)
    spans = find_holes(text, marker)
    if max_spans is not None and len(spans) > max_spans:
        raise LimitError(f"{len(spans)} holes; the limit is {max_spans}")
    return prepare_fill(text, spans, denoiser=denoiser, options=options, rewrite=False,
                        language=language, parse_text=neutralise(text, spans))


def fill_text(
    text: str,
    *,
    denoiser: Denoiser,
    marker: str = DEFAULT_MARKER,
    language: str | None = PYTHON,
    options: SamplerOptions | None = None,
    progress: Callable[[int, int], None] | None = None,
    **overrides: Any,
) -> FillResult:
    """Fill every hole marker in `text` (`<mask>`, `<mask:N>` with a hint of N tokens).

    Args:
        text: the text with hole markers.
        denoiser: the network (`model.loading.load_denoiser()` loads the shipped one).
        marker: the hole marker (`??` means holes `??` and `??:N`).
        language: "python" for scope-aware windows; None or another name: line windows.
        options: sampler options; keyword overrides (e.g. `threshold=0.8`) apply on top.
        progress: called after each step with (slots committed, slots in all).

    Raises InfillError (a subclass naming the problem) for bad input or options.
    """
    opts = SamplerOptions.build(options, **overrides)
    fill = prepare_holes(text, denoiser=denoiser, options=opts, marker=marker,
                         language=language)
    denoise(fill.job, denoiser, progress)
    return fill.result()


def fill_spans(
    text: str,
    spans: Sequence[Span],
    *,
    denoiser: Denoiser,
    language: str | None = PYTHON,
    options: SamplerOptions | None = None,
    **overrides: Any,
) -> FillResult:
    """Mask the characters of each span and fill them ("rewrite selection"; an empty span
    is an insertion point). Edits touch only what the fill changed.

    Args: as for `fill_text`, with `spans` instead of markers (Span(start, end, length)).
    """
    opts = SamplerOptions.build(options, **overrides)
    fill = prepare_fill(text, spans, denoiser=denoiser, options=opts, rewrite=True,
                        language=language)
    denoise(fill.job, denoiser)
    return fill.result()
