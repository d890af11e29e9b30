"""A text cut inside a docstring, read as its file reads.

A window or an excerpt may start or end inside a docstring. Read as it is, the prose after
a hole there is code full of errors and unknown names, and a right fill fails the checks:
a window that starts inside one has its closing quotes open a "string" that runs on over
the code after them, and each docstring after it reads inside out. `as_read` gives the
checks (infill/core/checks.py) the text as its file reads it: a docstring the text starts
inside opened where its first three spaces were (or its prose blanked up to its closing
quotes, infill/core/lexer.py `docstring_head`), so that offsets hold, and the quotes of
one it ends inside added after its end (`open_docstring`).

    before, after = as_read(before, after, before_ranges, after_ranges)
"""

from __future__ import annotations

from collections.abc import Sequence

from diffusion_infill.infill.core.lexer import docstring_head, open_docstring

Range = tuple[int, int]

_last_cut: list[tuple[str, int, tuple[str, str | None, str]]] = []
_QUOTING = frozenset("'\"#\\")  # what may change where a text's strings start and end


def _headed(text: str, head: str) -> str:
    """`text` with `head` in place of as many of its first characters."""
    return head + text[len(head) :] if head else text


def _head(text: str, first: int) -> str:
    """What stands in for the start of `text` where it starts inside a docstring (""
    where it does not): its first three spaces become the docstring's opening quotes where
    it starts with them and the first hole (at `first`) comes later, so the prose reads as
    the string it is, holes in it too; else, where the first hole comes after the closing
    quotes, the prose up to them is blanked, line breaks kept. Offsets hold."""
    end = docstring_head(text)
    if not end:
        return ""
    if text.startswith("   ") and first >= 3:
        return text[end - 3 : end]
    if end <= first:
        return "".join(c if c == "\n" else " " for c in text[:end])
    return ""


def _cut(text: str, first: int) -> tuple[str, str | None, str]:
    """How `text` reads where it was cut inside a docstring (infill/core/lexer.py):
    (head, quote, read). `head`: what stands in for its start (`_head`); `quote`: the
    quotes of the docstring it ends inside (None: none), which `read` adds after its end.
    The text before the fills is checked many times: its last cut is kept, and so its
    parse (infill/core/checks.py `_before`)."""
    last = _last_cut[0] if _last_cut else None  # one read: threads may swap it
    if last is not None and last[0] is text and last[1] == first:
        return last[2]
    head = _head(text, first)
    read = _headed(text, head)
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
    headed = _headed(after, head)
    if any(not _QUOTING.isdisjoint(t) for t in spans):
        quote = open_docstring(headed)
    return read, headed + (quote or "")
