"""Spans of whole lines: the engine writes their indentation and closing line break.

A selection of whole lines (from column 0 through the line break of its last line, as an
editor selects a line) holds its indentation and line break inside the span. The model was
trained on holes that start after a line's indentation and end before its line break
(model/training/noising.py), and left to write them itself it writes a bare line break, or three
lines where one was selected, or the right statement at the wrong depth. So the engine
frames such a span: its first line's indentation is worked out from the code around it
and written before the fill (`head`), the line break after it (`tail`), and the model fills
the code between, the shape it knows. A span of one line is filled with one line: its fill
may not hold a line break. A span of k lines is filled with k lines or more
(`SamplerOptions.selection_lines`), as is any span over k lines of text, framed or not: its
fill may not end before it holds k - 1 line breaks (`selected_breaks`,
infill/core/canvas.py `SpanSlots.may_end`); left to itself the model
wrote one line for 188 of 200 held-out blocks of 2-8 lines (docs/log/architecture.md, "A
selection of k lines").

    frames = line_frames(text, spans)        # per span: Frame(head, tail, lines) or None
    text = frame.head + fill + frame.tail    # what replaces the span

The indentation (`indentation`), from the nearest code lines before and after the span:
- after a line that opens a block (ends with `:`, or with an opening bracket), one step
  deeper than it;
- after `return`, `raise`, `continue`, `break` or `pass`, the block has ended: the line
  after the span's depth where it is less indented, else one step out;
- after a blank line, the line after the span's depth where it is less indented (a new
  statement after a block);
- otherwise the line before's own (measured: docs/log/architecture.md, "Whole-line holes").
Where the code allows several depths (a hidden line may close blocks: `else:`), the engine
lets the model choose among them (infill/core/indents.py).
Comment-only and blank lines are passed over. One step is the file's own (a tab where the
line before is indented with tabs, else the smallest indentation step seen, else four
spaces).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from diffusion_infill.infill.core.spans import Span


@dataclass(frozen=True)
class Frame:
    """What the engine writes around a whole-line span's fill."""

    head: str  # the indentation of the span's first line
    tail: str  # the line break that closes its last line ("" at the end of the text)
    lines: int  # the lines the span holds: one may not take a line break, k end after k
    more: bool = False  # its fill may take more lines than it holds (a hinted line hole)

    @property
    def one_line(self) -> bool:
        """The span is one line and filled with one: its fill may not hold a line break."""
        return self.lines == 1 and not self.more


TRAILING_COMMENT = re.compile(r"""\s+#[^'"]*$""")  # a trailing comment with no quote in it
OPENERS = (":", "(", "[", "{", "\\")  # a line that ends with one goes on in the next
# a statement after which the block ends (the next line is dedented, or dead code)
_ENDS_BLOCK = re.compile(r"\s*(return|raise|continue|break|pass)\b")


def indent_of(line: str) -> str:
    """The spaces and tabs `line` starts with."""
    return line[: len(line) - len(line.lstrip(" \t"))]


def code_lines(text: str) -> list[str]:
    """The lines of `text` that hold code: not blank, not a comment alone."""
    return [ln for ln in text.split("\n") if ln.strip() and not ln.lstrip().startswith("#")]


def _line_above(text: str, start: int) -> str:
    """The line before the one that starts at `start` ("" at the top of the text)."""
    if start == 0:
        return ""
    return text[text.rfind("\n", 0, start - 1) + 1 : start - 1]


def indent_step(text: str, indent: str) -> str:
    """One indentation step of `text`'s code: a tab where `indent` holds one, else the
    most common step from a line that ends with `:` to the line after it (four spaces
    when there is none)."""
    if "\t" in indent:
        return "\t"
    lines = code_lines(text)
    steps = Counter(
        len(indent_of(b)) - len(indent_of(a))
        for a, b in zip(lines, lines[1:], strict=False)
        if TRAILING_COMMENT.sub("", a.rstrip()).endswith(":") and "\t" not in indent_of(b)
    )
    best = [(n, w) for w, n in steps.items() if 1 <= w <= 8]
    return " " * max(best)[1] if best else "    "


def indentation(text: str, start: int, end: int) -> str:
    """The indentation of a line at `start` that replaces text[start:end], read from the
    code lines around it (the module docstring's rules)."""
    before = code_lines(text[:start])
    if not before:
        return ""
    prev = before[-1].rstrip()
    indent = indent_of(prev)
    code = TRAILING_COMMENT.sub("", prev)
    if code.endswith(OPENERS):
        return indent + indent_step(text, indent)
    after = code_lines(text[end:])
    below = indent_of(after[0]) if after else ""
    if _ENDS_BLOCK.match(code):  # the line after return/raise/... leaves the block
        if len(below) < len(indent):
            return below
        return indent[: max(0, len(indent) - len(indent_step(text, indent)))]
    if len(below) < len(indent) and not _line_above(text, start).strip():
        return below  # after a blank line, a less indented line below: a new statement
    return indent


