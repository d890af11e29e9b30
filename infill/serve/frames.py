"""Frames on a worker connection: a 4-byte big-endian length (`HEADER`), then a msgpack map
of that many bytes (infill/serve/protocol.py makes and reads the maps). `read_frame`
reads one frame's body off a stream, bounded in size and in the silence allowed inside a
frame."""

from __future__ import annotations

import asyncio
import struct

from diffusion_infill.infill.core.errors import TOO_LARGE
from diffusion_infill.infill.serve.wire import ProtocolError

HEADER = struct.Struct(">I")  # the frame length prefix


class FrameTooLarge(ProtocolError):
    """A frame's length prefix exceeds the limit; `size` is the length it claims (its
    body is still on the stream)."""

    def __init__(self, size: int, max_size: int) -> None:
        super().__init__(
            f"a frame of {size} bytes exceeds the limit of {max_size} bytes", code=TOO_LARGE
        )
        self.size = size


async def read_frame(
    reader: asyncio.StreamReader, max_size: int, idle: float | None = None
) -> bytes | None:
    """The next frame's body; None at a clean end of stream (between frames). Waiting
    for a frame is unbounded; inside one, `idle` seconds without a byte (half a frame,
    then silence) or the stream's end is a ConnectionError. FrameTooLarge (a
    ProtocolError, too_large) when the length prefix exceeds `max_size` (the body is not
    read: the stream is lost; `discard` reads it away)."""
    first = await reader.read(1)
    if not first:
        return None
    head = first + await _read_more(reader, HEADER.size - 1, idle, "frame header")
    (size,) = HEADER.unpack(head)
    if size > max_size:
        raise FrameTooLarge(size, max_size)
    return await _read_more(reader, size, idle, "frame")


async def discard(reader: asyncio.StreamReader, n: int, within: float) -> int:
    """Read and drop up to `n` bytes (the body of a refused frame), for at most `within`
    seconds or until the stream ends; the bytes dropped."""
    dropped = 0
    try:
        async with asyncio.timeout(within):
            while dropped < n:
                chunk = await reader.read(min(n - dropped, 1 << 16))
                if not chunk:
                    break
                dropped += len(chunk)
    except (TimeoutError, ConnectionError, OSError):
        pass
    return dropped


async def _read_more(reader: asyncio.StreamReader, n: int, idle: float | None, what: str) -> bytes:
    """`n` bytes of a frame already begun, each chunk within `idle` seconds."""
    out = bytearray()
    while len(out) < n:
        try:
            async with asyncio.timeout(idle):
                chunk = await reader.read(min(n - len(out), 1 << 20))
        except TimeoutError:
            raise ConnectionError(f"no byte for {idle:g} s inside a {what}") from None
        if not chunk:
            raise ConnectionError(f"the connection ended inside a {what}")
        out += chunk
    return bytes(out)
