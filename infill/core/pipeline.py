"""A fill's preparation, one ordered list of stages: from a text and its spans to a job
ready to denoise.

    draft = Draft(text, spans, den, opts, rewrite, language, before, decided)
    for stage in STAGES:
        stage.run(draft)
    fill = draft.prepared()          # a PreparedFill: denoise its job, then .result()

Each stage is a small object with one job, reading and writing the `Draft` (the fill as
far as it has got). A stage with a `SamplerOptions` switch names it in `switch`; the
leave-one-out table turns each off in turn (benchmarks/leave_one_out.py, its figures in
docs/ARCHITECTURE.md, "The stages of a fill"):

    WordStarts     word_starts      a hole right after a word's start takes the word's
                                    head: its first token continues what is typed
                                    (word_starts.py)
    FrameLines     line_holes       whole-line spans framed: the engine writes their
                                    indentation and line break (lines.py)
    ModelDepths    indent_pass      a framed span whose depth the code leaves open: the
                                    model's choice (indents.py)
    ParsingDepths  -                a framed span at a depth where nothing parses: the
                                    nearest depth where the text does (indents.py)
    PlanCanvases   selection_lines  each span's slots, the windows, their canvases; a
                                    selection of k lines may not end before k lines
                                    (allocation.py, window.py)
    FillEnds       statement_ends   where fills end: echoes of the code after a hole, a
                                    statement's end at a line's end (echo.py)
    BuildJob       checks           the job: with checks, a CandidateJob whose fills must
                                    pass them (checks.py, candidates.py)
    ContextCopies  context_copies   copies of the code around in-line holes and of other
                                    files, scored beside the fills (copy_fills.py,
                                    cross_copies.py)

Then `sampler.denoise` runs the job: a CandidateJob's rounds (candidates.py, `Round`) are
the fills, their alternatives should a fill fail the checks, the scoring of runner-ups,
the copies; `PreparedFill.result()` reads the texts, edits, confidence and runner-ups
(prepared.py, rated.py).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

from diffusion_infill.infill.core.allocation import Allocation, allocate, window_canvases
from diffusion_infill.infill.core.candidates import CandidateJob
from diffusion_infill.infill.core.canvas import Canvas
from diffusion_infill.infill.core.checks import Problem, check_fills, splice
from diffusion_infill.infill.core.copy_fills import inline_holes
from diffusion_infill.infill.core.cross_copies import copy_round
from diffusion_infill.infill.core.echo import Ends, after_space, echo_keys, ended
from diffusion_infill.infill.core.fills import REPLACEMENT, decoded_fill
from diffusion_infill.infill.core.indents import model_indents, parsing_depths
from diffusion_infill.infill.core.lines import Frame, framed, line_frames, line_keys
from diffusion_infill.infill.core.options import SamplerOptions
from diffusion_infill.infill.core.prepared import PreparedFill
from diffusion_infill.infill.core.sampler import DenoiseJob
from diffusion_infill.infill.core.snippets import Snippet, Source
from diffusion_infill.infill.core.spans import Span
from diffusion_infill.infill.core.window import Layout, Window, plan_windows
from diffusion_infill.infill.core.word_starts import continuing, widened, word_heads
from diffusion_infill.model.denoiser import Denoiser

Job = DenoiseJob | CandidateJob

PYTHON = "python"  # the language with scope-aware windows (tree-sitter); others get lines


@dataclass
class Draft:
    """A fill as far as the stages have got."""

    text: str
    spans: list[Span]  # validated and sorted: the ranges filled
    denoiser: Denoiser
    options: SamplerOptions
    rewrite: bool  # the spans hold code being rewritten, not hole markers
    language: str | None
    before: str  # the text checks and probes read (holes neutralised; offsets of `text`)
    decided: list[list[int] | None]  # per span, its tokens if already chosen (a repair's)
    more_lines: Collection[int] = ()  # whole-line spans that may take more lines than held
    context: Sequence[Snippet] = ()  # windows of other files of the repository
    source: Source | None = None  # where the text lives (jedi's checks read it)
    started: float = field(default_factory=time.perf_counter)
    given: list[Span] = field(default_factory=list)  # the spans as asked (word_starts.py)
    heads: list[str] = field(default_factory=list)  # per span, the word's head it took over
    frames: list[Frame | None] = field(default_factory=list)  # per span (lines.py)
    allocs: list[Allocation] = field(default_factory=list)
    guessed: frozenset[int] = frozenset()  # the spans whose length the plan guessed
    windows: list[Window] = field(default_factory=list)
    canvases: list[Canvas] = field(default_factory=list)
    ends: Ends = field(default_factory=lambda: Ends([], []))
    job: Job | None = None
    passes: int = 0  # forward passes spent before the job's own steps

    @property
    def python(self) -> bool:
        return self.language == PYTHON

    def prepared(self) -> PreparedFill:
        """The fill ready to denoise."""
        assert self.job is not None, "BuildJob has not run"
        return PreparedFill(
            self.text, self.spans, self.windows, self.job, self.denoiser,
            rewrite=self.rewrite, started=self.started, ends=self.ends,
            frames=self.frames, probes=self.passes, given=self.given, heads=self.heads,
        )  # fmt: skip


class Stage(Protocol):
    """One step of a fill's preparation."""

    switch: ClassVar[str | None]  # the SamplerOptions switch that turns it off, if any

    def run(self, draft: Draft) -> None: ...


