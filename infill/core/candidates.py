"""Candidates: a fill that fails its checks (infill/core/checks.py) loses to the next best.

    job = CandidateJob(canvases, options, ..., check=check)   # drive it like a DenoiseJob
    job.choices()                                               # per span: tokens or why not

The cost is bounded and visible, and paid only when a fill fails:

1. The primary round is the plain DenoiseJob, exactly what the engine decodes with the
   checks off. When it is done, every fill is checked; most pass, and that is all.
2. Alternatives: each window that holds a failing span (one whose length is not fixed)
   gets `candidates - 1` more canvases, decoded side by side in one more DenoiseJob,
   re-decoding the failing spans from `initial >> k` masks (shorter: the junk we see is a
   long allocation filled past what was meant; docs/log/architecture.md, "Checks"). A raced
   hole (`lengths` > 1; its length the model's guess) gets `lengths - 1` exact lengths
   instead: the last halvings before one token.
3. The best passing alternative wins, by the mean log-probability of its tokens with the
   canvas visible (one scoring pass); one token (or none) wins only when nothing longer
   passes. With none passing, the
   span is *rejected*: it keeps its text and says why.

Alternatives start from their window's context entries (infill/core/reused_entries.py); once
chosen, an in-line hole's fill meets the copies of the code around it
(infill/core/copy_fills.py). The rounds are one job for a driver, batched like any
DenoiseJob (canvases: alternatives.py); `CandidateJob.round` says which one it is in
(`Round`): PRIMARY -> ALTERNATIVES (failing spans only) -> SCORING (several passing) ->
COPIES (copies to score) -> DONE, each round skipped when it has nothing to do.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, replace
from enum import Enum

import numpy as np

from diffusion_infill.infill.core.alternatives import (
    Alternative,
    Scoring,
    alternative_canvases,
    mean_log_probs,
    scoring_rows,
)
from diffusion_infill.infill.core.canvas import Canvas, fill_ids
from diffusion_infill.infill.core.copy_fills import CopyRound
from diffusion_infill.infill.core.errors import DenoiserError
from diffusion_infill.infill.core.fill_checks import Check, Decode, FillChecks
from diffusion_infill.infill.core.options import SamplerOptions
from diffusion_infill.infill.core.reused_entries import FromWindows
from diffusion_infill.infill.core.sampler import DenoiseJob, LogitsRequest, StepRecord
from diffusion_infill.model.denoiser import SpecialIds

Ended = Callable[[int, list[int]], bool]  # (span index, tokens) -> ended without a null


class Round(Enum):
    """Where a CandidateJob is: each round's requests and what its logits go to."""

    PRIMARY = "primary"  # the plain decode
    ALTERNATIVES = "alternatives"  # failing spans decoded again, side by side
    SCORING = "scoring"  # one pass: several passing alternatives scored
    COPIES = "copies"  # one pass: copies of the context scored against the chosen fills
    DONE = "done"  # every span has its choice


@dataclass(frozen=True)
class Choice:
    """What a span ends with: the winning candidate's tokens, or why it has none."""

    ids: list[int] | None  # the fill's tokens (nulls dropped); None: rejected
    candidate: int  # 0: the primary decode, k: alternative k
    rejected: str | None = None  # why every candidate lost
    copied: bool = False  # a copy of the code around the hole (infill/core/copy_fills.py)


