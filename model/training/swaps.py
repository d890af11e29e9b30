"""Bug-shaped token swaps: the corruptions people write, for the bug-finding objective.

Random-token substitution (model/training/noising.py) teaches the model that a visible token can be
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
            lead = t[: len(t) - len(bare)]
            if _NAME.fullmatch(bare) and not keyword.iskeyword(bare):
                self.names[i] = (lead, bare)
            if bare.isdigit() and len(bare) <= 3:
                value = int(bare)
                moved = [
                    self.id_of.get(lead + str(v)) for v in {value + 1, max(0, value - 1)} - {value}
                ]
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
        # per id, what the whole-word and spacing tests read of a token's text, looked up
        # once here (the data loader's hot loop: `pick` runs on every training row)
        self._glue_first = [_gluey(t[:1]) for t in self.text]
        self._glue_last = [_gluey(t[-1:]) for t in self.text]
        self._spaced = [t.startswith(" ") for t in self.text]
        self._spaced_or_nl = [t.startswith((" ", "\n")) for t in self.text]

    def _spaced_after(self, ids: list[int], i: int) -> bool:
        return i + 1 < len(ids) and self._spaced_or_nl[ids[i + 1]]

    def candidates(self, ids: list[int], allowed: list[bool]) -> dict[str, list[tuple[int, int]]]:
        """Every swap the row allows, by kind: (position, replacement id)."""
        return {
            kind: [
                (pos, new) for pos, news, skip in sites for k, new in enumerate(news) if k != skip
            ]
            for kind, sites in self._sites(ids, allowed).items()
        }

    def negations(self, ids: list[int], allowed: list[bool]) -> list[int]:
        """Where a ` not` can be inserted as a bug: before a spaced ` in` (`x not in y`)
        or after ` is` (`x is not y`), not where the row already says `not` there."""
        if self.not_id is None:
            return []

        def spot(i: int, tid: int) -> bool:
            if not allowed[i] or (i > 0 and ids[i - 1] == self.not_id):
                return False
            before_in = tid == self._in_id and self._spaced_after(ids, i)
            after_is = (
                i > 0
                and ids[i - 1] == self._is_id
                and allowed[i - 1]
                and tid != self.not_id
                and self.text[tid].startswith(" ")
            )
            return before_in or after_is

        return [i for i, tid in enumerate(ids) if spot(i, tid)]

    def _sites(
        self, ids: list[int], allowed: list[bool]
    ) -> dict[str, list[tuple[int, list[int], int]]]:
        """`candidates` without spelling out every name swap: per kind, per position in
        order, (position, replacement ids, the one to skip or -1); a name's replacements
        are the row's names of its lead (one list shared by all of them) less its own."""
        n = len(ids)
        glue_first, glue_last, spaced = self._glue_first, self._glue_last, self._spaced

        def whole(i: int) -> bool:
            glued_before = i > 0 and not spaced[ids[i]] and glue_last[ids[i - 1]]
            return not glued_before and not (i + 1 < n and glue_first[ids[i + 1]])

        names, table, numbers = self.names, self.table, self.numbers
        name_at = [i for i, tid in enumerate(ids) if tid in names and whole(i)]
        row_names: dict[str, set[str]] = {}
        for i in name_at:
            lead, bare = names[ids[i]]
            row_names.setdefault(lead, set()).add(bare)
        # per lead: the row's names that are one token with it, in order, and where each is
        replacements: dict[str, list[int]] = {}
        place: dict[str, dict[str, int]] = {}
        for lead, bare in row_names.items():
            found = [(other, self.id_of.get(lead + other)) for other in sorted(bare)]
            kept = [(other, new) for other, new in found if new is not None]
            replacements[lead] = [new for _, new in kept]
            place[lead] = {other: k for k, (other, _) in enumerate(kept)}
        out: dict[str, list[tuple[int, list[int], int]]] = {k: [] for k in KINDS}
        name_set = set(name_at)
        for i, tid in enumerate(ids):
            if not allowed[i]:
                continue
            hit = table.get(tid)
            if hit is not None and self._spaced_after(ids, i):
                out[hit[0]].append((i, [hit[1]], -1))
                continue
            if i in name_set:
                lead, bare = names[tid]
                out["name"].append((i, replacements[lead], place[lead].get(bare, -1)))
                continue
            if tid in numbers and whole(i):
                out["number"].append((i, numbers[tid], -1))
        return out

    def pick(
        self, ids: list[int], allowed: list[bool], n: int, rng: random.Random
    ) -> list[tuple[int, int]]:
        """Up to `n` swaps at distinct positions, the kind drawn evenly among those the row
        has (so the rare operator and comparison swaps are not drowned by names), then a
        swap drawn evenly among the kind's: the draws of choosing from the full list of
        `candidates` (the same swaps for the same generator), without building it."""
        found = self._sites(ids, allowed)
        chosen: dict[int, int] = {}
        for _ in range(n):
            open_sites = {
                k: [(p, news, skip) for p, news, skip in found[k] if p not in chosen] for k in KINDS
            }
            counts = {
                k: [len(news) - (skip >= 0) for _, news, skip in sites]
                for k, sites in open_sites.items()
            }
            kinds = [k for k in KINDS if sum(counts[k])]
            if not kinds:
                break
            kind = rng.choice(kinds)
            index = rng.choice(range(sum(counts[kind])))  # the draw of rng.choice(options)
            for (pos, news, skip), count in zip(open_sites[kind], counts[kind], strict=True):
                if index < count:
                    chosen[pos] = news[index + (0 <= skip <= index)]
                    break
                index -= count
        return sorted(chosen.items())
