"""The depth of a whole-line span, chosen by the model where the code around it leaves it
open (infill/core/lines.py frames such a span with an indentation read from that code).

After a plain statement the hidden line may go on at the same depth or close one or more
blocks (`else:`, `except OSError:`, a method after a method): the rules of
`lines.indentation` read only the code around the span and guess the line before's depth.
The depths the code allows are the levels of the blocks that enclose the line before, from
its own depth out to one step above the line below's (a line shallower than the line below
must open the block that holds it); where the text starts inside a block (an excerpt), the
levels out from its shallowest line are taken a step each. Where there are several, one
forward pass asks the model: the span's text masked as natural code (no indentation
given), the first slot's distribution read as a distribution over depths. The tokenizer
writes eight spaces and `else` as `       ` + ` else`, so a first token of k spaces alone
means depth k + 1, and a token of k spaces followed by code means depth k (a tokenizer
that writes `        ` + `else` is recognised: k spaces alone are depth k there). The
likeliest depth replaces the rules' when it is more likely by MARGIN (natural log); tabs
and spans the rules settle are left to them.

    frames, passes = model_indents(text, before, spans, frames, denoiser)

Measured: docs/log/architecture.md, "Whole-line holes".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache

import numpy as np

from diffusion_infill.infill.core.canvas import fitted
from diffusion_infill.infill.core.limits import token_texts
from diffusion_infill.infill.core.lines import Frame, depths, other_depths
from diffusion_infill.infill.core.scoring import log_softmax
from diffusion_infill.infill.core.spans import Span
from diffusion_infill.infill.core.stand_ins import parses_at
from diffusion_infill.model.denoiser import Denoiser

MARGIN = 0.5  # how much likelier (nats) a depth must be than the rules' to replace it
PROBE_SLOTS = 16  # masks in place of the span's text, as a hole's default allocation


def _left_out(denoiser: Denoiser) -> int:
    """How many of a line's indentation spaces its first token leaves to the next: 1
    where the tokenizer spells eight spaces and `else` as `       ` + ` else`, 0 where
    it spells them `        ` + `else`; 1 when its spelling does not tell (no runs)."""
    runs = []
    for n in (4, 8):
        pieces = [denoiser.decode([t]) for t in denoiser.encode(f"x\n{' ' * n}y\n")]
        after = pieces[pieces.index("\n") + 1] if "\n" in pieces[:-1] else ""
        runs.append(len(after) if after and not after.strip(" ") else 0)
    return 8 - runs[1] if runs[1] - runs[0] == 4 and runs[1] in (7, 8) else 1


@lru_cache(maxsize=16)
def token_depths(denoiser: Denoiser) -> np.ndarray:
    """Per id, the depth a line that starts with that token has (see the module
    docstring), or -1 (special ids, tabs, line breaks, ids without text)."""
    left_out = _left_out(denoiser)
    out = np.full(denoiser.vocab_size, -1, dtype=np.int32)
    for t, piece in enumerate(token_texts(denoiser)):
        if piece is None:
            continue
        code = piece.lstrip(" ")
        spaces = len(piece) - len(code)
        if not code:
            out[t] = spaces + left_out if spaces else -1
        elif not code[0].isspace():
            out[t] = spaces
    return out


def probe(before: str, span: Span, denoiser: Denoiser) -> tuple[list[int], int]:
    """The probe canvas of `span`: the code before it, PROBE_SLOTS masks, the code after
    it from the line break that closes it; and the first mask's position."""
    tail = 1 if span.end > span.start and before[span.end - 1] == "\n" else 0
    return fitted(
        denoiser.encode(before[: span.start]),
        [denoiser.special.mask] * PROBE_SLOTS,
        denoiser.encode(before[span.end - tail :]),
        denoiser.max_length,
    )


def depth_scores(row: np.ndarray, options: Sequence[str], depth_of: np.ndarray) -> dict[str, float]:
    """The log-probability of each of `options` (indentations) from the probe's first
    slot's logits `row`: the summed probability of the ids that start a line of that
    depth (`token_depths`); an indentation no id starts is left out."""
    logp = log_softmax(row[None, :])[0]
    scores = {}
    for indent in options:
        hit = depth_of == len(indent)
        if hit.any():
            scores[indent] = float(np.logaddexp.reduce(logp[hit]))
    return scores


def choose(scores: dict[str, float], rule: str, margin: float = MARGIN) -> str:
    """The likeliest indentation of `scores` when it beats `rule`'s by `margin`; else
    `rule` (also when the rules' depth has no score)."""
    if rule not in scores:
        return rule
    best = max(scores, key=lambda d: scores[d])
    return best if scores[best] > scores[rule] + margin else rule


def open_depths(
    text: str,
    before: str,
    spans: Sequence[Span],
    frames: Sequence[Frame | None],
    denoiser: Denoiser,
) -> dict[int, dict[str, float]]:
    """Per framed span whose depth the code leaves open (by index), the model's
    log-probability of each depth it allows (`depth_scores`): one batched forward pass
    for all such spans, none when there is none. `before` is the text the probe reads
    (holes neutralised; same offsets as `text`)."""
    asked = [
        (i, options)
        for i, (s, f) in enumerate(zip(spans, frames, strict=True))
        if f is not None and (options := depths(text, s.start, s.end))
    ]
    if not asked:
        return {}
    probes = [probe(before, spans[i], denoiser) for i, _ in asked]
    rows = denoiser.logits([ids for ids, _ in probes], [[at] for _, at in probes])
    depth_of = token_depths(denoiser)
    return {
        i: depth_scores(np.asarray(arr)[0], options, depth_of)
        for (i, options), arr in zip(asked, rows, strict=True)
    }


def model_indents(
    text: str,
    before: str,
    spans: Sequence[Span],
    frames: Sequence[Frame | None],
    denoiser: Denoiser,
) -> tuple[list[Frame | None], int]:
    """`frames` with the model's depth for each framed span the code leaves open
    (`open_depths`, `choose`), and the forward passes that took (0 or 1)."""
    scores = open_depths(text, before, spans, frames, denoiser)
    out = list(frames)
    for i, found in scores.items():
        frame = out[i]
        assert frame is not None
        out[i] = replace(frame, head=choose(found, frame.head))
    return out, 1 if scores else 0


def parsing_depths(
    before: str, spans: Sequence[Span], frames: Sequence[Frame | None]
) -> list[Frame | None]:
    """`frames` with a framed span's depth moved where Python parses `before` (holes
    neutralised) with no stand-in in the span at its depth and does at another depth the
    code allows (`lines.depths`): to the nearest such. A method's header hidden after the
    last line of the method before is read at that line's depth by the rules, and the
    model may agree; no fill parses there (infill/core/stand_ins.py)."""
    ranges = [(s.start, s.end) for s in spans]
    out = list(frames)
    for i, frame in enumerate(frames):
        others = other_depths(before, *ranges[i], frame.head) if frame is not None else []
        if frame is None or not others or parses_at(before, ranges, i, frame.head):
            continue
        found = next((d for d in others if parses_at(before, ranges, i, d)), None)
        if found is not None:
            out[i] = replace(frame, head=found)
    return out
