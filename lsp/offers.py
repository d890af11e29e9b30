"""What a completion offers: its items, each shaped as offered (`shape`: one line, or on
an empty line up to its first blank line), and typing through the first.

The items (`completion_items`) are the fill, its runner-ups (infill/core/rated.py) and the
copies at the cursor (infill/core/copy_offers.py), as the server shapes them, each
distinct text once with the probability that it is right from what vouches for it (the
decode's confidence and the copies that read as it: a fill a copy agrees with is surer
than either alone), surest first, none below `completionMinConfidence`: the model is
silent where it is unsure, and a client that cycles through inline suggestions (VS Code;
the Neovim plugin's next/previous keys) shows the others. A runner-up's confidence is read
off its fill's decode and is never above its fill's (docs/log/architecture.md,
"Confidence", "Agreeing copies").

Typing through a completion: the user types what the last completion offered.

When the characters typed since a document's last completion, at its cursor and nothing
else changed, are the start of what it offered, the rest of that offer is the answer at
once, without the model: the suggestion the user is reading stays as it is (no flicker to
another guess) and keeps up with any typing speed. Anything else (a character the offer
did not have, a deletion, an edit elsewhere, the cursor moved, all of the offer typed)
asks the model again.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from diffusion_infill.infill.core.copy_offers import OfferedCopy, item_confidence
from diffusion_infill.infill.core.results import SpanFill
from diffusion_infill.lsp.positions import LINE_BREAK
from diffusion_infill.lsp.settings import Settings

# A line break followed by a line of spaces and tabs alone and its line break.
_BLANK_LINE = re.compile(r"(?:\r\n|\r(?!\n)|\n)[ \t]*(?:\r\n|\r(?!\n)|\n)")


@dataclass(frozen=True)
class Offer:
    """A completion offered: the document's text and cursor when it was asked, and the
    text offered there."""

    text: str
    at: int
    fill: str
    multiline: bool


Item = tuple[str, float | None]  # an offer and its confidence (None: not known)
# a copy at an empty line this sure on its own is the answer without the model's fill:
# on validation empty lines of the repository set, every such cursor's top item was the
# copy's with the fill as without it (docs/log/architecture.md, "Sure copies")
SURE_LINE = 0.35
# an empty line's fill that no copy reads as is offered at no floor above this: as an item
# on its own (fill or runner-up), the highest confidence it got on validation empty lines
# was 0.105 on 400 of the corpus and 0.08 on 400 of the repository set
# (docs/log/architecture.md, "An empty line no copy reads on", "One line for a copy")
LONE_LINE = 0.2


def ranked(candidates: Sequence[Item], floor: float, limit: int) -> list[Item]:
    """The offers of `candidates` ("" for none) with their confidences, surest first (one
    without a confidence, a model without confidence weights, first), distinct, at most
    `limit`, none whose confidence is below `floor`."""
    out: list[Item] = []
    for text, confidence in sorted(candidates, key=lambda c: -(c[1] if c[1] is not None else 2.0)):
        fresh = text.strip() and all(text != t for t, _ in out)
        if fresh and (confidence is None or confidence >= floor):
            out.append((text, confidence))
    return out[:limit]


def shape(text: str, *, multiline: bool, at_line_end: bool) -> str:
    """The fill as offered: one line (cut at the first line break) unless multi-line, and
    a multi-line one ends at its first blank line (a block ends there; past it the model
    guesses at the next one, and the last of its few passes commits every slot still
    masked, mostly as line breaks: offers of 14 lines on average, half of them with runs
    of blank lines, before this cut); trailing whitespace dropped when nothing follows on
    the line; "" when only whitespace is left."""
    if not multiline:
        m = LINE_BREAK.search(text)
        if m is not None:
            text = text[: m.start()]
    else:
        m = _BLANK_LINE.search(text)
        if m is not None:
            text = text[: m.start()]
        text = text.rstrip(" \t\r\n")
    if at_line_end:
        text = text.rstrip(" \t")
    return text if text.strip() else ""


def offered(
    shape: Callable[[str], str],
    fill: SpanFill | None,
    s: Settings,
    copies: Sequence[OfferedCopy] = (),
    empty_line: bool = False,
) -> list[Item]:
    """The items of a completion's `fill`, its runner-ups and the `copies` at its cursor,
    each as `shape` offers it ("" for nothing), ranked (`completion_items`)."""
    own = ups = None
    if fill is not None and fill.rejected is None:
        own = (shape(fill.text), fill.confidence)
        ups = [(shape(r.text), r.confidence) for r in fill.runner_ups]
    found = [(shape(c.text), c.confidence) for c in copies]
    floor, limit = s.completion_min_confidence, s.completion_items
    return completion_items(own, ups or [], found, empty_line, floor, limit)


def answers_alone(copies: Sequence[OfferedCopy], empty_line: bool) -> bool:
    """Whether a copy at an empty line's cursor is sure enough (SURE_LINE) on its own to
    be offered without asking the model."""
    alone = (item_confidence(None, c.confidence, False, True) for c in copies)
    return empty_line and any(p >= SURE_LINE for p in alone)


def one_line_enough(empty_line: bool, s: Settings) -> bool:
    """Whether an empty line's completion need only be decoded as one line: above a
    `completionMinConfidence` of LONE_LINE, a fill there is shown only where a copy reads
    as it (alone it never got that sure), and copies are lines; with no copy, not at all."""
    return empty_line and s.completion_min_confidence > LONE_LINE


def completion_items(
    fill: Item | None,
    runner_ups: Sequence[Item],
    copies: Sequence[Item],
    empty_line: bool,
    floor: float,
    limit: int,
) -> list[Item]:
    """A completion's items (`ranked`): each distinct text of its `fill`, `runner_ups` and
    `copies` with the probability that it is right from what vouches for it (`vouching`,
    copy_offers.py `item_confidence`). Without the decode's confidence (a model without
    confidence weights) the fill and its runner-ups come first, then the copies by theirs."""
    if fill is not None and fill[1] is None:
        return ranked([fill, *runner_ups, *copies], floor, limit)
    items = [
        (v.text, item_confidence(v.decoded, v.copied, v.runner_up, empty_line))
        for v in vouching(fill, runner_ups, copies)
    ]
    return ranked(items, floor, limit)


@dataclass(frozen=True)
class Vouched:
    """A distinct text a completion could offer and what vouches for it: the confidence
    the decode gives it (the fill's, or a runner-up's, never above the fill's; None:
    neither), the surest copy that reads as it (None: none), and whether only a runner-up
    gives it."""

    text: str
    decoded: float | None
    copied: float | None
    runner_up: bool


def vouching(
    fill: Item | None, runner_ups: Sequence[Item], copies: Sequence[Item]
) -> list[Vouched]:
    """Each distinct text (stripped; none blank) of `fill`, `runner_ups` and `copies`, in
    that order of first appearance, with what vouches for it (`Vouched`)."""
    cap = fill[1] if fill is not None else None
    decoded = [(fill, False)] if fill is not None else []
    decoded += [((t, _at_most(c, cap)), True) for t, c in runner_ups]
    out: dict[str, Vouched] = {}
    for (text, confidence), runner_up in decoded:
        v = out.get(text.strip())
        if v is None:
            out[text.strip()] = Vouched(text, confidence, None, runner_up)
        elif confidence is not None:
            sure = confidence if v.decoded is None else max(v.decoded, confidence)
            out[text.strip()] = replace(v, decoded=sure, runner_up=v.runner_up and runner_up)
    for text, confidence in copies:
        v = out.get(text.strip())
        if v is None:
            out[text.strip()] = Vouched(text, None, confidence, False)
        elif confidence is not None:
            sure = confidence if v.copied is None else max(v.copied, confidence)
            out[text.strip()] = replace(v, copied=sure)
    return [v for key, v in out.items() if key]


def _at_most(confidence: float | None, cap: float | None) -> float | None:
    """A runner-up's confidence for ranking: never above its fill's (`cap`)."""
    if cap is None:
        return confidence
    return cap if confidence is None else min(confidence, cap)


def typed_through(offer: Offer, text: str, at: int) -> str | None:
    """What is left of `offer` when `text` is its document with the offer's first
    characters typed at its cursor and the cursor `at` after them; None otherwise, and
    when nothing but whitespace is left."""
    typed = at - offer.at
    if typed <= 0 or typed >= len(offer.fill) or len(text) != len(offer.text) + typed:
        return None
    if not offer.fill.startswith(text[offer.at : at]):
        return None
    if not (text.startswith(offer.text[: offer.at]) and text.endswith(offer.text[offer.at :])):
        return None
    rest = offer.fill[typed:]
    return rest if rest.strip() else None
