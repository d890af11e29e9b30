"""Fill masked regions of a text: spans -> windows -> canvases -> DenoiseJob -> text + edits.

    result = fill_text("def f(x):\\n    return <mask>\\n", denoiser=den)
    result = fill_spans(text, [Span(10, 24)], denoiser=den)    # rewrite a selection

Both prepare a fill (`prepare_holes` / `prepare_fill`: a `PreparedFill`,
infill/core/prepared.py), denoise its job and read the result. The stages a fill meets, in
order (each a `SamplerOptions` switch; docs/ARCHITECTURE.md, "The stages of a fill"):

    prepare_fill  line_holes, indent_pass: whole-line spans framed (lines.py, indents.py);
                  slots, windows, canvases (selection_lines); where fills end (echo.py);
                  the job, a CandidateJob with checks; length_head (head_lengths.py);
                  context_copies (copy_fills.py, cross_copies.py)
    denoise       the job's rounds (candidates.py `Round`): primary, alternatives (the
                  race), scoring, copies; each step is the sampler's
    result        texts, edits, confidence and runner-ups (prepared.py, rated.py)

A worker that batches several requests prepares the fills itself, drives their jobs
together (`job.requests()` / `job.advance()`), and calls `PreparedFill.result()` when a
job is done. Each span's slots and each window's canvas are infill/core/allocation.py's.

The result is the original text with each span's range replaced by the decoded fill (null
tokens dropped); text outside the spans is copied, never decoded, so it comes back byte
for byte.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from typing import Any

from diffusion_infill.infill.core.allocation import Allocation, allocate, window_canvases
from diffusion_infill.infill.core.candidates import CandidateJob, Decode, Ended
from diffusion_infill.infill.core.canvas import Canvas
from diffusion_infill.infill.core.checks import Problem, Range, check_fills, splice
from diffusion_infill.infill.core.copy_fills import inline_holes
from diffusion_infill.infill.core.cross_copies import copy_round
from diffusion_infill.infill.core.echo import Ends, after_space, echo_keys, ended
from diffusion_infill.infill.core.errors import InputError, LimitError, line_col
from diffusion_infill.infill.core.fills import REPLACEMENT, decoded_fill
from diffusion_infill.infill.core.head_lengths import (
    asked_holes,
    first_step,
    keep_rows,
    set_races,
    sure_spans,
)
from diffusion_infill.infill.core.indents import model_indents, parsing_depths
from diffusion_infill.infill.core.line_holes import line_holes
from diffusion_infill.infill.core.lines import Frame, framed, line_frames, line_keys
from diffusion_infill.infill.core.options import SamplerOptions
from diffusion_infill.infill.core.prepared import PreparedFill
from diffusion_infill.infill.core.results import FillResult
from diffusion_infill.infill.core.sampler import DenoiseJob, denoise
from diffusion_infill.infill.core.snippets import Snippet
from diffusion_infill.infill.core.spans import (
    DEFAULT_MARKER,
    Span,
    check_spans,
    find_holes,
    neutralise,
)
from diffusion_infill.infill.core.spans import check_decided as _check_decided
from diffusion_infill.infill.core.window import Layout, Window, plan_windows
from diffusion_infill.model.denoiser import Denoiser, SpecialIds

Job = DenoiseJob | CandidateJob

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


def _planned(
    text: str,
    spans: list[Span],
    frames: Sequence[Frame | None],
    decided: Sequence[list[int] | None],
    denoiser: Denoiser,
    options: SamplerOptions,
    rewrite: bool,
    parse_text: str | None,
) -> tuple[list[Allocation], list[Window], list[Canvas]]:
    """Each span's allocation, the windows that hold the spans (scope-aware when
    `parse_text` is given: the text to parse), and each window's canvas."""
    budget = denoiser.max_length
    if options.window_tokens is not None:
        budget = min(budget, options.window_tokens)

    def count(piece: str) -> int:
        return len(denoiser.encode(piece)) if piece else 0

    allocs = [
        allocate(text, s, options, rewrite=rewrite, count=count, frame=f)
        for s, f in zip(spans, frames, strict=True)
    ]
    layout = Layout(text, count, parse_text)
    windows = plan_windows(
        text,
        spans,
        allocs=[a.slots for a in allocs],
        room=[a.room for a in allocs],
        budget=budget,
        count=count,
        layout=layout,
    )
    canvases = window_canvases(
        text,
        spans,
        windows,
        allocs,
        layout=layout,
        denoiser=denoiser,
        budget=budget,
        decided=decided,
        frames=frames,
        selection_lines=options.selection_lines,
    )
    return allocs, windows, canvases


