"""The infilling engine: masked regions, windows, the denoising sampler, minimal diffs.

Pure Python and numpy over token ids and text; the network is reached only through the
`Denoiser` protocol (infill.denoiser), so nothing here imports torch.
"""

from infill.canvas import Canvas, SpanSlots
from infill.diff import Edit, apply_edits, minimal_edits, unified_diff
from infill.engine import (
    Fill,
    FillResult,
    FillStats,
    SpanFill,
    TraceStep,
    fill_spans,
    fill_text,
    prepare_fill,
)
from infill.errors import (
    DenoiserError,
    InfillError,
    InputError,
    MarkerError,
    NoHolesError,
    OptionError,
    SpanError,
    WindowError,
)
from infill.options import SamplerOptions
from infill.sampler import DenoiseJob, Request, StepRecord, run
from infill.spans import DEFAULT_MARKER, Span, find_holes
from infill.strategies import STRATEGIES, Strategy
from infill.window import Window
from model.denoiser import Denoiser, SpecialIds

__all__ = [
    "DEFAULT_MARKER",
    "STRATEGIES",
    "Canvas",
    "DenoiseJob",
    "Denoiser",
    "DenoiserError",
    "Edit",
    "Fill",
    "FillResult",
    "FillStats",
    "InfillError",
    "InputError",
    "MarkerError",
    "NoHolesError",
    "OptionError",
    "Request",
    "SamplerOptions",
    "Span",
    "SpanError",
    "SpanFill",
    "SpanSlots",
    "SpecialIds",
    "StepRecord",
    "Strategy",
    "TraceStep",
    "Window",
    "WindowError",
    "apply_edits",
    "fill_spans",
    "fill_text",
    "find_holes",
    "minimal_edits",
    "prepare_fill",
    "run",
    "unified_diff",
]
