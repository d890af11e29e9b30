"""Where a fill writes again what is already written, the fill has ended before it.

    keys = echo_keys(text, spans, exact)   # per span: the code after it on its line
    fill = end_fill(fill, keys[i])         # the fill up to where it writes that code, or
                                           # its own last line, again

The model ends an in-line hole badly: between `f(` and `)` it puts almost no weight on
`<null>` where the arguments end (0.003 on average: docs/log/architecture.md), so it
writes the arguments, then the `)` and the rest of the line that follow the hole anyway,
then new lines of code, until growth stops at its cap:

    hole:  requests.get(<mask>)            fill:  url, timeout=5)\\n    resp.raise_for_status(
                                                  ^^^^^^^^^^^^^^ what was meant

The code after the hole on its line is the end the model could not find; where the fill
writes it, followed by a line break, is where the fill ends (an autoregressive
fill-in-the-middle model's outputs are cut the same way when they reach the suffix). So:

- `echo_keys`: for each span that has code after it on its line (up to the next span on
  that line), that code, stripped; '' for a span without (a whole-line hole, the end of the
  text); None for a span of exact length (its length is the caller's, not the model's:
  never cut);
- `cut_echo`: the fill up to the first place where it writes its key and then a line
  break; else, when the fill ends with its key (or the key's start) and the brackets it
  closes there are ones the fill never opened (`a, b)` for `f(<hole>)`, `a)` for
  `g(f(<hole>))`: the fill ends where the call does), the fill without it. A nested
  call is kept: `g(x)` opened the `)` it ends with. The engine cuts every fill it
  returns and every candidate it checks (infill/core/engine.py);
- `cut_loop`: the fill up to the first line that says again what the line before it
  said (`import sys` twice in a row). The model loops: a third of its multi-line fills
  with the true length write one line three times or more, and a one-line hole's fill
  goes on `Response,\n    Response,` (docs/log/architecture.md, "A line written again ends
  the fill"). Blank lines and lines of brackets and punctuation alone (`)`, `],`) do not
  count: code closes two calls in a row;
- `cut_statement` (Python): a span that starts after code on its line, outside brackets,
  with nothing after it on its line (`x = <hole>`, a selected right-hand side) ends with
  its statement: the fill up to its first line break outside brackets and strings. The
  model writes on past the statement into new lines (`()` for `self.parse<hole>` came
  back as `()\n    addr = self.parse(addr)`); the line break that follows the span is
  already there. A line that opens a block (`if x:`, written before the hole or by the
  fill) keeps its body, and so does a fill that starts with a line break: that is the
  next lines, not the rest of this one. Such a span's key is `STATEMENT`;
- `after_space`, `unspaced`: a span after a space that follows code (`if <hole>:`)
  already has its space, yet the model may start its fill with one (the context ends
  in a lone ` ` token where the tokenizer spells `if rv` as `if` + ` rv`): 23 of 149
  such held-out fills did (`if  rv`). The engine drops a fill's leading spaces there;
- `end_fill`: both cuts (echo or statement, then loop) for a span whose length is not
  exact;
- `ended`: whether `end_fill` would cut a fill: the sampler does not grow such a span
  (infill/core/sampler.py `ended`), since what growth would add is cut anyway.

Measured in docs/log/architecture.md, "In-line holes end where they echo" (test, a call's
arguments: exact match 1.0% -> 27.0% with the same weights) and "A line written again
ends the fill".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from diffusion_infill.infill.core.lexer import lexemes, nested
from diffusion_infill.infill.core.spans import Span

STATEMENT = "\n"  # the key of a span that ends with its statement (never a stripped code)


@dataclass(frozen=True)
class Ends:
    """Per span (as the engine holds them): its echo key (`echo_keys`, `end_fill`) and
    whether its fill starts without a space (`after_space`, `unspaced`)."""

    keys: list[str | None]
    spaced: list[bool]


def echo_keys(
    text: str, spans: Sequence[Span], exact: Sequence[bool], *, statements: bool = False
) -> list[str | None]:
    """Per span (sorted, disjoint, as the engine holds them): the code after it on its
    line, up to the line's end or the next span's start, stripped; '' when there is none;
    None when the span's length is exact (`exact`, per span): its fill is never cut.
    With `statements` (Python), a span with none that starts after code on its line,
    outside brackets, strings and comments and not after a block's `:`, gets `STATEMENT`."""
    keys: list[str | None] = []
    outside = _outside(text, [s.start for s in spans]) if statements else None
    for i, (span, fixed) in enumerate(zip(spans, exact, strict=True)):
        line_end = text.find("\n", span.end)
        stop = len(text) if line_end < 0 else line_end
        if i + 1 < len(spans):
            stop = min(stop, spans[i + 1].start)
        key = None if fixed else text[span.end : stop].strip()
        if key == "" and outside is not None and outside[i]:
            head = text[text.rfind("\n", 0, span.start) + 1 : span.start].rstrip()
            if head and not head.endswith((":", "\\")):
                key = STATEMENT
        keys.append(key)
    return keys


