"""The worker protocol: every message round-trips, every bad field is a typed error."""

from __future__ import annotations

import asyncio
import re
import struct
from pathlib import Path

import msgpack
import pytest
from fakes import TargetDenoiser

from diffusion_infill.infill import SamplerOptions, Span, fill_text
from diffusion_infill.infill.core.diff import Edit
from diffusion_infill.infill.core.results import FillStats, SpanFill, TokenScore
from diffusion_infill.infill.serve.protocol import (
    BAD_REQUEST,
    CODES,
    PROTOCOL_VERSION,
    REPLIES,
    REQUESTS,
    TOO_LARGE,
    VERSION,
    Cancel,
    Counters,
    Error,
    FillRequest,
    FixRequest,
    Hello,
    InfoRequest,
    Limits,
    ProtocolError,
    Result,
    ScoreRequest,
    Scores,
    Step,
    Versions,
    Welcome,
    WorkerInfo,
    decode_reply,
    decode_request,
    pack,
    read_frame,
)
from diffusion_infill.infill.serve.sockets import Address, default_socket_path, parse_address

ROOT = Path(__file__).resolve().parent.parent

MESSAGES = [
    Hello(),
    Hello("s3cret"),
    FillRequest(1, "x = <mask>\n"),
    FillRequest(
        2,
        "x = 1\n",
        spans=[Span(4, 5), Span(5, 5, 3, True)],
        marker="??",
        language=None,
        options=SamplerOptions(threshold=0.8, order="margin"),
        stream=True,
        deadline=2.5,
    ),
    FixRequest(
        3,
        "y = x - 1\n",
        start=2,
        end=9,
        max_fixes=2,
        min_suspicion=0.25,
        options=SamplerOptions(max_steps=4),
        deadline=1.0,
    ),
    ScoreRequest(4, "é😀\n", start=0, end=None, language="python"),
    Cancel(5),
    InfoRequest(6),
    Welcome("fake", "cpu", "int8", True),
    Result(
        7,
        "x = 42\n",
        [Edit(4, 10, "42")],
        [SpanFill(Span(4, 10), "42", 2)],
        FillStats("fake", 1, 1, 2, 2, 2, 1.5, 1.0, 2, 0, 0, 0),
    ),
    Result(8, "y\n", [], [], None, scores=[TokenScore(0, 1, "y", 0.75, "x")]),
    Scores(9, [TokenScore(0, 2, "é😀", 0.0, "é😀")]),
    Step(10, 3, [(0, "ab░░"), (1, "∅")]),
    WorkerInfo(
        11,
        "fake",
        "cuda:0",
        Versions("0.1.0", None, "5.0", 1),
        Limits(max_frame=4096, deadline=30.0),
        True,
        Counters(4, 3, 5, 1, 0),
        "bf16",
    ),
    Error(12, "cancelled", "cancelled by the client"),
    Error(None, "unauthorized", "wrong or missing token"),
]


@pytest.mark.parametrize("msg", MESSAGES, ids=lambda m: m.TYPE)
def test_every_message_round_trips_through_a_frame(msg):
    frame = pack(msg)
    (size,) = struct.unpack(">I", frame[:4])
    assert size == len(frame) - 4
    wire = msgpack.unpackb(frame[4:])
    assert wire["v"] == PROTOCOL_VERSION and wire["type"] == msg.TYPE
    decode = decode_request if msg.TYPE in REQUESTS else decode_reply
    assert decode(frame[4:]) == msg


def test_types_are_distinct_per_direction():
    assert not set(REQUESTS) & set(REPLIES)
    with pytest.raises(ProtocolError, match="unknown message type 'result'"):
        decode_request(pack(MESSAGES[9])[4:])
    with pytest.raises(ProtocolError, match="unknown message type 'fill'"):
        decode_reply(pack(MESSAGES[2])[4:])


def test_optional_fields_take_their_defaults():
    body = msgpack.packb({"v": PROTOCOL_VERSION, "type": "fill", "id": 1, "text": "a"})
    assert decode_request(body) == FillRequest(1, "a")
    body = msgpack.packb({"v": PROTOCOL_VERSION, "type": "hello"})
    assert decode_request(body) == Hello(None)
    # a worker from before `precision` was said: the client reads "" (not said)
    body = msgpack.packb({"v": PROTOCOL_VERSION, "type": "welcome", "model": "m", "device": "cpu"})
    assert decode_reply(body) == Welcome("m", "cpu", "")
    assert Welcome("m", "cpu", "").cpu_bf16 is False  # not said: no bf16 instructions
    assert Welcome("m", "cpu", "").confidence is False  # not said: fills without one