def depths(text: str, start: int, end: int) -> list[str]:
    """The indentations the code around text[start:end] (whole lines) allows its first
    line, deepest first; [] when the code settles it (after a line that opens a block, at
    the top of the text, or where tabs indent). Where the text starts inside a block, the
    levels out from its shallowest line are a step each."""
    before = code_lines(text[:start])
    if not before:
        return []
    prev = before[-1].rstrip()
    if TRAILING_COMMENT.sub("", prev).endswith(OPENERS):
        return []
    levels: list[str] = []
    for line in reversed(before):
        indent = indent_of(line)
        if "\t" in indent:
            return []
        if not levels or len(indent) < len(levels[-1]):
            levels.append(indent)
            if not indent:
                break
    step = len(indent_step(text, indent_of(prev)))
    while levels[-1]:  # the text starts inside a block: the levels out, a step each
        levels.append(" " * max(0, len(levels[-1]) - step))
    after = code_lines(text[end:])
    if after:
        lowest = len(indent_of(after[0])) - step
        levels = [d for d in levels if len(d) >= lowest]
    return levels if len(levels) > 1 else []


def other_depths(text: str, start: int, end: int, own: str) -> list[str]:
    """The indentations `depths` allows text[start:end] other than `own`, nearest to it
    first."""
    others = [d for d in depths(text, start, end) if d != own]
    return sorted(others, key=lambda d: abs(len(d) - len(own)))


def is_whole_lines(text: str, span: Span) -> bool:
    """The span starts at a line's start and ends after a line break (or at the end of
    the text) and holds some code: a selection of whole lines."""
    if span.end <= span.start or (span.start > 0 and text[span.start - 1] != "\n"):
        return False
    if span.end < len(text) and text[span.end - 1] != "\n":
        return False
    return bool(text[span.start : span.end].strip())


def line_frames(
    text: str,
    spans: Sequence[Span],
    *,
    decided: Sequence[object | None] | None = None,
    on: bool = True,
    more: Collection[int] = (),
) -> list[Frame | None]:
    """Per span, its Frame when it is a selection of whole lines (and not `decided`, a
    repair's own tokens), else None; all None unless `on`; the spans of index in `more`
    may take more lines than they hold. The head is never read from the span itself (it
    may be a hole whose text is gone). A span that ends with CRLF ends its fill with it."""
    out: list[Frame | None] = []
    for i, span in enumerate(spans):
        if (
            not on
            or (decided is not None and decided[i] is not None)
            or not is_whole_lines(text, span)
        ):
            out.append(None)
            continue
        inner = text[span.start : span.end]
        tail = "\r\n" if inner.endswith("\r\n") else "\n" if inner.endswith("\n") else ""
        out.append(
            Frame(
                indentation(text, span.start, span.end),
                tail,
                lines=inner[: len(inner) - len(tail)].count("\n") + 1,
                more=i in more,
            )
        )
    return out


def selected_breaks(text: str, span: Span, frame: Frame | None) -> int:
    """The line breaks a fill of `span` must hold before it may end: those of the text it
    replaces (a selection of k lines is filled with k lines or more), but a framed span's
    closing one, which the engine writes; none for a hole marker or an insertion."""
    if frame is not None:
        return frame.lines - 1
    return text[span.start : span.end].count("\n")


def one_line_limits(limits: Sequence[str], frames: Sequence[Frame | None]) -> list[str]:
    """Each span's forbidden characters (infill/core/limits.py), with the line break for
    a one-line selection."""
    return [
        chars + ("\n\r" if f is not None and f.one_line and "\n" not in chars else "")
        for chars, f in zip(limits, frames, strict=True)
    ]


def line_keys(keys: Sequence[str | None], frames: Sequence[Frame | None]) -> list[str | None]:
    """The echo keys (infill/core/echo.py) of framed spans: '' (a framed span ends its
    line: no code after it on its line); None (an exact span) stays."""
    return [
        None if k is None else ("" if f is not None else k)
        for k, f in zip(keys, frames, strict=True)
    ]


def framed(fill: str, frame: Frame | None) -> str:
    """A span's text from the model's fill: a whole-line span's indentation and line
    break around it."""
    return fill if frame is None else frame.head + fill + frame.tail


def framed_code(text: str) -> str:
    """The part of a whole-line span's text that the model writes: without its first
    line's indentation and its closing line break (the rewrite's length guess)."""
    code = text.lstrip(" \t")
    return code.removesuffix("\r\n") if code.endswith("\r\n") else code.removesuffix("\n")
