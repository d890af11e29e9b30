"""Typing through a completion: the user types what the last completion offered.

When the characters typed since a document's last completion, at its cursor and nothing
else changed, are the start of what it offered, the rest of that offer is the answer at
once, without the model: the suggestion the user is reading stays as it is (no flicker to
another guess) and keeps up with any typing speed. Anything else (a character the offer
did not have, a deletion, an edit elsewhere, the cursor moved, all of the offer typed)
asks the model again.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Offer:
    """A completion offered: the document's text and cursor when it was asked, and the
    text offered there."""

    text: str
    at: int
    fill: str
    multiline: bool


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
