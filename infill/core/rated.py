"""Each span's confidence and runner-ups, read off a finished decode: no forward pass.

The confidence is infill/core/confidence.py's calibrated probability that the chosen fill
is right. The runner-ups (`SamplerOptions.runner_ups`) are other fills of the span, surest
first, from what the decode holds already:

- the other fills its rounds decoded: a failing fill's alternatives
  (infill/core/alternatives.py);
- fills one token from the chosen one (`swaps`): at each of its least sure slots, the
  token the model put second there in place of its own (a null there: the fill ends
  before it), and where a null ended it, the token second to that null (one more token).

With the checks on, a runner-up must pass them beside the other spans' choices, as the
chosen fill did; each is written as the chosen one is (cut where it echoes the code after
it, framed as a whole line). A fill held back by `min_confidence` keeps its span's text.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from diffusion_infill.infill.core.candidates import CandidateJob
from diffusion_infill.infill.core.confidence import Calibrator
from diffusion_infill.infill.core.copy_texts import context_copies
from diffusion_infill.infill.core.errors import DenoiserError
from diffusion_infill.infill.core.evidence import (
    Evidence,
    chosen,
    decoded_candidates,
    line_facts,
    shape_of,
)
from diffusion_infill.infill.core.lines import Frame
from diffusion_infill.infill.core.results import RunnerUp
from diffusion_infill.infill.core.sampler import DenoiseJob
from diffusion_infill.infill.core.spans import Span
from diffusion_infill.model.denoiser import SpecialIds

SWAP_SLOTS = 3  # the least sure slots of a fill that each give a fill one token from it
SWAP_MIN = 0.05  # the probability a token second at a slot needs to stand in for its own
WriteFill = Callable[[int, list[int]], tuple[str, int]]  # (span, ids) -> (text, kept); raises


@dataclass(frozen=True)
class Rated:
    """A span's rating: its fill's confidence and evidence, its runner-ups and theirs."""

    confidence: float | None = None
    runner_ups: tuple[RunnerUp, ...] = ()
    evidence: Evidence | None = None  # None: the span was rejected
    runner_evidence: tuple[Evidence, ...] = ()  # one per runner-up


def swaps(e: Evidence, null: int, slots: int = SWAP_SLOTS) -> list[Evidence]:
    """Fills one token from `e`'s: at each of its `slots` least sure slots (by the odds of
    the token second there), that token in place of its own, or the fill cut before it
    where that token is a null; and the fill one token longer where a null ended it; only
    where the token second there has at least SWAP_MIN of the probability."""
    out: list[Evidence] = []
    if len(e.probs) != len(e.ids):  # a copy: no odds were read
        return out
    order = sorted(range(len(e.ids)), key=lambda t: -e.seconds[t][1] / max(e.probs[t], 1e-9))
    for t in order[:slots]:
        second, p2 = e.seconds[t]
        if second < 0 or p2 < SWAP_MIN:
            continue
        if second == null:
            cut = replace(e, ids=e.ids[:t], probs=e.probs[:t], steps=e.steps[:t], end=p2)
            out.append(replace(cut, seconds=e.seconds[:t], end_second=(e.ids[t], e.probs[t])))
            continue
        out.append(
            replace(
                e,
                ids=(*e.ids[:t], second, *e.ids[t + 1 :]),
                probs=(*e.probs[:t], p2, *e.probs[t + 1 :]),
                seconds=(*e.seconds[:t], (e.ids[t], e.probs[t]), *e.seconds[t + 1 :]),
            )
        )
    if e.end_second is not None and e.end_second[0] >= 0 and e.end_second[1] >= SWAP_MIN:
        token, p2 = e.end_second
        out.append(
            replace(
                e,
                ids=(*e.ids, token),
                probs=(*e.probs, p2),
                steps=(*e.steps, e.steps[-1] if e.steps else 1),
                seconds=(*e.seconds, (null, e.end)),
                end=None,
                end_second=None,
            )
        )
    return out


def rate_fills(
    job: DenoiseJob | CandidateJob,
    chosen_ids: Sequence[list[int] | None],
    copied: Sequence[bool],
    *,
    text: str,
    spans: Sequence[Span],
    frames: Sequence[Frame | None],
    denoiser: object,
    write: WriteFill,
) -> list[Rated]:
    """Per span, the confidence of its chosen fill (`chosen_ids`; None: rejected, no
    rating) and up to `job.options.runner_ups` runner-ups."""
    calibrator = Calibrator.of(denoiser)
    special: SpecialIds = job.special if isinstance(job, DenoiseJob) else job.primary.special
    shapes = [shape_of(text, s, f is not None) for s, f in zip(spans, frames, strict=True)]
    found = decoded_candidates(job, shapes)
    limit = job.options.runner_ups
    passes = job.passes if isinstance(job, CandidateJob) else None

    def score(e: Evidence) -> float | None:
        return None if calibrator is None or e.decided else calibrator.probability(e)

    out: list[Rated] = []
    for i, ids in enumerate(chosen_ids):
        if ids is None:
            out.append(Rated())
            continue
        own = chosen(found.get(i, []), ids, special) or Evidence(
            shapes[i], tuple(ids), (), (), (), copied=copied[i], decided=not copied[i], checked=True
        )
        own_text, n = write(i, ids)
        copies = _copies(text, spans[i], shapes[i])
        facts = line_facts(text, spans[i], own_text)
        own = replace(own, copied=copied[i], copy_agrees=own_text.strip() in copies, line=facts)
        own = own.kept(n)
        ups: list[tuple[RunnerUp, Evidence]] = []
        if limit and not own.decided:
            pool = [e for e in found.get(i, []) if e.ids != own.ids] + swaps(own, special.null)
            ups = _runner_ups(
                i, own_text, pool, limit, write, passes, score, copies, spans[i], text
            )
        runner_ups = tuple(r for r, _ in ups)
        out.append(Rated(score(own), runner_ups, own, tuple(e for _, e in ups)))
    return out


def _runner_ups(
    i: int,
    own_text: str,
    pool: list[Evidence],
    limit: int,
    write: WriteFill,
    passes: Callable[[int, list[int]], bool] | None,
    score: Callable[[Evidence], float | None],
    copies: set[str],
    span: Span,
    text: str,
) -> list[tuple[RunnerUp, Evidence]]:
    """Up to `limit` fills of span `i` from `pool`, surest first (without a confidence:
    by their mean log-probability), each written (cut where it echoes the code after it)
    and, with checks, passing them; none that reads as `own_text` or another one listed,
    none blank."""
    rated = []
    for e in pool:
        try:
            written, n = write(i, list(e.ids))
        except DenoiserError:
            continue
        facts = line_facts(text, span, written)
        e = replace(e.kept(n), copy_agrees=written.strip() in copies, line=facts)
        conf = score(e)
        rated.append((conf if conf is not None else math.exp(_mean_log(e)), conf, written, e))
    seen = {own_text.strip()}
    out: list[tuple[RunnerUp, Evidence]] = []
    for _, conf, written, e in sorted(rated, key=lambda r: -r[0]):
        if not written.strip() or written.strip() in seen:
            continue
        if passes is not None and not passes(i, list(e.ids)):
            continue
        seen.add(written.strip())
        out.append((RunnerUp(written, conf), e))
        if len(out) == limit:
            break
    return out


def _copies(text: str, span: Span, shape: str) -> set[str]:
    """The copies of the code around an in-line span (stripped); none for other shapes."""
    if shape != "inline":
        return set()
    return {c.strip() for c in context_copies(text, span.start, span.end)}


def _mean_log(e: Evidence) -> float:
    return sum(math.log(max(p, 1e-9)) for p in e.probs) / len(e.probs) if e.probs else 0.0
