"""A text cut inside a docstring, read as its file reads.

A window or an excerpt may start or end inside a docstring. Read as it is, the prose after
a hole there is code full of errors and unknown names, and a right fill fails the checks:
a window that starts inside one has its closing quotes open a "string" that runs on over
the code after them, and each docstring after it reads inside out. `as_read` gives the
checks (infill/core/checks.py) the text as its file reads it: the prose of a docstring the
text starts inside blanked up to its closing quotes (infill/core/lexer.py
`docstring_head`), line breaks kept so that offsets hold, and the quotes of one it ends
inside added after its end (`open_docstring`).

    before, after = as_read(before, after, before_ranges, after_ranges)
"""

from __future__ import annotations

from collections.abc import Sequence

from diffusion_infill.infill.core.lexer import docstring_head, open_docstring

Range = tuple[int, int]

_last_cut: list[tuple[str, int, tuple[int, str | None, str]]] = []
_QUOTING = frozenset("'\"#\\")  # what may change where a text's strings start and end


def _blanked(text: str, head: int) -> str:
    """`text` with its first `head` characters blanked, line breaks kept."""
    if not head:
        return text
    return "".join(c if c == "\n" else " " for c in text[:head]) + text[head:]


def _cut(text: str, first: int) -> tuple[int, str | None, str]:
    """Where `text` was cut inside a docstring (infill/core/lexer.py), and the text as its
    file reads there: (head, quote, read). `head`: the end of the docstring it starts
    inside (0: none; only before the first hole, at `first`), whose prose up to its closing
    quotes `read` blanks, line breaks kept, so offsets hold; `quote`: the quotes of the
    docstring it ends inside (None: none), which `read` adds after its end. Else the text
    after a hole in a docstring reads as code full of errors and unknown names. The text
    before the fills is checked many times: its last cut is kept, and so its parse
    (infill/core/checks.py `_before`)."""
    last = _last_cut[0] if _last_cut else None  # one read: threads may swap it
    if last is not None and last[0] is text and last[1] == first:
        return last[2]
    head = docstring_head(text)
    head = head if 0 < head <= first else 0
    read = _blanked(text, head)
    quote = open_docstring(read)
    cut = (head, quote, read + quote if quote else read)
    _last_cut[:] = [(text, first, cut)]
    return cut


def as_read(
    before: str,
    after: str,
    before_ranges: Sequence[Range],
    after_ranges: Sequence[Range],
) -> tuple[str, str]:
    """`before` and `after` as their file reads where a window or an excerpt cut them
    inside a docstring (`_cut`). The text before the first fill is the same in both; past
    it, `after`'s strings open and close where `before`'s do unless a span (a selection as
    written) or a fill holds a quote, a comment or a backslash, and only then is `after`
    read again."""
    head, quote, read = _cut(before, min((r[0] for r in before_ranges), default=0))
    spans = [before[a:b] for a, b in before_ranges] + [after[a:b] for a, b in after_ranges]
    if any(not _QUOTING.isdisjoint(t) for t in spans):
        blank = _blanked(after, head)
        quote = open_docstring(blank)
        return read, blank + quote if quote else blank
    return read, _blanked(after, head) + (quote or "")
