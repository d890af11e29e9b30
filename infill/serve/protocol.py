"""The worker protocol: every message between the worker and its clients, typed once.

A frame is a 4-byte big-endian length and a msgpack map of that many bytes. Every map
carries `v` (PROTOCOL_VERSION) and `type`; the other keys are the fields of the message
class registered for that type. Decoding validates every field and raises a
`ProtocolError` whose `code` is the error code to reply with. docs/PROTOCOL.md is the
specification; the worker (infill/worker.py), the client (infill/client.py) and the tests
all use these classes, never raw dicts. No pickle anywhere: msgpack carries only plain
data (ext types are refused).

Addresses are strings: `unix:/path/worker.sock` (or a bare path) and `tcp:HOST:PORT`
(`tcp:[::1]:7777` for IPv6).
"""

from __future__ import annotations

import asyncio
import math
import os
import struct
from collections.abc import Callable, Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

import msgpack

from infill.core.diff import Edit
from infill.core.engine import FillResult, FillStats, SpanFill
from infill.core.options import SamplerOptions
from infill.core.repair import TokenScore
from infill.core.spans import DEFAULT_MARKER, Span

PROTOCOL_VERSION = 1
HEADER = struct.Struct(">I")  # the frame length prefix
MAX_ID = 2**63 - 1

# Error codes (the `code` of an `error` reply); docs/PROTOCOL.md says when each is used.
BAD_REQUEST = "bad_request"
TOO_LARGE = "too_large"
UNAUTHORIZED = "unauthorized"
CANCELLED = "cancelled"
DEADLINE = "deadline"
INPUT = "input"
MODEL = "model"
INTERNAL = "internal"
SHUTTING_DOWN = "shutting_down"
VERSION = "version"
CODES = frozenset(
    {BAD_REQUEST, TOO_LARGE, UNAUTHORIZED, CANCELLED, DEADLINE, INPUT, MODEL, INTERNAL,
     SHUTTING_DOWN, VERSION}
)


class ProtocolError(Exception):
    """A frame that breaks the protocol. `code` is the error code to answer with; `id` is
    the request's id when the frame had a readable one (so its sender can match it)."""

    def __init__(self, code: str, message: str, id: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.id = id


# -- field kinds: validate a wire value, and turn a Python value back into wire data ---


@dataclass(frozen=True)
class _Kind:
    check: Callable[[Any, str], Any]  # (wire value, field name) -> Python value
    dump: Callable[[Any], Any] = lambda v: v  # Python value -> msgpack-ready value


def _bad(name: str, what: str, value: Any) -> ProtocolError:
    shown = repr(value)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return ProtocolError(BAD_REQUEST, f"{name} must be {what}, got {shown}")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _int(lo: int = 0, hi: int = MAX_ID) -> _Kind:
    def check(v: Any, name: str) -> int:
        if not _is_int(v) or not lo <= v <= hi:
            raise _bad(name, f"an integer in [{lo}, {hi}]", v)
        return v

    return _Kind(check)


def _real(lo: float, hi: float) -> _Kind:
    def check(v: Any, name: str) -> float:
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) \
                or not lo <= v <= hi:
            raise _bad(name, f"a number in [{lo:g}, {hi:g}]", v)
        return float(v)

    return _Kind(check)


def _check_str(v: Any, name: str) -> str:
    if not isinstance(v, str):
        raise _bad(name, "a string", v)
    return v


def _check_bool(v: Any, name: str) -> bool:
    if not isinstance(v, bool):
        raise _bad(name, "true or false", v)
    return v


_STR = _Kind(_check_str)
_BOOL = _Kind(_check_bool)


def _optional(kind: _Kind) -> _Kind:
    return _Kind(lambda v, n: None if v is None else kind.check(v, n),
                 lambda v: None if v is None else kind.dump(v))


