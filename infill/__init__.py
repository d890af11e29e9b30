"""Infilling with a diffusion model (`diffusion_infill.infill`): the engine (`infill.core`),
the worker that hosts it next to a model and its client (`infill.serve`), and the `infill`
command (`infill.cli`).

The engine's public names are importable from here (`infill.fill_text`, `infill.Span`,
...); each is imported on first use, so `from diffusion_infill import infill` costs nothing
and a program that only talks to a worker (the language server) never imports the engine's
numpy.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_CORE = "diffusion_infill.infill.core."

# name -> the module that defines it
_EXPORTS = {
    **dict.fromkeys(["Canvas", "SpanSlots"], _CORE + "canvas"),
    **dict.fromkeys(["Edit", "apply_edits", "minimal_edits", "unified_diff"], _CORE + "diff"),
    **dict.fromkeys(["fill_spans", "fill_text", "prepare_fill", "prepare_holes"], _CORE + "engine"),
    **dict.fromkeys(
        [
            "DenoiserError",
            "InfillError",
            "InputError",
            "LimitError",
            "MarkerError",
            "NoHolesError",
            "OptionError",
            "SpanError",
            "WindowError",
        ],
        _CORE + "errors",
    ),
    "SamplerOptions": _CORE + "options",
    "Snippet": _CORE + "snippets",
    "PreparedFill": _CORE + "prepared",
    **dict.fromkeys(["fix_text", "score_text"], _CORE + "repair"),
    **dict.fromkeys(
        ["FillResult", "FillStats", "SpanFill", "TokenScore", "TraceStep"], _CORE + "results"
    ),
    **dict.fromkeys(["DenoiseJob", "LogitsRequest", "StepRecord", "denoise"], _CORE + "sampler"),
    **dict.fromkeys(["DEFAULT_MARKER", "Span", "find_holes"], _CORE + "spans"),
    **dict.fromkeys(["STRATEGIES", "Strategy"], _CORE + "strategies"),
    "Window": _CORE + "window",
    **dict.fromkeys(["CacheHint", "Denoiser", "SpecialIds"], "diffusion_infill.model.denoiser"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # the next lookup does not come here
    return value


def __dir__() -> list[str]:
    return __all__
