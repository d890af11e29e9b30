"""Field kinds: how each value of a message is checked coming in and written going out.

A kind turns a decoded msgpack value into the Python value of a message field (raising a
`ProtocolError` that names the field) and back. Messages (infill/serve/protocol.py)
declare one kind per field. The engine's value types travel as arrays (spans, edits,
fills, scores) or as maps whose keys are their fields (stats, options); the records that
only the wire knows (limits, versions, counters) are maps too, checked from their type
hints.

The error codes a worker sends live here, next to `ProtocolError`, the error of a frame
the worker cannot accept.
"""

from __future__ import annotations

import math
import types
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, Union, get_args, get_origin, get_type_hints

from diffusion_infill.infill.core.diff import Edit
from diffusion_infill.infill.core.errors import INPUT, MODEL, TOO_LARGE, InfillError
from diffusion_infill.infill.core.options import SamplerOptions
from diffusion_infill.infill.core.results import FillStats, RunnerUp, SpanFill, TokenScore
from diffusion_infill.infill.core.spans import Span

MAX_ID = 2**63 - 1

# Error codes (the `code` of an `error` reply); docs/PROTOCOL.md says when each is used.
# INPUT, TOO_LARGE and MODEL are the engine's own (infill.core.errors).
BAD_REQUEST = "bad_request"
UNAUTHORIZED = "unauthorized"
CANCELLED = "cancelled"
DEADLINE = "deadline"
INTERNAL = "internal"
SHUTTING_DOWN = "shutting_down"
SLOW_READER = "slow_reader"  # the client let more than max_queued bytes of replies wait
VERSION = "version"
CODES = frozenset(
    {
        BAD_REQUEST,
        TOO_LARGE,
        UNAUTHORIZED,
        CANCELLED,
        DEADLINE,
        INPUT,
        MODEL,
        INTERNAL,
        SHUTTING_DOWN,
        SLOW_READER,
        VERSION,
    }
)


class ProtocolError(InfillError):
    """A frame the worker cannot accept: it breaks the protocol (`bad_request`, `version`,
    `too_large`), or a field holds a value the engine refuses (`input`: bad options).
    `id` is the request's id when the frame had a readable one (so its sender can match
    the error reply)."""

    code = BAD_REQUEST

    def __init__(self, message: str, *, code: str = BAD_REQUEST, id: int | None = None) -> None:
        super().__init__(message, code=code)
        self.id = id


@dataclass(frozen=True)
class Kind:
    check: Callable[[Any, str], Any]  # (wire value, field name) -> Python value
    dump: Callable[[Any], Any] = lambda v: v  # Python value -> msgpack-ready value


def bad(name: str, what: str, value: Any) -> ProtocolError:
    shown = repr(value)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return ProtocolError(f"{name} must be {what}, got {shown}")


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def integer(lo: int = 0, hi: int = MAX_ID) -> Kind:
    def check(v: Any, name: str) -> int:
        if not is_int(v) or not lo <= v <= hi:
            raise bad(name, f"an integer in [{lo}, {hi}]", v)
        return v

    return Kind(check)


def number(lo: float = -math.inf, hi: float = math.inf) -> Kind:
    def check(v: Any, name: str) -> float:
        if (
            isinstance(v, bool)
            or not isinstance(v, int | float)
            or not math.isfinite(v)
            or not lo <= v <= hi
        ):
            raise bad(name, f"a number in [{lo:g}, {hi:g}]", v)
        return float(v)

    return Kind(check)


def _check_str(v: Any, name: str) -> str:
    if not isinstance(v, str):
        raise bad(name, "a string", v)
    return v


def _check_bool(v: Any, name: str) -> bool:
    if not isinstance(v, bool):
        raise bad(name, "true or false", v)
    return v


STR = Kind(_check_str)
BOOL = Kind(_check_bool)


def optional(kind: Kind) -> Kind:
    return Kind(
        lambda v, n: None if v is None else kind.check(v, n),
        lambda v: None if v is None else kind.dump(v),
    )


def one_of(values: frozenset[str]) -> Kind:
    def check(v: Any, name: str) -> str:
        if v not in values:
            raise bad(name, f"one of {', '.join(sorted(values))}", v)
        return v

    return Kind(check)


# -- arrays of rows: spans, edits, fills, scores, step texts ---------------------------


def rows(build: Callable[[list[Any], str], Any], dump: Callable[[Any], list[Any]]) -> Kind:
    """A list of rows (arrays), each checked and built by `build(row, where)`."""

    def check(v: Any, name: str) -> list[Any]:
        if not isinstance(v, list):
            raise bad(name, "an array", v)
        out = []
        for i, row in enumerate(v):
            if not isinstance(row, list):
                raise bad(f"{name}[{i}]", "an array", row)
            out.append(build(row, f"{name}[{i}]"))
        return out

    return Kind(check, lambda v: [dump(x) for x in v])


def row(items: list[Any], where: str, kinds: list[Kind], at_least: int) -> list[Any]:
    if not at_least <= len(items) <= len(kinds):
        n = str(len(kinds)) if at_least == len(kinds) else f"{at_least} to {len(kinds)}"
        raise bad(where, f"an array of {n} items", items)
    return [k.check(x, f"{where}[{i}]") for i, (k, x) in enumerate(zip(kinds, items, strict=False))]