class CandidateJob:
    """A DenoiseJob in rounds: the primary, then alternatives for failing spans, then a
    scoring pass when a span has several passing alternatives (see the module docstring)."""

    def __init__(
        self,
        canvases: Sequence[Canvas],
        options: SamplerOptions,
        *,
        special: SpecialIds,
        vocab_size: int,
        decode: Decode,
        check: Check,
        neutral: list[str],
        ended: Ended | None = None,
    ) -> None:
        self.options = options
        self.ended = ended
        self.special = special
        self.vocab_size = vocab_size
        # the spans of each window, checked together
        windows = [{s.index for s in c.spans} for c in canvases if c.spans]
        self._checks = FillChecks(decode, check, neutral, windows)
        self._initial = {s.index: len(s.ids) for c in canvases for s in c.spans}
        self._raced = (
            {s.index for c in canvases for s in c.spans if s.raced and not s.exact}
            if options.lengths > 1
            else set()
        )
        self._alts: list[Alternative] = []  # per alternative canvas: (window, k)
        self.primary = DenoiseJob(
            canvases, options, special=special, vocab_size=vocab_size, ended=ended
        )
        self.rounds = [self.primary]
        self._copies = FromWindows(self.primary, [], self.primary)  # the alternatives'
        self._scoring: Scoring | None = None  # the scoring pass, when one is due
        self._scores: dict[tuple[int, int], float] = {}  # (span, k) -> its score
        self.round = Round.PRIMARY
        self._choices: list[Choice] | None = None
        self._copies_round: CopyRound | None = None  # context copies, scored once chosen
        self._pending: list[Choice] | None = None  # the choices while copies are scored
        self._passing: dict[int, list[int]] = {}  # failing span -> passing alternatives
        self._primary_ids: dict[int, list[int]] = {}
        self._failures: dict[int, str] = {}  # span -> why its primary fill fails
        self.scoring_passes = 0
        self._scoring_nfe = 0
        if self.primary.done:  # every slot decided before any pass: check them now
            self._next()

    # -- what a driver sees ---------------------------------------------------------

    @property
    def done(self) -> bool:
        return self.round is Round.DONE

    def _jobs(self) -> list[DenoiseJob]:
        """Every round's job."""
        return list(self.rounds)

    def _starts(self) -> list[int]:
        """The step each of `_jobs()` starts after, and last, the step the rounds end at."""
        starts, end = [0], self.primary.steps
        for r in self.rounds[1:]:
            starts.append(end)
            end += r.steps
        return starts + [end]

    @property
    def canvases(self) -> list[Canvas]:
        return [c for r in self._jobs() for c in r.canvases]

    @property
    def primary_canvases(self) -> list[Canvas]:
        """The primary decode's canvases (what a live view shows)."""
        return self.primary.canvases

    def _alt_canvases(self) -> list[Canvas]:  # in the order of `_alts`
        return self.rounds[1].canvases if len(self.rounds) > 1 else []

    @property
    def steps(self) -> int:
        return self._starts()[-1] + self.scoring_passes

    @property
    def nfe(self) -> int:
        return sum(r.nfe for r in self._jobs()) + self._scoring_nfe

    @property
    def scored(self) -> int:
        return sum(r.scored for r in self._jobs())

    @property
    def remasks(self) -> int:
        return sum(r.remasks for r in self._jobs())

    @property
    def candidates(self) -> int:
        """Alternative canvases decoded."""
        return len(self._alts)

    @property
    def trace(self) -> list[StepRecord]:
        out: list[StepRecord] = []
        canvases = 0
        for r, start in zip(self._jobs(), self._starts(), strict=False):
            out += [replace(t, step=t.step + start, canvas=t.canvas + canvases) for t in r.trace]
            canvases += len(r.canvases)
        return out

    def slots(self) -> tuple[int, int]:
        done, total = zip(*(r.slots() for r in self._jobs()), strict=True)
        return sum(done), sum(total)

    def cache_key(self, ci: int) -> tuple[str, int, int]:
        for r in self._jobs():
            if ci < len(r.canvases):
                return r.cache_key(ci)
            ci -= len(r.canvases)
        raise IndexError(ci)

    def cache_keys(self) -> list[Hashable]:
        """Every CacheHint key the rounds' requests carry (the copies' pass's too)."""
        copies = self._copies_round.keys() if self._copies_round else []
        return [key for r in self._jobs() for key in r.cache_keys()] + copies

    def copy_round(self, copies: CopyRound) -> None:
        """Score `copies` against the holes' chosen fills once chosen (copy_fills.py)."""
        self._copies_round = copies

    def requests(self) -> list[LogitsRequest]:
        match self.round:
            case Round.PRIMARY | Round.ALTERNATIVES:
                return self._copies(self.rounds[-1].requests())
            case Round.SCORING:
                assert self._scoring is not None
                return [
                    LogitsRequest(canvas.ids(), [p for _, ps in rows for p in ps])
                    for canvas, _, rows in self._scoring
                ]
            case Round.COPIES:
                assert self._copies_round is not None
                return self._copies_round.requests
        raise RuntimeError("the job is done")

    def advance(self, logits: Sequence[np.ndarray]) -> None:
        match self.round:
            case Round.PRIMARY | Round.ALTERNATIVES:
                self.rounds[-1].advance(logits)
                if self.rounds[-1].done:
                    self._next()
            case Round.SCORING:
                self._score(logits)
            case Round.COPIES:
                self._copied(logits)
            case Round.DONE:
                raise RuntimeError("the job is done")

    def choices(self) -> list[Choice]:
        if self._choices is None:
            raise RuntimeError("the candidates are not decided yet")
        return self._choices

    def passes(self, i: int, ids: list[int]) -> bool:
        """Whether `ids` as span `i`'s fill passes its checks beside the other choices."""
        return self._checks.passes(i, {j: c.ids for j, c in enumerate(self.choices())} | {i: ids})

    # -- rounds -----------------------------------------------------------------------

    def _ids(self, canvases: Sequence[Canvas]) -> dict[int, list[int]]:
        return {s.index: fill_ids(s.ids, self.special) for c in canvases for s in c.spans}

    def _next(self) -> None:
        """After a decoding round: check, then start the next round or decide."""
        if self.round is Round.PRIMARY:
            self._primary_ids = self._ids(self.primary_canvases)
            self._failures = self._checks.why(dict(self._primary_ids))
            made = alternative_canvases(
                self.primary.canvases,
                set(self._failures),
                raced=self._raced,
                initial=self._initial,
                options=self.options,
                mask=self.special.mask,
            )
            self._alts = [alt for _, alt in made]
            if not made:
                self._decide()
                return
            self.rounds.append(
                DenoiseJob(
                    [c for c, _ in made],
                    self.options,
                    special=self.special,
                    vocab_size=self.vocab_size,
                    ended=self.ended,
                )
            )
            self._copies = FromWindows(self.rounds[1], [a[0] for a in self._alts], self.primary)
            self.round = Round.ALTERNATIVES
            return
        self._judge()
        if self._scoring:
            self.round = Round.SCORING
        else:
            self._decide()

    def _judge(self) -> None:
        """Check each alternative canvas (its redone spans in place of the primary's);
        queue a scoring pass for the spans that have several passing candidates."""
        failing = set(self._failures)
        alt_canvases = self._alt_canvases()
        tokens: dict[tuple[int, int], int] = {}  # (span, k) -> tokens of its passing fill
        for ci, (_, k) in enumerate(self._alts):
            canvas = alt_canvases[ci]
            mine = {i: v for i, v in self._ids([canvas]).items() if i in failing}
            fails = self._checks.why(self._primary_ids | mine, [{s.index for s in canvas.spans}])
            for i in sorted(set(mine) - set(fails)):
                self._passing.setdefault(i, []).append(k)
                tokens[(i, k)] = len(mine[i])
        # one token (or none) is a last resort: it wins on one sure token, seldom right
        for i, ks in self._passing.items():
            self._passing[i] = [k for k in ks if tokens[(i, k)] > 1] or ks
        self._scoring = (
            scoring_rows(alt_canvases, self._alts, self._passing, self.special.null) or None
        )

    def _score(self, logits: Sequence[np.ndarray]) -> None:
        """The scoring pass: each passing alternative's mean log-probability."""
        assert self._scoring is not None
        if len(logits) != len(self._scoring):
            raise DenoiserError(
                f"the denoiser returned {len(logits)} logit arrays for "
                f"{len(self._scoring)} canvases"
            )
        self.scoring_passes += 1
        self._scoring_nfe += len(logits)
        self._scores.update(mean_log_probs(self._scoring, logits))
        self._scoring = None
        self._decide()

    def _decide(self) -> None:
        """Each span's choice; then one check of the chosen combination (a span that
        fails there is rejected too)."""
        alt_ids = {(i, 0): ids for i, ids in self._primary_ids.items()}
        for (_, k), canvas in zip(self._alts, self._alt_canvases(), strict=True):
            for s in canvas.spans:
                alt_ids[(s.index, k)] = fill_ids(s.ids, self.special)
        choices = []
        for i in range(len(self._checks.neutral)):
            if i not in self._failures:
                choices.append(Choice(self._primary_ids[i], 0))
            elif self._passing.get(i):
                # best score; a tie (to 1e-9: a mean of equal terms) goes to the lower k
                k = max(
                    self._passing[i], key=lambda k: (round(self._scores.get((i, k), 0.0), 9), -k)
                )
                choices.append(Choice(alt_ids[(i, k)], k))
            else:
                choices.append(Choice(None, 0, self._failures[i]))
        if self._copies_round is not None and self._copies_round.ask(
            self._chosen(choices),
            self.primary.canvases,
            [self.primary.cache_key(w) for w in range(len(self.primary.canvases))]
            if self.options.cache_refresh
            else None,
        ):
            self._pending = choices  # one more pass: the copies (`_copied`)
            self.round = Round.COPIES
            return
        self._finish(choices)

    def _finish(self, choices: list[Choice]) -> None:
        self._choices = self._verified(choices)
        self.round = Round.DONE

    def _chosen(self, choices: list[Choice]) -> dict[int, str]:
        """The text of each chosen fill whose tokens are valid text."""
        texts, bad = self._checks.texts({i: c.ids for i, c in enumerate(choices)})
        return {i: t for i, t in enumerate(texts) if choices[i].ids and i not in bad}

    def _copied(self, logits: Sequence[np.ndarray]) -> None:
        """The copies' pass: a hole's best copy that scores above its fill and passes the
        checks with the other choices replaces it."""
        assert self._copies_round is not None and self._pending is not None
        try:
            better = self._copies_round.ranked(logits)
        except ValueError as exc:
            raise DenoiserError(str(exc)) from None
        self.scoring_passes += 1
        self._scoring_nfe += len(logits)
        choices, self._pending = self._pending, None
        for i, copies in better.items():
            chosen = {j: c.ids for j, c in enumerate(choices)}
            for ids in copies:
                if self._checks.passes(i, chosen | {i: ids}):
                    choices[i] = Choice(ids, choices[i].candidate, copied=True)
                    break
        self._finish(choices)

    def _verified(self, choices: list[Choice]) -> list[Choice]:
        if not any(c.candidate or c.copied for c in choices):
            return choices
        fails = self._checks.why({i: c.ids for i, c in enumerate(choices)})
        return [
            Choice(None, c.candidate, fails[i]) if (c.candidate or c.copied) and i in fails else c
            for i, c in enumerate(choices)
        ]
