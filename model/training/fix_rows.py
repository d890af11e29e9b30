"""Training rows shaped like real fixes, for the bug-finding objective.

Bug-shaped swaps (model/training/swaps.py) teach the fixer the bugs people could write; the
lines a package's next release changed are the bugs they did write. A fix pair is a window
of an older release of a training package around one line that the next release changed
(model/training/fix_pairs.py builds them): the text before the line, the line as it was,
the line as released next, and the text after it.

`fix_example` makes a row of it: the window with the old line in view, every token clean,
and targets only where the old line's tokens differ from the new line's (token ids
aligned by difflib): a replaced token's target is the new token at the same offset, or
`<null>` ("no token here", as for an inserted ` not`) past the new tokens' end; a deleted
token's is `<null>`; where tokens are only inserted, the token they go before is targeted
at the first of them. So one pass over a clean buffer learns to read the old line's
changed tokens as unlikely, which is how the fixer ranks lines.
"""

from __future__ import annotations

import difflib
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer

FIX_WEIGHT = 1.0  # a changed token's loss weight (a swap's: 1.0)


@dataclass(frozen=True)
class FixPair:
    before: str  # the window's whole lines before the changed line
    old: str  # the line as it was, indentation kept, no line break
    new: str  # the line as the next release has it
    after: str  # the rest of the window, from the changed line's line break on


def pair_of(record: dict) -> FixPair:
    """The pair of a record of real fixes (model/training/corpus/release_diffs.py's fields)."""
    lines = record["window"].split("\n")
    k = record["window_line"]
    if lines[k] != record["buggy_line"]:
        raise ValueError(f"window line {k} is not the record's buggy line")
    before = "".join(f"{line}\n" for line in lines[:k])
    after = "\n" + "\n".join(lines[k + 1 :]) if k + 1 < len(lines) else ""
    return FixPair(before, record["buggy_line"], record["fixed_line"], after)


def load_fix_pairs(path: Path) -> list[FixPair]:
    """The pairs of a .jsonl file of fix records."""
    with path.open() as fh:
        return [pair_of(json.loads(line)) for line in fh if line.strip()]


def line_targets(old: list[int], new: list[int], null: int) -> dict[int, int]:
    """Offsets into `old` whose token the fix changes, and each one's target."""
    out: dict[int, int] = {}
    ops = difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal":
            continue
        if tag == "insert":
            out.setdefault(i1, new[j1])
            continue
        for k in range(i2 - i1):
            out[i1 + k] = new[j1 + k] if j1 + k < j2 else null
    return out


def fix_example(
    pair: FixPair, tok: Tokenizer, seq_len: int, null: int, rng: random.Random
) -> tuple[list[int], list[int], list[float]] | None:
    """(input ids, targets, weights) of one fix row of at most `seq_len` tokens, the
    changed line inside it; None where the lines tokenize alike."""
    before, old = tok.encode(pair.before).ids, tok.encode(pair.old).ids
    after, new = tok.encode(pair.after).ids, tok.encode(pair.new).ids
    changed = line_targets(old, new, null)
    changed = {k: t for k, t in changed.items() if k < len(old) or after}
    if not changed or len(old) >= seq_len:
        return None
    ids = before + old + after
    targets, weights = list(ids), [0.0] * len(ids)
    for k, t in changed.items():
        targets[len(before) + k] = t
        weights[len(before) + k] = FIX_WEIGHT
    room = seq_len - len(old)
    lo = max(0, len(before) - rng.randint(0, room))
    lo = min(lo, max(0, len(ids) - seq_len))
    return ids[lo : lo + seq_len], targets[lo : lo + seq_len], weights[lo : lo + seq_len]


def draw_fix(pairs: Sequence[FixPair], rng: random.Random) -> FixPair:
    return pairs[rng.randrange(len(pairs))]
