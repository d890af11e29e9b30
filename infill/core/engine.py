"""Fill masked regions of a text: spans -> windows -> canvases -> DenoiseJob -> text + edits.

    result = fill_text("def f(x):\\n    return <mask>\\n")
    result = fill_spans(text, [Span(10, 24)])          # rewrite a selection

Both build a `Fill` (`prepare_fill`), run its job with the denoiser and read the result. A
worker that batches several requests calls `prepare_fill` itself, drives the jobs together
(`Fill.job.requests()` / `.advance()`), and calls `Fill.result()` when a job is done.

The result is the original text with each span's range replaced by the decoded fill (null
tokens dropped); text outside the spans is copied, never decoded, so it comes back byte
for byte.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from itertools import pairwise
from typing import Any

from infill.core.canvas import Canvas, SpanSlots, fill_ids, render
from infill.core.diff import Edit, minimal_edits, unified_diff
from infill.core.errors import InputError, SpanError, line_col
from infill.core.options import SamplerOptions
from infill.core.sampler import DenoiseJob, Slot, run
from infill.core.spans import DEFAULT_MARKER, Span, check_spans, find_holes, neutralise
from infill.core.window import Window, plan_windows
from model.denoiser import Denoiser

PYTHON = "python"  # the language with scope-aware windows (tree-sitter); others get lines


@dataclass(frozen=True)
class SpanFill:
    span: Span  # the span, in original-text offsets
    text: str  # what replaced it (null tokens dropped)
    tokens: int  # non-null tokens generated for it


@dataclass(frozen=True)
class FillStats:
    model: str  # the denoiser's name
    spans: int
    groups: int  # canvases (windows) the spans went into
    tokens: int  # non-null tokens generated, all spans
    nfe: int  # forward passes (one per canvas per step)
    steps: int  # denoising steps (batched passes)
    ms: float  # wall time of the whole fill, milliseconds
    nfe_per_token: float  # nfe / max(tokens, 1)
    scored: int  # logit rows requested, all passes
    remasks: int  # committed tokens masked again
    grown: int  # slots appended to spans that ran out of room
    trimmed: int  # context tokens dropped to make room for growth


@dataclass(frozen=True)
class TraceStep:
    """One step of one canvas, for people and tests."""

    step: int
    group: int
    scored: int  # positions whose logits were requested
    committed: tuple[Slot, ...]  # (span, slot) committed in this step
    remasked: tuple[Slot, ...]
    grown: tuple[tuple[int, int], ...]  # (span, slots appended)
    spans: tuple[tuple[int, str], ...]  # (span, text after the step; ░ masked, ∅ null)

    def format(self) -> str:
        parts = [f"step {self.step} canvas {self.group}: scored {self.scored}"]
        parts.append("committed " + (" ".join(f"{k}:{j}" for k, j in self.committed) or "-"))
        if self.remasked:
            parts.append("remasked " + " ".join(f"{k}:{j}" for k, j in self.remasked))
        if self.grown:
            parts.append("grown " + " ".join(f"{k}+{n}" for k, n in self.grown))
        lines = [", ".join(parts)]
        lines += [f"  span {k}: {text!r}" for k, text in self.spans]
        return "\n".join(lines)


@dataclass(frozen=True)
class FillResult:
    text: str  # the filled text
    original: str  # the text as given (markers included)
    edits: list[Edit]  # original -> text, minimal, in original character offsets
    fills: list[SpanFill]  # per span, sorted by position
    windows: list[Window]  # the canvases' windows
    stats: FillStats
    trace: list[TraceStep]

    def diff(self, path: str = "file") -> str:
        return unified_diff(self.original, self.text, path)

    def trace_text(self) -> str:
        return "\n".join(step.format() for step in self.trace)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready)."""
        return {
            "text": self.text,
            "edits": [asdict(e) for e in self.edits],
            "fills": [
                {"start": f.span.start, "end": f.span.end, "text": f.text, "tokens": f.tokens}
                for f in self.fills
            ],
            "stats": asdict(self.stats),
        }


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


