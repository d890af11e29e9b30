"""The length contest: a hole inside a line, decoded at its likeliest lengths beside the
network's own ending, the best of them by the model's confidence when it wrote them.

A hole with code before it on its line (an expression, a call's arguments, a condition, a
right-hand side) is where the network's own ending is furthest from the truth's: on
held-out part-of-line holes the true length is exact about twice as often as the
network's. The length head (model/length_head.py) ranks the lengths better than the
network's nulls, yet its likeliest taken alone does not pay; what pays is letting the
candidates decode and comparing what the model wrote (docs/log/architecture.md, "The
length contest"). So, for such a hole whose length the head is not sure of
(infill/core/head_lengths.py):

- its `CONTEST` likeliest lengths by the head are decoded exactly, each on a copy of the
  hole's canvas, beside the primary decode and in the same passes (CandidateJob's side
  round; `contest_canvases`);
- when both are done, the network's own fill and each contest fill that passes the checks
  are scored by the sum of their tokens' log-probabilities at the step that committed them
  (StepRecord.logp; `commit_sum`) plus `PRIOR_WEIGHT` x the head's log-probability of
  their length (`score`), and the best wins; a tie goes to the network's own fill;
- when none passes, the hole fails as before and races the head's next lengths.

On a GPU the copies share the passes; on a CPU they cost what they hold.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from diffusion_infill.infill.core.alternatives import shorter
from diffusion_infill.infill.core.canvas import Canvas, fill_ids
from diffusion_infill.infill.core.copies import FromWindows
from diffusion_infill.infill.core.sampler import DenoiseJob
from diffusion_infill.infill.core.spans import Span
from diffusion_infill.infill.core.steps import LogitsRequest, StepRecord

CONTEST = 3  # the head's likeliest lengths decoded beside the network's own ending
PRIOR_WEIGHT = 0.5  # the head's log-probability of a length, weighed against the fill's


@dataclass(frozen=True)
class Contest:
    """The holes in a contest, by span index: the lengths decoded (likeliest first) and
    the head's log-probability of each length, 0..slots - 1 and "slots or more"."""

    lengths: dict[int, tuple[int, ...]]
    prior: dict[int, tuple[float, ...]]

    def score(self, span: int, length: int, commit: float) -> float:
        """A candidate's score: its commit sum plus the weighed prior of its length (a
        length past the head's last class counts as that class)."""
        prior = self.prior[span]
        return commit + PRIOR_WEIGHT * prior[min(length, len(prior) - 1)]


class SideRound:
    """The contest's canvases (`contest_canvases`), decoded beside a `primary` round in
    its passes from its next request on (`start`: the primary's steps before the side's
    first): requests are the primary's, then the side job's (`job`); `alone` counts the
    passes after the primary was done. Logits for a request the primary made before the
    side round began are the primary's alone."""

    def __init__(self, primary: DenoiseJob, contest: Contest) -> None:
        made = contest_canvases(primary.canvases, contest, primary.special.mask)
        self.contest = contest
        self.ks = [k for _, k, _ in made]  # per side canvas: which of its holes' lengths
        self.start = primary.steps
        self.alone = 0
        self.job = DenoiseJob(
            [c for c, _, _ in made],
            primary.options,
            special=primary.special,
            vocab_size=primary.vocab_size,
            ended=primary.ended,
        )
        self._primary = primary
        self._split: int | None = None  # the primary's share of the last requests
        # a copy's first pass starts from its window's entries (infill/core/copies.py)
        self._copies = FromWindows(self.job, [w for _, _, w in made], primary)

    @property
    def done(self) -> bool:
        return self._primary.done and self.job.done

    def requests(self) -> list[LogitsRequest]:
        first = [] if self._primary.done else self._primary.requests()
        self._split = len(first)
        side = [] if self.job.done else self.job.requests()
        return first + self._copies(side)

    def advance(self, logits: Sequence[np.ndarray]) -> None:
        n = self._split
        if n is None:  # requested before the side round began
            self.start += 1
            self._primary.advance(logits)
            return
        if n:
            self._primary.advance(logits[:n])
        else:
            self.alone += 1
        if len(logits) > n:
            self.job.advance(logits[n:])

    def winners(
        self, passes: Callable[[int, list[int]], bool], kept: Callable[[int, list[int]], int]
    ) -> dict[int, tuple[int, list[int]]]:
        """`settle` over the two rounds."""
        return settle(self.contest, self._primary, self.job, self.ks, passes, kept)


