"""What the engine knows of how sure the model was of a span's fill: its `Evidence`.

Read from what a decode already keeps, at no forward pass: each committed token's
probability in the pass that committed it, the likeliest other token there and its
probability (`StepRecord.odds`), the pass it came in, the probability of the null that
ended the fill, the runs of nulls between its tokens (the fill reads on across them, as
`canvas.fill_ids` does), whether the fill passed the checks at the first try or was a copy of the
code around the hole, and the hole's shape.
infill/core/confidence.py turns it into a calibrated probability that the fill is right.

    found = decoded_candidates(job, special)  # per span: every fill decoded, its evidence
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from diffusion_infill.infill.core.candidates import CandidateJob
from diffusion_infill.infill.core.canvas import fill_ids
from diffusion_infill.infill.core.sampler import DenoiseJob
from diffusion_infill.infill.core.spans import Span
from diffusion_infill.infill.core.steps import StepRecord
from diffusion_infill.model.denoiser import SpecialIds

# a hole's shape: the code of a line after its indentation (or an empty line's), a whole
# line (indentation and line break in the span), inside a line (code before or after it
# on its line), several lines
SHAPES = ("cursor", "line", "inline", "lines")
FORCED = (1.0, -1, 0.0)  # the odds of a slot filled by force (a null tail) or decided


@dataclass(frozen=True)
class Evidence:
    """How one fill of one span was decoded (see the module docstring)."""

    shape: str  # one of SHAPES
    ids: tuple[int, ...]  # the fill's tokens (nulls dropped)
    probs: tuple[float, ...]  # per token: its probability in the pass that committed it
    steps: tuple[int, ...]  # per token: that pass, counted in its round (1: the first)
    seconds: tuple[tuple[int, float], ...]  # per token: the likeliest other token, its p
    end: float | None = None  # p of the null that ended the fill (None: no null did)
    end_second: tuple[int, float] | None = None  # the likeliest token in the null's place
    cap: int | None = None  # the passes its round may take (the last commits the rest)
    first_try: bool = True  # the checks passed the first decode (or there are none)
    copied: bool = False  # a copy of the code around the hole (infill/core/copy_fills.py)
    decided: bool = False  # its tokens were given, not decoded (a repair's swap)
    checked: bool = False  # the fill had to pass the checks (infill/core/checks.py)
    # an in-line fill that reads as text following the same code elsewhere in the text
    # (infill/core/copy_texts.py `context_copies`)
    copy_agrees: bool = False
    line: LineFacts | None = None  # the line the fill completes (`line_facts`)
    gaps: int = 0  # runs of nulls between its tokens (the text reads on across them)

    def kept(self, n: int) -> Evidence:
        """This evidence for the fill's first `n` tokens (the rest cut: the fill wrote the
        code after it again, infill/core/echo.py); a cut fill has no end of its own."""
        if n >= len(self.ids):
            return self
        cut = replace(self, ids=self.ids[:n], probs=self.probs[:n], steps=self.steps[:n])
        return replace(cut, seconds=self.seconds[:n], end=None, end_second=None)


@dataclass(frozen=True)
class LineFacts:
    """What the line a fill completes looks like: the code of the span's line before it,
    the fill's first line and, where the fill is one line, the rest of the line after the
    span, strings left out (`line_facts`)."""

    depth: int  # brackets left open at its end (below 0: more closed than opened)
    dips: bool  # it closes a bracket it never opened
    colon: bool  # it ends with ':' (a block opens)
    chars: int  # characters of the fill's first line, stripped
    opened: bool  # brackets are open where the span starts


_STRING = re.compile(r"'(?:\\.|[^'\\\n])*'|\"(?:\\.|[^\"\\\n])*\"")  # a one-line string


def _depth(code: str) -> tuple[int, int]:
    """The bracket depth at the end of `code` (strings left out) and its lowest point."""
    depth = low = 0
    for ch in _STRING.sub("", code):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            low = min(low, depth)
    return depth, low


def line_facts(text: str, span: Span, written: str) -> LineFacts:
    """The `LineFacts` of the line that `written`, a fill of `span` of `text`, completes."""
    before = text[text.rfind("\n", 0, span.start) + 1 : span.start]
    first, newline, _ = written.partition("\n")
    line_end = text.find("\n", span.end)
    after = "" if newline else text[span.end : len(text) if line_end < 0 else line_end]
    line = (before + first.rstrip("\r") + after).rstrip()
    depth, low = _depth(line)
    return LineFacts(depth, low < 0, line.endswith(":"), len(first.strip()), _depth(before)[0] > 0)


def shape_of(text: str, span: Span, framed: bool) -> str:
    """The SHAPES name of `span` of `text` (`framed`: the engine writes its indentation
    and line break, a whole-line span)."""
    inside = text[span.start : span.end]
    if framed:
        return "line" if inside.count("\n") <= 1 else "lines"
    if "\n" in inside.rstrip("\n"):
        return "lines"
    before = text[text.rfind("\n", 0, span.start) + 1 : span.start]
    line_end = text.find("\n", span.end)
    after = text[span.end : len(text) if line_end < 0 else line_end]
    return "inline" if before.strip() or after.strip() else "cursor"


def slot_records(
    trace: Sequence[StepRecord], canvas: int, span: int
) -> dict[int, tuple[int, tuple[float, int, float]]]:
    """Slot -> (the step that last committed it, its odds) for span `span` on canvas
    `canvas` of a job's trace; a slot masked again counts from its next commit."""
    last: dict[int, tuple[int, tuple[float, int, float]]] = {}
    for r in trace:
        if r.canvas != canvas:
            continue
        for k, j in r.remasked:
            if k == span:
                last.pop(j, None)
        for n, (k, j) in enumerate(r.committed):
            if k == span:
                last[j] = (r.step, r.odds[n] if n < len(r.odds) else FORCED)
    return last


