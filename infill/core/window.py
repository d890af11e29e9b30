"""Context windows: which spans share a canvas, and which text around them it holds.

A window is a range of the text; its canvas (infill/core/canvas.py) is the window's token
ids, with the spans' slots in place. One canvas per window. A canvas holds at most
`budget` tokens (the denoiser's max_length, or less by option):

    canvas tokens = context tokens + allocated span tokens + room for growth

1. Spans per window: spans are taken in order; a span joins the current window when it,
   from its first span to this one (allocations + the text between them + room for one
   growth chunk), still fits the budget. Otherwise it starts a new window: spans too far
   apart are denoised in separate canvases (one batch, but they do not see each other).
2. Context: the window's core (first span start .. last span end) is widened to whole
   lines. For Python, the enclosing scopes found with tree-sitter (function, class, their
   decorators, the module-level statement, the module) are tried smallest first, and the
   window ascends to the next one while it fits: a window that ends at scope edges is
   better context than one that ends mid-function. Then whole lines are added, one above
   and one below in turn, while the budget allows. Other languages and text whose scopes
   do not parse get the line expansion alone. A window never reaches into another
   window's spans (that text would be hole markers or text being rewritten).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from diffusion_infill.infill.core.errors import WindowError, line_col
from diffusion_infill.infill.core.scopes import PythonScopes
from diffusion_infill.infill.core.spans import Span

CountTokens = Callable[[str], int]

_MAX_CHARS_PER_TOKEN = 64  # a generous bound, used only to skip hopeless scopes early


@dataclass(frozen=True)
class Window:
    """Characters [start, end) of the text go into one canvas with spans `spans`."""

    start: int
    end: int
    spans: tuple[int, ...]  # indices into the request's (sorted) spans
    scope: str  # what the window was built from: a tree-sitter node type, or "lines"
    reserve: int  # tokens kept free for span growth


class _Lines:
    """Line geometry of a text, split at "\\n" only (as tree-sitter counts rows)."""

    def __init__(self, text: str, count: CountTokens) -> None:
        self.text = text
        self.starts = [0]
        pos = text.find("\n")
        while pos >= 0:
            self.starts.append(pos + 1)
            pos = text.find("\n", pos + 1)
        self._count = count
        self._tokens: dict[int, int] = {}

    def index(self, offset: int) -> int:
        return bisect_right(self.starts, offset) - 1

    def start(self, i: int) -> int:
        return self.starts[i]

    def end(self, i: int) -> int:
        return self.starts[i + 1] if i + 1 < len(self.starts) else len(self.text)

    def tokens(self, i: int) -> int:
        if i not in self._tokens:
            self._tokens[i] = self._count(self.text[self.start(i) : self.end(i)])
        return self._tokens[i]

    def widen(self, start: int, end: int) -> tuple[int, int]:
        """[start, end) widened to whole lines."""
        last = self.index(max(start, end - 1))
        return self.start(self.index(start)), self.end(last)


class Layout:
    """A text's line geometry and Python scopes (parsed once): what planning needs of the
    text beyond the spans. Built once and handed to every `plan_windows` call over the same
    text, so planning many windows of a long file (bug-finding scores it chunk by chunk)
    does not re-split and re-parse the file per window."""

    def __init__(self, text: str, count: CountTokens, parse_text: str | None = None) -> None:
        self.lines = _Lines(text, count)
        self.scopes = PythonScopes(parse_text) if parse_text is not None else None


def spans_per_window(
    text: str,
    spans: Sequence[Span],
    allocs: Sequence[int],
    room: Sequence[int],
    budget: int,
    count: CountTokens,
) -> list[list[int]]:
    """Which (sorted) spans share a window: greedily, while the window's canvas fits
    `budget` tokens. One list of span indices per window."""
    for i, s in enumerate(spans):
        if allocs[i] > budget:
            raise WindowError(
                f"{line_col(text, s.start)}: the span needs {allocs[i]} tokens but a canvas "
                f"holds at most {budget}"
            )
    per_window: list[list[int]] = [[0]]
    cost = allocs[0]  # allocations + text between the window's spans
    for i in range(1, len(spans)):
        gap = count(text[spans[i - 1].end : spans[i].start])
        members = per_window[-1]
        reserve = max(room[j] for j in [*members, i])
        if cost + gap + allocs[i] + reserve <= budget:
            members.append(i)
            cost += gap + allocs[i]
        else:
            per_window.append([i])
            cost = allocs[i]
    return per_window


def choose_window(
    text: str,
    spans: Sequence[Span],
    members: Sequence[int],
    *,
    limits: tuple[int, int],
    context_budget: int,
    count: CountTokens,
    lines: _Lines,
    scopes: PythonScopes | None,
) -> tuple[int, int, str]:
    """The window [start, end) around spans `members` and what it was built from.

    `limits` bounds the window (neighbouring windows' spans); `context_budget` is the
    number of tokens the text outside the core may take.
    """
    lo, hi = limits
    core = spans[members[0]].start, spans[members[-1]].end

    def cost(ws: int, we: int) -> int:
        return count(text[ws : core[0]]) + count(text[core[1] : we])

    ws, we = lines.widen(*core)
    ws, we = max(ws, lo), min(we, hi)
    if cost(ws, we) > context_budget:
        return _shrink(text, core, ws, we, context_budget, cost, lines)
    scope = "lines"
    if scopes is not None:
        ws, we, scope = _ascend_scopes(
            scopes,
            core,
            (ws, we),
            limits=limits,
            context_budget=context_budget,
            cost=cost,
            lines=lines,
        )
    ws, we = _add_lines(
        text, (ws, we), limits=limits, used=cost(ws, we), context_budget=context_budget, lines=lines
    )
    return _shrink(text, core, ws, we, context_budget, cost, lines, scope)


def _ascend_scopes(
    scopes: PythonScopes,
    core: tuple[int, int],
    window: tuple[int, int],
    *,
    limits: tuple[int, int],
    context_budget: int,
    cost: Callable[[int, int], int],
    lines: _Lines,
) -> tuple[int, int, str]:
    """The largest enclosing scope (smallest first) whose whole lines fit, or `window`."""
    lo, hi = limits
    (ws, we), scope = window, "lines"
    for s_start, s_end, kind in scopes.around(*core):
        c_start, c_end = lines.widen(s_start, s_end)
        if c_start < lo or c_end > hi:
            break
        # Cheap rejection before encoding a huge scope (a module of a long file): no
        # tokenizer packs more than _MAX_CHARS_PER_TOKEN characters into a token.
        if c_end - c_start > _MAX_CHARS_PER_TOKEN * (context_budget + 1):
            break
        if cost(c_start, c_end) > context_budget:
            break
        ws, we, scope = c_start, c_end, kind
    return ws, we, scope


def _add_lines(
    text: str,
    window: tuple[int, int],
    *,
    limits: tuple[int, int],
    used: int,
    context_budget: int,
    lines: _Lines,
) -> tuple[int, int]:
    """Whole lines above and below `window`, in turn, while they fit. The running cost
    adds line counts (exact for tokenizers that split at "\\n"); _shrink corrects any
    excess."""
    lo, hi = limits
    ws, we = window
    up, down = lines.index(ws) - 1, lines.index(we) if we < len(text) else len(lines.starts)
    grow_up, grow_down = ws > lo and ws == lines.start(lines.index(ws)), we < hi
    while grow_up or grow_down:
        if grow_up:
            if up >= 0 and lines.start(up) >= lo and used + lines.tokens(up) <= context_budget:
                used += lines.tokens(up)
                ws = lines.start(up)
                up -= 1
            else:
                grow_up = False
        if grow_down:
            if (
                down < len(lines.starts)
                and lines.end(down) <= hi
                and used + lines.tokens(down) <= context_budget
            ):
                used += lines.tokens(down)
                we = lines.end(down)
                down += 1
            else:
                grow_down = False
    return ws, we


def _shrink(
    text: str,
    core: tuple[int, int],
    ws: int,
    we: int,
    context_budget: int,
    cost: Callable[[int, int], int],
    lines: _Lines,
    scope: str = "lines",
) -> tuple[int, int, str]:
    """Drop outer lines (from the side with more text) until the exact count fits."""
    core_start, core_end = core
    while cost(ws, we) > context_budget:
        if core_start - ws >= we - core_end and ws < core_start:
            nxt = lines.end(lines.index(ws))
            ws = min(nxt, core_start)
        elif we > core_end:
            prev = lines.start(lines.index(we - 1))
            we = max(prev, core_end)
        else:
            ws = core_start
        scope = "lines"
    return ws, we, scope


def plan_windows(
    text: str,
    spans: Sequence[Span],
    *,
    allocs: Sequence[int],
    room: Sequence[int],
    budget: int,
    count: CountTokens,
    parse_text: str | None = None,
    layout: Layout | None = None,
) -> list[Window]:
    """Share `spans` (sorted, non-overlapping) out among windows and choose each window.

    Args:
        text: the original text.
        spans: the request's spans, sorted.
        allocs: tokens allocated to each span at the start.
        room: tokens of growth room each span would like kept free (0: cannot grow).
        budget: the most tokens one canvas may hold.
        count: token count of a piece of text (the denoiser's encode, measured).
        parse_text: the text to parse for Python scopes (holes neutralised), or None for a
            plain line window.
        layout: the text's Layout when the caller plans several times over one text
            (then `parse_text` is not used: the layout holds its scopes).
    """
    layout = layout or Layout(text, count, parse_text)
    lines, scopes = layout.lines, layout.scopes
    per_window = spans_per_window(text, spans, allocs, room, budget, count)
    windows: list[Window] = []
    for wi, members in enumerate(per_window):
        lo = spans[per_window[wi - 1][-1]].end if wi > 0 else 0
        hi = spans[per_window[wi + 1][0]].start if wi + 1 < len(per_window) else len(text)
        gaps = sum(count(text[spans[a].end : spans[b].start]) for a, b in pairwise(members))
        core = sum(allocs[j] for j in members) + gaps
        reserve = min(max(room[j] for j in members), budget - core)
        ws, we, scope = choose_window(
            text,
            spans,
            members,
            limits=(lo, hi),
            context_budget=budget - core - reserve,
            count=count,
            lines=lines,
            scopes=scopes,
        )
        windows.append(Window(ws, we, tuple(members), scope, reserve))
    return windows
