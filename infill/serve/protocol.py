"""The worker protocol: every message between the worker and its clients, typed once.

A frame is a 4-byte big-endian length and a msgpack map of that many bytes (read off a
stream by infill/serve/frames.py). Every map carries `v` (PROTOCOL_VERSION) and `type`;
the other keys are the fields of the message class registered for that type, each checked
by its field kind (infill/serve/wire.py). Decoding validates every field and raises a
`ProtocolError` whose `code` is the error code to reply with. docs/PROTOCOL.md is the
specification; the worker, the client and the tests all use these classes, never raw
dicts, carrying the engine's value types (spans, edits, fills, stats, scores, sampler
options). No pickle: msgpack carries only plain data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any, ClassVar, TypeVar

import msgpack

from diffusion_infill.infill.core.diff import Edit
from diffusion_infill.infill.core.errors import INPUT, MODEL, TOO_LARGE, InfillError
from diffusion_infill.infill.core.options import SamplerOptions
from diffusion_infill.infill.core.results import FillResult, FillStats, SpanFill, TokenScore
from diffusion_infill.infill.core.snippets import Snippet, Source
from diffusion_infill.infill.core.spans import DEFAULT_MARKER, Span
from diffusion_infill.infill.core.suspicion import DEFAULT_MIN_LIKELY, DEFAULT_MIN_SUSPICION
from diffusion_infill.infill.serve.frames import HEADER, read_frame
from diffusion_infill.infill.serve.limits import Limits
from diffusion_infill.infill.serve.wire import (
    BAD_REQUEST,
    BOOL,
    CANCELLED,
    CODES,
    DEADLINE,
    EDITS,
    FILLS,
    INTERNAL,
    OPTIONS,
    POS,
    SCORES,
    SHUTTING_DOWN,
    SLOW_READER,
    SPANS,
    STATS,
    STEP_SPANS,
    STR,
    SUSPICION,
    UNAUTHORIZED,
    VERSION,
    Kind,
    ProtocolError,
    integer,
    is_int,
    number,
    one_of,
    optional,
    record,
    row,
    rows,
)

__all__ = [  # for the worker, the client and tests: the error codes and messages, frames
    "BAD_REQUEST",
    "CANCELLED",
    "CODES",
    "DEADLINE",
    "INPUT",
    "INTERNAL",
    "MODEL",
    "SHUTTING_DOWN",
    "SLOW_READER",
    "TOO_LARGE",
    "UNAUTHORIZED",
    "VERSION",
    "ProtocolError",
    "HEADER",
    "read_frame",
]

PROTOCOL_VERSION = 1


def _f(kind: Kind, *, newer: bool = False, **kw: Any) -> Any:
    """A message field of `kind`; `newer`: added after version 1's first workers, so left
    off the wire while empty or null (what a worker that predates it reads)."""
    return field(metadata={"kind": kind, "newer": newer}, **kw)


# -- what a worker reports about itself -------------------------------------------------


@dataclass(frozen=True)
class Versions:
    infill: str | None  # package versions; None: not installed
    torch: str | None
    transformers: str | None
    protocol: int


@dataclass(frozen=True)
class Counters:
    """Since the worker started."""

    requests: int  # requests received
    passes: int  # forward passes (logits calls)
    canvases: int  # canvases scored
    shared_passes: int  # passes that served more than one request
    active: int  # denoising jobs in the scheduler now


# -- messages ---------------------------------------------------------------------------

M = TypeVar("M", bound="Message")


@dataclass(frozen=True)
class Message:
    TYPE: ClassVar[str]

    def to_wire(self) -> dict[str, Any]:
        """The msgpack-ready map of this message (with `v` and `type`)."""
        out: dict[str, Any] = {"v": PROTOCOL_VERSION, "type": self.TYPE}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.metadata["newer"] and value in (None, []):
                continue
            out[f.name] = f.metadata["kind"].dump(value)
        return out

    @classmethod
    def from_wire(cls: type[M], obj: Mapping[str, Any]) -> M:
        """Validate a decoded map (its `v` and `type` already checked) into a message."""
        rid = obj.get("id") if is_int(obj.get("id")) else None
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(str(k) for k in obj if k not in known and k not in ("v", "type"))
        if unknown:
            raise ProtocolError(f"{cls.TYPE}: unknown field {unknown[0]!r}", id=rid)
        values: dict[str, Any] = {}
        for name, f in known.items():
            if name not in obj:
                if f.default is MISSING and f.default_factory is MISSING:
                    raise ProtocolError(f"{cls.TYPE}: missing field {name!r}", id=rid)
                continue
            try:
                values[name] = f.metadata["kind"].check(obj[name], name)
            except ProtocolError as exc:
                raise ProtocolError(f"{cls.TYPE}: {exc.message}", code=exc.code, id=rid) from None
            except InfillError as exc:  # the engine refused a value (options): its message
                raise ProtocolError(exc.message, code=exc.code, id=rid) from None
        return cls(**values)


_ID = integer()
SNIPPETS = rows(
    lambda items, where: Snippet(*row(items, where, [STR, STR], 2)), lambda s: [s.path, s.text]
)
# where the text lives: {path, root, python}, each a string or null (the map may be absent)
SOURCE = optional(record(Source))
_LANGUAGE = optional(STR)
_DEADLINE = optional(number(0.001, 86400.0))


# client -> worker ------------------------------------------------------------------


@dataclass(frozen=True)
class Hello(Message):
    """The first frame of every connection; `token` is required when the worker has one."""

    TYPE: ClassVar[str] = "hello"
    token: str | None = _f(optional(STR), default=None)


@dataclass(frozen=True)
class FillRequest(Message):
    """Fill hole markers (`spans` is null) or rewrite explicit character spans."""

    TYPE: ClassVar[str] = "fill"
    id: int = _f(_ID)
    text: str = _f(STR)
    spans: list[Span] | None = _f(optional(SPANS), default=None)  # null: use markers
    marker: str = _f(STR, default=DEFAULT_MARKER)
    language: str | None = _f(_LANGUAGE, default="python")  # null: plain line windows
    options: SamplerOptions = _f(OPTIONS, default_factory=SamplerOptions)
    stream: bool = _f(BOOL, default=False)  # send a `step` event after every step
    deadline: float | None = _f(_DEADLINE, default=None)  # seconds; null: worker default
    # windows of other files of the user's repository: [[path, text], ...] (may be absent)
    context: list[Snippet] = _f(SNIPPETS, newer=True, default_factory=list)
    source: Source | None = _f(SOURCE, newer=True, default=None)  # where the text lives


@dataclass(frozen=True)
class FixRequest(Message):
    """Score text[start:end], repair its most suspicious tokens ("Fix selection")."""

    TYPE: ClassVar[str] = "fix"
    id: int = _f(_ID)
    text: str = _f(STR)
    start: int = _f(POS, default=0)
    end: int | None = _f(optional(POS), default=None)  # null: the end of the text
    max_fixes: int = _f(integer(1), default=1)
    min_suspicion: float = _f(SUSPICION, default=DEFAULT_MIN_SUSPICION)
    language: str | None = _f(_LANGUAGE, default="python")
    options: SamplerOptions = _f(OPTIONS, default_factory=SamplerOptions)
    deadline: float | None = _f(_DEADLINE, default=None)
    min_likely: float = _f(SUSPICION, default=DEFAULT_MIN_LIKELY)  # last: positions kept
    source: Source | None = _f(SOURCE, newer=True, default=None)  # where the text lives


@dataclass(frozen=True)
class ScoreRequest(Message):
    """Suspicion of every token of text[start:end] (one forward pass per window)."""

    TYPE: ClassVar[str] = "score"
    id: int = _f(_ID)
    text: str = _f(STR)
    start: int = _f(POS, default=0)
    end: int | None = _f(optional(POS), default=None)
    language: str | None = _f(_LANGUAGE, default="python")
    deadline: float | None = _f(_DEADLINE, default=None)


@dataclass(frozen=True)
class Cancel(Message):
    """Stop request `id` (between steps); it ends with an `error` of code `cancelled`."""

    TYPE: ClassVar[str] = "cancel"
    id: int = _f(_ID)


@dataclass(frozen=True)
class InfoRequest(Message):
    TYPE: ClassVar[str] = "info"
    id: int = _f(_ID)


# worker -> client ------------------------------------------------------------------


@dataclass(frozen=True)
class Welcome(Message):
    TYPE: ClassVar[str] = "welcome"
    model: str = _f(STR)
    device: str = _f(STR)
    # what the model computes in: "bf16", "fp32", "int8" ("": not said, an older worker
    # or a model without one), so that a client can choose its budgets per machine
    precision: str = _f(STR, default="")
    # the CPU has bf16 instructions (int8 there was timed the faster, not the only fast
    # choice); False: it has none, or not said (an older worker, an accelerator)
    cpu_bf16: bool = _f(BOOL, default=False)
    # the model's fills carry a calibrated confidence (confidence weights beside its
    # weights), so that a client can skip work whose result its floor would hide; False:
    # they carry none, or not said (an older worker)
    confidence: bool = _f(BOOL, default=False)


@dataclass(frozen=True)
class Result(Message):
    """The answer to `fill` and `fix`. `scores` is set for `fix` only; a fix that found
    nothing suspicious has no edits, no fills and no stats (it filled nothing)."""

    TYPE: ClassVar[str] = "result"
    id: int = _f(_ID)
    text: str = _f(STR)  # the whole text after the edits
    edits: list[Edit] = _f(EDITS)  # minimal, in the request text's character offsets
    # per span: [start, end, text, tokens, rejected?, confidence?, [[text, confidence]...]?]
    fills: list[SpanFill] = _f(FILLS)
    stats: FillStats | None = _f(optional(STATS))  # None: nothing was filled
    scores: list[TokenScore] | None = _f(optional(SCORES), default=None)

    @classmethod
    def of(cls, id: int, result: FillResult, scores: list[TokenScore] | None = None) -> Result:
        return cls(id, result.text, list(result.edits), list(result.fills), result.stats, scores)

    def to_fill_result(self, original: str) -> FillResult:
        """The engine's FillResult (no windows, no trace), e.g. for the CLI's output, of a
        result that filled something (`stats` set)."""
        if self.stats is None:
            raise ValueError("this result filled nothing")
        return FillResult(
            self.text, original, list(self.edits), list(self.fills), [], self.stats, []
        )


@dataclass(frozen=True)
class Scores(Message):
    TYPE: ClassVar[str] = "scores"
    id: int = _f(_ID)
    scores: list[TokenScore] = _f(SCORES)


@dataclass(frozen=True)
class Step(Message):
    """After each denoising step of a streamed fill: each span's text, `░` per masked
    slot and `∅` per null slot."""

    TYPE: ClassVar[str] = "step"
    id: int = _f(_ID)
    step: int = _f(integer(1))
    spans: list[tuple[int, str]] = _f(STEP_SPANS)


@dataclass(frozen=True)
class WorkerInfo(Message):
    TYPE: ClassVar[str] = "worker_info"
    id: int = _f(_ID)
    model: str = _f(STR)
    device: str = _f(STR)
    versions: Versions = _f(record(Versions))
    limits: Limits = _f(record(Limits))
    batching: bool = _f(BOOL)  # steps of concurrent requests share forward passes
    counters: Counters = _f(record(Counters))
    precision: str = _f(STR, default="")  # as in `welcome`

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready), without the id: what `infill.workerInfo` returns."""
        return {
            "model": self.model,
            "device": self.device,
            "precision": self.precision,
            "versions": asdict(self.versions),
            "limits": asdict(self.limits),
            "batching": self.batching,
            "counters": asdict(self.counters),
        }


