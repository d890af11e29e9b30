"""Hole markers that stand for whole lines.

A marker with nothing before it on its line (column 0) is a *line hole*: the code of one
line, its indentation and its line break all hidden, as fill-in-the-middle tasks and other
editors' tools write a hole (the text before it ends with a line break). Two forms:

- the marker alone on its line (`<mask>` then the line break, or the end of the text):
  the hole is that line;
- the marker followed on its line by indented code (`<mask>    return x`, the text after
  the hole starting at the next line's indentation: a tab, or two spaces or more): the
  hole is a line inserted before that code.

A marker followed by code at column 0 (`<mask>import os`) or after one space (`<mask> =
compute()`), or with code before it on its line, is a hole inside a line, as before.

The model was trained on holes that start after a line's indentation and end before its
line break, so a line hole is written here as the engine's selection of one whole line
(infill/core/lines.py frames it): the indentation the code around it implies, the marker,
a line break. The engine then fills that text, its checks judge the fill in a line at
the right depth (a parse reference that a bare marker at column 0 inside a block never
gives), and the result is mapped back: a fill replaces the marker (and, alone on its
line, the line break after it) in the text as given.

    recast = line_holes(text, spans)   # Recast: the text to fill, its spans, the originals
    text, spans = recast.text, recast.spans

A line hole without a length hint is filled with one line; `<mask:N>` may take more.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from diffusion_infill.infill.core.lines import code_lines, indent_of, indentation
from diffusion_infill.infill.core.spans import Span


@dataclass(frozen=True)
class Recast:
    """A text whose line holes are written as selected lines, and where its spans were."""

    text: str  # the text the engine fills
    spans: list[Span]  # the holes in `text`
    given: list[Span]  # the same holes in the text as given: what each fill replaces
    lines: frozenset[int] = frozenset()  # indices of the line holes
    # per line hole alone on its line: what follows its marker there, its line break
    # included ("" at the end of the text), which its fill ends with in place of the frame's
    rests: dict[int, str] = field(default_factory=dict)

    def given_offset(self, at: int) -> int:
        """An offset of `text` as an offset of the text as given (one inside a line hole
        maps into the range that hole replaces there)."""
        shift = 0
        for i in sorted(self.lines):
            new, old = self.spans[i], self.given[i]
            if at < new.start:
                break
            if at < new.end:
                return old.start + min(at - new.start, old.end - old.start)
            shift = new.end - old.end
        return at - shift


def _rest_of_line(text: str, end: int) -> tuple[str, int]:
    """The text after `end` on its line, and where its line break is (len(text): none)."""
    eol = text.find("\n", end)
    eol = len(text) if eol < 0 else eol
    return text[end:eol], eol


def line_hole_form(text: str, span: Span) -> str | None:
    """ "alone" (the marker is its line), "before" (it precedes indented code on its line:
    a tab or two spaces or more, then code) or None (a hole inside a line)."""
    if span.start > 0 and text[span.start - 1] != "\n":
        return None
    rest, _ = _rest_of_line(text, span.end)
    if not rest.strip(" \t\r"):
        return "alone"
    indent = rest[: len(rest) - len(rest.lstrip(" \t"))]
    if ("\t" in indent or len(indent) >= 2) and rest.strip():
        return "before"
    return None


def _head(before: str, after: str) -> str:
    """The indentation of a line hole between `before` (ending with a line break) and
    `after`, by `lines.indentation`. The hole's line reads as a name at the depth of the
    code before it, so that the file's indentation step is not taken from the code line
    before the hole to the one after it (a `def` line to its body's second line)."""
    prev = code_lines(before)
    stand = (indent_of(prev[-1]) if prev else "") + "_\n"
    return indentation(before + stand + after, len(before), len(before) + len(stand))


def line_holes(text: str, spans: Sequence[Span], *, on: bool = True) -> Recast:
    """`text` with each line hole among `spans` (sorted hole markers) written as one
    selected line at the depth the code around it implies (`lines.indentation`); the
    other holes unchanged. `on=False`: nothing changes."""
    forms = [line_hole_form(text, s) if on else None for s in spans]
    if not any(forms):
        return Recast(text, list(spans), list(spans))
    parts: list[str] = []
    out: list[Span] = []
    given: list[Span] = []
    rests: dict[int, str] = {}
    pos = shift = 0
    for i, (s, form) in enumerate(zip(spans, forms, strict=True)):
        parts.append(text[pos : s.start])
        at = s.start + shift
        if form is None:
            parts.append(text[s.start : s.end])
            out.append(Span(at, s.end + shift, s.length, s.exact))
            given.append(s)
            pos = s.end
            continue
        rest, eol = _rest_of_line(text, s.end)
        # the code after it: from the next line ("alone") or from this line's indentation
        after = eol + 1 if form == "alone" else s.end
        so_far = "".join(parts)
        head = _head(so_far, text[after:])
        crlf = rest.endswith("\r") or so_far.endswith("\r\n")
        piece = head + text[s.start : s.end] + ("\r\n" if crlf else "\n")
        parts.append(piece)
        out.append(Span(at, at + len(piece), s.length, s.exact))
        end = min(after, len(text)) if form == "alone" else s.end
        if form == "alone":
            rests[i] = text[s.end : end]
        given.append(Span(s.start, end, s.length, s.exact))
        shift += len(piece) - (end - s.start)
        pos = end
    parts.append(text[pos:])
    lines = frozenset(i for i, f in enumerate(forms) if f is not None)
    return Recast("".join(parts), out, given, lines, rests)
