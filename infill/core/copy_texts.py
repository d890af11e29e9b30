"""Where copies come from: the text that follows a line's code elsewhere (text only).

A hole inside a line (or a completion's cursor after code) is often filled by what follows
the same code elsewhere: the longest tail of its line before it that occurs in the text
around it (`context_copies`, for infill/core/copy_fills.py's pass) or in snippets of other
files (`inline_copies`, infill/core/cross_copies.py), each cut where the text after the
hole on its line starts again. No numpy, no model: the language server calls these for
its completions (infill/core/copy_offers.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from diffusion_infill.infill.core.snippets import Snippet

LIMIT = 4  # copies per hole at most (the first found, by the longest tail)
MAX_TAIL = 24  # characters of the hole's line before it that an in-file copy must follow
MIN_TAIL = 4  # characters of the line before it that a copy from another file must follow
MAX_FILE_TAIL = 40  # characters of that tail tried at most for another file
_END_CHARS = 3  # characters of the text after the hole (on its line) a copy ends before


def context_copies(text: str, start: int, end: int, limit: int = LIMIT) -> list[str]:
    """Texts that follow, elsewhere in `text`, the longest tail of the hole's line before
    `start` (at most MAX_TAIL characters, not all blank) that occurs elsewhere, each cut
    where the text after the hole on its line (its first characters) begins, within that
    line, without trailing whitespace; not blank, each once, in text order, at most
    `limit`. None for a hole at its line's start."""
    return tailed_context_copies(text, start, end, limit)[0]


def tailed_context_copies(
    text: str, start: int, end: int, limit: int = LIMIT
) -> tuple[list[str], int]:
    """`context_copies`, and the length of the tail they follow (0 for none)."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    before = text[line_start:start]
    after = text[end : len(text) if line_end < 0 else line_end][:_END_CHARS]
    for size in range(min(len(before), MAX_TAIL), 0, -1):
        tail = before[-size:]
        if not tail.strip():
            continue
        found: list[str] = []
        for at in _occurrences(text, tail, start, end):
            for cut in _cuts(text, at + size, after, start if at < start else len(text)):
                copy = cut.rstrip(" \t\r")
                if copy.strip() and copy not in found:
                    found.append(copy)
        if found:
            return found[:limit], size
    return [], 0


def _occurrences(text: str, tail: str, start: int, end: int) -> list[int]:
    """Where `tail` occurs outside the hole [start, end), but where it ends at the hole."""
    out = []
    at = text.find(tail)
    while at >= 0:
        if at + len(tail) != start and (at + len(tail) <= start or at >= end):
            out.append(at)
        at = text.find(tail, at + 1)
    return out


def _cuts(text: str, at: int, after: str, stop: int) -> list[str]:
    """The text from `at` to its line's end (or `stop`, the hole, if before), or, where
    `after` is not empty, each prefix of it that `after` follows (the first three)."""
    line_end = text.find("\n", at, stop)
    rest = text[at : stop if line_end < 0 else line_end]
    if not after:
        return [rest]
    return [rest[:j] for j in range(1, len(rest) + 1) if rest.startswith(after, j)][:3]


def inline_copies(
    text: str, start: int, end: int, context: Sequence[Snippet], limit: int = LIMIT
) -> list[str]:
    """What follows, in the snippets, the longest tail of the hole's line before `start`
    (MIN_TAIL to MAX_FILE_TAIL characters) that occurs there, cut as in-file copies are
    (`context_copies`); each once, at most `limit`."""
    return tailed_inline_copies(text, start, end, context, limit)[0]


def tailed_inline_copies(
    text: str, start: int, end: int, context: Sequence[Snippet], limit: int = LIMIT
) -> tuple[list[str], int]:
    """`inline_copies`, and the length of the tail they follow (0 for none)."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    before = text[line_start:start]
    after = text[end : len(text) if line_end < 0 else line_end]
    for size in range(min(len(before), MAX_FILE_TAIL), MIN_TAIL - 1, -1):
        tail = before[-size:]
        if not tail.strip():
            continue
        found: list[str] = []
        for s in context:
            at = s.text.find(tail)
            while at >= 0 and len(found) < limit:
                for cut in _cuts(s.text, at + size, after[:_END_CHARS], len(s.text)):
                    copy = cut.rstrip(" \t\r")
                    if copy.strip() and copy not in found:
                        found.append(copy)
                at = s.text.find(tail, at + 1)
        if found:
            return found[:limit], size
    return [], 0


