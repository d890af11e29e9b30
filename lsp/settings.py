"""The server's settings (section "infill"), typed and validated.

Settings arrive in `initializationOptions` (either `{"infill": {...}}` or the section's
map itself) and in `workspace/didChangeConfiguration` (pushed, or pulled with
`workspace/configuration` when the client sends none). A value of the wrong type or out
of range is reported by name (`window/showMessage`, warning) and replaced by the default;
an unknown name is reported too. Nothing here ever raises on user input.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from diffusion_infill.infill.core.errors import OptionError
from diffusion_infill.infill.core.options import (
    DEFAULT_CACHE_REFRESH,
    DEFAULT_GROW_CAP,
    DEFAULT_LENGTHS,
    MAX_CANDIDATES,
    MAX_RUNNER_UPS,
    SamplerOptions,
)
from diffusion_infill.infill.core.snippets import MAX_PATH_CHARS
from diffusion_infill.infill.core.spans import DEFAULT_MARKER, check_marker
from diffusion_infill.infill.core.suspicion import DEFAULT_MIN_LIKELY, DEFAULT_MIN_SUSPICION
from diffusion_infill.infill.serve.sockets import parse_address

SECTION = "infill"
# completionMinConfidence's default: the lowest threshold (in steps of 0.05) at which at
# least half of the validation mid-line completions shown (their copies ranked in) were
# exactly right
# (benchmarks/results/confidence_3103Mtok_valid.json; docs/log/architecture.md, "Confidence")
DEFAULT_MIN_CONFIDENCE = 0.35


class Invalid(ValueError):
    """A setting's value cannot be used; the message says what is expected."""


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise Invalid("must be true or false")
    return v


def _int(lo: int, hi: int) -> Callable[[Any], int]:
    def check(v: Any) -> int:
        if isinstance(v, float) and v.is_integer():
            v = int(v)  # JSON clients may send 16.0
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise Invalid(f"must be a whole number from {lo} to {hi}")
        return v

    return check


def _real(lo: float, hi: float, *, open_low: bool = False) -> Callable[[Any], float]:
    def check(v: Any) -> float:
        bad = isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v)
        if bad or not (lo < v if open_low else lo <= v) or v > hi:
            low = "above" if open_low else "from"
            raise Invalid(f"must be a number {low} {lo:g} to {hi:g}")
        return float(v)

    return check