def _places(text: str, starts: Sequence[int]) -> list[tuple[int, bool]]:
    """Per offset of `starts` (ascending): the depth of brackets it lies in (a stray
    closer closes nothing) and whether it lies inside a string or a comment."""
    out: list[tuple[int, bool]] = []
    depth, last_end, last_kind = 0, 0, " "
    lex = lexemes(text)
    pending = next(lex, None)
    for start in starts:
        while pending is not None and pending[0] < start:
            _, last_end, last_kind = pending
            depth = nested(depth, last_kind)
            pending = next(lex, None)
        out.append((depth, last_kind in '"?#' and last_end > start))
    return out


def _outside(text: str, starts: Sequence[int]) -> list[bool]:
    """Per offset of `starts` (ascending): whether it lies outside every bracket, string
    and comment of `text`."""
    return [depth == 0 and not quoted for depth, quoted in _places(text, starts)]


def after_space(text: str, spans: Sequence[Span]) -> list[bool]:
    """Per span (sorted): whether it starts after a space or tab that follows code on its
    line, outside strings and comments (`x = <hole>`, `if <hole>:`, `f(a, <hole>)`): the
    space is written, so its fill starts without one (`unspaced`)."""
    places = _places(text, [s.start for s in spans])
    out = []
    for span, (_, quoted) in zip(spans, places, strict=True):
        head = text[text.rfind("\n", 0, span.start) + 1 : span.start]
        out.append(not quoted and head.endswith((" ", "\t")) and bool(head.strip()))
    return out


def unspaced(fill: str) -> str:
    """`fill` without the spaces and tabs it starts with (`if  rv` is `if rv`), unless
    only whitespace or a line break follows them."""
    body = fill.lstrip(" \t")
    return body if body.strip() and not body.startswith(("\n", "\r")) else fill


def cut_statement(fill: str) -> str:
    """`fill` up to its first line break outside brackets and strings that follows some
    of its code (without the spaces before it); `fill` itself when it has none, when the
    line there opens a block (ends with `:`), when a string of it never closes, or when
    it starts with a line break."""
    if not fill.strip() or fill.lstrip(" \t").startswith(("\n", "\r\n")):
        return fill
    depth, line_start = 0, 0
    for at, end, c in lexemes(fill):
        depth = nested(depth, c)
        if c == "?":
            return fill
        if c == "\n" and depth == 0:
            line = _without_comment(fill[line_start:at])
            if line.endswith(":"):
                return fill
            if not line.endswith("\\"):
                return fill[:at].rstrip(" \t\r")
        if c == "\n":
            line_start = end
    return fill


def _without_comment(line: str) -> str:
    """`line` without a trailing comment and the spaces before it."""
    for at, _, c in lexemes(line):
        if c == "#":
            return line[:at].rstrip()
    return line.rstrip()


def _echo(key: str) -> re.Pattern[str]:
    return re.compile(re.escape(key) + r"[ \t]*\r?\n")


_OPENERS = {")": "(", "]": "[", "}": "{"}


def _stray_closers(text: str) -> int:
    """Closing brackets of `text` that close nothing opened in it (quoted text skipped)."""
    stack: list[str] = []
    stray, quote, i = 0, "", 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote or c == "\n":
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in "([{":
            stack.append(c)
        elif c in _OPENERS:
            if stack and stack[-1] == _OPENERS[c]:
                stack.pop()
            else:
                stray += 1
        i += 1
    return stray


def cut_echo(fill: str, key: str) -> str:
    """`fill` up to the first place where it writes `key` followed by a line break; else,
    when it ends with `key` (or with the start of it) and that end closes brackets the
    fill never opened, `fill` without it; `fill` itself otherwise (and when `key` is '')."""
    if not key:
        return fill
    m = _echo(key).search(fill) if "\n" in fill else None
    if m is not None:
        return fill[: m.start()]
    body = fill.rstrip()
    for end in range(len(key), 0, -1):  # the whole key, else its start (`a)` for `))`)
        if body.endswith(key[:end]):
            head = body[: len(body) - end]
            if _stray_closers(body) > _stray_closers(head):
                return head
    return fill


_PUNCTUATION = re.compile(r"[\s()\[\]{},:;.'\"`]*")  # a line of these alone is no loop


def cut_loop(fill: str) -> str:
    """`fill` up to the line break before its first line that is the line before it
    again (both stripped; not a blank line, not one of brackets and punctuation alone);
    `fill` itself when there is none."""
    lines = fill.split("\n")
    start = len(lines[0]) + 1  # where lines[i] starts in `fill`
    for i in range(1, len(lines)):
        line = lines[i].strip()
        if line == lines[i - 1].strip() and not _PUNCTUATION.fullmatch(line):
            head = fill[: start - 1]
            return head[:-1] if head.endswith("\r") else head
        start += len(lines[i]) + 1
    return fill


def end_fill(fill: str, key: str | None) -> str:
    """`fill` cut where it writes its echo (`cut_echo`) or ends its statement
    (`cut_statement`, key `STATEMENT`), then where it loops (`cut_loop`); `fill` itself
    for a span of exact length (`key` None)."""
    if key is None:
        return fill
    return cut_loop(cut_statement(fill) if key == STATEMENT else cut_echo(fill, key))


def ended(fill: str, key: str | None) -> bool:
    """Whether `end_fill` would cut `fill`."""
    return end_fill(fill, key) != fill