def _wire(**fields):
    return msgpack.packb({"v": PROTOCOL_VERSION, **fields}, use_bin_type=True)


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ({"type": "fill", "id": "x", "text": "a"}, "id must be an integer"),
        ({"type": "fill", "id": -1, "text": "a"}, "id must be an integer"),
        ({"type": "fill", "id": True, "text": "a"}, "id must be an integer"),
        ({"type": "fill", "id": 7, "text": 5}, "text must be a string"),
        ({"type": "fill", "id": 7, "text": b"bytes"}, "text must be a string"),
        ({"type": "fill", "id": 7}, "missing field 'text'"),
        ({"type": "fill", "id": 7, "text": "a", "colour": 1}, "unknown field 'colour'"),
        ({"type": "fill", "id": 7, "text": "a", "spans": [[1]]}, r"spans\[0\] must be"),
        ({"type": "fill", "id": 7, "text": "a", "spans": [[0, 1, 0]]}, r"spans\[0\]\[2\]"),
        ({"type": "fill", "id": 7, "text": "a", "spans": [[0, "1"]]}, r"spans\[0\]\[1\]"),
        ({"type": "fill", "id": 7, "text": "a", "spans": [[0, 1, None, 1]]}, "true or false"),
        ({"type": "fill", "id": 7, "text": "a", "spans": {"0": 1}}, "spans must be an array"),
        ({"type": "fill", "id": 7, "text": "a", "options": [1]}, "options must be a map"),
        ({"type": "fill", "id": 7, "text": "a", "options": {"x": [1]}}, "options.x"),
        ({"type": "fill", "id": 7, "text": "a", "stream": 1}, "stream must be true or false"),
        ({"type": "fill", "id": 7, "text": "a", "deadline": 0}, "deadline must be a number"),
        ({"type": "fill", "id": 7, "text": "a", "deadline": float("nan")}, "deadline"),
        ({"type": "fix", "id": 7, "text": "a", "max_fixes": 0}, "max_fixes"),
        ({"type": "fix", "id": 7, "text": "a", "min_suspicion": 2}, "min_suspicion"),
        ({"type": "score", "id": 7, "text": "a", "start": -3}, "start must be"),
        ({"type": "cancel"}, "missing field 'id'"),
        ({"type": "hello", "token": 5}, "token must be a string"),
    ],
)
def test_bad_fields_are_bad_requests_that_keep_the_id(fields, needle):
    with pytest.raises(ProtocolError) as info:
        decode_request(_wire(**fields))
    assert info.value.code == BAD_REQUEST
    assert re.search(needle, info.value.message), info.value.message
    expected_id = (
        fields.get("id")
        if isinstance(fields.get("id"), int) and not isinstance(fields.get("id"), bool)
        else None
    )
    assert info.value.id == expected_id


@pytest.mark.parametrize(
    ("body", "code", "needle"),
    [
        (b"", BAD_REQUEST, "not a msgpack frame"),
        (b"\xc1", BAD_REQUEST, "not a msgpack frame"),
        (b"\xa2\xff\xfe", BAD_REQUEST, "not a msgpack frame"),  # invalid UTF-8 str
        (msgpack.packb({"v": 1}) + b"\x00", BAD_REQUEST, "not a msgpack frame"),  # extra
        (b"\x91" * 100_000 + b"\xc0", BAD_REQUEST, "not a msgpack frame"),  # too deep
        (msgpack.packb([1, 2]), BAD_REQUEST, "must be a msgpack map"),
        (msgpack.packb(msgpack.ExtType(1, b"x")), BAD_REQUEST, "must be a msgpack map"),
        (msgpack.packb({1: 2}), BAD_REQUEST, "not a msgpack frame"),  # non-str key
        (msgpack.packb({"type": "info", "id": 3}), VERSION, "protocol version None"),
        (msgpack.packb({"v": 99, "type": "info", "id": 3}), VERSION, "version 99"),
        (msgpack.packb({"v": 1, "type": "nope", "id": 3}), BAD_REQUEST, "unknown message"),
        (msgpack.packb({"v": 1, "id": 3}), BAD_REQUEST, "unknown message type None"),
        (_wire(type="fill", id=3, text=msgpack.ExtType(1, b"x")), BAD_REQUEST, "text"),
    ],
)
def test_malformed_frames_are_typed_errors(body, code, needle):
    with pytest.raises(ProtocolError) as info:
        decode_request(body)
    assert info.value.code == code
    assert needle in info.value.message