def _job(
    text: str,
    before: str,
    spans: list[Span],
    canvases: list[Canvas],
    denoiser: Denoiser,
    options: SamplerOptions,
    language: str | None,
    ends: Ends,
    frames: Sequence[Frame | None],
) -> Job:
    """A plain DenoiseJob, or with the checks or raced lengths on, a CandidateJob
    (infill/core/candidates.py)."""
    # a span whose fill already writes the code after it, or its last line, again has
    # ended: no growth (a span of exact length never grows)
    keys = ends.keys
    done = (
        (lambda i, ids: ended(denoiser.decode(ids), keys[i]))
        if any(k is not None for k in keys)
        else None
    )
    if not options.check_kinds and options.lengths == 1:
        return DenoiseJob(
            canvases, options, special=denoiser.special, vocab_size=denoiser.vocab_size, ended=done
        )
    allowed = REPLACEMENT in text
    return _checked_job(
        text,
        before,
        [(s.start, s.end) for s in spans],
        canvases,
        options,
        special=denoiser.special,
        vocab_size=denoiser.vocab_size,
        decode=lambda i, ids: framed_fill(
            decoded_fill(ids, denoiser.decode, allowed, i, keys[i], ends.spaced[i]), frames[i]
        ),
        language=language,
        kinds=options.check_kinds,
        ended=done,
    )


def _ends(
    text: str,
    spans: list[Span],
    allocs: Sequence[Allocation],
    frames: Sequence[Frame | None],
    options: SamplerOptions,
    language: str | None,
) -> Ends:
    """Each span's echo key (infill/core/echo.py; a statement's end for Python) and
    whether it starts after a space (its fill then starts without one)."""
    statements = options.statement_ends and language == PYTHON
    keys = echo_keys(text, spans, [a.exact for a in allocs], statements=statements)
    return Ends(line_keys(keys, frames), after_space(text, spans))


def _frames(
    text: str,
    before: str,
    spans: list[Span],
    decided: Sequence[list[int] | None],
    denoiser: Denoiser,
    options: SamplerOptions,
    language: str | None,
    more_lines: Collection[int] = (),
) -> tuple[list[Frame | None], int]:
    """Each whole-line span's frame (infill/core/lines.py; those in `more_lines` may take
    more lines than they hold), its depth the model's where the code leaves it open
    (Python, `indent_pass`) and one at which Python parses the text (`parsing_depths`),
    and the forward passes that took."""
    frames = line_frames(text, spans, decided=decided, on=options.line_holes, more=more_lines)
    if language != PYTHON or not any(frames):
        return frames, 0
    passes = 0
    if options.indent_pass:
        frames, passes = model_indents(text, before, spans, frames, denoiser)
    return parsing_depths(before, spans, frames), passes


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
    more_lines: Collection[int] = (),
    context: Sequence[Snippet] = (),
) -> PreparedFill:
    """Validate spans, plan windows, build the canvases and the job (passes: indents, head_lengths).

    Args:
        spans: the ranges of `text` to fill (validated: overlapping or out of range is an error).
        denoiser: supplies the tokenizer, special ids, vocab size and max_length.
        rewrite: the spans hold code being rewritten (minimal edits), not hole markers.
        language: "python": scope-aware windows (parsing `parse_text`, holes neutralised,
            if given); anything else gets line windows.
        decided: per span, its tokens if already chosen (a repair's, exact), else None.
        more_lines: whole-line spans (by position) that may take more lines than they hold.
    """
    started = time.perf_counter()
    check_text(text)
    ordered = check_spans(text, list(spans))
    chosen, before = _check_decided(ordered, decided), parse_text or text
    # line_holes, indent_pass: whole-line spans framed, their depth the model's if open
    frames, probes = _frames(text, before, ordered, chosen, denoiser, options, language, more_lines)
    parse = before if language == PYTHON else None  # scope-aware windows for Python

    def plan(planned: list[Span]) -> tuple[list[Allocation], list[Window], list[Canvas], Ends, Job]:
        # slots, windows, canvases; where fills end; the job (checks)
        allocs, windows, canvases = _planned(
            text, planned, frames, chosen, denoiser, options, rewrite, parse
        )
        ends = _ends(text, planned, allocs, frames, options, language)
        job = _job(text, before, ordered, canvases, denoiser, options, language, ends, frames)
        return allocs, windows, canvases, ends, job

    allocs, windows, canvases, ends, job = plan(ordered)
    # length_head: the job's first step also reads each asked hole's length
    asked = asked_holes(canvases, allocs, frames, denoiser, options)
    head, passes = first_step(job, canvases, asked, denoiser, options)  # job's step 1
    if (sure := sure_spans(ordered, head.sure)) is not None:
        _, windows, canvases, ends, job = plan(sure)  # those holes exactly that long
        set_races(canvases, head.race)  # the others race its lengths should they fail
        keep_rows(job, head)
    # context_copies: the code around each in-line hole, and other files', once chosen
    inline = inline_holes(text, ordered)
    copy_round(job, before, ordered, (inline, allocs), frames, denoiser, options, context)
    return PreparedFill(
        text, ordered, windows, job, denoiser, rewrite=rewrite, started=started, ends=ends,
        frames=frames, probes=probes + passes,
    )  # fmt: skip


