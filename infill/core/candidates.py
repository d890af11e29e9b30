"""Candidates: a fill that fails its checks (infill/core/checks.py) loses to the next best.

    job = CandidateJob(canvases, options, ..., check=check)   # drive it like a DenoiseJob
    job.choices()                                               # per span: tokens or why not

The design keeps the cost bounded and visible, and pays it only when a fill fails:

1. The primary round is the plain DenoiseJob, exactly what the engine decodes with the
   checks off. When it is done, every fill is checked. Most pass, and then that is all:
   the checks cost a few milliseconds and no forward pass.
2. Alternatives: each window that holds a failing span (one whose length is not fixed)
   gets `candidates - 1` more canvases, decoded side by side in one more DenoiseJob (one
   batched pass per step, as for several windows). Alternative k re-decodes the failing
   spans from masks with a shorter allocation, `initial >> k` slots (at least one; still
   with nulls and growth), and keeps the window's passing spans as decoded. Shorter,
   because the junk we see is a long allocation filled past the end of what was meant
   (`default=None, default=None`, a `#` that comments out the rest of the line); the
   held-out numbers in docs/ARCHITECTURE.md ("Checks") are what this choice rests on.
   A span of fixed length (exact, or `<mask:N>` with exact length) has no alternative.
3. The best passing alternative wins, by the model's own score: the mean log-probability
   of the fill's tokens with the whole canvas visible, one scoring pass (only when a span
   has two passing alternatives or more). With none passing, the span is *rejected*: the
   result keeps the span's text as it was and says why.

Raced lengths (`lengths` > 1): a failing hole whose length the model chose
(SpanSlots.raced: the default allocation or a hint, not a rewrite's own length) gets
`lengths - 1` alternatives of exact lengths instead, the last halvings of its allocation
before one token (4, 2, 1 after 16 with `lengths` 4; 8 too with 5), and the model's score
picks among those that pass. Only failing holes race: a primary fill that passes is kept,
so a hole the model gets right costs nothing more. Racing every hole from the start and
letting the score pick, primary included, was worse: held-out one-line exact match 8.0%
against 11.0% for the primary alone, at 3x the time (docs/ARCHITECTURE.md, "Length").
An alternative of one token (or none) wins only when no longer one passes: the score, a
mean, rates a lone confident token (`return`, `def`, `#`) above longer fills and it is
seldom what was meant.

So a request costs the primary's passes, plus for a failing hole at most `candidates - 1`
(or `lengths - 1`) shorter decodes batched in one more round, plus one scoring pass,
and `FillStats.candidates` / `nfe` show what it took. The rounds are one job for whoever
drives it (`requests()` / `advance()` / `done`), so a worker batches them with other
requests' steps like any DenoiseJob. The alternative canvases and the scoring pass are
built in infill/core/alternatives.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from diffusion_infill.infill.core.alternatives import (
    Alternative,
    Scoring,
    alternative_canvases,
    mean_log_probs,
    scoring_rows,
)
from diffusion_infill.infill.core.canvas import Canvas, fill_ids
from diffusion_infill.infill.core.checks import Problem, Range, check_fills, splice, summary
from diffusion_infill.infill.core.errors import DenoiserError
from diffusion_infill.infill.core.options import SamplerOptions
from diffusion_infill.infill.core.sampler import DenoiseJob, LogitsRequest, StepRecord
from diffusion_infill.model.denoiser import SpecialIds

# (fill text of every span, the spans to look at) -> their problems in that combination
Check = Callable[[list[str], set[int]], list[Problem]]
Decode = Callable[[int, list[int]], str]  # (span index, tokens) -> text; DenoiserError
Ended = Callable[[int, list[int]], bool]  # (span index, tokens) -> ended without a null


@dataclass(frozen=True)
class Choice:
    """What a span ends with: the winning candidate's tokens, or why it has none."""

    ids: list[int] | None  # the fill's tokens (nulls dropped); None: rejected
    candidate: int  # 0: the primary decode, k: alternative k
    rejected: str | None = None  # why every candidate lost


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
        self._decode = decode
        self._check = check
        self._neutral = neutral  # per span: its text before (what a rejected span keeps)
        # the spans of each window, checked together (`_why`)
        self._windows = [{s.index for s in c.spans} for c in canvases if c.spans]
        rest = set(range(len(neutral))).difference(*self._windows)
        self._windows += [rest] if rest else []
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
        self._scoring: Scoring | None = None  # the scoring pass, when one is due
        self._scores: dict[tuple[int, int], float] = {}  # (span, k) -> mean log p
        self._choices: list[Choice] | None = None
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
        return self._choices is not None

    @property
    def canvases(self) -> list[Canvas]:
        return [c for r in self.rounds for c in r.canvases]

    @property
    def primary_canvases(self) -> list[Canvas]:
        """The primary decode's canvases (what a live view shows)."""
        return self.primary.canvases

    def _alt_canvases(self) -> list[Canvas]:
        """The alternatives' canvases, in the order of `_alts`."""
        return self.rounds[1].canvases if len(self.rounds) > 1 else []

    @property
    def steps(self) -> int:
        return sum(r.steps for r in self.rounds) + self.scoring_passes

    @property
    def nfe(self) -> int:
        return sum(r.nfe for r in self.rounds) + self._scoring_nfe

    @property
    def scored(self) -> int:
        return sum(r.scored for r in self.rounds)

    @property
    def remasks(self) -> int:
        return sum(r.remasks for r in self.rounds)

    @property
    def candidates(self) -> int:
        """Alternative canvases decoded."""
        return len(self._alts)

    @property
    def trace(self) -> list[StepRecord]:
        out: list[StepRecord] = []
        steps = canvases = 0
        for r in self.rounds:
            out += [replace(t, step=t.step + steps, canvas=t.canvas + canvases) for t in r.trace]
            steps, canvases = steps + r.steps, canvases + len(r.canvases)
        return out

    def slots(self) -> tuple[int, int]:
        done, total = zip(*(r.slots() for r in self.rounds), strict=True)
        return sum(done), sum(total)

    def cache_key(self, ci: int) -> tuple[str, int, int]:
        for r in self.rounds:
            if ci < len(r.canvases):
                return r.cache_key(ci)
            ci -= len(r.canvases)
        raise IndexError(ci)

    def requests(self) -> list[LogitsRequest]:
        if self.done:
            raise RuntimeError("the job is done")
        if self._scoring is not None:
            return [
                LogitsRequest(canvas.ids(), [p for _, ps in rows for p in ps])
                for canvas, _, rows in self._scoring
            ]
        return self.rounds[-1].requests()

    def advance(self, logits: Sequence[np.ndarray]) -> None:
        if self._scoring is not None:
            self._score(logits)
        else:
            self.rounds[-1].advance(logits)
            if self.rounds[-1].done:
                self._next()

    def choices(self) -> list[Choice]:
        if self._choices is None:
            raise RuntimeError("the candidates are not decided yet")
        return self._choices

    # -- rounds -----------------------------------------------------------------------

    def _ids(self, canvases: Sequence[Canvas]) -> dict[int, list[int]]:
        return {s.index: fill_ids(s.ids, self.special) for c in canvases for s in c.spans}

    def _texts(self, ids: dict[int, list[int]]) -> tuple[list[str], dict[int, str]]:
        """Each span's text, and the spans whose tokens are no valid text (and why)."""
        texts, bad = [], {}
        for i in range(len(self._neutral)):
            try:
                texts.append(self._decode(i, ids[i]))
            except DenoiserError as exc:
                texts.append(self._neutral[i])
                bad[i] = str(exc)
        return texts, bad

    def _next(self) -> None:
        """After a round: check, then start the next round or decide."""
        if len(self.rounds) == 1:
            self._primary_ids = self._ids(self.primary_canvases)
            texts, bad = self._texts(self._primary_ids)
            self._failures = self._why(texts, bad)
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
            return
        self._judge()
        if not self._scoring:
            self._decide()

    def _why(
        self, texts: list[str], bad: dict[int, str], windows: Sequence[set[int]] | None = None
    ) -> dict[int, str]:
        """Why each failing span of `windows` (default: every window) fails, by span. A
        window's spans are checked together, the other windows' spans as they were
        (neutral): a window's fills never saw another's, and a fill that breaks the parse
        far around it must not fail the spans of other windows with it."""
        out = dict(bad)
        for group in self._windows if windows is None else windows:
            mixed = (
                texts
                if len(self._windows) == 1
                else [t if i in group else self._neutral[i] for i, t in enumerate(texts)]
            )
            problems = [p for p in self._check(mixed, group) if p.range in group]
            for i in sorted({p.range for p in problems} - set(out)):
                out[i] = summary([p for p in problems if p.range == i])
        return out

    def _judge(self) -> None:
        """Check each alternative canvas (its redone spans in place of the primary's);
        queue a scoring pass for the spans that have several passing candidates."""
        failing = set(self._failures)
        alt_canvases = self._alt_canvases()
        tokens: dict[tuple[int, int], int] = {}  # (span, k) -> tokens of its passing fill
        for ci, (_, k) in enumerate(self._alts):
            canvas = alt_canvases[ci]
            mine = {i: v for i, v in self._ids([canvas]).items() if i in failing}
            texts, bad = self._texts(dict(self._primary_ids) | mine)
            fails = self._why(texts, bad, [{s.index for s in canvas.spans}])
            for i in sorted(set(mine) - set(fails)):
                self._passing.setdefault(i, []).append(k)
                tokens[(i, k)] = len(mine[i])
        # A fill of one token (or none) is a last resort: scored against longer ones it
        # wins on its single confident token (`return`, `def`, `#`) and is seldom right.
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
        for i in range(len(self._neutral)):
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
        self._choices = self._verified(choices)

    def _verified(self, choices: list[Choice]) -> list[Choice]:
        if not any(c.candidate for c in choices):
            return choices
        texts, bad = self._texts({i: c.ids or [] for i, c in enumerate(choices)})
        texts = [
            t if c.ids is not None else self._neutral[i]
            for i, (t, c) in enumerate(zip(texts, choices, strict=True))
        ]
        fails = self._why(texts, bad)
        return [
            Choice(None, c.candidate, fails[i]) if c.candidate and i in fails else c
            for i, c in enumerate(choices)
        ]


def checked_job(
    text: str,
    before: str,
    ranges: list[Range],
    canvases: Sequence[Canvas],
    options: SamplerOptions,
    *,
    special: SpecialIds,
    vocab_size: int,
    decode: Decode,
    language: str | None,
    kinds: Sequence[str],
    ended: Ended | None = None,
) -> CandidateJob:
    """The CandidateJob of a fill of `ranges` of `text`, checked against `before` (the text
    with its holes neutralised, or as given for a rewrite; same offsets as `text`)."""

    def check(texts: list[str], only: set[int]) -> list[Problem]:
        after, filled = splice(text, ranges, texts)
        return check_fills(before, after, ranges, filled, language=language, kinds=kinds, only=only)

    return CandidateJob(
        canvases,
        options,
        special=special,
        vocab_size=vocab_size,
        decode=decode,
        check=check,
        neutral=[before[a:b] for a, b in ranges],
        ended=ended,
    )
