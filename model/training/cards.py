"""Cards written by a tool (docs/DATA_CARD.md by the corpus builder, model/training/corpus/,
the model card by model/training/release.py) that keep what people wrote below a marker line
when they are rewritten."""

from __future__ import annotations

from pathlib import Path


def hand_written(card: Path, marker: str) -> str:
    """The marker line of `card` and everything after it; the marker alone (and a line
    break) when the card does not exist yet or has no marker."""
    text = card.read_text() if card.exists() else ""
    return text[text.index(marker) :] if marker in text else marker + "\n"
