"""A text Python parses with something standing in each span: what the checks judge a fill
against when the text as it is (a hole neutralised to `_`s, a selection as written) does
not parse.

    stood = parsing_stand_in(before, ranges)   # None: no stand-in parses
    stood.text, stood.ranges                   # the spans' places in stood.text

A row of `_`s reads as a name, which breaks the text wherever the hidden code was not an
expression: a line that opened a block (`class Parser(object):`, `else:`) before deeper
lines, the end of a call or a signature (`**params):`), an item of a list with its comma,
a string beside another string. Each stand-in keeps a span's line breaks and the
indentation that starts each of its lines and replaces each line's code. Span by span, they
are tried in turn: the first with which Python parses the text is kept, or else the one
that moves Python's first error furthest down:

- the text as it is;
- a name per line (`_`), as a hole is neutralised: for a selection as written;
- a string (`""`, `b""`): implicit concatenation;
- an item (`_,`), a keyword argument or a parameter's default (`_=_,`), a dict entry
  (`_:_,`);
- block headers where a line's code comes before deeper lines: `except:` after a `try:`
  block, `def _():` after a decorator, `if _:` elsewhere, or else `try:` (and `except:`
  for the next hidden header at its depth);
- brackets: the span ends with the brackets open where it starts that nothing after it
  closes, and a colon where the statement that opened them is compound (`def f(a,` then
  `_):`), with a comma (`_],` in a list of lists), or opens what the code after it closes
  (`_[` before `'Jul', 'Aug']`, `_)[` for `) == [`), or those brackets alone where no name
  may come first (`)[` after a list's `]`), or before a name (`{_` for a comprehension's
  `{k: v` above its `for`);
- a header or an assignment that opens them: `if _(` (a condition over lines), `def _(`
  (`def parse(` before `self, args) -> str:` and its body), `_ = {` (`IGNORE = {`);
- `def _(): pass` after a decorator, where no deeper line follows;
- nothing (a hole before code at column 0, `<mask>import os`, or a line the code does
  without).

Where the text still does not parse, the checks have no reference for Python's parser
(the tree-sitter rules still run).
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from diffusion_infill.infill.core.lexer import lexemes
from diffusion_infill.infill.core.lines import is_whole_lines, other_depths
from diffusion_infill.infill.core.spans import Span

Range = tuple[int, int]
Segment = tuple[int, int]  # the code of one line of a span, after its indentation

_CLOSER = {"(": ")", "[": "]", "{": "}"}
_OPENER = {v: k for k, v in _CLOSER.items()}
_COMPOUND = re.compile(r"(?:async\s+)?(?:def|class|if|elif|while|for|with|except)\b")


@dataclass(frozen=True)
class StandIn:
    text: str
    ranges: list[Range]  # each span's range in `text`, in the order given


def segments(text: str, r: Range) -> list[Segment]:
    """The parts of `text[r]` a stand-in replaces: each line's characters after the
    indentation that starts it (where the span starts a line's code or holds a line break),
    up to the line's end or the span's."""
    out: list[Segment] = []
    a, b = r
    at_line_start = not text[text.rfind("\n", 0, a) + 1 : a].strip()
    start = None
    for i in range(a, b):
        ch = text[i]
        if ch == "\n":
            if start is not None:
                out.append((start, i))
            start, at_line_start = None, True
        elif at_line_start and ch in " \t":
            continue
        elif start is None:
            start, at_line_start = i, False
    if start is not None:
        out.append((start, b))
    return out


def _indent(text: str, line_start: int) -> int:
    end = line_start
    while end < len(text) and text[end] in " \t":
        end += 1
    return end - line_start


def _code_lines(text: str, line_start: int, step: int) -> Iterator[int]:
    """The starts of the lines with code after (`step` 1) or before (-1) the line that
    starts at `line_start`, nearest first."""
    pos = line_start
    while True:
        if step > 0:
            if (nxt := text.find("\n", pos)) < 0:
                return
            pos = nxt + 1
        else:
            if pos == 0:
                return
            pos = text.rfind("\n", 0, pos - 1) + 1
        end = text.find("\n", pos)
        if text[pos : len(text) if end < 0 else end].strip():
            yield pos


def _above(text: str, line_start: int, depth: int) -> str:
    """The code of the line before at `depth`, past deeper ones ("" where a shallower one
    comes first)."""
    for pos in _code_lines(text, line_start, -1):
        if (d := _indent(text, pos)) <= depth:
            end = text.find("\n", pos)
            return text[pos + d : len(text) if end < 0 else end].strip() if d == depth else ""
    return ""


def _starts_line(text: str, seg: Segment) -> bool:
    return not text[text.rfind("\n", 0, seg[0]) + 1 : seg[0]].strip()


def _header(default: str) -> Filler:
    """A block header where the segment is a line's whole code and the next line with
    code is deeper: `except:` after a `try:` block, `def _():` after a decorator, `default`
    elsewhere (after a hidden line at the same depth too: `except:` where the default is
    `try:`); a name where the segment is no header."""

    def filler(text: str, seg: Segment, last: bool, r: Range) -> str:
        start, end = seg
        line_start = text.rfind("\n", 0, start) + 1
        line_end = text.find("\n", end)
        if line_end < 0 or text[end:line_end].strip() or not _starts_line(text, seg):
            return "_"
        depth = start - line_start
        if not next((_indent(text, p) > depth for p in _code_lines(text, line_start, 1)), False):
            return "_"
        above = _above(text, line_start, depth)
        hidden = bool(above) and not above.strip("_")  # a line of the span, stood in for
        if above == "try:" or above.startswith("except") or (hidden and default == "try:"):
            return "except:"
        return "def _():" if above.startswith("@") else default

    return filler


def _open_at(text: str, end: int) -> list[tuple[int, str]]:
    """The brackets open at `end` (where each opened, which), outermost first."""
    stack: list[tuple[int, str]] = []
    for start, _end, kind in lexemes(text[:end]):
        if kind in _CLOSER:
            stack.append((start, kind))
        elif kind in _OPENER and stack:
            stack.pop()
    return stack


def _closed_after(text: str, start: int) -> list[str]:
    """The closers after `start` that close brackets opened before it, in order."""
    depth = 0
    out: list[str] = []
    for _start, _end, kind in lexemes(text[start:]):
        if kind in _CLOSER:
            depth += 1
        elif kind in _OPENER:
            if depth:
                depth -= 1
            else:
                out.append(kind)
    return out


def _bracket_tail(text: str, r: Range) -> str:
    """What a span must end with for the brackets around it to balance: the closers of the
    innermost brackets open where it starts that nothing after it closes, then the openers
    of the closers after it that nothing before it opened (`) == [`), and a colon where it
    closes every bracket open and the statement that opened the outermost is compound."""
    opened, closed = _open_at(text, r[0]), _closed_after(text, r[1])
    for shut in range(len(opened) + 1):  # the span closes the `shut` innermost
        kept = opened[: len(opened) - shut]
        new = len(closed) - len(kept)  # closers after it of brackets the span opens
        if new >= 0 and closed[new:] == [_CLOSER[c] for _, c in reversed(kept)]:
            tail = "".join(_CLOSER[c] for _, c in reversed(opened[len(kept) :]))
            tail += "".join(_OPENER[c] for c in reversed(closed[:new]))
            if opened and not kept and not new:
                line = text[text.rfind("\n", 0, opened[0][0]) + 1 : opened[0][0]].lstrip()
                tail += ":" if _COMPOUND.match(line) else ""
            return tail
    return ""


def _brackets(template: str, *, opens: bool = False) -> Filler:
    """`template` with `_bracket_tail` in it on a span's last segment (`_{}`: a name, then
    the tail); with `opens`, only where the tail ends with an opener and the segment starts
    a line (`if _{}`, `def _{}`, `_ = {}`); a name elsewhere."""

    def filler(text: str, seg: Segment, last: bool, r: Range) -> str:
        tail = _bracket_tail(text, r) if last else ""
        if not tail or (opens and not (tail[-1] in _CLOSER and _starts_line(text, seg))):
            return "_"
        return template.format(tail)

    return filler


def _fixed(stand: str) -> Filler:
    return lambda text, seg, last, r: stand


def _decorated(text: str, seg: Segment, last: bool, r: Range) -> str:
    """`def _(): pass` where the segment is a line's whole code after a decorator at its
    depth (a hidden decorated one-line definition); a name elsewhere."""
    start, end = seg
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    if text[end : len(text) if line_end < 0 else line_end].strip() or not _starts_line(text, seg):
        return "_"
    return "def _(): pass" if _above(text, line_start, start - line_start).startswith("@") else "_"


Filler = Callable[[str, Segment, bool, Range], str]
FILLERS: tuple[Filler, ...] = (
    _fixed("_"),
    _fixed('""'),
    _fixed('b""'),
    _fixed("_,"),
    _fixed("_=_,"),
    _fixed("_:_,"),
    _header("if _:"),
    _header("try:"),
    _brackets("_{}"),
    _brackets("{}"),  # the tail alone: a line that starts by closing (`) == [`)
    _brackets("{}_"),  # an opener, then a name: a comprehension's element (`{k: v`)
    _brackets("_{},"),
    _brackets("if _{}", opens=True),
    _brackets("def _{}", opens=True),
    _brackets("_ = {}", opens=True),
    _decorated,
    _fixed(""),  # nothing: a hole before code at column 0, a line the code does without
)


def _stood_in(text: str, ranges: Sequence[Range], fillers: Sequence[Filler | None]) -> StandIn:
    """`text` with each range's code stood in for by its filler (None: as it is)."""
    parts: list[str] = []
    out: list[Range] = []
    pos = shift = 0
    for r, filler in zip(ranges, fillers, strict=True):
        start = r[0] + shift
        segs = segments(text, r) if filler is not None else []
        for j, seg in enumerate(segs):
            stand = filler(text, seg, j == len(segs) - 1, r)
            parts += [text[pos : seg[0]], stand]
            shift += len(stand) - (seg[1] - seg[0])
            pos = seg[1]
        out.append((start, r[1] + shift))
    parts.append(text[pos:])
    return StandIn("".join(parts), out)


