"""Options of a fill, typed and validated up front (an invalid SamplerOptions cannot exist)."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

from diffusion_infill.infill.core.checks import KINDS
from diffusion_infill.infill.core.errors import OptionError
from diffusion_infill.infill.core.strategies import STRATEGIES

DEFAULT_REMASK_BUDGET = 32  # remasks per request when remasking is on and no budget is given
# The checks the command and the language server run unless told otherwise: those the
# held-out evaluation kept (docs/log/architecture.md, "Checks"), plus `comment` and `keyword`,
# which could not fire on its whole-line holes and flag only fills that are broken by
# definition (code after the hole commented out; a repeated keyword argument, a
# SyntaxError). The engine's own default is none, so that a caller of
# fill_text gets exactly the model's decode unless it asks.
DEFAULT_CHECKS = "parse,name,member,comment,keyword,line"
# Raced lengths in the CLI and the server's code actions (not inline completion, where
# every millisecond counts): a hole whose length the model chose and whose fill fails its
# checks races the halvings 4, 2, 1 of its allocation, picked by the model's score.
# Held-out one-line holes, the shipped model, the other defaults: 95.0% filled cleanly vs
# 87.5% without, exact match 14.5% either way (docs/log/architecture.md, "Length"). Racing 8
# as well (5) cost half the race's passes for one exact match in 800 validation holes
# ("Passes per produced token"). The engine's own default is 1.
DEFAULT_LENGTHS = 4
# Context key/value reuse in the CLI and the server's code actions: a full pass every 4
# steps, the passes between recompute only the span slots. Held-out one-line holes with
# the CLI's defaults (the shipped model, test, n=200): exact match 14.5% either way, clean
# fills 94.5% vs 95.0%, p50 821 -> 638 ms (benchmarks/results/eval_cli_*_s19_test.json).
# The engine's own default is 0 (every pass exact), so that a caller of fill_text gets the
# model's exact decode.
DEFAULT_CACHE_REFRESH = 4
MAX_CARRY_KEY = 4096  # characters of a carry_key (a document URI, say)
# A hole grows no further than 64 tokens: on 200 validation one-line holes, every fill that
# grew past 64 was wrong and they took half the time (docs/ARCHITECTURE.md, "A cap on
# growth").
DEFAULT_GROW_CAP = 64
MAX_CANDIDATES = 8  # alternative k halves the allocation k times: 8 reaches one slot from 256
MAX_RUNNER_UPS = 8  # runner-ups a fill may list (infill/core/rated.py)


@dataclass(frozen=True)
class SamplerOptions:
    """How to denoise. See docs/ARCHITECTURE.md ("Sampler") for the semantics."""

    order: str = "confidence"  # commit order: a name in infill.core.strategies.STRATEGIES
    threshold: float | None = None  # commit rule of the order; None: the order's default
    tokens_per_step: int | None = None  # commit exactly k per step by score (no threshold)
    max_steps: int | None = None  # cap on passes per canvas; the last one commits the rest
    temperature: float = 0.0  # 0: argmax (deterministic); > 0: sample softmax(logits / T)
    seed: int | None = None  # seed of the numpy Generator used at temperature > 0
    remask_threshold: float | None = None  # remask committed tokens whose p fell below this
    remask_budget: int | None = None  # remasks per request; None: 32 when remasking is on
    default_span_tokens: int = 16  # tokens allocated to a hole without a length hint
    max_span_tokens: int = 256  # the most tokens one span may take (hint or growth)
    grow: int = 16  # masks appended to a span whose allocation filled up (0: never grow)
    grow_cap: int | None = DEFAULT_GROW_CAP  # growth stops at this many tokens (a longer
    #                              allocation is kept, not grown); None: max_span_tokens
    exact_length: bool = False  # every span is exactly its allocation: no null, no growth
    window_tokens: int | None = None  # canvas budget; None: the denoiser's max_length
    cache_refresh: int = 0  # 0: exact passes; k: reuse context K/V, full pass every k steps
    carry_key: str = ""  # with cache_refresh: keep the context K/V under this name after the
    #                      request, for the next one of that name to carry over what its
    #                      canvas shares (a document's inline completion, keystroke to
    #                      keystroke); "": the request's own, dropped when it ends
    eager_ends: bool = True  # no pass on nulls alone; close a span whose slots all predict null
    line_holes: bool = True  # a span of whole lines: the engine writes its indentation and
    #                          line break, the model its code (infill/core/lines.py)
    selection_lines: bool = True  # a span over k >= 2 lines of text (a selection): its fill
    #                               may not end before k - 1 line breaks (infill/core/lines.py)
    indent_pass: bool = True  # Python: one pass lets the model choose a whole-line span's
    #                           depth where the code around it allows several
    #                           (infill/core/indents.py)
    context_copies: bool = True  # with the checks, a hole after code on its line whose
    #                              length is a guess: text that follows the same code
    #                              elsewhere replaces its fill where the model scores it
    #                              higher (infill/core/copy_fills.py)
    statement_ends: bool = True  # Python: a hole at a line's end after code ends with its
    #                              statement (infill/core/echo.py `cut_statement`)
    word_starts: bool = True  # a hole right after a word's start: the model writes the word
    #                           whole, its first token one that continues what is typed
    #                           (infill/core/word_starts.py)
    checks: str = ""  # comma-separated checks.KINDS a fill must pass; "": none (the CLI
    #                   and the language server default to DEFAULT_CHECKS)
    candidates: int = 2  # with checks: the primary decode and this many - 1 alternatives
    lengths: int = 1  # > 1: a hole whose length the model chose and whose fill fails its
    #                   checks races this many - 1 exact halvings of its allocation, the
    #                   last ones before one token (16 slots, 4: 4, 2, 1), the model's
    #                   score picks among those that pass; with order
    #                   entropy-bound (no null token), such a hole races this many exact
    #                   lengths around its allocation from the start, in the same passes
    min_confidence: float | None = None  # a fill whose confidence (infill/core/confidence.py)
    #                   is below this is held back: its span keeps its text, and says why;
    #                   needs a model with confidence weights. None: every fill is returned
    runner_ups: int = 0  # per span, up to this many other fills, surest first: the other
    #                   fills its decode made, and fills one token from it (rated.py)

    def __post_init__(self) -> None:
        _validate(self)

    @classmethod
    def build(cls, options: SamplerOptions | None = None, **overrides: Any) -> SamplerOptions:
        """`options` (or the defaults) with keyword overrides; unknown names are errors."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(overrides) - names)
        if unknown:
            raise OptionError(
                f"unknown option {unknown[0]!r}; options are: {', '.join(sorted(names))}"
            )
        base = options if options is not None else cls()
        return replace(base, **overrides) if overrides else base

    @property
    def effective_threshold(self) -> float | None:
        """The threshold in force: None with tokens_per_step or a positional order."""
        if self.tokens_per_step is not None:
            return None
        if self.threshold is not None:
            return self.threshold
        return STRATEGIES[self.order].default_threshold

    @property
    def check_kinds(self) -> tuple[str, ...]:
        """The checks a fill must pass (infill/core/checks.py); () when they are off."""
        if not isinstance(self.checks, str):
            return ("?",)
        return tuple(k for k in (w.strip() for w in self.checks.split(",")) if k)

    @property
    def remasking(self) -> bool:
        return self.remask_threshold is not None

    @property
    def effective_remask_budget(self) -> int:
        if not self.remasking:
            return 0
        return self.remask_budget if self.remask_budget is not None else DEFAULT_REMASK_BUDGET