class WordStarts:
    """A hole right after a word's start takes the word's head: the span starts where the
    head's token does, and its first slot may take only the tokens that continue it."""

    switch = "word_starts"

    def run(self, d: Draft) -> None:
        d.given = list(d.spans)
        d.heads = [""] * len(d.spans)
        if d.options.word_starts:
            d.heads = word_heads(d.text, d.spans, d.denoiser, rewrite=d.rewrite, decided=d.decided)
            most, default = d.options.max_span_tokens, d.options.default_span_tokens
            d.spans = [widened(s, h, default, most) for s, h in zip(d.spans, d.heads, strict=True)]


class FrameLines:
    """Whole-line spans framed: their indentation and line break are the engine's."""

    switch = "line_holes"

    def run(self, d: Draft) -> None:
        d.frames = line_frames(
            d.text, d.spans, decided=d.decided, on=d.options.line_holes, more=d.more_lines
        )


class ModelDepths:
    """Where the code leaves a framed span's depth open, the model chooses it (Python)."""

    switch = "indent_pass"

    def run(self, d: Draft) -> None:
        if d.options.indent_pass and d.python and any(d.frames):
            d.frames, passes = model_indents(d.text, d.before, d.spans, d.frames, d.denoiser)
            d.passes += passes


class ParsingDepths:
    """A framed span at a depth where no code parses moves to the nearest depth the code
    allows where the text does (Python)."""

    switch = None

    def run(self, d: Draft) -> None:
        if d.python and any(d.frames):
            d.frames = parsing_depths(d.before, d.spans, d.frames)


class PlanCanvases:
    """Each span's slots, the windows that hold the spans (scope-aware for Python) and
    each window's canvas."""

    switch = "selection_lines"

    def run(self, d: Draft) -> None:
        budget = d.denoiser.max_length
        if d.options.window_tokens is not None:
            budget = min(budget, d.options.window_tokens)

        def count(piece: str) -> int:
            return len(d.denoiser.encode(piece)) if piece else 0

        d.allocs = [
            allocate(d.text, s, d.options, rewrite=d.rewrite, count=count, frame=f)
            for s, f in zip(d.spans, d.frames, strict=True)
        ]
        d.guessed = frozenset(i for i, a in enumerate(d.allocs) if a.raced)
        layout = Layout(d.text, count, d.before if d.python else None)
        d.windows = plan_windows(
            d.text, d.spans,
            allocs=[a.slots for a in d.allocs], room=[a.room for a in d.allocs],
            budget=budget, count=count, layout=layout,
        )  # fmt: skip
        d.canvases = window_canvases(
            d.text, d.spans, d.windows, d.allocs,
            layout=layout, denoiser=d.denoiser, budget=budget, decided=d.decided,
            frames=d.frames, selection_lines=d.options.selection_lines,
            first=[continuing(d.denoiser, h) if h else () for h in d.heads],
        )  # fmt: skip


class FillEnds:
    """Each span's echo key (a statement's end, for Python) and whether it starts after
    a space (its fill then starts without one)."""

    switch = "statement_ends"

    def run(self, d: Draft) -> None:
        statements = d.options.statement_ends and d.python
        exact = [a.exact for a in d.allocs]
        keys = echo_keys(d.text, d.spans, exact, statements=statements)
        d.ends = Ends(line_keys(keys, d.frames), after_space(d.text, d.spans))


class BuildJob:
    """The job: a plain DenoiseJob, or with the checks (or raced lengths) a CandidateJob
    whose fills must pass them."""

    switch = "checks"

    def run(self, d: Draft) -> None:
        # a span whose fill already writes the code after it, or its last line, again has
        # ended: no growth (a span of exact length never grows)
        keys, decode_ids = d.ends.keys, d.denoiser.decode
        done = (
            (lambda i, ids: ended(decode_ids(ids), keys[i]))
            if any(k is not None for k in keys)
            else None
        )
        o, special, vocab = d.options, d.denoiser.special, d.denoiser.vocab_size
        if not o.check_kinds and o.lengths == 1:
            d.job = DenoiseJob(d.canvases, o, special=special, vocab_size=vocab, ended=done)
            return
        text, before, ranges = d.text, d.before, [(s.start, s.end) for s in d.spans]
        allowed, spaced, frames = REPLACEMENT in text, d.ends.spaced, d.frames

        def check(texts: list[str], only: set[int]) -> list[Problem]:
            after, filled = splice(text, ranges, texts)
            return check_fills(
                before, after, ranges, filled, language=d.language, kinds=o.check_kinds,
                only=only, source=d.source,
            )  # fmt: skip

        def decode(i: int, ids: Sequence[int]) -> tuple[str, int]:
            fill, kept = decoded_fill(ids, decode_ids, allowed, i, keys[i], spaced[i])
            return framed(fill, frames[i]), kept

        d.job = CandidateJob(
            d.canvases, o, special=special, vocab_size=vocab, decode=decode, check=check,
            neutral=[before[a:b] for a, b in ranges], ended=done,
        )  # fmt: skip


class ContextCopies:
    """Copies of the code around each in-line hole and of other files' code, scored by
    the model beside the fills (with the checks on)."""

    switch = "context_copies"

    def run(self, d: Draft) -> None:
        inline = inline_holes(d.text, d.spans)
        copy_round(
            d.job, d.before, d.spans, (inline, d.guessed),
            d.frames, d.denoiser, d.options, d.context, heads=d.heads,
        )  # fmt: skip


STAGES: tuple[Stage, ...] = (
    WordStarts(),
    FrameLines(),
    ModelDepths(),
    ParsingDepths(),
    PlanCanvases(),
    FillEnds(),
    BuildJob(),
    ContextCopies(),
)