def first_error(text: str) -> tuple[int, str] | None:
    """Python's first syntax error in `text`: its line (1-based; 0 where it has none) and
    message; None when it parses."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes and the like: still code
            ast.parse(text)
    except SyntaxError as e:
        return e.lineno or 0, e.msg or str(e)
    except ValueError as e:  # a NUL byte
        return 0, str(e)
    return None


_BRACKETS = ("never closed", "does not match", "unmatched")  # errors placed off the span
_NEAR = 5  # lines around a span where an error it causes may surface (`unexpected indent`)
BUDGET = 24  # parses one search may make (a file broken elsewhere, with many holes)


def _may_fix(error: tuple[int, str], text: str, r: Range) -> bool:
    """Whether a stand-in in `r` could move `error`: it lies within a few lines of the
    span (a statement over lines is blamed where it starts), or concerns brackets (Python
    places those at the opener or a closer, however far)."""
    line, message = error
    first = text.count("\n", 0, r[0]) + 1
    last = first + text.count("\n", r[0], r[1])
    return first - _NEAR <= line <= last + _NEAR or any(b in message for b in _BRACKETS)


def parsing_stand_in(text: str, ranges: Sequence[Range]) -> StandIn | None:
    """`text` with the code of each (sorted, disjoint) range replaced by a stand-in so that
    Python parses it (`text` itself when it parses as it is), and the ranges' places in
    it; None when no stand-in does. Range by range, in order, where Python's first error
    is one the range could cause: the first filler with which the text parses, or else
    the one that moves the error furthest down; at most BUDGET parses. Where none parses,
    a range of whole lines may be at a depth no code parses at (a method's header after
    the last line of the method before, at that line's depth): the same search with its
    first line at each other depth the code around it allows (`lines.depths`), nearest
    first, at most DEPTHS of them. Stand-ins keep line breaks, so line numbers are the
    text's."""
    error = first_error(text)
    if error is None:
        return StandIn(text, list(ranges))
    if (found := _search(text, ranges, error)) is not None:
        return found
    for i, head in _other_depths(text, ranges, error):
        if (found := _at_depth(text, ranges, i, head)) is not None:
            return found
    return None


def parses_at(text: str, ranges: Sequence[Range], i: int, head: str) -> bool:
    """Whether some stand-in parses with range `i` (whole lines) starting at indentation
    `head` (no other depth tried)."""
    return _at_depth(text, ranges, i, head) is not None


def _at_depth(text: str, ranges: Sequence[Range], i: int, head: str) -> StandIn | None:
    """The filler search with range `i`'s first line indented by `head` (the text as
    moved, where it parses so)."""
    moved, at = _redented(text, ranges, i, head)
    if (error := first_error(moved)) is None:
        return StandIn(moved, at)
    return _search(moved, at, error)


DEPTHS = 3  # other depths a failed search tries (each a search of at most BUDGET parses)


def _lead(text: str, r: Range) -> int:
    """The length of the indentation that starts range `r`."""
    piece = text[r[0] : r[1]]
    return len(piece) - len(piece.lstrip(" \t"))


def _other_depths(
    text: str, ranges: Sequence[Range], error: tuple[int, str]
) -> list[tuple[int, str]]:
    """(range, indentation) pairs to search again: each range of whole lines near
    Python's first error, at the depths `lines.depths` allows it other than its own,
    nearest first; DEPTHS at most."""
    out: list[tuple[int, str]] = []
    for i, r in enumerate(ranges):
        if not is_whole_lines(text, Span(*r)) or not _may_fix(error, text, r):
            continue
        out += [(i, d) for d in other_depths(text, *r, text[r[0] : r[0] + _lead(text, r)])]
    return out[:DEPTHS]


def _redented(text: str, ranges: Sequence[Range], i: int, head: str) -> tuple[str, list[Range]]:
    """`text` with range `i`'s first line indented by `head`, and the ranges there."""
    a, b = ranges[i]
    lead = _lead(text, ranges[i])
    shift = len(head) - lead
    moved = [
        r if j < i else (a, b + shift) if j == i else (r[0] + shift, r[1] + shift)
        for j, r in enumerate(ranges)
    ]
    return text[:a] + head + text[a + lead :], moved


def _search(text: str, ranges: Sequence[Range], error: tuple[int, str]) -> StandIn | None:
    """The filler search of `parsing_stand_in` at the ranges' depths as they are, from
    Python's first `error` in `text`."""
    chosen: list[Filler | None] = [None] * len(ranges)
    parses = 1
    for i, r in enumerate(ranges):
        if not _may_fix(error, text, r):
            continue
        for filler in FILLERS:
            if parses >= BUDGET:
                return None
            tried = _stood_in(text, ranges, [*chosen[:i], filler, *chosen[i + 1 :]])
            parses += 1
            if (found := first_error(tried.text)) is None:
                return tried
            if found[0] > error[0]:
                error, chosen[i] = found, filler
    return None
