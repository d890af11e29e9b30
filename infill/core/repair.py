"""Bug finding and repair: score every token of a clean buffer, re-denoise the worst.

The model was trained with random-token substitution (model/noising.py): shown a buffer
with no masks, it predicts the original token at every position. One forward pass over a
window therefore scores every token in it: suspicion = 1 - p(the token that is there).
Autoregressive completion engines cannot do this; a denoiser does it in one pass.

`fix_text` masks the most suspicious tokens (widened to the whole identifier, number or
operator they belong to) and fills them jointly with the usual sampler; only what changed
comes back as edits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from infill.core.engine import PYTHON, Fill, FillResult, check_text, prepare_fill
from infill.core.errors import SpanError
from infill.core.options import SamplerOptions
from infill.core.sampler import run
from infill.core.spans import Span
from infill.core.strategies import softmax
from infill.core.window import plan_windows
from model.denoiser import Denoiser

_WORD = re.compile(r"\w+|[^\w\s]+")  # an identifier / number, or a run of operator characters


@dataclass(frozen=True)
class TokenScore:
    start: int  # character range of the token in the text
    end: int
    text: str  # the token as written
    suspicion: float  # 1 - p(this token | everything else), in [0, 1]
    likely: str  # the model's most likely token here (a hint, not a fix)


def _char_offsets(den: Denoiser, ids: list[int], text: str) -> list[tuple[int, int]] | None:
    """Character range of each token of `ids` (the encoding of `text`), or None where a
    character is split across tokens (those tokens share the character's range)."""
    bounds = [0]
    for k in range(1, len(ids) + 1):
        prefix = den.decode(ids[:k])
        if prefix.endswith("\ufffd") and not text[: len(prefix)].endswith("\ufffd"):
            bounds.append(bounds[-1])  # a partial character: the token is folded forward
        else:
            bounds.append(len(prefix))
    if bounds[-1] != len(text):
        return None
    return [(bounds[k], bounds[k + 1]) for k in range(len(ids))]


def score_text(
    text: str,
    *,
    denoiser: Denoiser,
    start: int = 0,
    end: int | None = None,
    language: str | None = PYTHON,
) -> list[TokenScore]:
    """Suspicion of every token in text[start:end], one forward pass per window."""
    check_text(text)
    end = len(text) if end is None else end
    if not 0 <= start <= end <= len(text):
        raise SpanError(f"range {start}..{end} is outside the text (0..{len(text)})")
    den = denoiser
    count = lambda s: len(den.encode(s))  # noqa: E731
    # Long ranges are scored in chunks of whole lines, each inside its own window.
    chunks: list[tuple[int, int]] = []
    budget = den.max_length // 2
    pos = start
    while pos < end:
        stop, used = pos, 0
        while stop < end:
            nl = text.find("\n", stop, end)
            nxt = end if nl < 0 else nl + 1
            cost = count(text[stop:nxt])
            if used and used + cost > budget:
                break
            stop, used = nxt, used + cost
            if used > budget:  # one very long line: cut it at the budget's characters
                stop = min(stop, pos + budget)
                break
        chunks.append((pos, stop))
        pos = stop
    canvases: list[list[int]] = []
    positions: list[list[int]] = []
    metas: list[tuple[int, list[int], list[tuple[int, int]] | None]] = []
    for a, b in chunks:
        (win,) = plan_windows(text, [Span(a, b)], allocs=[count(text[a:b])], room=[0],
                              budget=den.max_length, count=count,
                              parse_text=text if language == PYTHON else None)
        before, middle, after = (den.encode(text[win.start:a]), den.encode(text[a:b]),
                                 den.encode(text[b:win.end]))
        canvases.append(before + middle + after)
        positions.append(list(range(len(before), len(before) + len(middle))))
        metas.append((a, middle, _char_offsets(den, middle, text[a:b])))
    scores: list[TokenScore] = []
    for logits, (a, middle, offsets) in zip(den.logits(canvases, positions), metas,
                                            strict=True):
        if not middle:
            continue
        probs = softmax(logits)  # (n, V)
        seen = probs[np.arange(len(middle)), middle]
        sp = den.special
        best = np.where(np.isin(np.arange(probs.shape[1]), [sp.mask, sp.pad, sp.null]), -1.0,
                        probs).argmax(axis=-1)  # the hint is never a special token
        for k, tok in enumerate(middle):
            s, e = offsets[k] if offsets is not None else (0, 0)
            if offsets is None or s == e:
                continue
            scores.append(TokenScore(a + s, a + e, text[a + s:a + e], float(1 - seen[k]),
                                     den.decode([int(best[k])]) if best[k] != tok else
                                     text[a + s:a + e]))
    return scores


def _widen(text: str, s: int, e: int) -> tuple[int, int]:
    """The token's range widened to the identifier/number/operator run it belongs to."""
    line_start = text.rfind("\n", 0, s) + 1
    line_end = text.find("\n", e)
    line_end = len(text) if line_end < 0 else line_end
    for m in _WORD.finditer(text, line_start, line_end):
        if m.start() < e and m.end() > s:
            s, e = min(s, m.start()), max(e, m.end())
    return s, e


def suspicious_spans(scores: list[TokenScore], *, text: str, max_fixes: int,
                     min_suspicion: float) -> list[tuple[int, int, float]]:
    """The worst tokens (not whitespace), widened, non-overlapping: (start, end, score)."""
    picked: list[tuple[int, int, float]] = []
    for sc in sorted(scores, key=lambda s: -s.suspicion):
        if len(picked) >= max_fixes or sc.suspicion < min_suspicion:
            break
        if not sc.text.strip():
            continue
        s, e = _widen(text, sc.start + (len(sc.text) - len(sc.text.lstrip())), sc.end)
        if all(e <= a or s >= b for a, b, _ in picked):
            picked.append((s, e, sc.suspicion))
    return sorted(picked)


def fix_spans(den: Denoiser, text: str, picked: list[tuple[int, int, float]]) -> list[Span]:
    """The spans `fix_text` re-denoises: each picked range, with room for two more tokens."""
    return [Span(s, e, length=max(4, len(den.encode(text[s:e])) + 2)) for s, e, _ in picked]


def prepare_fix(
    text: str,
    *,
    denoiser: Denoiser,
    options: SamplerOptions,
    start: int = 0,
    end: int | None = None,
    max_fixes: int = 1,
    min_suspicion: float = 0.5,
    language: str | None = PYTHON,
) -> tuple[Fill | None, list[TokenScore]]:
    """Score text[start:end] and prepare (not run) the fill of its most suspicious tokens:
    None when no token reached `min_suspicion`. The worker runs the fill in its scheduler;
    `fix_text` runs it here."""
    scores = score_text(text, denoiser=denoiser, start=start, end=end, language=language)
    picked = suspicious_spans(scores, text=text, max_fixes=max_fixes,
                              min_suspicion=min_suspicion)
    if not picked:
        return None, scores
    fill = prepare_fill(text, fix_spans(denoiser, text, picked), denoiser=denoiser,
                        options=options, rewrite=True, language=language)
    return fill, scores


def fix_text(
    text: str,
    *,
    denoiser: Denoiser,
    start: int = 0,
    end: int | None = None,
    max_fixes: int = 1,
    min_suspicion: float = 0.5,
    language: str | None = PYTHON,
    options: SamplerOptions | None = None,
    **overrides: Any,
) -> tuple[FillResult | None, list[TokenScore]]:
    """Re-denoise the most suspicious tokens of text[start:end].

    Returns the fill (None when no token reached `min_suspicion`) and the scores.
    """
    opts = SamplerOptions.build(options, **overrides)
    fill, scores = prepare_fix(text, denoiser=denoiser, options=opts, start=start, end=end,
                               max_fixes=max_fixes, min_suspicion=min_suspicion,
                               language=language)
    if fill is None:
        return None, scores
    run(fill.job, denoiser)
    return fill.result(), scores
