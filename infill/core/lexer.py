"""Python's strings, comments and brackets, found without a parser (text may be cut
anywhere: a window of a file, a fill being written).

    for start, end, kind in lexemes(text): ...   # brackets, line breaks, strings, comments
        depth = nested(depth, kind)               # the brackets open after it
    prose_ranges(text)                            # its comments and docstrings
    open_docstring(text)                          # the quotes a cut docstring lacks
    docstring_head(text)                          # where one the text starts in ends

`lexemes` serves the fill ends (infill/core/echo.py); `prose_ranges` the fixer, which
names no token of a comment or a docstring (infill/core/repair.py `score_text`);
`open_docstring` and `docstring_head` the checks, which read a text cut inside a docstring
as the file reads (infill/core/docstring_cuts.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

# A string's opening quote (after its prefix letters), a comment, a bracket, a line break.
_LEXEME = re.compile(r"""(?:\b[rRbBuUfF]{1,2})?("{3}|'{3}|"|')|#[^\n]*|[()\[\]{}\n]""")


def _string_end(text: str, pos: int, quote: str) -> int:
    """Where the string whose opening `quote` ends at `pos` closes (after its closing
    quote); a one-quote string also stops at a line break; -1 if it runs to the end."""
    i = pos
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text.startswith(quote, i):
            return i + len(quote)
        elif text[i] == "\n" and len(quote) == 1:
            return i
        else:
            i += 1
    return -1


def lexemes(text: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, kind) of the brackets and line breaks of `text` (kind: the character)
    and of its strings and comments (kind '"' or '#'; '?' for a string that never
    closes), in order."""
    pos = 0
    while (m := _LEXEME.search(text, pos)) is not None:
        if m.group(1):
            end = _string_end(text, m.end(), m.group(1))
            pos = len(text) if end < 0 else end
            yield m.start(), pos, "?" if end < 0 else '"'
        else:
            pos = m.end()
            yield m.start(), pos, m.group()[0]


def nested(depth: int, kind: str) -> int:
    """The bracket depth after a lexeme of `kind` at `depth` (a stray closer closes
    nothing)."""
    return depth + (kind in "([{") - (depth > 0 and kind in ")]}")


def prose_ranges(text: str) -> list[tuple[int, int]]:
    """(start, end) of the comments of `text` and of its docstrings: strings at bracket
    depth 0 that stand alone on their lines (only spaces before them on the line, only
    spaces or a comment after them), in order. A statement that is a string does nothing
    but document. A string that never closes is not counted: in a window that starts
    inside a docstring, its closing quotes open one that runs on over the code."""
    out: list[tuple[int, int]] = []
    depth = 0
    for start, end, kind in lexemes(text):
        depth = nested(depth, kind)
        if kind == "#" or (kind == '"' and depth == 0 and _alone(text, start, end)):
            out.append((start, end))
    return out


_REST = re.compile(r"[ \t]*(?:#[^\n]*)?(?:\r?\n|$)")


def _alone(text: str, start: int, end: int) -> bool:
    """Whether text[start:end] has only spaces before it on its first line and only
    spaces or a comment after it on its last."""
    head = text[text.rfind("\n", 0, start) + 1 : start]
    return not head.strip() and _REST.match(text, end) is not None


_OPENED = re.compile(r"[ \t]*(?:\b[rRbBuUfF]{1,2})?$")


def open_docstring(text: str) -> str | None:
    """The quotes that would close the docstring `text` leaves open at its end (a window
    or an excerpt cut inside one), or None. Only a triple-quoted string that opens as a
    docstring does: alone at the start of its line, with text after its quotes on that
    line or a line before it that ends with a colon. (A window that starts inside a
    docstring has its closing quotes, alone on their line after prose, open a "string"
    that runs on over the code: that one is not closed.)"""
    last = None
    for start, _, kind in lexemes(text):
        last = (start, kind)
    if last is None or last[1] != "?":
        return None
    start = last[0]
    m = _LEXEME.match(text, start)
    if m is None or len(m.group(1) or "") != 3:
        return None
    line_start = text.rfind("\n", 0, start) + 1
    if not _OPENED.match(text, line_start, start):
        return None
    line_end = text.find("\n", m.end())
    rest = text[m.end() : line_end if line_end >= 0 else len(text)]
    above = text[:line_start].rstrip()
    if not rest.strip() and not above.endswith(":"):
        return None
    return m.group(1)


_TRIPLE = re.compile(r"\"\"\"|'''")
# what code ends with before the quotes that open a string: `x = """`, `f("""`, `return """`
_OPENS_AFTER = re.compile(r"(?:[=(\[{,:]|\breturn|\byield|\b[rRbBuUfF]{1,2})\Z")


def docstring_head(text: str) -> int:
    """Where the docstring `text` starts inside ends (after its closing quotes; a window or
    an excerpt cut inside one), or 0. Its closing quotes are the text's first triple
    quotes outside a comment, with nothing but spaces or a comment after them on their
    line, and before them either prose (not code that opens a string: `x = \"\"\"`,
    `f(\"\"\"`) or only spaces, after a line of prose that does not end with a colon (a
    docstring's opening quotes alone on their line follow a `def`, a `class`, or only
    comments at the start of a module). Read from the start, they would open a "string"
    that runs on over the code after them, and each docstring after it would read inside
    out."""
    for m in _TRIPLE.finditer(text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        before = text[line_start : m.start()].strip()
        if before.startswith("#"):
            continue
        if _REST.match(text, m.end()) is None:
            return 0
        if before:
            return 0 if _OPENS_AFTER.search(before) else m.end()
        above = [ln.strip() for ln in text[:line_start].split("\n")]
        prose = [ln for ln in above if ln and not ln.startswith("#")]
        return m.end() if prose and not prose[-1].endswith(":") else 0
    return 0
