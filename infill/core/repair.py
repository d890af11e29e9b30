"""Bug finding and repair: score every token of a clean buffer, replace the worst.

The model was trained with random-token substitution (model/training/noising.py): shown a buffer
with no masks, it predicts the original token at every position. One forward pass over a
window therefore scores every token in it: suspicion = 1 - p(the token that is there).
Autoregressive completion engines cannot do this; a denoiser does it in one pass.

A token is suspicious when it is improbable AND the model is confident of a replacement
(infill/core/suspicion.py, calibrated so that clean files are left alone). `fix_text`
replaces each of the most suspicious tokens by that replacement when the token is a whole
identifier, number or operator run (no forward pass more), and otherwise masks the word
it belongs to and re-denoises it with the usual sampler (`repair_plan`); when the model
is sure of no swap, it re-denoises the line it least expects (infill/core/suspect_lines.py).
The checks judge every kind of fill, and only what changed comes back as edits.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from diffusion_infill.infill.core.engine import PYTHON, PreparedFill, check_text, prepare_fill
from diffusion_infill.infill.core.errors import SpanError
from diffusion_infill.infill.core.lexer import prose_ranges
from diffusion_infill.infill.core.options import SamplerOptions
from diffusion_infill.infill.core.results import FillResult, TokenScore
from diffusion_infill.infill.core.sampler import denoise
from diffusion_infill.infill.core.snippets import Source
from diffusion_infill.infill.core.spans import Span
from diffusion_infill.infill.core.suspect_lines import prepare_line_fix
from diffusion_infill.infill.core.suspicion import (
    DEFAULT_MIN_LIKELY,
    DEFAULT_MIN_SUSPICION,
    is_suspicious,
    preference,
    worst_first,
)
from diffusion_infill.infill.core.window import Layout, plan_windows
from diffusion_infill.model.denoiser import Denoiser

_WORD = re.compile(r"\w+|[^\w\s]+")  # an identifier / number, or a run of operator characters
# Canvases per forward pass while scoring: a long file is scored a few windows at a time,
# so memory holds a few windows' logits (positions x vocabulary each), never the file's.
SCORE_BATCH = 8
Progress = Callable[[int, int], None]  # (windows done, windows in all)


def _char_offsets(den: Denoiser, ids: list[int], text: str) -> list[tuple[int, int]] | None:
    """Character range of each token of `ids` (the encoding of `text`), or None where the
    decoded tokens do not give back `text`. A token that ends inside a character (byte-level
    tokens) shares the character's range with the tokens that complete it (folded forward).

    Linear: each token is decoded alone, and from a token that does not decode cleanly
    alone on, the run is decoded as a prefix. A prefix is a whole number of characters
    when one more token extends it (decodes to it and more), not when it rewrites its
    last character (a U+FFFD that the next bytes complete): so a U+FFFD written in the
    text is told apart from a split character."""
    bounds = [0]
    anchor: int | None = None  # the first token of a run decoded as a prefix
    prefix = ""  # ids[anchor:k + 1] decoded (the last step's `longer`)
    for k in range(len(ids)):
        if anchor is None:
            piece = den.decode([ids[k]])
            if "\ufffd" not in piece:
                bounds.append(bounds[-1] + len(piece))
                continue
            anchor, prefix = k, piece
        longer = den.decode(ids[anchor : k + 2]) if k + 1 < len(ids) else None
        if longer is None or (len(longer) > len(prefix) and longer.startswith(prefix)):
            bounds.append(bounds[anchor] + len(prefix))
            anchor = None
        else:
            bounds.append(bounds[-1])  # a partial character: the token is folded forward
            prefix = longer
    if bounds[-1] != len(text):
        return None
    return [(bounds[k], bounds[k + 1]) for k in range(len(ids))]


def _chunks(
    text: str, start: int, end: int, budget: int, count: Callable[[str], int]
) -> list[tuple[int, int]]:
    """text[start:end] cut into ranges of whole lines of at most `budget` tokens (a line
    longer than that is cut at the budget's characters)."""
    chunks: list[tuple[int, int]] = []
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
    return chunks


@dataclass(frozen=True)
class _Chunk:
    """One range to score, on its own canvas (its window around it)."""

    start: int  # the range's first character in the text
    canvas: list[int]  # window ids: before + tokens + after
    first: int  # canvas position of the range's first token
    tokens: list[int]  # the range's own ids
    offsets: list[tuple[int, int]] | None  # each token's characters, relative to `start`


def _chunk(den: Denoiser, text: str, a: int, b: int, layout: Layout) -> _Chunk:
    count = lambda s: len(den.encode(s))  # noqa: E731
    (win,) = plan_windows(
        text,
        [Span(a, b)],
        allocs=[count(text[a:b])],
        room=[0],
        budget=den.max_length,
        count=count,
        layout=layout,
    )
    before, middle, after = (
        den.encode(text[win.start : a]),
        den.encode(text[a:b]),
        den.encode(text[b : win.end]),
    )
    return _Chunk(
        a, before + middle + after, len(before), middle, _char_offsets(den, middle, text[a:b])
    )


def _token_scores(den: Denoiser, text: str, chunk: _Chunk, logits: np.ndarray) -> list[TokenScore]:
    """Suspicion and likeliest replacement of each token of the chunk (tokens that share
    a character with the next one are left out)."""
    if not chunk.tokens or chunk.offsets is None:
        return []
    x = np.array(logits, dtype=np.float32)  # (n, V), a copy: masked below
    x -= x.max(axis=-1, keepdims=True)
    log_z = np.log(np.exp(x).sum(axis=-1))  # (n,)
    rows = np.arange(len(chunk.tokens))
    seen = np.exp(x[rows, chunk.tokens] - log_z)  # (n,)
    sp = den.special
    # the replacement is never mask or pad, nor the written token; it may be <null>: the
    # model reads the token as one that should not be there (trained on inserted `not`s,
    # model/training/swaps.py), and the fix deletes it
    x[:, [sp.mask, sp.pad]] = -np.inf
    x[rows, chunk.tokens] = -np.inf
    best = x.argmax(axis=-1)  # (n,)
    best_p = np.exp(x[rows, best] - log_z)
    scores: list[TokenScore] = []
    for k in range(len(chunk.tokens)):
        s, e = chunk.offsets[k]
        if s == e:
            continue
        # 1 - p in float64: a float32 1 - p is 1.0 for every p below 6e-8, and the
        # fixer's order (`preference`) divides by p
        likely = "" if best[k] == sp.null else den.decode([int(best[k])])
        scores.append(
            TokenScore(
                chunk.start + s,
                chunk.start + e,
                text[chunk.start + s : chunk.start + e],
                1.0 - float(seen[k]),
                likely,
                float(best_p[k]),
            )
        )
    return scores


def score_text(
    text: str,
    *,
    denoiser: Denoiser,
    start: int = 0,
    end: int | None = None,
    language: str | None = PYTHON,
    progress: Progress | None = None,
) -> list[TokenScore]:
    """Suspicion of every token in text[start:end], but in Python the tokens of comments
    and docstrings (read as context, never named: a bug is in code; `_code`): long
    ranges are scored in chunks of whole lines, each inside its own window, SCORE_BATCH
    windows per forward pass. `progress(done, total)` is called after each pass."""
    check_text(text)
    end = len(text) if end is None else end
    if not 0 <= start <= end <= len(text):
        raise SpanError(f"range {start}..{end} is outside the text (0..{len(text)})")
    den = denoiser
    count = lambda s: len(den.encode(s))  # noqa: E731
    ranges = _chunks(text, start, end, den.max_length // 2, count)
    layout = Layout(text, count, text if language == PYTHON else None)
    scores: list[TokenScore] = []
    for first in range(0, len(ranges), SCORE_BATCH):
        chunks = [_chunk(den, text, a, b, layout) for a, b in ranges[first : first + SCORE_BATCH]]
        logits = den.logits(
            [c.canvas for c in chunks],
            [list(range(c.first, c.first + len(c.tokens))) for c in chunks],
        )
        scores.extend(
            score
            for c, rows in zip(chunks, logits, strict=True)
            for score in _token_scores(den, text, c, rows)
        )
        if progress is not None:
            progress(min(first + SCORE_BATCH, len(ranges)), len(ranges))
    return _code(text, scores) if language == PYTHON else scores


def _code(text: str, scores: list[TokenScore]) -> list[TokenScore]:
    """The scores of tokens whose first non-space character lies outside every comment
    and docstring of `text` (infill/core/lexer.py `prose_ranges`)."""
    prose = prose_ranges(text)
    starts = [a for a, _ in prose]
    kept = []
    for sc in scores:
        at = sc.start + len(sc.text) - len(sc.text.lstrip())
        i = bisect.bisect_right(starts, at) - 1
        if i < 0 or at >= prose[i][1]:
            kept.append(sc)
    return kept


def _widen(text: str, s: int, e: int) -> tuple[int, int]:
    """The token's range widened to the identifier/number/operator run it belongs to."""
    line_start = text.rfind("\n", 0, s) + 1
    line_end = text.find("\n", e)
    line_end = len(text) if line_end < 0 else line_end
    for m in _WORD.finditer(text, line_start, line_end):
        if m.start() < e and m.end() > s:
            s, e = min(s, m.start()), max(e, m.end())
    return s, e


def suspicious_spans(
    scores: list[TokenScore],
    *,
    text: str,
    max_fixes: int,
    min_suspicion: float = DEFAULT_MIN_SUSPICION,
    min_likely: float = DEFAULT_MIN_LIKELY,
) -> list[tuple[int, int, TokenScore]]:
    """The worst tokens (by `preference`) that pass `is_suspicious`, widened,
    non-overlapping, at most `max_fixes`: (start, end, the token's score)."""
    picked: list[tuple[int, int, TokenScore]] = []
    for sc in worst_first(scores):
        if len(picked) >= max_fixes:
            break
        if not is_suspicious(sc, min_suspicion, min_likely):
            continue
        s, e = _widen(text, sc.start + (len(sc.text) - len(sc.text.lstrip())), sc.end)
        if all(e <= a or s >= b for a, b, _ in picked):
            picked.append((s, e, sc))
    return sorted(picked)


def repair_plan(
    den: Denoiser, text: str, picked: list[tuple[int, int, TokenScore]]
) -> tuple[list[Span], list[list[int] | None]]:
    """The spans `fix_text` rewrites and, per span, its tokens when already decided.

    A flagged token that is a whole identifier, number or operator run is replaced by the
    model's likeliest other token there: the substitution the model was trained to undo,
    read with the wrong token in view, and no forward pass more. A token that is part of
    a longer word (`_widen`) has the whole word masked and re-denoised at its length
    (exactly: given more slots the model writes content into all of them). A token the
    model would delete (`likely` "", a `not` where it does not belong) is deleted
    (`_deletion`). On 100 validation bug windows the substitution repaired 10,
    re-denoising the flagged word 4 (docs/log/architecture.md, "Repair")."""
    spans: list[Span] = []
    decided: list[list[int] | None] = []
    for s, e, score in picked:
        if not score.likely:  # the model would delete the token
            gone = _deletion(den, text, score)
            if gone is not None:
                spans.append(gone[0])
                decided.append(gone[1])
                continue
        lead = len(score.text) - len(score.text.lstrip())
        ids = den.encode(score.likely) if "\ufffd" not in score.likely else []
        if (s, e) == (score.start + lead, score.end) and score.likely.strip() and ids:
            spans.append(Span(score.start, score.end, length=len(ids), exact=True))
            decided.append(list(ids))
        else:
            spans.append(Span(s, e, length=max(1, len(den.encode(text[s:e]))), exact=True))
            decided.append(None)
    return spans, decided


_NEXT_WORD = re.compile(r"\s*(?:" + _WORD.pattern + ")")  # whitespace, then a `_WORD`


def _deletion(den: Denoiser, text: str, score: TokenScore) -> tuple[Span, list[int]] | None:
    """The token deleted, as an exact span with its tokens decided (a span holds at least
    one token): the token and the word after it (its whitespace included), rewritten as
    that word alone; None when no word follows on the token's line."""
    m = _NEXT_WORD.match(text, score.end)
    if m is None or "\n" in m.group():
        return None
    ids = list(den.encode(text[score.end : m.end()]))
    return Span(score.start, m.end(), length=len(ids), exact=True), ids


def prepare_repair(
    den: Denoiser,
    text: str,
    picked: list[tuple[int, int, TokenScore]],
    options: SamplerOptions,
    *,
    language: str | None = PYTHON,
    source: Source | None = None,
) -> PreparedFill:
    """The fill of the `picked` ranges (not run; `repair_plan` says how each is rewritten).
    The hole lengths of `options.lengths` are not raced: a repair's length is known."""
    spans, decided = repair_plan(den, text, picked)
    return prepare_fill(
        text, spans, denoiser=den, options=replace(options, lengths=1), rewrite=True,
        language=language, decided=decided, source=source,
    )  # fmt: skip


def prepare_fix(
    text: str,
    *,
    denoiser: Denoiser,
    options: SamplerOptions,
    start: int = 0,
    end: int | None = None,
    max_fixes: int = 1,
    min_suspicion: float = DEFAULT_MIN_SUSPICION,
    min_likely: float = DEFAULT_MIN_LIKELY,
    language: str | None = PYTHON,
    progress: Progress | None = None,
    source: Source | None = None,
) -> tuple[PreparedFill | None, list[TokenScore]]:
    """Score text[start:end] and prepare (not run) the fill of its most suspicious tokens,
    or, when the model is sure of no swap, of the line it least expects read masked
    (infill/core/suspect_lines.py): None when no token passed `is_suspicious` (nothing
    suspicious). The worker runs the fill in its scheduler; `fix_text` runs it here."""
    scores = score_text(
        text, denoiser=denoiser, start=start, end=end, language=language, progress=progress
    )
    picked = suspicious_spans(
        scores, text=text, max_fixes=max_fixes, min_suspicion=min_suspicion, min_likely=min_likely
    )
    if not picked:
        return None, scores
    worst = max((x[2] for x in picked), key=preference)
    fill = prepare_line_fix(  # None: the model is sure of a swap, the token is repaired
        text, scores, worst, (start, end), denoiser=denoiser, options=options, language=language,
        source=source,
    )  # fmt: skip
    if fill is None:
        fill = prepare_repair(denoiser, text, picked, options, language=language, source=source)
    return fill, scores


def fix_text(
    text: str,
    *,
    denoiser: Denoiser,
    start: int = 0,
    end: int | None = None,
    max_fixes: int = 1,
    min_suspicion: float = DEFAULT_MIN_SUSPICION,
    min_likely: float = DEFAULT_MIN_LIKELY,
    language: str | None = PYTHON,
    options: SamplerOptions | None = None,
    progress: Progress | None = None,
    source: Source | None = None,
    **overrides: Any,
) -> tuple[FillResult | None, list[TokenScore]]:
    """Re-denoise the most suspicious tokens of text[start:end].

    Returns the fill (None when no token passed `is_suspicious`: nothing suspicious)
    and the scores; `progress(done, total)` follows the scoring passes.
    """
    opts = SamplerOptions.build(options, **overrides)
    fill, scores = prepare_fix(
        text, denoiser=denoiser, options=opts, start=start, end=end, max_fixes=max_fixes,
        min_suspicion=min_suspicion, min_likely=min_likely, language=language,
        progress=progress, source=source,
    )  # fmt: skip
    if fill is None:
        return None, scores
    denoise(fill.job, denoiser)
    return fill.result(), scores
