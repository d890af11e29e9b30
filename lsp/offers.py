"""What a completion offers: its items, and typing through the first.

The items (`ranked`) are the fill and its runner-ups (infill/core/rated.py) as the server
shapes them, distinct, the fill first and the runner-ups surest first after it, none whose
confidence is below `completionMinConfidence`, and none at all when the fill's is: the
model is silent where it is unsure, and a client that cycles through inline suggestions
(VS Code; the Neovim plugin's next/previous keys) shows the others. The fill stays first:
a runner-up's confidence is read off the fill's decode, not its own, and ranking them
together lost precision on validation completions (docs/log/architecture.md, "Confidence").

Typing through a completion: the user types what the last completion offered.

When the characters typed since a document's last completion, at its cursor and nothing
else changed, are the start of what it offered, the rest of that offer is the answer at
once, without the model: the suggestion the user is reading stays as it is (no flicker to
another guess) and keeps up with any typing speed. Anything else (a character the offer
did not have, a deletion, an edit elsewhere, the cursor moved, all of the offer typed)
asks the model again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from diffusion_infill.infill.core.copy_offers import OfferedCopy
from diffusion_infill.infill.core.results import SpanFill
from diffusion_infill.lsp.settings import Settings


@dataclass(frozen=True)
class Offer:
    """A completion offered: the document's text and cursor when it was asked, and the
    text offered there."""

    text: str
    at: int
    fill: str
    multiline: bool


Item = tuple[str, float | None]  # an offer and its confidence (None: not known)


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


def offered(
    shape: Callable[[str], str],
    fill: SpanFill | None,
    s: Settings,
    copies: Sequence[OfferedCopy] = (),
) -> list[Item]:
    """The items of a completion's `fill`, its runner-ups (after it) and the `copies` at
    its cursor, each as `shape` offers it ("" for nothing), ranked (`ranked`)."""
    found: list[Item] = [(c.text, c.confidence) for c in copies]
    if fill is not None and fill.rejected is None:
        # a runner-up is never surer than its fill: its confidence is read off the fill's
        # decode (ranked above it, it lost precision on validation)
        sure = fill.confidence
        ups = [(r.text, _at_most(r.confidence, sure)) for r in fill.runner_ups]
        found = [(fill.text, sure), *ups, *found]
    shaped = [(shape(text), confidence) for text, confidence in found]
    return ranked(shaped, s.completion_min_confidence, s.completion_items)


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
