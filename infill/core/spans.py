"""Masked regions: hole markers in text and explicit character ranges.

A `Span` is a half-open range of *characters* (Python str indices, i.e. code points) of the
original text. Its characters are masked and replaced by the fill; an empty range is an
insertion point.

Hole markers (`marker` is configurable, default `<mask>`):
- bracketed markers `<name>`: `<name>` is a hole, `<name:N>` a hole with a length hint of N
  tokens. Once `<name:` is written it must be completed as `<name:N>` with N >= 1:
  `<name:>`, `<name:0>`, `<name:x>`, `<name:-1>` and an unclosed `<name:12` are errors.
  `<<mask>>` is a hole between `<` and `>` (Java/C++ generics need exactly that).
- any other marker `M`: `M` is a hole, `M:N` a hole with a hint of N >= 1 (`M:0` is an
  error). `M:` followed by anything but digits is a hole followed by a colon, because that
  is ordinary code (`{??: 1}`).
Occurrences are found left to right without overlap (`???` with marker `??` is a hole and
a `?`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from diffusion_infill.infill.core.errors import (
    MarkerError,
    NoHolesError,
    OptionError,
    SpanError,
    line_col,
)

DEFAULT_MARKER = "<mask>"


@dataclass(frozen=True)
class Span:
    """Characters [start, end) of the text are masked and replaced by the fill."""

    start: int
    end: int
    length: int | None = None  # tokens to allocate (hint); None: the default allocation
    exact: bool = False  # the fill is exactly `length` tokens: no null, no growth


def check_marker(marker: str) -> None:
    if not isinstance(marker, str) or not marker:
        raise OptionError("the hole marker must be a non-empty string")
    if any(ch.isspace() for ch in marker):
        raise OptionError(f"the hole marker {marker!r} must not contain whitespace")
    if len(marker) > 64:
        raise OptionError("the hole marker must be at most 64 characters")


def _bracketed(marker: str) -> bool:
    return len(marker) >= 3 and marker[0] == "<" and marker[-1] == ">"


def find_holes(text: str, marker: str = DEFAULT_MARKER) -> list[Span]:
    """The hole markers in `text`, as spans covering each marker (hint in `length`).

    Raises MarkerError for a malformed marker and NoHolesError when there is none.
    """
    check_marker(marker)
    spans = _find_bracketed(text, marker) if _bracketed(marker) else _find_plain(text, marker)
    if not spans:
        raise NoHolesError(f"no holes: the text has no {marker!r} marker")
    return spans


def _hint_error(text: str, start: int, snippet: str, example: str) -> MarkerError:
    return MarkerError(
        f"{line_col(text, start)}: malformed hole marker {snippet!r}: the length hint must "
        f"be a whole number of tokens >= 1, as in {example!r}"
    )


def _find_bracketed(text: str, marker: str) -> list[Span]:
    head = marker[:-1]  # "<mask"
    example = f"{head}:8>"
    hinted = re.compile(re.escape(head) + r":(\d+)>")
    spans: list[Span] = []
    for m in re.finditer(re.escape(head) + "[>:]", text):
        start = m.start()
        if text[m.end() - 1] == ">":
            spans.append(Span(start, m.end()))
            continue
        h = hinted.match(text, start)
        if h is None:
            close = text.find(">", m.end(), m.end() + 24)
            newline = text.find("\n", m.end())
            if close < 0 or 0 <= newline < close:
                line_end = newline if newline >= 0 else len(text)
                snippet = text[start : min(line_end, m.end() + 12)]
                raise MarkerError(
                    f"{line_col(text, start)}: unclosed hole marker {snippet!r}: write "
                    f"{marker!r} or {example!r}"
                )
            raise _hint_error(text, start, text[start : close + 1], example)
        n = int(h.group(1))
        if n < 1:
            raise _hint_error(text, start, h.group(0), example)
        spans.append(Span(start, h.end(), length=n))
    return spans


def _find_plain(text: str, marker: str) -> list[Span]:
    hint = re.compile(r":(\d+)")
    spans: list[Span] = []
    pos = text.find(marker)
    while pos >= 0:
        end = pos + len(marker)
        h = hint.match(text, end)
        if h is None:
            spans.append(Span(pos, end))
        else:
            n = int(h.group(1))
            if n < 1:
                raise _hint_error(text, pos, text[pos : h.end()], f"{marker}:8")
            end = h.end()
            spans.append(Span(pos, end, length=n))
        pos = text.find(marker, end)
    return spans


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def check_spans(text: str, spans: list[Span]) -> list[Span]:
    """Validate explicit spans against `text`; return them sorted by position.

    Raises NoHolesError for an empty list, SpanError for a span out of range, with a bad
    length, or overlapping another (two empty spans at one offset count as overlapping;
    adjacent spans do not).
    """
    if not spans:
        raise NoHolesError("no spans: nothing to fill")
    for s in spans:
        if not isinstance(s, Span):
            raise SpanError(f"not a Span: {s!r}")
        if not (_is_int(s.start) and _is_int(s.end)):
            raise SpanError(f"span offsets must be integers: {s!r}")
        if not 0 <= s.start <= s.end <= len(text):
            raise SpanError(
                f"span [{s.start}, {s.end}) is out of range: the text has {len(text)} characters"
            )
        if s.length is not None and (not _is_int(s.length) or s.length < 1):
            raise SpanError(f"span length must be an integer >= 1, got {s.length!r}")
        if s.exact and s.length is None:
            raise SpanError(f"an exact-length span needs a length: {s!r}")
    ordered = sorted(spans, key=lambda s: (s.start, s.end))
    for a, b in pairwise(ordered):
        if b.start < a.end or (a.start, a.end) == (b.start, b.end):
            raise SpanError(
                f"spans overlap: {line_col(text, a.start)}-{line_col(text, a.end)} and "
                f"{line_col(text, b.start)}-{line_col(text, b.end)}"
            )
    return ordered


def neutralise(text: str, spans: list[Span]) -> str:
    """`text` with each span's characters replaced by `_`: the same offsets, but a hole
    marker reads as an identifier, so the parser sees the code around it intact. A span
    over line breaks keeps them, and the indentation that starts each of its lines, so
    that a span of whole lines reads as lines of identifiers at their depth rather than
    one long identifier that breaks the block it sits in (which would leave the checks
    nothing to compare a fill with)."""
    parts: list[str] = []
    pos = 0
    for s in spans:
        parts.append(text[pos : s.start])
        at_line_start = not text[text.rfind("\n", 0, s.start) + 1 : s.start].strip()
        for ch in text[s.start : s.end]:
            if ch == "\n":
                parts.append(ch)
                at_line_start = True
            elif at_line_start and ch in " \t":
                parts.append(ch)
            else:
                parts.append("_")
                at_line_start = False
        pos = s.end
    parts.append(text[pos:])
    return "".join(parts)


def check_decided(
    spans: list[Span], decided: Sequence[list[int] | None] | None
) -> Sequence[list[int] | None]:
    """Per span (sorted), its tokens when already decided (None: to denoise). Raises
    SpanError unless there is one entry per span, each for an exact span of its length."""
    if decided is None:
        return [None] * len(spans)
    if len(decided) != len(spans) or any(
        d is not None and (not s.exact or s.length != len(d))
        for s, d in zip(spans, decided, strict=False)
    ):
        raise SpanError(
            "decided tokens need one entry per span, each for an exact span of that length"
        )
    return decided
