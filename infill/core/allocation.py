"""Slots and canvases of a fill: how many slots each span starts with and may grow to (the
length contract, docs/ARCHITECTURE.md), and each window's canvas: its context encoded,
each span's masked slots (or tokens already decided), the tokens a span's fill may not
hold (infill/core/limits.py) forbidden.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from diffusion_infill.infill.core.canvas import Canvas, SpanSlots
from diffusion_infill.infill.core.errors import SpanError, line_col
from diffusion_infill.infill.core.limits import fill_limits, ids_with
from diffusion_infill.infill.core.lines import (
    Frame,
    framed_code,
    one_line_limits,
    selected_breaks,
)
from diffusion_infill.infill.core.options import SamplerOptions
from diffusion_infill.infill.core.spans import Span
from diffusion_infill.infill.core.window import Layout, Window
from diffusion_infill.model.denoiser import Denoiser


@dataclass(frozen=True)
class Allocation:
    """How many slots a span starts with and may grow to."""

    slots: int  # allocated at the start
    cap: int  # the most it may grow to
    exact: bool  # exactly `slots`: no null, no growth
    room: int  # growth room its window keeps free
    raced: bool = False  # the length is a guess (a hole's default or hint): may race shorter


def allocate(
    text: str,
    span: Span,
    options: SamplerOptions,
    *,
    rewrite: bool,
    count: Callable[[str], int],
    frame: Frame | None = None,
) -> Allocation:
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
    return Allocation(
        slots, cap, exact, 0 if exact else min(o.grow, cap - slots), raced=guessed and not exact
    )


def window_canvas(
    text: str,
    spans: list[Span],
    window: Window,
    allocs: list[Allocation],
    *,
    denoiser: Denoiser,
    budget: int,
    forbidden: list[tuple[int, ...]],
    decided: Sequence[list[int] | None],
    frames: Sequence[Frame | None],
    breaks: frozenset[int],
    min_breaks: Sequence[int],
    first: Sequence[tuple[int, ...]],
) -> Canvas:
    """The window's canvas: its context segments encoded one by one, masked slots (or the
    tokens `decided` for a span); a framed span's indentation and line break are context.
    With `breaks` (the ids that hold a line break), span i may not end before its fill
    holds `min_breaks[i]` of them."""

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
        spans=[
            SpanSlots(
                i,
                list(decided[i]) if decided[i] is not None else [mask] * allocs[i].slots,
                allocs[i].cap,
                allocs[i].exact,
                forbidden=forbidden[i],
                raced=allocs[i].raced,
                min_breaks=min_breaks[i],
                breaks=breaks,
                first=first[i],
            )
            for i in idx
        ],
        gaps=[
            encode(tail(a) + text[spans[a].end : spans[b].start] + head(b))
            for a, b in pairwise(idx)
        ],
        right=encode(tail(idx[-1]) + text[spans[idx[-1]].end : window.end]),
        budget=budget,
    )


def window_canvases(
    text: str,
    spans: list[Span],
    windows: list[Window],
    allocs: list[Allocation],
    *,
    layout: Layout,
    denoiser: Denoiser,
    budget: int,
    decided: Sequence[list[int] | None],
    frames: Sequence[Frame | None],
    selection_lines: bool = False,
    first: Sequence[tuple[int, ...]] | None = None,
) -> list[Canvas]:
    """Each window's canvas, with the tokens each span's fill may not hold forbidden: the
    quote of a string literal it sits in (and a line break in a one-line literal, or in a
    one-line selection); with `selection_lines`, a selection of k lines ends after k; with
    `first`, the ids each span's first slot may take (none: any)."""
    limits = one_line_limits(fill_limits(spans, layout.scopes), frames)
    forbidden = {chars: ids_with(denoiser, chars) for chars in set(limits) if chars}
    lines = [
        selected_breaks(text, s, f) if selection_lines else 0
        for s, f in zip(spans, frames, strict=True)
    ]
    breaks = frozenset(ids_with(denoiser, "\n")) if any(lines) else frozenset()
    return [
        window_canvas(
            text,
            spans,
            w,
            allocs,
            denoiser=denoiser,
            budget=budget,
            forbidden=[forbidden.get(chars, ()) for chars in limits],
            decided=decided,
            frames=frames,
            breaks=breaks,
            min_breaks=lines,
            first=first if first is not None else [()] * len(spans),
        )
        for w in windows
    ]
