"""Windows of whole lines around a span of a file: the shape of every held-out example
(benchmarks/heldout.py) and of the real one-line fixes cut from release histories
(model/training/corpus/line_changes.py)."""

from __future__ import annotations

import random

# Characters of a held-out window (about 250 tokens): what every checkpoint's figures were
# measured in. A larger --window-chars keeps these windows' random draws (draw_chars), so
# the same holes.
HELDOUT_WINDOW_CHARS = 700


def window_around(
    text: str,
    line_start: int,
    line_end: int,
    rng: random.Random,
    window_chars: int,
    draw_chars: int | None = None,
) -> tuple[str, int]:
    """A window of whole lines around [line_start, line_end), about `window_chars` long,
    the span at a random place in its middle third; returns (window, offset). With
    `draw_chars`, the random draw is the one a window of that size makes, scaled to
    `window_chars`: the stream of draws, so every later pick, does not depend on the size."""
    span = line_end - line_start
    budget = max(0, window_chars - span)
    drawn_budget = budget if draw_chars is None else max(0, draw_chars - span)
    before = rng.randint(drawn_budget // 3, 2 * drawn_budget // 3)
    if drawn_budget != budget:
        before = round(before * budget / max(1, drawn_budget))
    a = text.rfind("\n", 0, max(0, line_start - before))
    a = 0 if a < 0 else a + 1
    b = text.find("\n", min(len(text), line_end + (budget - before)))
    b = len(text) if b < 0 else b + 1
    return text[a:b], a
