"""A prepared fill (`PreparedFill`): a request's DenoiseJob, and what turns the job's slots
into a FillResult once it is done.

The result is the original text with each span's range replaced by the decoded fill (null
tokens dropped); text outside the spans is copied, never decoded, so it comes back byte
for byte. With the checks on, a span whose every candidate failed keeps its own text and
says why (infill/core/candidates.py).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

from diffusion_infill.infill.core.candidates import CandidateJob
from diffusion_infill.infill.core.canvas import fill_ids, render
from diffusion_infill.infill.core.confidence import Calibrator
from diffusion_infill.infill.core.diff import minimal_edits
from diffusion_infill.infill.core.echo import Ends
from diffusion_infill.infill.core.errors import OptionError
from diffusion_infill.infill.core.fills import REPLACEMENT, decoded_fill
from diffusion_infill.infill.core.line_holes import Recast
from diffusion_infill.infill.core.lines import Frame, framed
from diffusion_infill.infill.core.rated import Rated, rate_fills
from diffusion_infill.infill.core.results import FillResult, FillStats, SpanFill, TraceStep
from diffusion_infill.infill.core.sampler import DenoiseJob
from diffusion_infill.infill.core.spans import Span
from diffusion_infill.infill.core.window import Window
from diffusion_infill.infill.core.word_starts import given_text
from diffusion_infill.model.denoiser import Denoiser


class PreparedFill:
    """A request ready to denoise: its DenoiseJob, and what turns the job's slots into a
    result once it is done."""

    def __init__(
        self,
        text: str,
        spans: list[Span],
        windows: list[Window],
        job: DenoiseJob | CandidateJob,
        denoiser: Denoiser,
        *,
        rewrite: bool,
        started: float,
        ends: Ends,
        frames: Sequence[Frame | None] | None = None,
        probes: int = 0,
        given: Sequence[Span] = (),
        heads: Sequence[str] = (),
    ) -> None:
        self.text = text
        self.spans = spans  # as the job fills them
        # the spans as asked, and per span the word's head its fill took over
        # (infill/core/word_starts.py): its fill is the job's after the head
        self.given = list(given) if given else list(spans)
        self.heads = list(heads) if heads else [""] * len(spans)
        self.ends = ends  # per span: its echo key and whether it starts after a space
        self.windows = windows
        self.job = job
        self.denoiser = denoiser
        self.rewrite = rewrite
        self.started = started
        # per span: what the engine writes around its fill (a selection of whole lines:
        # infill/core/lines.py), None when the model writes it all
        self.frames = list(frames) if frames is not None else [None] * len(spans)
        self.probes = probes  # forward passes before the job (infill/core/indents.py)
        self.rated: list[Rated] = []  # per span, once `result()` has read the fills
        if job.options.min_confidence is not None and Calibrator.of(denoiser) is None:
            raise OptionError(
                "min_confidence needs a model with confidence weights (confidence.json "
                "beside its weights: python -m diffusion_infill.model.training.fit_confidence "
                "fits them)"
            )

    def as_given(self, text: str, recast: Recast) -> PreparedFill:
        """This fill, its result read in `text`, the text as given, where `recast`
        (infill/core/line_holes.py) wrote its line holes as selected lines: each fill
        replaces what its hole is there, and windows are given in its offsets."""
        self.text = text
        self.given = list(recast.given)
        self.spans = [
            replace(g, start=g.start - len(h)) for g, h in zip(self.given, self.heads, strict=True)
        ]
        for i, rest in recast.rests.items():  # a line alone: its fill ends as the line did
            frame = self.frames[i]
            if frame is not None:
                self.frames[i] = replace(frame, tail=rest)
        self.windows = [
            replace(w, start=recast.given_offset(w.start), end=recast.given_offset(w.end))
            for w in self.windows
        ]
        return self

    def span_texts(self) -> list[tuple[int, str]]:
        """Each span's slots as they stand, as text (`░` masked, `∅` null), by span index:
        what a live view shows after a step."""
        canvases = (
            self.job.primary_canvases if isinstance(self.job, CandidateJob) else self.job.canvases
        )
        return sorted((s.index, self._render(s.ids)) for c in canvases for s in c.spans)

    def result(self) -> FillResult:
        if not self.job.done:
            raise RuntimeError("the fill's job is not done")
        fills = self._span_fills()
        parts: list[str] = []
        pos = 0
        for f in fills:
            parts += [self.text[pos : f.span.start], f.text]
            pos = f.span.end
        parts.append(self.text[pos:])
        edits = minimal_edits(
            self.text,
            [(f.span.start, f.span.end, f.text, self.rewrite) for f in fills if f.rejected is None],
        )
        return FillResult(
            "".join(parts), self.text, edits, fills, self.windows, self._stats(fills), self._trace()
        )

    def _render(self, ids: Sequence[int]) -> str:
        return render(ids, self.denoiser.special, self.denoiser.decode)

    def _span_fills(self) -> list[SpanFill]:
        """Each span's fill and its confidence and runner-ups (infill/core/rated.py); with
        the checks on, the winning candidate's, or the span's own text and the reason when
        every candidate failed; the same where its confidence is below `min_confidence`."""
        n = len(self.spans)
        if isinstance(self.job, CandidateJob):
            choices = self.job.choices()
            chosen = [c.ids for c in choices]
            why, copied = [c.rejected for c in choices], [c.copied for c in choices]
        else:
            slots = {s.index: s for c in self.job.canvases for s in c.spans}
            chosen = [fill_ids(slots[i].ids, self.denoiser.special) for i in range(n)]
            why, copied = [None] * n, [False] * n
        rated = self.rated = [
            self._given_rated(r, h)
            for r, h in zip(self._ratings(chosen, copied), self.heads, strict=True)
        ]
        floor = self.job.options.min_confidence
        fills: list[SpanFill] = []
        for i, (span, ids) in enumerate(zip(self.given, chosen, strict=True)):
            confidence, runner_ups = rated[i].confidence, rated[i].runner_ups
            kept = self.text[span.start : span.end]
            if ids is None:
                fills.append(SpanFill(span, kept, 0, why[i]))
                continue
            if floor is not None and confidence is not None and confidence < floor:
                low = f"its confidence {confidence:.2f} is below the minimum {floor:g}"
                fills.append(SpanFill(span, kept, 0, low, confidence, runner_ups))
                continue
            text, tokens = self._write(i, ids)
            given = given_text(text, self.heads[i])
            if given is None:
                other = f"its fill does not continue the word before it ({self.heads[i]!r})"
                fills.append(SpanFill(span, kept, 0, other, confidence, runner_ups))
            else:
                fills.append(SpanFill(span, given, tokens, None, confidence, runner_ups))
        return fills

    @staticmethod
    def _given_rated(rated: Rated, head: str) -> Rated:
        """`rated` for the span as asked: its runner-ups' texts after the word's `head`,
        none that does not start with it."""
        if not head:
            return rated
        ups = [
            (replace(u, text=t), e)
            for u, e in zip(rated.runner_ups, rated.runner_evidence, strict=True)
            if (t := given_text(u.text, head)) is not None and t.strip()
        ]
        return replace(
            rated, runner_ups=tuple(u for u, _ in ups), runner_evidence=tuple(e for _, e in ups)
        )

    def _ratings(self, chosen: list[list[int] | None], copied: list[bool]) -> list[Rated]:
        """Each span's rating (infill/core/rated.py); none asked where the model has no
        confidence weights and no runner-ups are asked for (nothing to compute)."""
        if Calibrator.of(self.denoiser) is None and not self.job.options.runner_ups:
            return [Rated() for _ in chosen]
        return rate_fills(
            self.job,
            chosen,
            copied,
            text=self.text,
            spans=self.spans,
            frames=self.frames,
            denoiser=self.denoiser,
            write=self._write,
        )

    def _write(self, i: int, ids: list[int]) -> tuple[str, int]:
        """Span `i`'s fill `ids` as written (`decoded_fill`, framed), and the tokens kept."""
        text, n = decoded_fill(
            ids,
            self.denoiser.decode,
            REPLACEMENT in self.text,
            i,
            self.ends.keys[i],
            self.ends.spaced[i],
        )
        return framed(text, self.frames[i]), n

    def _stats(self, fills: list[SpanFill]) -> FillStats:
        job = self.job
        tokens = sum(f.tokens for f in fills)
        nfe = job.nfe + self.probes
        return FillStats(
            model=getattr(self.denoiser, "name", type(self.denoiser).__name__),
            spans=len(self.spans),
            windows=len(self.windows),
            tokens=tokens,
            nfe=nfe,
            steps=job.steps + self.probes,
            ms=round((time.perf_counter() - self.started) * 1000, 3),
            nfe_per_token=nfe / max(tokens, 1),
            scored=job.scored,
            remasks=job.remasks,
            grown=sum(n for r in job.trace for _, n in r.grown),
            trimmed=sum(c.trimmed for c in job.canvases),
            candidates=job.candidates if isinstance(job, CandidateJob) else 0,
            rejected=sum(f.rejected is not None for f in fills),
        )

    def _trace(self) -> list[TraceStep]:
        return [
            TraceStep(
                step=r.step,
                canvas=r.canvas,
                scored=r.scored,
                committed=r.committed,
                remasked=r.remasked,
                grown=r.grown,
                spans=tuple((k, self._render(ids)) for k, ids in r.spans),
            )
            for r in self.job.trace
        ]
