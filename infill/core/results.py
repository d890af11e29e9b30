"""What a fill and a scoring pass produce: plain value types, no engine logic.

They cross the wire as they are (infill.serve.protocol carries them) and are read by the
CLI and the language server, so this module imports nothing heavier than difflib.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from diffusion_infill.infill.core.canvas import Slot
from diffusion_infill.infill.core.diff import Edit, unified_diff
from diffusion_infill.infill.core.spans import Span
from diffusion_infill.infill.core.window import Window


@dataclass(frozen=True)
class RunnerUp:
    """Another fill of a span the engine decoded or read off its decode, and its
    confidence (None: the model has no confidence weights)."""

    text: str
    confidence: float | None = None


@dataclass(frozen=True)
class SpanFill:
    span: Span  # the span, in original-text offsets
    text: str  # what replaced it (null tokens dropped)
    tokens: int  # non-null tokens generated for it
    rejected: str | None = None  # why every candidate failed the checks, or why the fill
    #                              was held back (then `text` is the span's text as it
    #                              was: nothing is written there)
    # the calibrated probability that the fill is right (infill/core/confidence.py); None
    # when the model has no confidence weights or the fill's tokens were given
    confidence: float | None = None
    runner_ups: tuple[RunnerUp, ...] = ()  # other fills, surest first (options.runner_ups)


@dataclass(frozen=True)
class FillStats:
    model: str  # the denoiser's name
    spans: int
    windows: int  # windows the spans went into (one canvas each)
    tokens: int  # non-null tokens generated, all spans
    nfe: int  # forward passes (one per canvas per step)
    steps: int  # denoising steps (batched passes)
    ms: float  # wall time of the whole fill, milliseconds
    nfe_per_token: float  # nfe / max(tokens, 1)
    scored: int  # logit rows requested, all passes
    remasks: int  # committed tokens masked again
    grown: int  # slots appended to spans that ran out of room
    trimmed: int  # context tokens dropped to make room for growth
    candidates: int = 0  # alternative canvases decoded for fills that failed the checks
    rejected: int = 0  # spans left as they were: every candidate failed the checks


@dataclass(frozen=True)
class TraceStep:
    """One step of one canvas, for people and tests."""

    step: int
    canvas: int  # the canvas (= window) index in the request
    scored: int  # positions whose logits were requested
    committed: tuple[Slot, ...]  # (span, slot) committed in this step
    remasked: tuple[Slot, ...]
    grown: tuple[tuple[int, int], ...]  # (span, slots appended)
    spans: tuple[tuple[int, str], ...]  # (span, text after the step; ░ masked, ∅ null)

    def format(self) -> str:
        parts = [f"step {self.step} canvas {self.canvas}: scored {self.scored}"]
        parts.append("committed " + (" ".join(f"{k}:{j}" for k, j in self.committed) or "-"))
        if self.remasked:
            parts.append("remasked " + " ".join(f"{k}:{j}" for k, j in self.remasked))
        if self.grown:
            parts.append("grown " + " ".join(f"{k}+{n}" for k, n in self.grown))
        lines = [", ".join(parts)]
        lines += [f"  span {k}: {text!r}" for k, text in self.spans]
        return "\n".join(lines)


@dataclass(frozen=True)
class FillResult:
    text: str  # the filled text
    original: str  # the text as given (markers included)
    edits: list[Edit]  # original -> text, minimal, in original character offsets
    fills: list[SpanFill]  # per span, sorted by position
    windows: list[Window]  # the canvases' windows
    stats: FillStats
    trace: list[TraceStep]

    def diff(self, path: str = "file") -> str:
        return unified_diff(self.original, self.text, path)

    def trace_text(self) -> str:
        return "\n".join(step.format() for step in self.trace)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready)."""
        return {
            "text": self.text,
            "edits": [asdict(e) for e in self.edits],
            "fills": [
                {
                    "start": f.span.start,
                    "end": f.span.end,
                    "text": f.text,
                    "tokens": f.tokens,
                    "rejected": f.rejected,
                    "confidence": f.confidence,
                    "runner_ups": [asdict(r) for r in f.runner_ups],
                }
                for f in self.fills
            ],
            "stats": asdict(self.stats),
        }


@dataclass(frozen=True)
class TokenScore:
    """How improbable one token of a clean text is (infill.core.repair.score_text)."""

    start: int  # character range of the token in the text
    end: int
    text: str  # the token as written
    suspicion: float  # 1 - p(this token | everything else), in [0, 1]
    likely: str  # the model's likeliest *other* token here (a hint, not a fix); "": the
    #              model reads the token as one that should not be there (delete it)
    p_likely: float = 0.0  # p(likely | everything else), in [0, 1]; 0.0: not known (a
    #                        score row from a worker older than this field)
