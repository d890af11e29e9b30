"""Excerpts: the part of a long buffer worth sending to the worker.

The engine chooses its own window (a few hundred tokens around the spans, whole scopes
where tree-sitter finds them), so a caller holding a 20,000-line buffer needs to send only
the region around the spans plus generous context. `excerpt` takes whole lines, about
`context` characters on each side of [start, end), and moves each cut to a line that
starts a top-level definition when one is near (inside a long class, to a line that starts
a method), so that the scopes the engine looks for are whole in the excerpt and neither
end of it falls inside a docstring. Offsets inside an excerpt are `offset` less than in
the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from diffusion_infill.lsp.positions import LINE_BREAK, line_start

# What starts a definition (`def`, `class`, a decorator). Lines that start with one are
# almost never inside a string, unlike lines of prose in a docstring; a wrong guess only
# costs the engine its scope context (it falls back to line windows).
_DEFINITION = r"(?:@[A-Za-z_]|(?:async\s+)?def\s+\w+\s*\(|class\s+\w+\s*[:(])"


@dataclass(frozen=True)
class Excerpt:
    offset: int  # where `text` starts in the whole text
    text: str

    @property
    def end(self) -> int:
        return self.offset + len(self.text)


def _line_end(text: str, i: int) -> int:
    """Offset just past the line break of the line holding `i` (or the end)."""
    m = LINE_BREAK.search(text, i)
    return m.end() if m else len(text)


# A line that starts a definition at any indentation (group 1: the indentation).
_DEF = re.compile(r"^([ \t]*)" + _DEFINITION, re.MULTILINE)


def definition_start(text: str, at: int, reach: int) -> int | None:
    """Where to parse from, at most `reach` characters before `at`, so that the definition
    that holds `at` is read whole and not from inside a string: the last line at or before
    `at` that starts a top-level definition; without one, the first of the least indented
    lines that start a definition (a method of a class that began further back); None
    when no line starts a definition there."""
    # every match starts a line, and the last line searched is the one that holds `at`
    lines = _definition_lines(text, max(0, at - reach), _line_end(text, at))
    if not lines:
        return None
    return lines[-1] if text[lines[0]] not in " \t" else lines[0]


def excerpt(text: str, start: int, end: int, *, context: int) -> Excerpt:
    """Whole lines around text[start:end] with about `context` characters on each side."""
    if start <= context and len(text) - end <= context:
        return Excerpt(0, text)
    a = line_start(text, max(0, start - context)) if start > context else 0
    b = _line_end(text, min(len(text), end + context)) if len(text) - end > context else len(text)
    core_a = line_start(text, start)
    core_b = _line_end(text, end) if end > core_a else core_a
    # Move the upper cut down to a top-level definition within the first half of the
    # context, the lower cut up to one within the last half of it; inside a long class
    # (no top-level line there), to a line that starts a definition at the least
    # indentation, so that neither cut falls inside a docstring (whose prose would parse
    # as code and the code after it as a string).
    # With no such line there (a docstring longer than half the context), the cut moves
    # out instead, to the nearest one within three more contexts: the excerpt grows.
    if a > 0:
        lines = (
            _definition_lines(text, a, max(a, min(core_a, a + context // 2)))
            or _definition_lines(text, max(0, a - 3 * context), a)[-1:]
        )
        if lines:
            a = lines[0]
    if b < len(text):
        lines = _definition_lines(text, max(core_b, b - context // 2), b)[-1:] or _definition_lines(
            text, b, min(len(text), b + 3 * context)
        )
        if lines:
            b = lines[0]
    return Excerpt(a, text[a:b])


def _definition_lines(text: str, lo: int, hi: int) -> list[int]:
    """The starts of the lines in [lo, hi) that start a definition at the least
    indentation found there: the top-level ones when there are any."""
    defs = [(len(m.group(1)), m.start()) for m in _DEF.finditer(text, lo, hi)]
    least = min((indent for indent, _ in defs), default=0)
    return [start for indent, start in defs if indent == least]