def _optional(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda v: None if v is None else check(v)


def _model_dir(v: Any) -> str:
    if not isinstance(v, str) or not v.strip():
        raise Invalid("must be the path of a model directory")
    path = Path(os.path.expandvars(v)).expanduser()
    if not path.is_dir():
        raise Invalid(f"is not a directory: {path}")
    return str(path)


def _address(v: Any) -> str:
    if not isinstance(v, str):
        raise Invalid("must be a worker address (unix:PATH or tcp:HOST:PORT)")
    try:
        parse_address(v)
    except ValueError as exc:
        raise Invalid(str(exc)) from None
    return v


def _str(v: Any) -> str:
    if not isinstance(v, str) or not v:
        raise Invalid("must be a non-empty string")
    return v


def _python(v: Any) -> str:
    if not isinstance(v, str) or "\x00" in v or len(v) > MAX_PATH_CHARS:
        raise Invalid(f"must be a path (a string of at most {MAX_PATH_CHARS} characters)")
    return v


def _marker(v: Any) -> str:
    try:
        check_marker(v)
    except OptionError as exc:
        raise Invalid(str(exc)) from None
    return v


def _severity(v: Any) -> str:
    if v not in ("information", "hint"):
        raise Invalid('must be "information" or "hint"')
    return v


def _precision(v: Any) -> str:
    if v not in PRECISIONS:
        raise Invalid("must be one of " + ", ".join(f'"{p}"' for p in PRECISIONS))
    return v


PRECISIONS = ("auto", "fp32", "bf16", "int8")  # the worker's --dtype


def _s(key: str, check: Callable[[Any], Any], **kw: Any) -> Any:
    return field(metadata={"key": key, "check": check}, **kw)


@dataclass(frozen=True)
class Settings:
    """Every setting, with its JSON name (camelCase) in the field's metadata."""

    # -- where the model runs
    model_dir: str | None = _s("modelDir", _optional(_model_dir), default=None)  # None: shipped
    # a running worker to use (unix:PATH, tcp:HOST:PORT); None: spawn one
    worker_address: str | None = _s("workerAddress", _optional(_address), default=None)
    device: str | None = _s("device", _optional(_str), default=None)  # None: cuda if present
    # compute precision of the spawned worker; None: $INFILL_DTYPE, else the machine's pick
    precision: str | None = _s("precision", _optional(_precision), default=None)
    # -- sampling (SamplerOptions)
    steps: int | None = _s("steps", _optional(_int(1, 4096)), default=None)  # max_steps
    threshold: float | None = _s(
        "threshold", _optional(_real(0.0, 1.0, open_low=True)), default=None
    )  # commit threshold; None: the order's default
    max_tokens: int = _s("maxTokens", _int(1, 1024), default=256)  # max_span_tokens
    # a hole (no hint) grows no further than this many tokens (grow_cap)
    grow_cap: int = _s("growCap", _int(1, 1024), default=DEFAULT_GROW_CAP)
    hole_marker: str = _s("holeMarker", _marker, default=DEFAULT_MARKER)
    checks: bool = _s("checks", _bool, default=True)  # code actions: a fill must pass checks
    # code actions: a failing hole whose length the model chose races lengths - 1 halvings
    # (the last before one token: 4, 2, 1 of 16)
    lengths: int = _s("lengths", _int(1, MAX_CANDIDATES), default=DEFAULT_LENGTHS)
    # code actions: an in-line hole's fill meets the text that follows the same code
    # elsewhere in the buffer, the one the model scores higher wins (copy_fills.py)
    context_copies: bool = _s("contextCopies", _bool, default=True)
    # code actions: copies from other files of the workspace's repository compete with the
    # fills (snippets sent with the request; infill/context, lsp/repository.py)
    repository_context: bool = _s("repositoryContext", _bool, default=True)
    # the Python interpreter or virtual environment of the user's code, whose libraries the
    # `member` check reads through jedi ("": the worker's active virtual environment, else
    # its own interpreter)
    python_environment: str = _s("pythonEnvironment", _python, default="")
    # context keys/values reused between passes, a full pass every K (0: every pass exact)
    cache_refresh: int = _s("cacheRefresh", _int(0, 4096), default=DEFAULT_CACHE_REFRESH)
    # -- completion
    completion_tokens: int = _s("completionTokens", _int(1, 1024), default=16)  # one line
    multiline_tokens: int = _s("multilineTokens", _int(1, 1024), default=48)  # empty line
    # a one-line completion's budget: canvas tokens around the cursor, denoising passes
    # (the last commits what is left; context keys/values computed once, then reused)
    # None: by the worker's machine (lsp/budgets.py `completion_window`)
    completion_window: int | None = _s(
        "completionWindowTokens", _optional(_int(16, 4096)), default=None
    )
    # None: by the worker's machine (lsp/budgets.py `completion_steps`)
    completion_steps: int | None = _s("completionSteps", _optional(_int(1, 64)), default=None)
    # an empty line's; None: by the worker's machine, as completionSteps
    multiline_steps: int | None = _s("multilineSteps", _optional(_int(1, 4096)), default=None)
    # an empty line's canvas tokens; None: as much as the model reads (a code action's)
    multiline_window: int | None = _s(
        "multilineWindowTokens", _optional(_int(16, 4096)), default=None
    )
    # carry the last keystroke's context keys/values over to the next completion of the
    # document where the two canvases agree (an approximation; a full pass every 8)
    completion_reuse: bool = _s("completionReuse", _bool, default=True)
    # answer at once with the rest of the last completion while the user types what it
    # offered (lsp/offers.py); false: ask the model on every keystroke
    completion_typed_through: bool = _s("completionTypedThrough", _bool, default=True)
    # no ghost text for a completion whose confidence (the calibrated probability that it
    # is right, infill/core/confidence.py) is below this; 0: every completion is shown
    completion_min_confidence: float = _s(
        "completionMinConfidence", _real(0.0, 1.0), default=DEFAULT_MIN_CONFIDENCE
    )
    # items a completion offers at most: the fill, then its runner-ups surest first
    completion_items: int = _s("completionItems", _int(1, 1 + MAX_RUNNER_UPS), default=3)
    # ms a completion may take before it answers nothing and its job is cancelled; None:
    # the worker's device decides (lsp.budgets.completion_deadline); 0: no deadline
    completion_deadline: int | None = _s(
        "completionDeadline", _optional(_int(0, 600_000)), default=None
    )
    # -- diagnostics and fixes
    diagnostics: bool = _s("diagnostics", _bool, default=False)  # off until measured fast
    # the fixer's rule (infill/core/suspicion.py): suspicion >= *Threshold and p(likely)
    # >= *LikelyThreshold; diagnostics and Fix selection share its calibrated defaults
    diagnostics_threshold: float = _s(
        "diagnosticsThreshold", _real(0.0, 1.0), default=DEFAULT_MIN_SUSPICION
    )
    diagnostics_likely_threshold: float = _s(
        "diagnosticsLikelyThreshold", _real(0.0, 1.0), default=DEFAULT_MIN_LIKELY
    )
    diagnostics_delay: int = _s("diagnosticsDelay", _int(0, 60_000), default=500)  # ms
    diagnostics_severity: str = _s("diagnosticsSeverity", _severity, default="information")
    max_diagnostics: int = _s("maxDiagnostics", _int(1, 1000), default=20)
    fix_threshold: float = _s(
        "fixThreshold", _real(0.0, 1.0), default=DEFAULT_MIN_SUSPICION
    )  # Fix selection
    fix_likely_threshold: float = _s(
        "fixLikelyThreshold", _real(0.0, 1.0), default=DEFAULT_MIN_LIKELY
    )
    max_fixes: int = _s("maxFixes", _int(1, 64), default=3)  # tokens per Fix selection
    # -- the editor side
    live_view: bool = _s("liveView", _bool, default=False)  # stream infill/denoiseStep
    progress_delay: int = _s("progressDelay", _int(0, 60_000), default=300)  # ms before $/progress
    context_chars: int = _s("contextChars", _int(1000, 1_000_000), default=12_000)

    def sampler_options(self, **overrides: Any) -> SamplerOptions:
        """The SamplerOptions these settings set, with `overrides` on top."""
        out: dict[str, Any] = {
            "max_span_tokens": self.max_tokens,
            "grow_cap": self.grow_cap,
            "cache_refresh": self.cache_refresh,
        }
        if self.steps is not None:
            out["max_steps"] = self.steps
        if self.threshold is not None:
            out["threshold"] = self.threshold
        out.update(overrides)
        if out.get("default_span_tokens", 16) > out["max_span_tokens"]:
            out["default_span_tokens"] = out["max_span_tokens"]
        return SamplerOptions.build(None, **out)


KEYS = {f.metadata["key"]: f for f in fields(Settings)}


def section(raw: Any) -> Any:
    """The "infill" section of a settings payload (`{"infill": {...}}` or the section)."""
    if isinstance(raw, Mapping) and isinstance(raw.get(SECTION), Mapping):
        return raw[SECTION]
    return raw


def parse(raw: Any) -> tuple[Settings, list[str]]:
    """Settings from a JSON map, and a warning for each value that was not used.

    Missing names take their defaults; a bad value takes the default and a warning."""
    raw = section(raw)
    if raw is None:
        return Settings(), []
    if not isinstance(raw, Mapping):
        return Settings(), [f"{SECTION}: settings must be an object; using the defaults"]
    values: dict[str, Any] = {}
    warnings: list[str] = []
    for key, value in raw.items():
        f = KEYS.get(key)
        if f is None:
            warnings.append(f"{SECTION}.{key}: unknown setting (ignored)")
            continue
        try:
            values[f.name] = f.metadata["check"](value)
        except Invalid as exc:
            warnings.append(f"{SECTION}.{key} {exc}; using the default ({_shown(f.default)})")
    return Settings(**values), warnings


def _shown(v: Any) -> str:
    if v is None:
        return "unset"
    if isinstance(v, bool):
        return str(v).lower()
    return repr(v) if isinstance(v, str) else str(v)