class Fill:
    """A prepared request: its DenoiseJob and what turns the job's slots into a result."""

    def __init__(
        self,
        text: str,
        spans: list[Span],
        windows: list[Window],
        job: DenoiseJob,
        denoiser: Denoiser,
        *,
        rewrite: bool,
        started: float,
    ) -> None:
        self.text = text
        self.spans = spans
        self.windows = windows
        self.job = job
        self.denoiser = denoiser
        self.rewrite = rewrite
        self.started = started

    def result(self) -> FillResult:
        if not self.job.done:
            raise RuntimeError("the fill's job is not done")
        special = self.denoiser.special
        slots = {s.index: s for c in self.job.canvases for s in c.spans}
        fills: list[SpanFill] = []
        parts: list[str] = []
        pos = 0
        for i, span in enumerate(self.spans):
            ids = fill_ids(slots[i].ids, special)
            text = self.denoiser.decode(ids) if ids else ""
            fills.append(SpanFill(span, text, len(ids)))
            parts += [self.text[pos : span.start], text]
            pos = span.end
        parts.append(self.text[pos:])
        filled = "".join(parts)
        edits = minimal_edits(
            self.text, [(f.span.start, f.span.end, f.text, self.rewrite) for f in fills]
        )
        job = self.job
        tokens = sum(f.tokens for f in fills)
        stats = FillStats(
            model=getattr(self.denoiser, "name", type(self.denoiser).__name__),
            spans=len(self.spans),
            groups=len(self.windows),
            tokens=tokens,
            nfe=job.nfe,
            steps=job.steps,
            ms=round((time.perf_counter() - self.started) * 1000, 3),
            nfe_per_token=job.nfe / max(tokens, 1),
            scored=job.scored,
            remasks=job.remasks,
            grown=sum(n for r in job.trace for _, n in r.grown),
            trimmed=sum(c.trimmed for c in job.canvases),
        )
        decode = self.denoiser.decode
        trace = [
            TraceStep(
                step=r.step,
                group=r.group,
                scored=r.scored,
                committed=r.committed,
                remasked=r.remasked,
                grown=r.grown,
                spans=tuple((k, render(ids, special, decode)) for k, ids in r.spans),
            )
            for r in job.trace
        ]
        return FillResult(filled, self.text, edits, fills, self.windows, stats, trace)


def prepare_fill(
    text: str,
    spans: Sequence[Span],
    *,
    denoiser: Denoiser,
    options: SamplerOptions,
    rewrite: bool,
    language: str | None = PYTHON,
    parse_text: str | None = None,
) -> Fill:
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
    """
    started = time.perf_counter()
    check_text(text)
    ordered = check_spans(text, list(spans))
    o = options
    budget = denoiser.max_length
    if o.window_tokens is not None:
        budget = min(budget, o.window_tokens)

    def count(piece: str) -> int:
        return len(denoiser.encode(piece)) if piece else 0

    allocs: list[int] = []
    room: list[int] = []
    exact: list[bool] = []
    caps: list[int] = []
    for s in ordered:
        where = line_col(text, s.start)
        is_exact = o.exact_length or s.exact
        if is_exact and s.length is None:
            raise SpanError(
                f"{where}: exact length needs a length for every span (a hint like <mask:8>)"
            )
        if s.length is not None:
            alloc = s.length
        elif rewrite and s.end > s.start:
            # The text being rewritten is the best guess of its replacement's length.
            alloc = min(max(1, count(text[s.start : s.end])), o.max_span_tokens)
        else:
            alloc = o.default_span_tokens
        if alloc > o.max_span_tokens:
            raise SpanError(
                f"{where}: the span asks for {alloc} tokens; max_span_tokens is {o.max_span_tokens}"
            )
        cap = alloc if is_exact else o.max_span_tokens
        allocs.append(alloc)
        exact.append(is_exact)
        caps.append(cap)
        room.append(0 if is_exact else min(o.grow, cap - alloc))

    windows = plan_windows(
        text,
        ordered,
        allocs=allocs,
        room=room,
        budget=budget,
        count=count,
        parse_text=(parse_text if parse_text is not None else text) if language == PYTHON else None,
    )
    mask = denoiser.special.mask
    canvases: list[Canvas] = []
    for w in windows:
        idx = list(w.spans)

        def encode(piece: str) -> list[int]:
            return list(denoiser.encode(piece)) if piece else []

        canvases.append(
            Canvas(
                left=encode(text[w.start : ordered[idx[0]].start]),
                spans=[SpanSlots(i, [mask] * allocs[i], caps[i], exact[i]) for i in idx],
                gaps=[encode(text[ordered[a].end : ordered[b].start]) for a, b in pairwise(idx)],
                right=encode(text[ordered[idx[-1]].end : w.end]),
                budget=budget,
            )
        )
    job = DenoiseJob(canvases, o, special=denoiser.special, vocab_size=denoiser.vocab_size)
    return Fill(text, ordered, windows, job, denoiser, rewrite=rewrite, started=started)


def fill_text(
    text: str,
    *,
    denoiser: Denoiser,
    marker: str = DEFAULT_MARKER,
    language: str | None = PYTHON,
    options: SamplerOptions | None = None,
    **overrides: Any,
) -> FillResult:
    """Fill every hole marker in `text` (`<mask>`, `<mask:N>` with a hint of N tokens).

    Args:
        text: the text with hole markers.
        denoiser: the network (`model.loading.load_denoiser()` loads the shipped one).
        marker: the hole marker (`??` means holes `??` and `??:N`).
        language: "python" for scope-aware windows; None or another name: line windows.
        options: sampler options; keyword overrides (e.g. `threshold=0.8`) apply on top.

    Raises InfillError (a subclass naming the problem) for bad input or options.
    """
    opts = SamplerOptions.build(options, **overrides)
    check_text(text)
    spans = find_holes(text, marker)
    fill = prepare_fill(
        text,
        spans,
        denoiser=denoiser,
        options=opts,
        rewrite=False,
        language=language,
        parse_text=neutralise(text, spans),
    )
    run(fill.job, denoiser)
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
    check_text(text)
    fill = prepare_fill(text, spans, denoiser=denoiser, options=opts, rewrite=True,
                        language=language)
    run(fill.job, denoiser)
    return fill.result()