def _int(name: str, value: object, lo: int, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, int) or isinstance(value, bool):
        raise OptionError(f"{name} must be an integer, got {value!r}")
    if value < lo:
        raise OptionError(f"{name} must be >= {lo}, got {value}")


def _real(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise OptionError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def _validate_checks(o: SamplerOptions) -> None:
    _int("candidates", o.candidates, 1)
    if o.candidates > MAX_CANDIDATES:
        raise OptionError(f"candidates must be <= {MAX_CANDIDATES}, got {o.candidates}")
    _int("lengths", o.lengths, 1)
    if o.lengths > MAX_CANDIDATES:
        raise OptionError(f"lengths must be <= {MAX_CANDIDATES}, got {o.lengths}")
    if not isinstance(o.checks, str) or not set(o.check_kinds) <= set(KINDS):
        raise OptionError(
            f"checks must be a comma-separated list of {', '.join(KINDS)} "
            f"(or empty: no checks), got {o.checks!r}"
        )


def _validate_confidence(o: SamplerOptions) -> None:
    if o.min_confidence is not None and not 0 <= _real("min_confidence", o.min_confidence) <= 1:
        raise OptionError(f"min_confidence must be a number from 0 to 1, got {o.min_confidence}")
    _int("runner_ups", o.runner_ups, 0)
    if o.runner_ups > MAX_RUNNER_UPS:
        raise OptionError(f"runner_ups must be <= {MAX_RUNNER_UPS}, got {o.runner_ups}")


def _validate_cache(o: SamplerOptions) -> None:
    _int("cache_refresh", o.cache_refresh, 0)
    if not isinstance(o.carry_key, str) or len(o.carry_key) > MAX_CARRY_KEY:
        raise OptionError(
            f"carry_key must be a string of at most {MAX_CARRY_KEY} characters, "
            f"got {o.carry_key!r:.80}"
        )
    if o.carry_key and not o.cache_refresh:
        raise OptionError("carry_key needs cache_refresh (context keys/values are not reused)")
    if o.carry_key and o.lengths > 1:
        raise OptionError("carry_key applies to one decode per hole; lengths must be 1")


def _validate_lengths(o: SamplerOptions) -> None:
    """The length contract's options (docs/ARCHITECTURE.md, "Length contract")."""
    _int("default_span_tokens", o.default_span_tokens, 1)
    _int("max_span_tokens", o.max_span_tokens, 1)
    _int("grow", o.grow, 0)
    _int("grow_cap", o.grow_cap, 1, optional=True)
    if o.default_span_tokens > o.max_span_tokens:
        raise OptionError(
            f"default_span_tokens ({o.default_span_tokens}) exceeds max_span_tokens "
            f"({o.max_span_tokens})"
        )


def _validate_entropy_bound(o: SamplerOptions) -> None:
    """DiffusionGemma's sampler (infill/core/entropy_bound.py) has its own temperature
    schedule, noises every step and decodes exact lengths."""
    if o.temperature != 0:
        raise OptionError(
            "order 'entropy-bound' follows its own temperature schedule "
            "(0.8 to 0.4); temperature does not apply"
        )
    if o.tokens_per_step is not None:
        raise OptionError(
            "order 'entropy-bound' accepts by its entropy bound (threshold); "
            "tokens_per_step does not apply"
        )
    if o.remasking:
        raise OptionError(
            "order 'entropy-bound' noises every unaccepted position each "
            "step; remasking does not apply"
        )
    if o.threshold is not None and _real("threshold", o.threshold) <= 0:
        raise OptionError(f"threshold for order 'entropy-bound' must be > 0, got {o.threshold}")


_SWITCHES = (  # the options that are true or false
    "eager_ends",
    "line_holes",
    "selection_lines",
    "indent_pass",
    "context_copies",
    "statement_ends",
    "word_starts",
    "exact_length",
)


def _validate(o: SamplerOptions) -> None:
    if o.order not in STRATEGIES:
        raise OptionError(
            f"unknown order {o.order!r}; choose one of: {', '.join(sorted(STRATEGIES))}"
        )
    strategy = STRATEGIES[o.order]
    _int("tokens_per_step", o.tokens_per_step, 1, optional=True)
    _int("max_steps", o.max_steps, 1, optional=True)
    _int("seed", o.seed, 0, optional=True)
    _int("remask_budget", o.remask_budget, 1, optional=True)
    _validate_lengths(o)
    _int("window_tokens", o.window_tokens, 8, optional=True)
    _validate_cache(o)
    _validate_checks(o)
    _validate_confidence(o)
    for name in _SWITCHES:
        if not isinstance(value := getattr(o, name), bool):
            raise OptionError(f"{name} must be true or false, got {value!r}")
    if _real("temperature", o.temperature) < 0:
        raise OptionError(f"temperature must be >= 0, got {o.temperature}")

    if strategy.sequential:
        if o.threshold is not None:
            raise OptionError(
                f"order {o.order!r} commits one token per step; it takes no threshold"
            )
        if o.tokens_per_step is not None:
            raise OptionError(
                f"order {o.order!r} commits one token per step; tokens_per_step does not apply"
            )
        if o.remasking:
            raise OptionError(
                f"order {o.order!r} decodes each token once; remasking does not apply"
            )
    if o.order == "entropy-bound":
        _validate_entropy_bound(o)
    if o.threshold is not None:
        t = _real("threshold", o.threshold)
        lo, hi = strategy.threshold_range
        if not lo <= t <= hi:
            raise OptionError(f"threshold for order {o.order!r} must be in [{lo}, {hi}], got {t}")
        if o.tokens_per_step is not None:
            raise OptionError("give either threshold or tokens_per_step, not both")

    if o.remask_budget is not None and not o.remasking:
        raise OptionError("remask_budget needs remask_threshold (remasking is off)")
    if o.remasking:
        r = _real("remask_threshold", o.remask_threshold)
        if not 0 < r < 1:
            raise OptionError(f"remask_threshold must be in (0, 1), got {r}")
        t = o.effective_threshold
        if o.order == "confidence" and t is not None and r >= t:
            # A token committed at p >= t would be remasked at once, and again, until the
            # budget runs out.
            raise OptionError(f"remask_threshold ({r}) must be below the commit threshold ({t})")
