"""Bug-shaped token swaps: the corruptions people write, for the bug-finding objective.

Random-token substitution (model/noising.py) teaches the model that a visible token can be
wrong, but a token drawn from anywhere in the batch is easy to spot. The bugs the fixer
must find are subtle: a name swapped for another name of the same window, `+` for `-`,
`<` for `>=`, `n` for `n + 1`. `PlausibleSwaps` makes those at the token level, on clean
positions of a training row, with the original token as the target:

- name: a whole-word identifier replaced by another whole-word identifier of the row;
- operator: ` +` ` -` ` *` ` /` ` and` ` or` swapped, spaced both sides (binary use);
- comparison: ` <` -> ` >=`, ` ==` -> ` !=`, ... (the negation), spaced both sides;
- number: a whole-word integer of at most three digits moved by one.

A swap is made only where the replacement is itself one token with the same leading
space, so the row keeps its length and every other token its place.

One more kind changes the row's length: a negation, ` not` written where it does not
belong (`x in y` read as `x not in y`, `x is y` as `x is not y`), the commonest comparison
bug that no one-token swap makes. `negations` lists where one can be inserted; the
inserted token's target is `<null>` ("no token here", as at a fill's tail), so the fixer
reads a confident null on a written token as "delete it" (infill/core/repair.py).
"""

from __future__ import annotations

import keyword
import random
import re

from tokenizers import Tokenizer

OPERATORS = {"+": "-", "-": "+", "*": "/", "/": "*", "and": "or", "or": "and"}
COMPARISONS = {"<": ">=", ">": "<=", "<=": ">", ">=": "<", "==": "!=", "!=": "=="}
KINDS = ("name", "operator", "comparison", "number")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _gluey(c: str) -> bool:
    """A character that joins the token beside it into one word (or an attribute)."""
    return c != "" and (c.isalnum() or c in "_.")


class PlausibleSwaps:
    """Swap tables of one tokenizer, and `pick` to choose the swaps of one row."""

    def __init__(self, tok: Tokenizer) -> None:
        size = tok.get_vocab_size()
        self.text = [tok.decode([i]) for i in range(size)]
        self.id_of: dict[str, int] = {}
        for i, t in enumerate(self.text):
            self.id_of.setdefault(t, i)
        # id -> (lead, bare) for tokens that are a lead of at most one space and a name
        self.names: dict[int, tuple[str, str]] = {}
        self.table: dict[int, tuple[str, int]] = {}  # id -> (kind, replacement id)
        self.numbers: dict[int, list[int]] = {}  # id -> the ids of its value moved by one
        for i, t in enumerate(self.text):
            bare = t[1:] if t.startswith(" ") else t
            lead = t[:len(t) - len(bare)]
            if _NAME.fullmatch(bare) and not keyword.iskeyword(bare):
                self.names[i] = (lead, bare)
            if bare.isdigit() and len(bare) <= 3:
                value = int(bare)
                moved = [self.id_of.get(lead + str(v))
                         for v in {value + 1, max(0, value - 1)} - {value}]
                self.numbers[i] = [m for m in moved if m is not None]
            if lead != " ":
                continue
            for kind, table in (("operator", OPERATORS), ("comparison", COMPARISONS)):
                new = self.id_of.get(" " + table.get(bare, "\0"))
                if new is not None:
                    self.table[i] = (kind, new)
        # " not", " in", " is" (None where the vocabulary splits them: no negations)
        self.not_id = self.id_of.get(" not")
        self._in_id, self._is_id = self.id_of.get(" in"), self.id_of.get(" is")

    def _whole_word(self, ids: list[int], i: int) -> bool:
        """Token i is not glued to a word (or a dot) on either side."""
        before = self.text[ids[i - 1]][-1:] if i > 0 else ""
        after = self.text[ids[i + 1]][:1] if i + 1 < len(ids) else ""
        glued_before = not self.text[ids[i]].startswith(" ") and _gluey(before)
        return not glued_before and not _gluey(after)

    def _spaced_after(self, ids: list[int], i: int) -> bool:
        return i + 1 < len(ids) and self.text[ids[i + 1]].startswith((" ", "\n"))

    def candidates(self, ids: list[int], allowed: list[bool]) -> dict[str, list[tuple[int, int]]]:
        """Every swap the row allows, by kind: (position, replacement id)."""
        out: dict[str, list[tuple[int, int]]] = {k: [] for k in KINDS}
        row_names: dict[str, set[str]] = {}
        for i, tid in enumerate(ids):
            if tid in self.names and self._whole_word(ids, i):
                lead, bare = self.names[tid]
                row_names.setdefault(lead, set()).add(bare)
        for i, tid in enumerate(ids):
            if not allowed[i]:
                continue
            hit = self.table.get(tid)
            if hit is not None and self._spaced_after(ids, i):
                out[hit[0]].append((i, hit[1]))
                continue
            if tid in self.names and self._whole_word(ids, i):
                lead, bare = self.names[tid]
                for other in sorted(row_names.get(lead, ())):
                    new = self.id_of.get(lead + other)
                    if other != bare and new is not None:
                        out["name"].append((i, new))
                continue
            if tid in self.numbers and self._whole_word(ids, i):
                out["number"] += [(i, new) for new in self.numbers[tid]]
        return out

    def negations(self, ids: list[int], allowed: list[bool]) -> list[int]:
        """Where a ` not` can be inserted as a bug: before a spaced ` in` (`x not in y`)
        or after ` is` (`x is not y`), not where the row already says `not` there."""
        if self.not_id is None:
            return []
        def spot(i: int, tid: int) -> bool:
            if not allowed[i] or (i > 0 and ids[i - 1] == self.not_id):
                return False
            before_in = tid == self._in_id and self._spaced_after(ids, i)
            after_is = (i > 0 and ids[i - 1] == self._is_id and allowed[i - 1]
                        and tid != self.not_id and self.text[tid].startswith(" "))
            return before_in or after_is

        return [i for i, tid in enumerate(ids) if spot(i, tid)]

    def pick(self, ids: list[int], allowed: list[bool], n: int, rng: random.Random
             ) -> list[tuple[int, int]]:
        """Up to `n` swaps at distinct positions, the kind drawn evenly among those the row
        has (so the rare operator and comparison swaps are not drowned by names)."""
        found = self.candidates(ids, allowed)
        chosen: dict[int, int] = {}
        for _ in range(n):
            kinds = [k for k in KINDS if any(p not in chosen for p, _ in found[k])]
            if not kinds:
                break
            options = [(p, new) for p, new in found[rng.choice(kinds)] if p not in chosen]
            pos, new = rng.choice(options)
            chosen[pos] = new
        return sorted(chosen.items())
