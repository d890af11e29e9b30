"""Minimal edits and unified diffs (difflib, standard library).

Offsets are characters (Python str indices) of the ORIGINAL text, the one that holds the
hole markers. A hole's marker always goes, so a hole gives one edit replacing the marker
by its fill. A rewritten range is compared with its fill: lines that did not change give
no edit, and inside a changed block of lines only the changed characters are replaced
(a fill equal to the old text gives no edit at all).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# Equal runs shorter than this between two changes are folded into one edit, so that
# `count` -> `total` is one replacement rather than edits around a shared `t`.
_MIN_KEEP = 3
# Character-level matching is quadratic; above this product of lengths a changed line
# block is replaced whole.
_MAX_CHAR_WORK = 4_000_000


@dataclass(frozen=True, order=True)
class Edit:
    """Replace original characters [start, end) by `new_text`."""

    start: int
    end: int
    new_text: str


def _lines(text: str) -> list[str]:
    """Lines with their "\\n" (split at "\\n" only, as `patch` does; "\\r" stays put)."""
    return re.findall(r"[^\n]*\n|[^\n]+", text)


def _char_edits(old: str, new: str, base: int) -> list[Edit]:
    if len(old) * len(new) > _MAX_CHAR_WORK:
        return [Edit(base, base + len(old), new)]
    ops = [op for op in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()]
    edits: list[Edit] = []
    group: list[tuple[str, int, int, int, int]] = []

    def flush() -> None:
        if group:
            a0, b0 = group[0][1], group[0][3]
            a1, b1 = group[-1][2], group[-1][4]
            edits.append(Edit(base + a0, base + a1, new[b0:b1]))
            group.clear()

    for op in ops:
        tag, a0, a1, _, _ = op
        if tag == "equal":
            if a1 - a0 >= _MIN_KEEP or not group:
                flush()
                continue
            group.append(op)  # a short equal run inside a change: folded in
        else:
            group.append(op)
    while group and group[-1][0] == "equal":
        group.pop()
    flush()
    return edits


def region_edits(original: str, start: int, end: int, new: str, *, minimise: bool) -> list[Edit]:
    """Edits that turn original[start:end] into `new`: one replacement (without the blanks
    and line breaks that end both), or (minimise) only the changed characters of the
    changed lines."""
    old = original[start:end]
    if not minimise:
        # a whole-line hole's fill ends as its line did: the edit leaves that be
        while old and new and old[-1] == new[-1] and old[-1] in " \t\r\n\f\v":
            old, new, end = old[:-1], new[:-1], end - 1
        return [Edit(start, end, new)]
    if old == new:
        return []
    a, b = _lines(old), _lines(new)
    a_offsets = [0]
    for line in a:
        a_offsets.append(a_offsets[-1] + len(line))
    edits: list[Edit] = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        edits += _char_edits("".join(a[i1:i2]), "".join(b[j1:j2]), start + a_offsets[i1])
    return edits


def minimal_edits(original: str, replacements: Iterable[tuple[int, int, str, bool]]) -> list[Edit]:
    """Edits for (start, end, new text, minimise) replacements of `original`, sorted."""
    edits: list[Edit] = []
    for start, end, new, minimise in replacements:
        edits += region_edits(original, start, end, new, minimise=minimise)
    return sorted(edits)


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    """`text` with `edits` applied (they must not overlap)."""
    out: list[str] = []
    pos = 0
    for e in sorted(edits):
        if e.start < pos or e.end < e.start or e.end > len(text):
            raise ValueError(f"overlapping or out-of-range edit: {e}")
        out.append(text[pos : e.start])
        out.append(e.new_text)
        pos = e.end
    out.append(text[pos:])
    return "".join(out)


def unified_diff(original: str, new: str, path: str = "file", *, context: int = 3) -> str:
    """A unified diff (`a/path` -> `b/path`) that `patch -p1` or `git apply` accepts; empty
    when nothing changed. A last line without a newline is marked as such."""
    if original == new:
        return ""
    out: list[str] = []
    for line in difflib.unified_diff(
        _lines(original), _lines(new), f"a/{path}", f"b/{path}", n=context
    ):
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)
