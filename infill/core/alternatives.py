"""Alternatives for the spans whose fill failed its checks (infill/core/candidates.py): the
canvases that redo a window's failing spans from fewer masks, the window's other spans kept
as decoded; and the scoring pass that ranks the alternatives that pass, by the model's mean
log-probability of their tokens with the whole canvas visible."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from diffusion_infill.infill.core.canvas import Canvas, SpanSlots
from diffusion_infill.infill.core.options import SamplerOptions
from diffusion_infill.infill.core.scoring import log_softmax

Alternative = tuple[int, int]  # (window, k): alternative k of that window's canvas
# per canvas scored: (canvas, k, rows), rows: (span, canvas positions of its fill)
Scoring = list[tuple[Canvas, int, list[tuple[int, list[int]]]]]


def alternative_canvases(
    canvases: Sequence[Canvas],
    redo: set[int],
    *,
    raced: set[int],
    initial: dict[int, int],
    options: SamplerOptions,
    mask: int,
) -> list[tuple[Canvas, Alternative]]:
    """The alternative canvases of each of `canvases` that holds a span of `redo` whose
    length may change, the window's other spans kept as decoded: alternative k re-decodes
    those spans from `initial >> k` masks. A raced span (its length is the model's guess,
    `lengths` > 1) gets `lengths - 1` alternatives of exactly that many tokens (with nulls
    allowed, a model that expects a long fill writes content into every slot and grows the
    span back); any other gets `candidates - 1`, with nulls and growth. In a window that
    holds a raced failing span, every failing span gets `lengths - 1` alternatives."""
    out: list[tuple[Canvas, Alternative]] = []
    for w, c in enumerate(canvases):
        mine = {s.index for s in c.spans if s.index in redo and not s.exact}
        if not mine:
            continue
        count = options.lengths if mine & raced else options.candidates
        for k in range(1, count):
            out.append(
                (
                    c.with_spans(
                        [
                            shorter(
                                s,
                                _length(initial[s.index], k, s.index in raced, options),
                                exact=s.index in raced,
                                mask=mask,
                            )
                            if s.index in mine
                            else kept(s)
                            for s in c.spans
                        ]
                    ),
                    (w, k),
                )
            )
    return out


def _length(initial: int, k: int, raced: bool, options: SamplerOptions) -> int:
    """Alternative k's slots: `initial >> k`, or for a raced span (exactly that many
    tokens) the last `lengths - 1` halvings before one token (16 slots, lengths 4: 4, 2,
    1)."""
    if not raced:
        return initial >> k
    return initial >> (k + max(0, initial.bit_length() - options.lengths))


def shorter(s: SpanSlots, n: int, *, exact: bool, mask: int) -> SpanSlots:
    """Span `s` from `n` masks (at least one): exactly that many tokens (a raced length),
    or with nulls and growth."""
    n = max(1, n)
    return SpanSlots(
        s.index,
        [mask] * n,
        n if exact else s.cap,
        exact,
        forbidden=s.forbidden,
        raced=s.raced,
        min_breaks=s.min_breaks,
        breaks=s.breaks,
        first=s.first,
    )


def kept(s: SpanSlots) -> SpanSlots:
    """A span an alternative does not redo: as the primary decoded it, fixed."""
    return SpanSlots(
        s.index,
        list(s.ids),
        len(s.ids),
        s.exact,
        can_grow=False,
        forbidden=s.forbidden,
        first=s.first,
    )


def scoring_rows(
    canvases: Sequence[Canvas],
    alts: Sequence[Alternative],
    passing: dict[int, list[int]],
    null: int,
) -> Scoring:
    """The scoring pass: the alternative canvases that hold a span with several passing
    alternatives (`passing`: span -> its passing k), and in each, the positions of those
    spans' fills (nulls left out)."""
    several = {i for i, ks in passing.items() if len(ks) > 1}
    scoring = []
    for canvas, (_, k) in zip(canvases, alts, strict=True):
        rows = [
            (s.index, [off + j for j, t in enumerate(s.ids) if t != null])
            for s, off in zip(canvas.spans, canvas.offsets(), strict=True)
            if s.index in several and k in passing[s.index]
        ]
        if rows:
            scoring.append((canvas, k, rows))
    return scoring


def mean_log_probs(scoring: Scoring, logits: Sequence[np.ndarray]) -> dict[tuple[int, int], float]:
    """(span, k) -> the mean log-probability of the fill's tokens, from the scoring pass's
    logits (one array per scored canvas, a row per position asked)."""
    out: dict[tuple[int, int], float] = {}
    for (canvas, k, rows), arr in zip(scoring, logits, strict=True):
        logp = log_softmax(arr)  # (rows, V)
        canvas_ids = canvas.ids()
        at = 0
        for i, positions in rows:
            got = [logp[at + r, canvas_ids[p]] for r, p in enumerate(positions)]
            at += len(positions)
            out[(i, k)] = float(np.mean(got)) if got else 0.0
    return out
