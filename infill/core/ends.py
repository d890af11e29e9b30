"""Where a fill ends: the two rules by which no denoising pass is spent on nulls alone
(`SamplerOptions.eager_ends`).

A span is allocated more slots than its fill needs; the model writes `<null>` in the
rest. Committing one null already ends its span (every later masked slot becomes null),
but two kinds of pass still produced nothing: a pass whose most confident slots were
nulls (the tail is usually the easiest thing to predict), and the pass after the last
content token, spent only to find that every slot left is null. So:

- `with_content`: when the order picked only nulls, the best-scoring content row is
  committed too (unless a chosen null would end it anyway);
- `close_ended`: a span whose still-masked slots all predict null in this pass is closed
  in this pass.

With both, a pass commits at least one content token or ends its spans, so a fill of n
tokens takes at most n passes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from diffusion_infill.infill.core.canvas import Slot, SpanSlots


def with_content(
    masked: Sequence[Slot], chosen: np.ndarray, tokens: np.ndarray, scores: np.ndarray, *, null: int
) -> np.ndarray:
    """`chosen` (rows of `masked`), plus the best-scoring content row when it holds
    none. Rows that a chosen null ends (later slots of its span) are not candidates."""
    if any(tokens[r] != null for r in chosen):
        return chosen
    first_null: dict[int, int] = {}
    for r in chosen:
        k, j = masked[int(r)]
        first_null[k] = min(j, first_null.get(k, j))
    taken = {int(r) for r in chosen}
    best = [
        r
        for r in range(len(tokens))
        if tokens[r] != null
        and r not in taken
        and masked[r][1] < first_null.get(masked[r][0], float("inf"))
    ]
    if not best:
        return chosen
    extra = max(best, key=lambda r: scores[r])
    return np.sort(np.append(chosen, extra))


def close_ended(
    masked: Sequence[Slot],
    tokens: np.ndarray,
    spans: Mapping[int, SpanSlots],
    *,
    mask: int,
    null: int,
) -> list[Slot]:
    """Commit as null the still-masked slots of each span whose masked slots all predicted
    null (`tokens`, one per row of `masked`); returns the slots committed."""
    left: dict[int, list[tuple[int, Slot]]] = {}
    for r, (k, j) in enumerate(masked):
        if spans[k].ids[j] == mask:
            left.setdefault(k, []).append((r, (k, j)))
    closed: list[Slot] = []
    for rows in left.values():
        if all(tokens[r] == null for r, _ in rows):
            for _, (k, j) in rows:
                spans[k].ids[j] = null
                closed.append((k, j))
    return closed
