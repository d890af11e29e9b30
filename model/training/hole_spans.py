"""Where the training holes are cut: one to three character spans of a text, each a line's
code after its indentation, part of a line (at random characters, or where an editor cuts:
a bracket pair's contents, a run of whole words), or 2-8 whole lines
(model/training/noising.py builds the variable-length holes on them)."""

from __future__ import annotations

import random
import re

_CLOSERS = {"(": ")", "[": "]", "{": "}"}
_PIECE = re.compile(r"\w+|[^\w\s]+")  # a word or a run of operator characters


def editor_span(text: str, s: int, e: int, rng: random.Random) -> tuple[int, int] | None:
    """An editor-shaped hole inside the line text[s:e], with code after it on the line:
    the contents of a bracket pair (a call's arguments, a subscript, a literal), else a
    run of whole words and operators that stops before the line's last one. None when the
    line has neither."""
    line = text[s:e]
    pairs, stack = [], []
    for i, ch in enumerate(line):
        if ch in _CLOSERS:
            stack.append((ch, i))
        elif ch in _CLOSERS.values():
            if stack and _CLOSERS[stack[-1][0]] == ch:
                a = stack.pop()[1] + 1
                if line[a:i].strip():
                    pairs.append((s + a, s + i))
            else:
                stack.clear()
    if pairs and rng.random() < 0.6:
        return rng.choice(pairs)
    pieces = [(m.start(), m.end()) for m in _PIECE.finditer(line)]
    if len(pieces) < 3:
        return None
    i = rng.randrange(1, len(pieces) - 1)
    j = rng.randrange(i, min(len(pieces) - 1, i + 6))
    return s + pieces[i][0], s + pieces[j][1]


def line_spans(
    text: str, limit: int, rng: random.Random, inline: float = 0.0, inline_span: float = 0.0
) -> list[tuple[int, int]]:
    """One to three non-overlapping character spans inside text[:limit]; `inline`: the
    share of part-of-line spans cut as an editor cuts them (`editor_span`);
    `inline_span`: the share of all spans first tried as such a cut."""
    lines: list[tuple[int, int]] = []  # (start, end) of each line's content, no newline
    pos = 0
    while pos < limit:
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        if end > limit:
            break
        lines.append((pos, end))
        pos = end + 1
    candidates = [i for i, (s, e) in enumerate(lines) if text[s:e].strip()]
    if not candidates:
        return []
    count = rng.choices([1, 2, 3], weights=[0.6, 0.25, 0.15])[0]
    spans: list[tuple[int, int]] = []
    for _ in range(count):
        i = rng.choice(candidates)
        s, e = lines[i]
        indent = len(text[s:e]) - len(text[s:e].lstrip())
        # no draw when off, as for `inline` below
        span = (
            editor_span(text, s + indent, e, rng)
            if inline_span and rng.random() < inline_span
            else None
        )
        if span is None:
            span = span_of_kind(text, lines, i, indent, rng, inline)
        if all(span[1] <= a or span[0] >= b for a, b in spans) and span[0] < span[1]:
            spans.append(span)
    return sorted(spans)


def span_of_kind(
    text: str, lines: list[tuple[int, int]], i: int, indent: int, rng: random.Random, inline: float
) -> tuple[int, int]:
    """A span on line i: its content, part of it, or it and up to 7 lines after it."""
    s, e = lines[i]
    kind = rng.random()
    if kind < 0.45:  # a line's content after its indentation
        return s + indent, e
    if kind < 0.75:  # part of a line (a completion at the cursor, a rewritten call)
        # no draw when off: the validation batches (and old recipes) keep their stream
        shaped = editor_span(text, s + indent, e, rng) if inline and rng.random() < inline else None
        if shaped is not None:
            return shaped
        a = rng.randint(s + indent, e - 1)  # cut at random characters
        b = rng.randint(a + 1, e) if rng.random() < 0.5 else e
        return a, b
    # 2-8 whole lines from the first one's indentation
    j = min(len(lines) - 1, i + rng.randint(1, 7))
    return s + indent, lines[j][1]