def contest_canvases(
    canvases: Sequence[Canvas], contest: Contest, mask: int
) -> list[tuple[Canvas, int, int]]:
    """(canvas, k, window) for k = 1..: a copy of each window's canvas that holds a hole of
    the contest, with that hole remade as exactly its k-th length in masks (a hole with
    fewer lengths keeps its last); the window's other spans are copied as they stand and
    go on decoding there (what they write on a copy is not used)."""
    out: list[tuple[Canvas, int, int]] = []
    for w, c in enumerate(canvases):
        mine = [s.index for s in c.spans if s.index in contest.lengths]
        rounds = max((len(contest.lengths[i]) for i in mine), default=0)
        for k in range(1, rounds + 1):
            spans = [
                shorter(s, _kth(contest.lengths[s.index], k), exact=True, mask=mask)
                if s.index in contest.lengths
                else replace(s, ids=list(s.ids))
                for s in c.spans
            ]
            out.append((c.with_spans(spans), k, w))
    return out


def _kth(lengths: tuple[int, ...], k: int) -> int:
    return lengths[min(k, len(lengths)) - 1]


def commit_sum(
    trace: Sequence[StepRecord], canvas: int, span: int, upto: int | None = None
) -> float:
    """The sum of the log-probabilities at commit of span `span`'s tokens on canvas
    `canvas` of a job's trace, its first `upto` slots (all: None); a slot masked again
    counts from its next commit; nulls count 0."""
    last: dict[int, float] = {}
    for r in trace:
        if r.canvas != canvas:
            continue
        for slot in r.remasked:
            if slot[0] == span:
                last.pop(slot[1], None)
        for (k, j), lp in zip(r.committed, r.logp, strict=False):
            if k == span:
                last[j] = lp
    return sum(v for j, v in last.items() if upto is None or j < upto)


def settle(
    contest: Contest,
    primary: DenoiseJob,
    side: DenoiseJob,
    side_ks: Sequence[int],
    passes: Callable[[int, list[int]], bool],
    kept: Callable[[int, list[int]], int],
) -> dict[int, tuple[int, list[int]]]:
    """Each hole of `contest` whose fills, the `primary` round's own (k 0) and the `side`
    round's (`side_ks`: k per side canvas), include one that `passes` its
    checks: (k, tokens) of the best-scoring such fill; a tie goes to the lower k. A fill
    is scored as returned: the tokens it `kept` once cut where it wrote the code after
    it again (infill/core/echo.py), the length the head is asked about."""
    fills: dict[int, list[tuple[float, int, list[int]]]] = {}
    for job, ks in ((primary, [0] * len(primary.canvases)), (side, side_ks)):
        for ci, (canvas, k) in enumerate(zip(job.canvases, ks, strict=True)):
            for s in canvas.spans:
                if s.index in contest.lengths:
                    ids = fill_ids(s.ids, job.special)
                    n = kept(s.index, ids)
                    score = contest.score(s.index, n, commit_sum(job.trace, ci, s.index, n))
                    fills.setdefault(s.index, []).append((score, k, ids))
    won: dict[int, tuple[int, list[int]]] = {}
    for i, entries in fills.items():
        for _, k, ids in sorted(entries, key=lambda e: (-e[0], e[1])):
            if passes(i, ids):
                won[i] = (k, ids)
                break
    return won


def inline_holes(text: str, spans: Sequence[Span]) -> frozenset[int]:
    """The indices of `spans` that start after code on their line (not only indentation):
    the holes a contest is for."""
    return frozenset(
        i for i, s in enumerate(spans) if text[text.rfind("\n", 0, s.start) + 1 : s.start].strip()
    )