@dataclass(frozen=True)
class Error(Message):
    """A request failed (`id` set), or the connection is refused (`id` null)."""

    TYPE: ClassVar[str] = "error"
    id: int | None = _f(optional(_ID))
    code: str = _f(one_of(CODES))
    message: str = _f(STR)

    @classmethod
    def of(cls, id: int | None, exc: InfillError) -> Error:
        """The reply for a request that failed with `exc`: its code, its message."""
        return cls(id, exc.code, exc.message)


REQUESTS: dict[str, type[Message]] = {
    m.TYPE: m for m in (Hello, FillRequest, FixRequest, ScoreRequest, Cancel, InfoRequest)
}
REPLIES: dict[str, type[Message]] = {
    m.TYPE: m for m in (Welcome, Result, Scores, Step, WorkerInfo, Error)
}


# -- frames -----------------------------------------------------------------------------


def pack(message: Message) -> bytes:
    """One frame: length prefix + msgpack map."""
    body = msgpack.packb(message.to_wire(), use_bin_type=True)
    return HEADER.pack(len(body)) + body


def decode(body: bytes, kinds: Mapping[str, type[Message]]) -> Message:
    """Validate one frame's body into a message of one of `kinds` (REQUESTS or REPLIES)."""
    try:
        obj = msgpack.unpackb(body, raw=False, strict_map_key=True)
    except (ValueError, TypeError, msgpack.UnpackException) as exc:  # every bad byte string
        raise ProtocolError(f"not a msgpack frame ({type(exc).__name__})") from None
    if not isinstance(obj, dict):
        raise ProtocolError(f"a frame must be a msgpack map, got {type(obj).__name__}")
    rid = obj.get("id") if is_int(obj.get("id")) else None
    version = obj.get("v")
    if version != PROTOCOL_VERSION or not is_int(version):
        raise ProtocolError(
            f"protocol version {version!r} is not spoken here (this side "
            f"speaks {PROTOCOL_VERSION})",
            code=VERSION,
            id=rid,
        )
    kind = obj.get("type")
    cls = kinds.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ProtocolError(f"unknown message type {kind!r}", id=rid)
    return cls.from_wire(obj)


def decode_request(body: bytes) -> Message:
    return decode(body, REQUESTS)


def decode_reply(body: bytes) -> Message:
    return decode(body, REPLIES)
