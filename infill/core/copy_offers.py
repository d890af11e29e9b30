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

Both are fitted on lines of the training split's files with in-file copies (the rows of
`python -m benchmarks.copy_rows`, fitted by
`python -m diffusion_infill.model.training.fit_copy_confidence`;
benchmarks/results/fit_copy_confidence.json, checked against copies from other files on the
repository set's validation packages there). The language server ranks them with the
model's fill and its runner-ups by confidence (lsp/completion.py): no pass of the model, so
no latency but the search.
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
# bias, log of the tail's characters, several distinct copies, not the first copy; the next
# line's bias, log of the characters of the line before the cursor, several distinct lines,
# the line after agrees, not the first line
WEIGHTS = (-3.819, 1.3052, -1.7303, -0.2018)
LINE_WEIGHTS = (-1.8258, 0.3726, -1.4545, 1.7773, -0.8001)
RANKS = 2  # copies offered per source at most (the completion's items are fewer)
SOURCES = ("file", "repository")
# an item's confidence from what vouches for its text (`item_confidence`), after code on
# its line and on an empty line; logistic weights on `item_features`
# (benchmarks/results/fit_copy_confidence.json, "items")
ITEM_WEIGHTS = {
    False: (-0.9598, 0.1611, 0.5759, 0.7057, 0.8599, 1.6968, -1.3907),
    True: (-2.1384, 0.716, 1.6252, 0.68, 0.8818, 4.4797, -2.0435),
}


@dataclass(frozen=True)
class OfferedCopy:
    """A copy offered at a cursor: its text, the probability that it is right, where it
    comes from ("file" or "repository")."""

    text: str
    confidence: float
    source: str


def copy_confidence(tail: int, found: int, rank: int = 0) -> float:
    """The probability that a copy following a tail of `tail` characters, the `rank`-th
    (0: the first) of `found` distinct copies after it, is the rest of the line
    (`WEIGHTS`)."""
    if tail < 1 or found < 1 or not 0 <= rank < found:
        raise ValueError(f"a copy follows a tail of 1 character or more, got {tail}, {found}")
    return _logistic(WEIGHTS, [1.0, math.log(tail), found > 1, rank > 0])


def line_confidence(found: NextLines, rank: int = 0) -> float:
    """The probability that the `rank`-th of `found` (0: the first), the lines after the
    line before an empty line's cursor, is the code of the cursor's line
    (`LINE_WEIGHTS`)."""
    if not found.lines or found.key < 1 or not 0 <= rank < len(found.lines):
        raise ValueError("a next line's copy follows a line of 1 character or more")
    x = [1.0, math.log(found.key), len(found.lines) > 1, rank < found.agree, rank > 0]
    return _logistic(LINE_WEIGHTS, x)


def completion_copies(text: str, at: int, context: Sequence[Snippet] = ()) -> list[OfferedCopy]:
    """The copies at the cursor `at` of `text`: the first `RANKS` of the file's and of
    the snippets', surest first; after code on its line the rest of it, on a line that
    holds only whitespace the line's code; none elsewhere (before code on its line)."""
    line_start = text.rfind("\n", 0, at) + 1
    line_end = text.find("\n", at)
    out = []
    if not text[line_start : len(text) if line_end < 0 else line_end].strip():
        for f, src in zip(next_line_copies(text, at, context), SOURCES, strict=True):
            out += [
                OfferedCopy(line, line_confidence(f, k), src)
                for k, line in enumerate(f.lines[:RANKS])
            ]
    elif text[line_start:at].strip():
        file = tailed_context_copies(text, at, at)
        found = [file, tailed_inline_copies(text, at, at, context)] if context else [file]
        for (copies, tail), src in zip(found, SOURCES, strict=False):
            out += [
                OfferedCopy(c, copy_confidence(tail, len(copies), k), src)
                for k, c in enumerate(copies[:RANKS])
            ]
    return sorted(out, key=lambda c: -c.confidence)


def item_features(decoded: float | None, copied: float | None, runner_up: bool) -> list[float]:
    """What vouches for a completion item's text: the confidence the model's decode gives
    it (its fill's or, `runner_up`, only a runner-up's; None: neither) and the highest of
    the copies that read as it (None: none), as the regression reads them: a bias, each
    source's presence and log-odds, both at once, a runner-up alone."""
    x = [1.0, float(decoded is not None), float(copied is not None)]
    x += [_log_odds(decoded), _log_odds(copied), float(decoded is not None and copied is not None)]
    return [*x, float(runner_up)]


def item_confidence(
    decoded: float | None, copied: float | None, runner_up: bool, empty_line: bool
) -> float:
    """The probability that a completion item is right, from `item_features` (the fill
    and a copy that agree are surer than either; a runner-up alone, less sure than its
    confidence says), with the weights of an `empty_line`'s completion or one after code
    (`ITEM_WEIGHTS`)."""
    if decoded is None and copied is None:
        raise ValueError("an item needs the decode's confidence or a copy's")
    return _logistic(ITEM_WEIGHTS[empty_line], item_features(decoded, copied, runner_up))


def _logistic(weights: Sequence[float], x: Sequence[float]) -> float:
    """sigmoid(weights . x), `x` a feature row (booleans count 0 or 1)."""
    z = sum(w * float(v) for w, v in zip(weights, x, strict=True))
    return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))


def _log_odds(p: float | None) -> float:
    if p is None:
        return 0.0
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))