def test_error_codes_are_checked():
    with pytest.raises(ProtocolError, match="code must be one of"):
        decode_reply(_wire(type="error", id=1, code="oops", message="m"))
    assert {
        "bad_request",
        "too_large",
        "unauthorized",
        "cancelled",
        "deadline",
        "input",
        "model",
        "internal",
        "shutting_down",
        "slow_reader",
        "version",
    } == CODES


def _read(data: bytes, max_size: int = 100):
    async def go():
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        return await read_frame(reader, max_size)

    return asyncio.run(go())


def test_read_frame():
    frame = pack(Cancel(3))
    assert decode_request(_read(frame)) == Cancel(3)
    assert _read(b"") is None  # a clean end between frames
    with pytest.raises(ConnectionError):
        _read(frame[:2])
    with pytest.raises(ConnectionError):
        _read(frame[:-1])
    with pytest.raises(ProtocolError) as info:
        _read(struct.pack(">I", 101) + b"x" * 101)
    assert info.value.code == TOO_LARGE


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("unix:/run/w.sock", Address("unix", path="/run/w.sock")),
        ("/run/w.sock", Address("unix", path="/run/w.sock")),
        ("w.sock", Address("unix", path="w.sock")),
        ("tcp:127.0.0.1:7777", Address("tcp", host="127.0.0.1", port=7777)),
        ("tcp:[::1]:0", Address("tcp", host="::1", port=0)),
        ("tcp:gpu-box:80", Address("tcp", host="gpu-box", port=80)),
    ],
)
def test_addresses(text, address):
    assert parse_address(text) == address
    assert parse_address(str(address)) == address


@pytest.mark.parametrize(
    "text", ["", "unix:", "tcp:", "tcp:host", "tcp::7", "tcp:h:x", "tcp:h:70000"]
)
def test_bad_addresses(text):
    with pytest.raises(ValueError, match="address"):
        parse_address(text)


def test_default_socket_path(monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/1000")
    assert default_socket_path() == Path("/run/user/1000/infill/worker.sock")
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert str(default_socket_path()).startswith("/tmp/infill-")


def test_options_on_the_wire_are_the_non_defaults():
    opts = SamplerOptions(order="margin", threshold=0.5, grow=0)
    wire = FillRequest(1, "a", options=opts).to_wire()["options"]
    assert wire == {"order": "margin", "threshold": 0.5, "grow": 0}
    assert decode_request(pack(FillRequest(1, "a", options=opts))[4:]).options == opts
    assert FillRequest(1, "a").to_wire()["options"] == {}


def test_a_bad_option_is_the_engines_input_error_with_the_id():
    with pytest.raises(ProtocolError) as info:
        decode_request(_wire(type="fill", id=7, text="a", options={"threshold": 3}))
    assert (info.value.code, info.value.id) == ("input", 7)
    assert info.value.message.startswith("threshold for order 'confidence' must be in")


def test_stats_and_worker_records_are_typed_maps():
    wire = msgpack.unpackb(pack(MESSAGES[9])[4:])
    assert wire["stats"]["windows"] == 1 and wire["stats"]["ms"] == 1.5
    info = msgpack.unpackb(pack(MESSAGES[13])[4:])
    assert info["limits"]["max_frame"] == 4096 and info["counters"]["passes"] == 3
    with pytest.raises(ProtocolError, match="stats: unknown field 'colour'"):
        decode_reply(
            _wire(
                type="result",
                id=1,
                text="",
                edits=[],
                fills=[],
                stats={**wire["stats"], "colour": 1},
            )
        )
    with pytest.raises(ProtocolError, match=r"stats.nfe must be an integer"):
        decode_reply(
            _wire(
                type="result",
                id=1,
                text="",
                edits=[],
                fills=[],
                stats={**wire["stats"], "nfe": "2"},
            )
        )
    with pytest.raises(ProtocolError, match="limit max_frame must be a positive number"):
        decode_reply(msgpack.packb({**info, "limits": {"max_frame": 0}}))


def test_a_result_rebuilds_the_engines_fill_result():
    local = fill_text(
        "x = <mask>\ny = <mask>\n", denoiser=TargetDenoiser({"x = ": "1", "y = ": "22"})
    )
    wire = decode_reply(pack(Result.of(1, local))[4:])
    assert isinstance(wire, Result)
    back = wire.to_fill_result(local.original)
    assert back.to_dict() == local.to_dict()
    assert back.diff("a.py") == local.diff("a.py")


def test_the_protocol_doc_names_the_version_and_every_message_and_code():
    doc = (ROOT / "docs" / "PROTOCOL.md").read_text()
    assert f"version {PROTOCOL_VERSION}" in doc.lower()
    for name in [*REQUESTS, *REPLIES, *CODES]:
        assert f"`{name}`" in doc, name
