"""Fill masked regions of a text: spans -> windows -> canvases -> DenoiseJob -> text + edits.

    result = fill_text("def f(x):\\n    return <mask>\\n", denoiser=den)
    result = fill_spans(text, [Span(10, 24)], denoiser=den)    # rewrite a selection

Both prepare a fill (`prepare_holes` / `prepare_fill`: a `PreparedFill`,
infill/core/prepared.py), denoise its job and read the result:

    prepare_fill  the stages of infill/core/pipeline.py, in order: frame whole lines,
                  choose their depths, plan canvases, find where fills end, build the
                  job (checks), add copies
    denoise       the job's rounds (candidates.py `Round`): primary, alternatives,
                  scoring, copies; each step is the sampler's
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

from diffusion_infill.infill.core.errors import InputError, LimitError, line_col
from diffusion_infill.infill.core.line_holes import line_holes
from diffusion_infill.infill.core.options import SamplerOptions
from diffusion_infill.infill.core.pipeline import PYTHON, STAGES, Draft
from diffusion_infill.infill.core.prepared import PreparedFill
from diffusion_infill.infill.core.results import FillResult
from diffusion_infill.infill.core.sampler import denoise
from diffusion_infill.infill.core.snippets import Snippet, Source, check_source
from diffusion_infill.infill.core.spans import (
    DEFAULT_MARKER,
    Span,
    check_spans,
    find_holes,
    neutralise,
)
from diffusion_infill.infill.core.spans import check_decided as _check_decided
from diffusion_infill.model.denoiser import Denoiser


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
    source: Source | None = None,
) -> PreparedFill:
    """Validate the text and spans, then run the pipeline's stages (infill/core/pipeline.py):
    a PreparedFill whose job is ready to denoise.

    Args:
        spans: the ranges of `text` to fill (validated: overlapping or out of range is an error).
        denoiser: supplies the tokenizer, special ids, vocab size and max_length.
        rewrite: the spans hold code being rewritten (minimal edits), not hole markers.
        language: "python": scope-aware windows (parsing `parse_text`, holes neutralised,
            if given); anything else gets line windows.
        decided: per span, its tokens if already chosen (a repair's, exact), else None.
        more_lines: whole-line spans (by position) that may take more lines than they hold.
        source: where the text lives (its file, repository, Python): jedi's checks read it.
    """
    started = time.perf_counter()
    check_text(text)
    ordered = check_spans(text, list(spans))
    draft = Draft(
        text, ordered, denoiser, options, rewrite, language,
        before=parse_text or text, decided=_check_decided(ordered, decided),
        more_lines=more_lines, context=context, source=check_source(source), started=started,
    )  # fmt: skip
    for stage in STAGES:  # infill/core/pipeline.py
        stage.run(draft)
    return draft.prepared()


def prepare_holes(
    text: str,
    *,
    denoiser: Denoiser,
    options: SamplerOptions,
    marker: str = DEFAULT_MARKER,
    language: str | None = PYTHON,
    max_spans: int | None = None,
    context: Sequence[Snippet] = (),
    source: Source | None = None,
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
        source=source,
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
    source: Source | None = None,
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
        source: where the text lives (`Source`: its file, the repository's root, the
            user's Python), from which jedi resolves its imports for the `member` check.

    Raises InfillError (a subclass naming the problem) for bad input or options.
    """
    opts = SamplerOptions.build(options, **overrides)
    fill = prepare_holes(
        text, denoiser=denoiser, options=opts, marker=marker, language=language,
        context=context, source=source,
    )  # fmt: skip
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
    source: Source | None = None,
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
        source=source,
    )
    denoise(fill.job, denoiser)
    return fill.result()
