"""The canvas: one window's token ids, with the spans' slots in place of their text.

    [left context] [span 0 slots] [gap 0] [span 1 slots] ... [span n slots] [right context]

Context segments are the window's text between span edges, each encoded on its own, and
are never decoded: the engine rebuilds the result from the original text, so text outside
the spans comes back byte for byte whatever the tokenizer does at the edges. Only slots
change. A slot holds the mask id (not yet decided), the null id (no token here) or a
committed token id.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from diffusion_infill.model.denoiser import SpecialIds

Slot = tuple[int, int]  # (span index in the request, slot index in the span)

RIGHT_SHARE = 3  # `fitted`: at most 1/RIGHT_SHARE of the context comes after the middle
MASK_GLYPH = "░"  # a masked slot, in traces
NULL_GLYPH = "∅"  # a null slot, in traces


@dataclass
class SpanSlots:
    """The slots of one span on a canvas."""

    index: int  # the span's index in the request (spans sorted by position)
    ids: list[int]  # one per slot: mask id, null id or a committed token id
    cap: int  # the most slots this span may grow to
    exact: bool  # exactly len(ids) tokens: null forbidden, never grown
    can_grow: bool = True  # False once the canvas had no room left to grow it
    forbidden: tuple[int, ...] = ()  # ids the span may not take (a string's closing quote)
    raced: bool = False  # its length is the model's to choose: shorter allocations may race
    min_breaks: int = 0  # line breaks its fill holds before it may end (a selection of lines)
    breaks: frozenset[int] = frozenset()  # the ids that hold a line break (with min_breaks)
    first: tuple[int, ...] = ()  # the ids its first slot may take (a word's head: word_starts.py)

    def may_end(self, j: int) -> bool:
        """Whether the fill may end at slot j (a null there): never in an exact span; in a
        selection over k lines, only after the k - 1 line breaks its first k lines hold
        (a committed token that holds a line break counts one)."""
        if self.exact:
            return False
        return not self.min_breaks or (
            sum(t in self.breaks for t in self.ids[:j]) >= self.min_breaks
        )


@dataclass
class Canvas:
    """One forward pass's worth of ids. `left` is trimmed from its start and `right` from
    its end when a growing span needs room: context far from the spans goes first."""

    left: list[int]
    spans: list[SpanSlots]
    gaps: list[list[int]]  # context between span k and span k+1
    right: list[int]
    budget: int  # the most ids the canvas may hold
    trimmed: int = field(default=0)  # context tokens dropped to make room for growth

    def __post_init__(self) -> None:
        if len(self.gaps) != len(self.spans) - 1:
            raise ValueError("a canvas needs one gap between each pair of spans")

    def __len__(self) -> int:
        return (
            len(self.left)
            + len(self.right)
            + sum(len(g) for g in self.gaps)
            + sum(len(s.ids) for s in self.spans)
        )

    def ids(self) -> list[int]:
        out = list(self.left)
        for k, span in enumerate(self.spans):
            out += span.ids
            if k < len(self.gaps):
                out += self.gaps[k]
        out += self.right
        return out

    def offsets(self) -> list[int]:
        """Canvas position of each span's first slot."""
        pos = len(self.left)
        out = []
        for k, span in enumerate(self.spans):
            out.append(pos)
            pos += len(span.ids) + (len(self.gaps[k]) if k < len(self.gaps) else 0)
        return out

    def with_spans(self, spans: list[SpanSlots]) -> Canvas:
        """A canvas of this one's context (copied) around `spans` instead of its own."""
        return Canvas(
            list(self.left), spans, [list(g) for g in self.gaps], list(self.right), self.budget
        )

    def make_room(self, n: int) -> int:
        """Free up to `n` positions, trimming outer context if needed; return how many
        positions may be added (possibly fewer than n, possibly 0)."""
        short = n - (self.budget - len(self))
        while short > 0 and (self.left or self.right):
            if len(self.left) >= len(self.right):
                take = min(short, len(self.left))
                del self.left[:take]
            else:
                take = min(short, len(self.right))
                del self.right[len(self.right) - take :]
            short -= take
            self.trimmed += take
        return max(0, min(n, self.budget - len(self)))


def fill_ids(ids: Sequence[int], special: SpecialIds) -> list[int]:
    """The tokens of a span's fill: slots without nulls (and masks, if any are left)."""
    return [t for t in ids if t != special.null and t != special.mask]


def render(ids: Sequence[int], special: SpecialIds, decode: Callable[[list[int]], str]) -> str:
    """A span's slots as text: runs of tokens decoded together (so multi-byte characters
    split over tokens read right), `░` per masked slot, `∅` per null slot."""
    out: list[str] = []
    run: list[int] = []
    for t in ids:
        if t == special.mask or t == special.null:
            if run:
                out.append(decode(run))
                run = []
            out.append(MASK_GLYPH if t == special.mask else NULL_GLYPH)
        else:
            run.append(t)
    if run:
        out.append(decode(run))
    return "".join(out)


def fitted(
    left: Sequence[int], middle: Sequence[int], right: Sequence[int], max_length: int
) -> tuple[list[int], int]:
    """`left + middle + right` cut to `max_length` ids: the right kept up to
    1/RIGHT_SHARE of the room the middle leaves, the left's end filling the rest; and
    where the middle starts. A one-off canvas for a single pass (a probe, a score), not
    a window's."""
    room = max_length - len(middle)
    right = list(right[: room // RIGHT_SHARE])
    left = list(left[max(0, len(left) - (room - len(right))) :])
    return left + list(middle) + right, len(left)