def decoded(
    job: DenoiseJob,
    canvas: int,
    span: int,
    shape: str,
    *,
    first_try: bool = True,
    checked: bool = False,
) -> Evidence:
    """The evidence of span `span`'s fill on canvas `canvas` of `job` as it stands."""
    null = job.special.null
    slots = next(s for s in job.canvases[canvas].spans if s.index == span)
    records = slot_records(job.trace, canvas, span)
    probs, steps, seconds, ids = [], [], [], []
    end = end_second = None
    gaps = 0
    last = max((j for j, t in enumerate(slots.ids) if t != null), default=-1)
    for j, t in enumerate(slots.ids):
        step, (p, second, p2) = records.get(j, (0, FORCED))
        if t == null:
            if j > last:  # the null that ends the fill
                if second >= 0:  # one the model predicted (not a tail filled by force)
                    end, end_second = p, (second, p2)
                break
            gaps += j == 0 or slots.ids[j - 1] != null  # a run of nulls inside the fill
            continue
        ids.append(t)
        probs.append(p)
        steps.append(step)
        seconds.append((second, p2))
    return Evidence(
        shape,
        tuple(ids),
        tuple(probs),
        tuple(steps),
        tuple(seconds),
        end,
        end_second,
        job.options.max_steps,
        first_try=first_try,
        decided=bool(ids) and all(s == 0 for s in steps),
        checked=checked,
        gaps=gaps,
    )


def rounds(job: DenoiseJob | CandidateJob) -> list[tuple[DenoiseJob, bool]]:
    """Each round of `job` that decodes fills, and whether its fills are first tries: the
    primary decode's are; a failing fill's alternatives are not."""
    if isinstance(job, DenoiseJob):
        return [(job, True)]
    return [(job.primary, True), *((r, False) for r in job.rounds[1:])]


def decoded_candidates(
    job: DenoiseJob | CandidateJob, shapes: Sequence[str]
) -> dict[int, list[Evidence]]:
    """Per span index: the evidence of every distinct fill the rounds of `job` decoded
    for it (`shapes`: each span's SHAPES name), the first tries first."""
    out: dict[int, list[Evidence]] = {}
    seen: set[tuple[int, tuple[int, ...]]] = set()
    checked = isinstance(job, CandidateJob)
    for round_job, first in rounds(job):
        for ci, canvas in enumerate(round_job.canvases):
            for s in canvas.spans:
                key = (s.index, tuple(fill_ids(s.ids, round_job.special)))
                if key in seen:
                    continue
                seen.add(key)
                e = decoded(
                    round_job, ci, s.index, shapes[s.index], first_try=first, checked=checked
                )
                out.setdefault(s.index, []).append(e)
    return out


def chosen(found: list[Evidence], ids: list[int], special: SpecialIds) -> Evidence | None:
    """The evidence in `found` of the fill `ids` (nulls dropped), None for a fill no
    round decoded (a copy of the code around the hole)."""
    want = tuple(fill_ids(ids, special))
    return next((e for e in found if e.ids == want), None)