def _check_scalars(v: Any, name: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise _bad(name, "a map", v)
    for k, x in v.items():
        if not isinstance(k, str):
            raise _bad(f"{name} key", "a string", k)
        if x is not None and not isinstance(x, bool | int | float | str):
            raise _bad(f"{name}.{k}", "null, a boolean, a number or a string", x)
    return dict(v)


_SCALARS = _Kind(_check_scalars, dict)


def _rows(build: Callable[[list[Any], str], Any], dump: Callable[[Any], list[Any]]) -> _Kind:
    """A list of rows (arrays), each checked and built by `build(row, where)`."""

    def check(v: Any, name: str) -> list[Any]:
        if not isinstance(v, list):
            raise _bad(name, "an array", v)
        out = []
        for i, row in enumerate(v):
            if not isinstance(row, list):
                raise _bad(f"{name}[{i}]", "an array", row)
            out.append(build(row, f"{name}[{i}]"))
        return out

    return _Kind(check, lambda v: [dump(x) for x in v])


def _row(row: list[Any], where: str, kinds: list[_Kind], at_least: int) -> list[Any]:
    if not at_least <= len(row) <= len(kinds):
        n = str(len(kinds)) if at_least == len(kinds) else f"{at_least} to {len(kinds)}"
        raise _bad(where, f"an array of {n} items", row)
    return [k.check(x, f"{where}[{i}]") for i, (k, x) in enumerate(zip(kinds, row,
                                                                        strict=False))]


_POS = _int()
_SUSPICION = _real(0.0, 1.0)


def _span(row: list[Any], where: str) -> Span:
    start, end, *rest = _row(row, where, [_POS, _POS, _optional(_int(1)), _BOOL], 2)
    return Span(start, end, rest[0] if rest else None, rest[1] if len(rest) > 1 else False)


def _edit(row: list[Any], where: str) -> Edit:
    return Edit(*_row(row, where, [_POS, _POS, _STR], 3))


def _fill(row: list[Any], where: str) -> SpanFill:
    start, end, text, tokens = _row(row, where, [_POS, _POS, _STR, _POS], 4)
    return SpanFill(Span(start, end), text, tokens)


def _score(row: list[Any], where: str) -> TokenScore:
    return TokenScore(*_row(row, where, [_POS, _POS, _STR, _SUSPICION, _STR], 5))


def _step_span(row: list[Any], where: str) -> tuple[int, str]:
    index, text = _row(row, where, [_POS, _STR], 2)
    return index, text


_SPANS = _rows(_span, lambda s: [s.start, s.end, s.length, s.exact])
_EDITS = _rows(_edit, lambda e: [e.start, e.end, e.new_text])
_FILLS = _rows(_fill, lambda f: [f.span.start, f.span.end, f.text, f.tokens])
_SCORES = _rows(_score, lambda s: [s.start, s.end, s.text, s.suspicion, s.likely])
_STEP_SPANS = _rows(_step_span, list)


def _check_code(v: Any, name: str) -> str:
    if v not in CODES:
        raise _bad(name, f"one of {', '.join(sorted(CODES))}", v)
    return v


def _f(kind: _Kind, **kw: Any) -> Any:
    return field(metadata={"kind": kind}, **kw)


# -- messages ---------------------------------------------------------------------------

M = TypeVar("M", bound="Message")


@dataclass(frozen=True)
class Message:
    TYPE: ClassVar[str]

    def to_wire(self) -> dict[str, Any]:
        """The msgpack-ready map of this message (with `v` and `type`)."""
        out: dict[str, Any] = {"v": PROTOCOL_VERSION, "type": self.TYPE}
        for f in fields(self):
            out[f.name] = f.metadata["kind"].dump(getattr(self, f.name))
        return out

    @classmethod
    def from_wire(cls: type[M], obj: Mapping[str, Any]) -> M:
        """Validate a decoded map (its `v` and `type` already checked) into a message."""
        rid = obj.get("id") if _is_int(obj.get("id")) else None
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(str(k) for k in obj if k not in known and k not in ("v", "type"))
        if unknown:
            raise ProtocolError(BAD_REQUEST, f"{cls.TYPE}: unknown field {unknown[0]!r}", rid)
        values: dict[str, Any] = {}
        for name, f in known.items():
            if name not in obj:
                if f.default is MISSING and f.default_factory is MISSING:
                    raise ProtocolError(BAD_REQUEST, f"{cls.TYPE}: missing field {name!r}", rid)
                continue
            try:
                values[name] = f.metadata["kind"].check(obj[name], name)
            except ProtocolError as exc:
                raise ProtocolError(exc.code, f"{cls.TYPE}: {exc.message}", rid) from None
        return cls(**values)


_ID = _int()
_TEXT = _STR
_LANGUAGE = _optional(_STR)
_DEADLINE = _optional(_real(0.001, 86400.0))


# client -> worker ------------------------------------------------------------------


@dataclass(frozen=True)
class Hello(Message):
    """The first frame of every connection; `token` is required when the worker has one."""

    TYPE: ClassVar[str] = "hello"
    token: str | None = _f(_optional(_STR), default=None)


@dataclass(frozen=True)
class FillRequest(Message):
    """Fill hole markers (`spans` is null) or rewrite explicit character spans."""

    TYPE: ClassVar[str] = "fill"
    id: int = _f(_ID)
    text: str = _f(_TEXT)
    spans: list[Span] | None = _f(_optional(_SPANS), default=None)  # null: use markers
    marker: str = _f(_STR, default=DEFAULT_MARKER)
    language: str | None = _f(_LANGUAGE, default="python")  # null: plain line windows
    options: dict[str, Any] = _f(_SCALARS, default_factory=dict)  # SamplerOptions fields
    stream: bool = _f(_BOOL, default=False)  # send a `step` event after every step
    deadline: float | None = _f(_DEADLINE, default=None)  # seconds; null: worker default


@dataclass(frozen=True)
class FixRequest(Message):
    """Score text[start:end], re-denoise its most suspicious tokens ("Fix selection")."""

    TYPE: ClassVar[str] = "fix"
    id: int = _f(_ID)
    text: str = _f(_TEXT)
    start: int = _f(_POS, default=0)
    end: int | None = _f(_optional(_POS), default=None)  # null: the end of the text
    max_fixes: int = _f(_int(1), default=1)
    min_suspicion: float = _f(_SUSPICION, default=0.5)
    language: str | None = _f(_LANGUAGE, default="python")
    options: dict[str, Any] = _f(_SCALARS, default_factory=dict)
    deadline: float | None = _f(_DEADLINE, default=None)


@dataclass(frozen=True)
class ScoreRequest(Message):
    """Suspicion of every token of text[start:end] (one forward pass per window)."""

    TYPE: ClassVar[str] = "score"
    id: int = _f(_ID)
    text: str = _f(_TEXT)
    start: int = _f(_POS, default=0)
    end: int | None = _f(_optional(_POS), default=None)
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
    model: str = _f(_STR)
    device: str = _f(_STR)


@dataclass(frozen=True)
class Result(Message):
    """The answer to `fill` and `fix`. `scores` is set for `fix` only; a fix that found
    nothing suspicious has no edits, no fills and empty stats."""

    TYPE: ClassVar[str] = "result"
    id: int = _f(_ID)
    text: str = _f(_TEXT)  # the whole text after the edits
    edits: list[Edit] = _f(_EDITS)  # minimal, in the request text's character offsets
    fills: list[SpanFill] = _f(_FILLS)  # per span: [start, end, text, tokens]
    stats: dict[str, Any] = _f(_SCALARS)  # FillStats fields (nfe, steps, ms, ...)
    scores: list[TokenScore] | None = _f(_optional(_SCORES), default=None)

    @classmethod
    def of(cls, id: int, result: FillResult,
           scores: list[TokenScore] | None = None) -> Result:
        return cls(id, result.text, list(result.edits), list(result.fills),
                   asdict(result.stats), scores)

    def to_fill_result(self, original: str) -> FillResult:
        """The engine's FillResult (no windows, no trace), e.g. for the CLI's output."""
        return FillResult(self.text, original, list(self.edits), list(self.fills), [],
                          FillStats(**self.stats), [])


@dataclass(frozen=True)
class Scores(Message):
    TYPE: ClassVar[str] = "scores"
    id: int = _f(_ID)
    scores: list[TokenScore] = _f(_SCORES)


@dataclass(frozen=True)
class Step(Message):
    """After each denoising step of a streamed fill: each span's text, `░` per masked
    slot and `∅` per null slot."""

    TYPE: ClassVar[str] = "step"
    id: int = _f(_ID)
    step: int = _f(_int(1))
    spans: list[tuple[int, str]] = _f(_STEP_SPANS)


@dataclass(frozen=True)
class WorkerInfo(Message):
    TYPE: ClassVar[str] = "worker_info"
    id: int = _f(_ID)
    model: str = _f(_STR)
    device: str = _f(_STR)
    versions: dict[str, Any] = _f(_SCALARS)  # infill, torch, transformers, protocol
    limits: dict[str, Any] = _f(_SCALARS)  # the worker's Limits
    batching: bool = _f(_BOOL)  # steps of concurrent requests share forward passes
    counters: dict[str, Any] = _f(_SCALARS)  # requests, passes, canvases (since start)


@dataclass(frozen=True)
class Error(Message):
    """A request failed (`id` set), or the connection is refused (`id` null)."""

    TYPE: ClassVar[str] = "error"
    id: int | None = _f(_optional(_ID))
    code: str = _f(_Kind(_check_code))
    message: str = _f(_STR)


REQUESTS: dict[str, type[Message]] = {
    m.TYPE: m for m in (Hello, FillRequest, FixRequest, ScoreRequest, Cancel, InfoRequest)
}
REPLIES: dict[str, type[Message]] = {
    m.TYPE: m for m in (Welcome, Result, Scores, Step, WorkerInfo, Error)
}


def options_to_wire(options: SamplerOptions | Mapping[str, Any] | None) -> dict[str, Any]:
    """The `options` map of a request: the fields that differ from the defaults."""
    if options is None:
        return {}
    if isinstance(options, SamplerOptions):
        default = SamplerOptions()
        return {f.name: getattr(options, f.name) for f in fields(options)
                if getattr(options, f.name) != getattr(default, f.name)}
    return dict(options)


# -- frames -----------------------------------------------------------------------------


def pack(message: Message) -> bytes:
    """One frame: length prefix + msgpack map."""
    body = msgpack.packb(message.to_wire(), use_bin_type=True)
    return HEADER.pack(len(body)) + body


def decode(body: bytes, kinds: Mapping[str, type[Message]]) -> Message:
    """Validate one frame's body into a message of one of `kinds` (REQUESTS or REPLIES)."""
    try:
        obj = msgpack.unpackb(body, raw=False, strict_map_key=True)
    except Exception as exc:  # noqa: BLE001 - msgpack raises several types for bad input
        raise ProtocolError(BAD_REQUEST, f"not a msgpack frame ({type(exc).__name__})") from None
    if not isinstance(obj, dict):
        raise ProtocolError(BAD_REQUEST, f"a frame must be a msgpack map, got {type(obj).__name__}")
    rid = obj.get("id") if _is_int(obj.get("id")) else None
    version = obj.get("v")
    if version != PROTOCOL_VERSION or not _is_int(version):
        raise ProtocolError(
            VERSION, f"protocol version {version!r} is not spoken here (this side speaks "
            f"{PROTOCOL_VERSION})", rid)
    kind = obj.get("type")
    cls = kinds.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ProtocolError(BAD_REQUEST, f"unknown message type {kind!r}", rid)
    return cls.from_wire(obj)


def decode_request(body: bytes) -> Message:
    return decode(body, REQUESTS)


def decode_reply(body: bytes) -> Message:
    return decode(body, REPLIES)


async def read_frame(reader: asyncio.StreamReader, max_size: int) -> bytes | None:
    """The next frame's body; None at a clean end of stream (between frames).

    Raises ProtocolError(too_large) when the length prefix exceeds `max_size` (the body is
    not read: the stream cannot be trusted after that), ConnectionError when the stream
    ends inside a frame."""
    try:
        head = await reader.readexactly(HEADER.size)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise ConnectionError("the connection ended inside a frame header") from None
    (size,) = HEADER.unpack(head)
    if size > max_size:
        raise ProtocolError(TOO_LARGE, f"a frame of {size} bytes exceeds the limit of "
                            f"{max_size} bytes")
    try:
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError:
        raise ConnectionError("the connection ended inside a frame") from None


# -- addresses --------------------------------------------------------------------------


@dataclass(frozen=True)
class Address:
    kind: Literal["unix", "tcp"]
    path: str = ""  # unix
    host: str = ""  # tcp
    port: int = 0  # tcp (0: any free port, when listening)

    def __str__(self) -> str:
        if self.kind == "unix":
            return f"unix:{self.path}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"tcp:{host}:{self.port}"


def parse_address(text: str) -> Address:
    """`unix:PATH`, a bare path, or `tcp:HOST:PORT`; ValueError when malformed."""
    if text.startswith("tcp:"):
        host, sep, port = text[4:].rpartition(":")
        host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError(f"bad TCP address {text!r}; expected tcp:HOST:PORT")
        return Address("tcp", host=host, port=int(port))
    path = text[5:] if text.startswith("unix:") else text
    if not path:
        raise ValueError(f"bad address {text!r}; expected unix:PATH or tcp:HOST:PORT")
    return Address("unix", path=path)


def default_socket_dir() -> Path:
    """`$XDG_RUNTIME_DIR/infill`, or `/tmp/infill-<uid>`; the worker makes it 0700."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime):
        return Path(runtime) / "infill"
    return Path(f"/tmp/infill-{os.getuid()}")


def default_socket_path() -> Path:
    return default_socket_dir() / "worker.sock"