POS = integer()
SUSPICION = number(0.0, 1.0)
PROBABILITY = number(0.0, 1.0)


def _span(items: list[Any], where: str) -> Span:
    start, end, *rest = row(items, where, [POS, POS, optional(integer(1)), BOOL], 2)
    return Span(start, end, rest[0] if rest else None, rest[1] if len(rest) > 1 else False)


def _edit(items: list[Any], where: str) -> Edit:
    return Edit(*row(items, where, [POS, POS, STR], 3))


def _runner_up(items: list[Any], where: str) -> RunnerUp:
    return RunnerUp(*row(items, where, [STR, optional(PROBABILITY)], 1))


RUNNER_UPS = rows(_runner_up, lambda r: [r.text, r.confidence])


def _fill(items: list[Any], where: str) -> SpanFill:
    # rejected, confidence and runner-ups: absent from old workers
    kinds = [POS, POS, STR, POS, optional(STR), optional(PROBABILITY), RUNNER_UPS]
    start, end, text, tokens, *rest = row(items, where, kinds, 4)
    rest += [None, None, []][len(rest) :]
    return SpanFill(Span(start, end), text, tokens, rest[0], rest[1], tuple(rest[2]))


def _dump_fill(f: SpanFill) -> list[Any]:
    """[start, end, text, tokens], then as much of [rejected, confidence, runner-ups] as
    says something."""
    tail = [f.rejected, f.confidence, RUNNER_UPS.dump(list(f.runner_ups))]
    while tail and tail[-1] in (None, []):
        tail.pop()
    return [f.span.start, f.span.end, f.text, f.tokens, *tail]


def _score(items: list[Any], where: str) -> TokenScore:  # p_likely: absent from old workers
    return TokenScore(*row(items, where, [POS, POS, STR, SUSPICION, STR, SUSPICION], 5))


def _step_span(items: list[Any], where: str) -> tuple[int, str]:
    index, text = row(items, where, [POS, STR], 2)
    return index, text


SPANS = rows(_span, lambda s: [s.start, s.end, s.length, s.exact])
EDITS = rows(_edit, lambda e: [e.start, e.end, e.new_text])
FILLS = rows(_fill, _dump_fill)
SCORES = rows(_score, lambda s: [s.start, s.end, s.text, s.suspicion, s.likely, s.p_likely])
STEP_SPANS = rows(_step_span, list)


# -- maps: records (a dataclass's fields by name) and sampler options --------------------


def _hint_kind(hint: Any) -> Kind:
    """The kind of a record field, from its type hint (bool, int, float, str, X | None)."""
    if get_origin(hint) in (Union, types.UnionType):
        (inner,) = [a for a in get_args(hint) if a is not type(None)]
        return optional(_hint_kind(inner))
    kinds = {bool: BOOL, int: integer(-MAX_ID - 1, MAX_ID), float: number(), str: STR}
    if hint not in kinds:
        raise TypeError(f"no wire kind for a field of type {hint!r}")
    return kinds[hint]


def record(cls: type) -> Kind:
    """A frozen dataclass of scalar fields as a map of its field names. A missing field
    takes its default; an unknown one, or a value the class refuses, is a bad request."""
    hints = get_type_hints(cls)
    kinds = {f.name: _hint_kind(hints[f.name]) for f in fields(cls)}

    def check(v: Any, name: str) -> Any:
        if not isinstance(v, dict):
            raise bad(name, "a map", v)
        unknown = sorted(str(k) for k in v if k not in kinds)
        if unknown:
            raise ProtocolError(f"{name}: unknown field {unknown[0]!r}")
        values = {k: kinds[k].check(x, f"{name}.{k}") for k, x in v.items()}
        try:
            return cls(**values)
        except (TypeError, ValueError) as exc:  # a missing field, a value out of range
            raise ProtocolError(f"{name}: {exc}") from None

    return Kind(check, lambda r: {k: kind.dump(getattr(r, k)) for k, kind in kinds.items()})


def _check_options(v: Any, name: str) -> SamplerOptions:
    if not isinstance(v, dict):
        raise bad(name, "a map", v)
    for k, x in v.items():
        if not isinstance(k, str):
            raise bad(f"{name} key", "a string", k)
        if x is not None and not isinstance(x, bool | int | float | str):
            raise bad(f"{name}.{k}", "null, a boolean, a number or a string", x)
    return SamplerOptions.build(None, **v)  # OptionError (code `input`) names the option


def _dump_options(o: SamplerOptions) -> dict[str, Any]:
    """The fields that differ from the defaults (the worker fills in the rest)."""
    default = SamplerOptions()
    return {
        f.name: getattr(o, f.name)
        for f in fields(o)
        if getattr(o, f.name) != getattr(default, f.name)
    }


# Sampler options: a map of the SamplerOptions fields that differ from their defaults. The
# values are checked by SamplerOptions itself, so a bad option is an `input` error with
# the engine's message (the same one the in-process engine gives).
OPTIONS = Kind(_check_options, _dump_options)
STATS = record(FillStats)
