"""Context windows: which spans share a canvas, and which text around them it holds.

A canvas holds at most `budget` tokens (the denoiser's max_length, or less by option):

    canvas tokens = context tokens + allocated span tokens + room for growth

1. Grouping: spans are taken in order; a span joins the current group when the group,
   from its first span to this one (allocations + the text between them + room for one
   growth chunk), still fits the budget. Otherwise it starts a new group: spans too far
   apart are denoised in separate canvases (one batch, but they do not see each other).
2. Context: the group's core (first span start .. last span end) is widened to whole
   lines. For Python, the enclosing scopes found with tree-sitter (function, class, their
   decorators, the module-level statement, the module) are tried smallest first, and the
   window ascends to the next one while it fits: a window that ends at scope edges is
   better context than one that ends mid-function. Then whole lines are added, one above
   and one below in turn, while the budget allows. Other languages and text whose scopes
   do not parse get the line expansion alone. A window never reaches into another
   group's spans (that text would be hole markers or text being rewritten).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from itertools import pairwise

from infill.core.errors import WindowError, line_col
from infill.core.spans import Span

CountTokens = Callable[[str], int]

_MAX_CHARS_PER_TOKEN = 64  # a generous bound, used only to skip hopeless scopes early
# Node types that delimit a scope worth keeping whole.
_SCOPE_TYPES = {"function_definition", "class_definition"}


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


def group_spans(
    text: str,
    spans: Sequence[Span],
    allocs: Sequence[int],
    room: Sequence[int],
    budget: int,
    count: CountTokens,
) -> list[list[int]]:
    """Greedy grouping of (sorted) spans into canvases of at most `budget` tokens."""
    for i, s in enumerate(spans):
        if allocs[i] > budget:
            raise WindowError(
                f"{line_col(text, s.start)}: the span needs {allocs[i]} tokens but a canvas "
                f"holds at most {budget}"
            )
    groups: list[list[int]] = [[0]]
    cost = allocs[0]  # allocations + text between the group's spans
    for i in range(1, len(spans)):
        gap = count(text[spans[i - 1].end : spans[i].start])
        group = groups[-1]
        reserve = max(room[j] for j in [*group, i])
        if cost + gap + allocs[i] + reserve <= budget:
            group.append(i)
            cost += gap + allocs[i]
        else:
            groups.append([i])
            cost = allocs[i]
    return groups


@cache
def python_parser():  # noqa: ANN202 - tree_sitter types
    import tree_sitter
    import tree_sitter_python

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_python.language()))


class PythonScopes:
    """Enclosing scopes in Python source, parsed once with tree-sitter."""

    def __init__(self, source: str) -> None:
        self.data = source.encode("utf-8")
        self.source = source
        self.tree = python_parser().parse(self.data)

    def _char(self, b: int) -> int:
        return len(self.data[:b].decode("utf-8", errors="replace"))

    def around(self, start: int, end: int) -> list[tuple[int, int, str]]:
        """Scopes enclosing characters [start, end), smallest first, as (start, end, node
        type). Scopes that tree-sitter could not parse cleanly are left out: their extent is
        a guess."""
        b_start = len(self.source[:start].encode("utf-8"))
        b_end = b_start + len(self.source[start:end].encode("utf-8"))
        node = self.tree.root_node.descendant_for_byte_range(b_start, b_end)
        scopes: list[tuple[int, int, str]] = []
        while node is not None:
            parent = node.parent
            take = None
            if node.type in _SCOPE_TYPES:
                decorated = parent is not None and parent.type == "decorated_definition"
                take = parent if decorated else node
            elif node.type == "module" or (parent is not None and parent.type == "module"):
                take = node
            if take is not None and not take.has_error:
                scope = (self._char(take.start_byte), self._char(take.end_byte), take.type)
                if not scopes or scopes[-1][:2] != scope[:2]:
                    scopes.append(scope)
            node = parent
        return scopes


def choose_window(
    text: str,
    spans: Sequence[Span],
    group: Sequence[int],
    *,
    limits: tuple[int, int],
    context_budget: int,
    count: CountTokens,
    lines: _Lines,
    scopes: PythonScopes | None,
) -> tuple[int, int, str]:
    """The window [start, end) for one group and what it was built from.

    `limits` bounds the window (neighbouring groups' spans); `context_budget` is the number
    of tokens the text outside the core may take.
    """
    lo, hi = limits
    core_start, core_end = spans[group[0]].start, spans[group[-1]].end

    def cost(ws: int, we: int) -> int:
        return count(text[ws:core_start]) + count(text[core_end:we])

    ws, we = lines.widen(core_start, core_end)
    ws, we = max(ws, lo), min(we, hi)
    scope = "lines"
    if cost(ws, we) > context_budget:
        return _shrink(text, core_start, core_end, ws, we, context_budget, cost, lines)
    if scopes is not None:
        for s_start, s_end, kind in scopes.around(core_start, core_end):
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

    # Whole lines above and below, in turn, while they fit. The running cost adds line
    # counts (exact for tokenizers that split at "\n"); _shrink corrects any excess.
    used = cost(ws, we)
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
    return _shrink(text, core_start, core_end, ws, we, context_budget, cost, lines, scope)


def _shrink(
    text: str,
    core_start: int,
    core_end: int,
    ws: int,
    we: int,
    context_budget: int,
    cost: Callable[[int, int], int],
    lines: _Lines,
    scope: str = "lines",
) -> tuple[int, int, str]:
    """Drop outer lines (from the side with more text) until the exact count fits."""
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
) -> list[Window]:
    """Group `spans` (sorted, non-overlapping) and choose each group's window.

    Args:
        text: the original text.
        spans: the request's spans, sorted.
        allocs: tokens allocated to each span at the start.
        room: tokens of growth room each span would like kept free (0: cannot grow).
        budget: the most tokens one canvas may hold.
        count: token count of a piece of text (the denoiser's encode, measured).
        parse_text: the text to parse for Python scopes (holes neutralised), or None for a
            plain line window.
    """
    lines = _Lines(text, count)
    scopes = PythonScopes(parse_text) if parse_text is not None else None
    groups = group_spans(text, spans, allocs, room, budget, count)
    windows: list[Window] = []
    for gi, group in enumerate(groups):
        lo = spans[groups[gi - 1][-1]].end if gi > 0 else 0
        hi = spans[groups[gi + 1][0]].start if gi + 1 < len(groups) else len(text)
        gaps = sum(count(text[spans[a].end : spans[b].start]) for a, b in pairwise(group))
        core = sum(allocs[j] for j in group) + gaps
        reserve = min(max(room[j] for j in group), budget - core)
        ws, we, scope = choose_window(
            text,
            spans,
            group,
            limits=(lo, hi),
            context_budget=budget - core - reserve,
            count=count,
            lines=lines,
            scopes=scopes,
        )
        windows.append(Window(ws, we, tuple(group), scope, reserve))
    return windows
