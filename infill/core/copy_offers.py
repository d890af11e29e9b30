"""Copies offered at a completion: what follows the code before the cursor elsewhere,
and how sure.

A user typing `price = compute_total(items, ` has often written the rest before, in this
file or another of the package; a user who opens a line after `def __init__(self):` has
often written the line that follows it before. So a completion gets, from the file and
from the snippets of other files, with the calibrated probability that each is right
(`OfferedCopy.confidence`):

- after code on its line: the text after the longest tail of the line before the cursor
  found elsewhere (`context_copies`, `inline_copies`; infill/core/copy_texts.py); the
  probability is a logistic regression on the tail's length (log characters) and whether
  several distinct texts follow it (`WEIGHTS`);
- on an empty line: the code of the line after a line that reads as the one before the
  cursor, indented as the cursor is (`next_line_copies`); the probability, on that line's
  length, whether several distinct lines follow it and whether the line after the copy
  reads as the line after the cursor's: the code after the hole agrees
  (`LINE_WEIGHTS`).

Both are fitted on lines of the training split's files with in-file copies
(`python -m benchmarks.fit_copy_confidence`, benchmarks/results/fit_copy_confidence.json;
checked against copies from other files on the repository set's validation packages
there). The language server ranks them with the model's fill and its runner-ups by
confidence (lsp/completion.py): no pass of the model, so no latency but the search.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from diffusion_infill.infill.core.copy_texts import (
    NextLines,
    next_line_copies,
    tailed_context_copies,
    tailed_inline_copies,
)
from diffusion_infill.infill.core.snippets import Snippet

# logistic weights (benchmarks/results/fit_copy_confidence.json): the rest of a line's
# bias, log of the tail's characters, several distinct copies; the next line's bias, log
# of the characters of the line before the cursor, several distinct lines, the line after
# agrees
WEIGHTS = (-3.851, 1.3173, -1.7309)
LINE_WEIGHTS = (-2.0587, 0.4322, -1.5038, 1.9604)


@dataclass(frozen=True)
class OfferedCopy:
    """A copy offered at a cursor: its text, the probability that it is right, where it
    comes from ("file" or "repository")."""

    text: str
    confidence: float
    source: str


def copy_confidence(tail: int, found: int) -> float:
    """The probability that a copy following a tail of `tail` characters, one of `found`
    distinct copies after it, is the rest of the line (`WEIGHTS`)."""
    if tail < 1 or found < 1:
        raise ValueError(f"a copy follows a tail of 1 character or more, got {tail}, {found}")
    bias, per_log_char, several = WEIGHTS
    z = bias + per_log_char * math.log(tail) + several * (found > 1)
    return 1.0 / (1.0 + math.exp(-z))


def line_confidence(found: NextLines) -> float:
    """The probability that the first of `found`, the lines after the line before an
    empty line's cursor, is the code of the cursor's line (`LINE_WEIGHTS`)."""
    if not found.lines or found.key < 1:
        raise ValueError("a next line's copy follows a line of 1 character or more")
    bias, per_log_char, several, agrees = LINE_WEIGHTS
    z = bias + per_log_char * math.log(found.key) + several * (len(found.lines) > 1)
    z += agrees * (found.agree > 0)
    return 1.0 / (1.0 + math.exp(-z))


def completion_copies(text: str, at: int, context: Sequence[Snippet] = ()) -> list[OfferedCopy]:
    """The copies at the cursor `at` of `text`: the first of the file's and the first of
    the snippets', surest first; after code on its line the rest of it, on a line that
    holds only whitespace the line's code; none elsewhere (before code on its line)."""
    line_start = text.rfind("\n", 0, at) + 1
    line_end = text.find("\n", at)
    if not text[line_start : len(text) if line_end < 0 else line_end].strip():
        lines = zip(next_line_copies(text, at, context), ("file", "repository"), strict=True)
        out = [OfferedCopy(f.lines[0], line_confidence(f), src) for f, src in lines if f.lines]
        return sorted(out, key=lambda c: -c.confidence)
    if not text[line_start:at].strip():
        return []
    out = []
    found, tail = tailed_context_copies(text, at, at)
    if found:
        out.append(OfferedCopy(found[0], copy_confidence(tail, len(found)), "file"))
    if context:
        found, tail = tailed_inline_copies(text, at, at, context)
        if found:
            out.append(OfferedCopy(found[0], copy_confidence(tail, len(found)), "repository"))
    return sorted(out, key=lambda c: -c.confidence)
