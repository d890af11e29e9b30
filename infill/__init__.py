"""Infilling with a diffusion model: the engine (`infill.core`), the worker that hosts it
next to a model and its client (`infill.serve`), and the `infill` command (`infill.cli`).

The engine's public names are importable from here (`infill.fill_text`, `infill.Span`,
...); each is imported on first use, so `import infill` costs nothing and a program that
only talks to a worker (the language server) never imports the engine's numpy.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

# name -> the module that defines it
_EXPORTS = {
    **dict.fromkeys(["Canvas", "SpanSlots"], "infill.core.canvas"),
    **dict.fromkeys(["Edit", "apply_edits", "minimal_edits", "unified_diff"],
                    "infill.core.diff"),
    **dict.fromkeys(["PreparedFill", "fill_spans", "fill_text", "prepare_fill",
                     "prepare_holes"], "infill.core.engine"),
    **dict.fromkeys(["DenoiserError", "InfillError", "InputError", "LimitError",
                     "MarkerError", "NoHolesError", "OptionError", "SpanError", "WindowError"],
                    "infill.core.errors"),
    "SamplerOptions": "infill.core.options",
    **dict.fromkeys(["fix_text", "score_text"], "infill.core.repair"),
    **dict.fromkeys(["FillResult", "FillStats", "SpanFill", "TokenScore", "TraceStep"],
                    "infill.core.results"),
    **dict.fromkeys(["DenoiseJob", "LogitsRequest", "StepRecord", "denoise"],
                    "infill.core.sampler"),
    **dict.fromkeys(["DEFAULT_MARKER", "Span", "find_holes"], "infill.core.spans"),
    **dict.fromkeys(["STRATEGIES", "Strategy"], "infill.core.strategies"),
    "Window": "infill.core.window",
    **dict.fromkeys(["CacheHint", "Denoiser", "SpecialIds"], "model.denoiser"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'infill' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # the next lookup does not come here
    return value


def __dir__() -> list[str]:
    return __all__