def prepare_holes(
    text: str,
    *,
    denoiser: Denoiser,
    options: SamplerOptions,
    marker: str = DEFAULT_MARKER,
    language: str | None = PYTHON,
    max_spans: int | None = None,
    context: Sequence[Snippet] = (),
) -> PreparedFill:
    """`prepare_fill` for every hole marker in `text`; more than `max_spans` holes is a
    LimitError (a worker's limit)."""
    check_text(text)
    spans = find_holes(text, marker)
    if max_spans is not None and len(spans) > max_spans:
        raise LimitError(f"{len(spans)} holes; the limit is {max_spans}")
    recast = line_holes(text, spans, on=options.line_holes)  # line-start markers: lines
    fill = prepare_fill(
        recast.text,
        recast.spans,
        denoiser=denoiser,
        options=options,
        rewrite=False,
        language=language,
        parse_text=neutralise(recast.text, recast.spans),
        more_lines=[i for i in recast.lines if recast.spans[i].length is not None],
        context=context,
    )
    return fill.as_given(text, recast) if recast.lines else fill


def fill_text(
    text: str,
    *,
    denoiser: Denoiser,
    marker: str = DEFAULT_MARKER,
    language: str | None = PYTHON,
    options: SamplerOptions | None = None,
    progress: Callable[[int, int], None] | None = None,
    context: Sequence[Snippet] = (),
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
        context: windows of other files of the repository (`Snippet`), whose copies the
            model weighs beside its fills (infill.context retrieves them).

    Raises InfillError (a subclass naming the problem) for bad input or options.
    """
    opts = SamplerOptions.build(options, **overrides)
    fill = prepare_holes(
        text, denoiser=denoiser, options=opts, marker=marker, language=language, context=context
    )
    denoise(fill.job, denoiser, progress)
    return fill.result()


def fill_spans(
    text: str,
    spans: Sequence[Span],
    *,
    denoiser: Denoiser,
    language: str | None = PYTHON,
    options: SamplerOptions | None = None,
    context: Sequence[Snippet] = (),
    **overrides: Any,
) -> FillResult:
    """Mask the characters of each span and fill them ("rewrite selection"; an empty span
    is an insertion point). Edits touch only what the fill changed.

    Args: as for `fill_text`, with `spans` instead of markers (Span(start, end, length)).
    """
    opts = SamplerOptions.build(options, **overrides)
    fill = prepare_fill(
        text,
        spans,
        denoiser=denoiser,
        options=opts,
        rewrite=True,
        language=language,
        context=context,
    )
    denoise(fill.job, denoiser)
    return fill.result()


def framed_fill(fill: tuple[str, int], frame: Frame | None) -> tuple[str, int]:
    """A decoded fill's text as the engine writes it (`framed`), and the tokens it keeps."""
    return framed(fill[0], frame), fill[1]


def _checked_job(
    text: str,
    before: str,
    ranges: list[Range],
    canvases: Sequence[Canvas],
    options: SamplerOptions,
    *,
    special: SpecialIds,
    vocab_size: int,
    decode: Decode,
    language: str | None,
    kinds: Sequence[str],
    ended: Ended | None = None,
) -> CandidateJob:
    """The CandidateJob of a fill of `ranges` of `text`, checked against `before` (the text
    with its holes neutralised, or as given for a rewrite; same offsets as `text`)."""

    def check(texts: list[str], only: set[int]) -> list[Problem]:
        after, filled = splice(text, ranges, texts)
        return check_fills(before, after, ranges, filled, language=language, kinds=kinds, only=only)

    return CandidateJob(
        canvases,
        options,
        special=special,
        vocab_size=vocab_size,
        decode=decode,
        check=check,
        neutral=[before[a:b] for a, b in ranges],
        ended=ended,
    )
