"""Which line the fixer names when no token is a sure swap: each line read masked.

The fixer's scoring pass (infill/core/repair.py `score_text`) reads every token in view.
Trained to undo swapped tokens, the model names a swapped operator or name with a
confident replacement: its `preference` (log p(likely) - log p(written)) is high. A real
change seldom reads like that: the wrong line is ordinary in view and surprising only out
of view. So when the worst token's preference is at most `LINE_GATE` (the model is not
sure of any swap), each line with a scored token is masked after its indentation, as many
masks as it has tokens, and one pass gives the log-probability of its tokens with the line
out of view; a line's `surprise` is their negated sum. The lines are ranked by
z(surprise) + WORST_WEIGHT z(worst preference) + PRIOR_WEIGHT z(prior), within the range
scored, the prior being how often releases change a line like it (infill/core/line_prior.py:
its text alone, no forward pass).

The gate and the weights come from `python -m benchmarks.line_gate` (docs/log/architecture.md,
"The line the model least expects" and "A prior over the lines releases change"): the best
top-1 on the validation set of real one-line fixes among the settings that keep the 400
injected validation bugs' top-1 within a point of the one-pass fixer's.

With the fixer's default thresholds a flagged token always has a preference above the
gate (p(likely) >= 0.6 against p(written) <= 0.002: 5.7), so only a user who lowers the
thresholds (asks for a suggestion anyway) gets a line rewritten this way.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, replace

import numpy as np

from diffusion_infill.infill.core.canvas import fitted
from diffusion_infill.infill.core.engine import PreparedFill, prepare_fill
from diffusion_infill.infill.core.line_prior import LinePrior, shipped_line_prior
from diffusion_infill.infill.core.options import SamplerOptions
from diffusion_infill.infill.core.results import TokenScore
from diffusion_infill.infill.core.scoring import log_softmax
from diffusion_infill.infill.core.snippets import Source
from diffusion_infill.infill.core.spans import Span
from diffusion_infill.infill.core.suspicion import preference
from diffusion_infill.model.denoiser import Denoiser

LINE_GATE = 1.5  # a worst preference at most this: no sure swap, the lines are read masked
WORST_WEIGHT = 0.0  # the worst token's share in the ranking of lines read masked
PRIOR_WEIGHT = 4.0  # the line prior's share in that ranking
PRIOR_SPREAD = 0.5  # nats: the prior is standardised by its spread, or this if more
MAX_MASKED_LINES = 48  # lines read masked at most (those with the worst tokens first)
LINE_BATCH = 8  # masked canvases per forward pass
_CONTEXT_CHARS = 4  # characters of context per canvas position, on each side


@dataclass(frozen=True)
class SuspectLine:
    """A line the fixer can name: one with a scored (code) token."""

    line: int  # 0-based line of the text
    start: int  # the line's code: from after its indentation ...
    end: int  # ... to its end (the line break excluded)
    worst: float  # the preference of its worst scored token
    surprise: float | None = None  # -sum log p(its tokens) with the line masked; None: not read


def code_lines(text: str, scores: list[TokenScore]) -> list[SuspectLine]:
    """The lines holding a scored non-whitespace token (a token belongs to the line of its
    first non-space character), in text order, each with its worst preference."""
    starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]
    worst: dict[int, float] = {}
    for s in scores:
        if not s.text.strip():
            continue
        line = bisect_right(starts, s.start + len(s.text) - len(s.text.lstrip())) - 1
        worst[line] = max(worst.get(line, -np.inf), preference(s))
    out = []
    for line in sorted(worst):
        a = starts[line]
        b = text.find("\n", a)
        b = len(text) if b < 0 else b
        out.append(SuspectLine(line, a + len(text[a:b]) - len(text[a:b].lstrip()), b, worst[line]))
    return out


def is_sure(lines: list[SuspectLine]) -> bool:
    """Whether the worst token is a swap the model is sure of (the token decides)."""
    return bool(lines) and max(x.worst for x in lines) > LINE_GATE


def rank_lines(
    text: str,
    scores: list[TokenScore],
    *,
    denoiser: Denoiser,
    prior: LinePrior | None = None,
) -> list[SuspectLine]:
    """The lines the fixer can name, most suspicious first: by their worst token when the
    model is sure of a swap (`is_sure`), else by z(surprise) + WORST_WEIGHT z(worst) +
    PRIOR_WEIGHT z(prior) over the `MAX_MASKED_LINES` lines with the worst tokens (the
    rest after them, by their worst token); `prior` defaults to the shipped one. Forward
    passes: none when sure, else one canvas per line read."""
    by_worst = sorted(code_lines(text, scores), key=lambda x: x.worst, reverse=True)
    if not by_worst or is_sure(by_worst):
        return by_worst
    read, rest = by_worst[:MAX_MASKED_LINES], by_worst[MAX_MASKED_LINES:]
    surprise = masked_surprise(denoiser, text, read)
    likely = (prior or shipped_line_prior()).scores(text, [x.line for x in read])
    order = surprise_order(surprise, np.array([x.worst for x in read]), likely)
    return [replace(read[k], surprise=float(surprise[k])) for k in order] + rest


def surprise_order(
    surprise: np.ndarray,
    worst: np.ndarray,
    prior: np.ndarray | None = None,
    weight: float = WORST_WEIGHT,
    prior_weight: float = PRIOR_WEIGHT,
) -> np.ndarray:
    """The order of lines read masked, most suspicious first: by z(surprise) + `weight`
    z(worst preference) + `prior_weight` z(prior), ties kept in the order given
    (benchmarks/line_gate.py replays it over recorded lines for other weights). The
    prior's z divides by at least PRIOR_SPREAD: lines it can barely tell apart stay
    nearly tied instead of a standard deviation apart."""
    score = _z(surprise) + weight * _z(worst)
    if prior is not None and prior_weight:
        score = score + prior_weight * _z(prior, floor=PRIOR_SPREAD)
    return np.argsort(-score, kind="stable")


def masked_surprise(den: Denoiser, text: str, lines: list[SuspectLine]) -> np.ndarray:
    """Per line, -sum log p(its tokens) with its code masked (as many masks as tokens;
    a line of more than half a canvas has its first half read) and the text around it
    in view, LINE_BATCH canvases per pass."""
    reach = den.max_length * _CONTEXT_CHARS
    canvases, positions, tokens = [], [], []
    for x in lines:
        lo, hi = max(0, x.start - reach), min(len(text), x.end + reach)
        if lo > 0:  # from a line's start
            lo = text.find("\n", lo, x.start) + 1 or lo
        if hi < len(text) and text.rfind("\n", x.end, hi) > x.end:  # to a line's end
            hi = text.rfind("\n", x.end, hi)
        mid = den.encode(text[x.start : x.end])[: den.max_length // 2]
        canvas, at = fitted(
            den.encode(text[lo : x.start]),
            [den.special.mask] * len(mid),
            den.encode(text[x.end : hi]),
            den.max_length,
        )
        canvases.append(canvas)
        positions.append(list(range(at, at + len(mid))))
        tokens.append(mid)
    out = np.zeros(len(lines))
    for first in range(0, len(lines), LINE_BATCH):
        batch = slice(first, first + LINE_BATCH)
        for k, rows in enumerate(den.logits(canvases[batch], positions[batch]), start=first):
            logp = log_softmax(rows)[np.arange(len(tokens[k])), tokens[k]]
            out[k] = -float(logp.sum())
    return out


def _z(values: np.ndarray, floor: float = 0.0) -> np.ndarray:
    """Standardised within the range ranked, by a spread of at least `floor` (a constant
    column is all zeros)."""
    values = np.asarray(values, dtype=np.float64)
    spread = max(float(values.std()), floor)
    return (values - values.mean()) / (spread if spread > 0 else 1.0)


def line_instead(
    text: str, scores: list[TokenScore], token: TokenScore, *, denoiser: Denoiser
) -> SuspectLine | None:
    """The line the fixer rewrites instead of repairing `token` (its worst flagged one):
    the first of `rank_lines` when the model is sure of no swap (the lines were read
    masked) and that line does not hold the token; else None (the token is repaired)."""
    ranked = rank_lines(text, scores, denoiser=denoiser)
    if not ranked or ranked[0].surprise is None:  # sure of a swap: no line was read
        return None
    top = ranked[0]
    at = token.start + len(token.text) - len(token.text.lstrip())
    return None if top.start <= at < top.end else top


def prepare_line_fix(
    text: str,
    scores: list[TokenScore],
    token: TokenScore,
    within: tuple[int, int | None],
    *,
    denoiser: Denoiser,
    options: SamplerOptions,
    language: str | None,
    source: Source | None = None,
) -> PreparedFill | None:
    """The rewrite of `line_instead`'s line, its code re-denoised (its length the model's:
    nulls and growth), kept `within` the range scored (a selection that starts or ends
    inside the line); None where the token is repaired instead."""
    line = line_instead(text, scores, token, denoiser=denoiser)
    if line is None:
        return None
    lo, hi = within
    a, b = max(line.start, lo), min(line.end, len(text) if hi is None else hi)
    if a >= b:
        return None
    return prepare_fill(
        text,
        [Span(a, b)],
        denoiser=denoiser,
        options=options,
        rewrite=True,
        language=language,
        source=source,
    )