@dataclass(frozen=True)
class NextLines:
    """The lines that follow, elsewhere, the line before an empty line's cursor: each
    line's code (`lines`, distinct, the ones whose next line is the cursor's next line
    first), the characters of the line they follow (`key`, stripped) and how many of them
    are followed by the line that follows the cursor's line (`agree`)."""

    lines: list[str]
    key: int
    agree: int


NO_LINES = NextLines([], 0, 0)


def next_line_copies(
    text: str, at: int, context: Sequence[Snippet] = (), limit: int = LIMIT
) -> tuple[NextLines, NextLines]:
    """At a cursor `at` on a line of `text` that holds only whitespace: the code of the
    lines that follow, elsewhere in `text` and in the snippets, a line that reads as the
    last non-blank line before the cursor (stripped), indented as far from it as the
    cursor is (a line copied one level deeper after a `def`); `NO_LINES` elsewhere."""
    line_start = text.rfind("\n", 0, at) + 1
    line_end = text.find("\n", at)
    line_end = len(text) if line_end < 0 else line_end
    if text[line_start:line_end].strip():
        return NO_LINES, NO_LINES
    before = text[:line_start].split("\n")[:-1]
    prev = next((k for k in range(len(before) - 1, -1, -1) if before[k].strip()), None)
    if prev is None:
        return NO_LINES, NO_LINES
    key, step = before[prev], (at - line_start) - _indent(before[prev])
    rest = text[line_end + 1 :].split("\n")
    after = None if (j := _next_code(rest, 0)) is None else rest[j]
    own = _lines_after(text.split("\n"), key, step, after, skip=prev, limit=limit)
    found: list[tuple[str, bool]] = []
    for s in context:
        found += _lines_after(s.text.split("\n"), key, step, after, skip=-1, limit=limit)
    return _next_lines(own, key, limit), _next_lines(found, key, limit)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _next_code(lines: list[str], start: int) -> int | None:
    """The index of the first non-blank line of `lines` from `start` (None: none)."""
    return next((k for k in range(start, len(lines)) if lines[k].strip()), None)


def _lines_after(
    lines: list[str], key: str, step: int, after: str | None, skip: int, limit: int
) -> list[tuple[str, bool]]:
    """(code, whether the line after it reads as `after`) of each non-blank line after a
    line of `lines` that reads as `key` (stripped; not the line `skip`) and is indented
    `step` columns from it."""
    out: list[tuple[str, bool]] = []
    want = key.strip()
    for k, line in enumerate(lines):
        if k == skip or line.strip() != want:
            continue
        j = _next_code(lines, k + 1)
        if j is None or _indent(lines[j]) - _indent(line) != step:
            continue
        nxt = _next_code(lines, j + 1)
        agrees = after is not None and nxt is not None and lines[nxt].strip() == after.strip()
        out.append((lines[j].strip(), agrees))
        if len(out) >= 4 * limit:
            break
    return out


def _next_lines(found: list[tuple[str, bool]], key: str, limit: int) -> NextLines:
    """The distinct codes of `found`, those followed by the cursor's next line first."""
    codes = list(dict.fromkeys(c for c, a in sorted(found, key=lambda f: not f[1])))
    agree = len({c for c, a in found if a})
    return NextLines(codes[:limit], len(key.strip()), agree) if codes else NO_LINES
