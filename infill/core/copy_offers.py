"""Copies offered at a completion: what follows the line's code elsewhere, and how sure.

A user typing `price = compute_total(items, ` has often written the rest before, in this
file or another of the package. A completion at a cursor after code on its line gets the
text after the longest tail of the line before the cursor found elsewhere, in the file
(`context_copies`) and in the snippets of other files (`inline_copies`; both in
infill/core/copy_texts.py), each with the calibrated probability that
it is the rest of the line (`confidence`). The language server ranks them with the
model's fill and its runner-ups by confidence (lsp/completion.py): no pass of the model,
so no latency but the search.

The probability is a logistic regression on the tail's length (log characters) and
whether the tail is followed by several distinct texts, fitted on mid-line cuts of the
training split's files with in-file copies (`python -m benchmarks.fit_copy_confidence`,
benchmarks/results/fit_copy_confidence.json; checked against copies from other files on
the repository set's validation packages there).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from diffusion_infill.infill.core.copy_texts import tailed_context_copies, tailed_inline_copies
from diffusion_infill.infill.core.snippets import Snippet

# logistic weights: bias, log of the tail's characters, several distinct copies
# (benchmarks/results/fit_copy_confidence.json)
WEIGHTS = (-3.851, 1.3173, -1.7309)


@dataclass(frozen=True)
class OfferedCopy:
    """A copy offered at a cursor: its text, the characters of the line before the
    cursor it follows, how many distinct copies follow them, where it comes from."""

    text: str
    tail: int
    found: int
    source: str  # "file" or "repository"

    @property
    def confidence(self) -> float:
        return copy_confidence(self.tail, self.found)


def copy_confidence(tail: int, found: int) -> float:
    """The probability that a copy following a tail of `tail` characters, one of `found`
    distinct copies after it, is the rest of the line (`WEIGHTS`)."""
    if tail < 1 or found < 1:
        raise ValueError(f"a copy follows a tail of 1 character or more, got {tail}, {found}")
    bias, per_log_char, several = WEIGHTS
    z = bias + per_log_char * math.log(tail) + several * (found > 1)
    return 1.0 / (1.0 + math.exp(-z))


def completion_copies(text: str, at: int, context: Sequence[Snippet] = ()) -> list[OfferedCopy]:
    """The copies at the cursor `at` of `text` (a completion: code before it on its line),
    the first of the file's and the first of the snippets', surest first; none at a line's
    start."""
    line_start = text.rfind("\n", 0, at) + 1
    if not text[line_start:at].strip():
        return []
    out = []
    found, tail = tailed_context_copies(text, at, at)
    if found:
        out.append(OfferedCopy(found[0], tail, len(found), "file"))
    if context:
        found, tail = tailed_inline_copies(text, at, at, context)
        if found:
            out.append(OfferedCopy(found[0], tail, len(found), "repository"))
    return sorted(out, key=lambda c: -c.confidence)
