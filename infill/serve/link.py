"""One connection to a worker, shared by any number of concurrent requests (the transport
under infill/serve/client.py's WorkerClient).

It connects on first use (starting a spawned worker first, and a fresh one when the last
died), says hello, sends each request and waits for its reply within a timeout, passes
`step` events to the request's callback, and cancels a request whose caller gave up. When
the connection is lost, every request in flight fails at once with `unavailable`; when the
worker refused a frame as `too_large` and closed it (a worker whose `max_frame` is below
the one assumed here), the request of the largest frame in flight, the one refused, fails
with that reply's `too_large` instead.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import subprocess
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Self, TypeVar

from diffusion_infill.infill.core.errors import TOO_LARGE, InfillError
from diffusion_infill.infill.serve.frames import HEADER, read_frame
from diffusion_infill.infill.serve.protocol import (
    Cancel,
    Error,
    Hello,
    Limits,
    Message,
    ProtocolError,
    Step,
    Welcome,
    decode_reply,
    pack,
)
from diffusion_infill.infill.serve.sockets import default_socket_path, parse_address
from diffusion_infill.infill.serve.spawn import WorkerProcess

log = logging.getLogger("infill.serve.client")
M = TypeVar("M", bound=Message)

UNAVAILABLE = "unavailable"  # the worker cannot be reached or started, or it died
TIMEOUT = "timeout"  # no reply within the request timeout
MAX_REPLY = 64 * 1024 * 1024  # bytes in one reply frame (a result holds a whole text)


class WorkerError(InfillError):
    """A request to the worker failed. `code`: a protocol error code, `unavailable` or
    `timeout`; `message`: for people (the engine's own message for code `input`)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message, code=code)

    @classmethod
    def of(cls, reply: Error) -> WorkerError:
        """The error that a worker's `error` reply stands for."""
        return cls(reply.code, reply.message)


@dataclass
class _Pending:
    future: asyncio.Future[Message]
    on_step: Callable[[Step], None] | None
    size: int = 0  # bytes of the request's frame


class WorkerLink:
    """One connection to a worker (connected on first use), shared by concurrent requests.

    Args:
        address: `unix:PATH`, a bare path or `tcp:HOST:PORT` (default: the per-user socket).
        spawn: the command that starts a worker listening on `address` (see
            `spawn_command`); None: connect to a worker that is already running.
        token: the worker's shared token (required for TCP).
        connect_timeout: seconds to connect (for a spawned worker: to start, load the model
            and listen).
        request_timeout: seconds to wait for a reply unless a call says otherwise.
        log: file for a spawned worker's stderr (appended); None: inherit ours.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        spawn: Sequence[str] | None = None,
        token: str | None = None,
        connect_timeout: float = 60.0,
        request_timeout: float = 120.0,
        log: str | Path | None = None,
    ) -> None:
        if address is None:
            if spawn is not None:
                raise ValueError("a spawned worker needs the address it will listen on")
            address = str(default_socket_path())
        self.address = parse_address(address)
        self.spawn = list(spawn) if spawn is not None else None
        self.token = token
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self.max_frame = Limits().max_frame  # the worker's default limit on a frame
        self.log = Path(log) if log is not None else None
        self.welcome: Welcome | None = None  # the worker's greeting on the live connection
        self._worker = WorkerProcess(spawn, self.log) if spawn is not None else None
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._pending: dict[int, _Pending] = {}
        self._refusal: Error | None = None  # a frame the worker refused on this connection
        self._ids = itertools.count(1)
        self._lock = asyncio.Lock()

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        """The spawned worker process (None when not spawned or not started)."""
        return self._worker.proc if self._worker is not None else None

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    async def __aenter__(self) -> Self:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- one request --------------------------------------------------------------------

    async def _call(
        self,
        make: Callable[[int], Message],
        kind: type[M],
        *,
        timeout: float,
        on_step: Callable[[Step], None] | None = None,
    ) -> M:
        await self.connect()
        rid = next(self._ids)
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._pending[rid] = _Pending(future, on_step)
        try:
            await self._send(make(rid), self._pending[rid])
            async with asyncio.timeout(timeout):
                reply = await future
        except TimeoutError:
            self._cancel(rid)
            raise WorkerError(TIMEOUT, f"no reply from the worker within {timeout:g} s") from None
        except asyncio.CancelledError:
            self._cancel(rid)
            raise
        finally:
            self._pending.pop(rid, None)
        if isinstance(reply, Error):
            raise WorkerError.of(reply)
        if not isinstance(reply, kind):
            raise WorkerError(
                UNAVAILABLE, f"the worker answered {reply.TYPE} to a request expecting {kind.TYPE}"
            )
        return reply

    async def _send(self, msg: Message, pending: _Pending) -> None:
        """Send one request (its frame's size goes into `pending`). A connection that
        fails under the write is left to the read loop, which reads the worker's last
        reply (a refused frame's `too_large`) before it fails the requests in flight
        (within a second)."""
        writer = self._writer
        if writer is None or writer.is_closing():
            raise WorkerError(UNAVAILABLE, "not connected to the worker")
        frame = pack(msg)
        if len(frame) - HEADER.size > self.max_frame:  # the worker would drop the link
            raise WorkerError(
                TOO_LARGE,
                f"the request is {len(frame)} bytes, over the "
                f"worker's frame limit of {self.max_frame} bytes",
            )
        pending.size = len(frame)
        try:
            writer.write(frame)
            await writer.drain()
        except (ConnectionError, OSError) as exc:
            reason = f"lost the connection to the worker: {exc}"
            asyncio.get_running_loop().call_later(1.0, self._lost, writer, reason)

    def _cancel(self, rid: int) -> None:
        """Tell the worker to drop request `rid` (best effort, never blocks)."""
        writer = self._writer
        if writer is not None and not writer.is_closing():
            try:
                writer.write(pack(Cancel(rid)))
            except (ConnectionError, OSError, RuntimeError) as exc:  # the link just went
                log.warning("could not cancel request %d: %s", rid, exc)

    # -- connection ---------------------------------------------------------------------

    async def connect(self) -> Welcome:
        """Connect (starting the worker first when this client spawns one) unless connected.
        Requests call this themselves."""
        async with self._lock:
            w = self._worker
            if w is not None and w.proc is not None and not w.running and self.connected:
                self._lost(self._writer, self._exit_reason())  # died between two calls
            if self.connected and self.welcome is not None:
                return self.welcome
            return await self._connect()

    async def _connect(self) -> Welcome:
        worker = self._worker
        if worker is None:
            return await self._handshake()
        fresh = not worker.running
        if fresh:
            self._start()
        try:
            return await self._handshake()
        except WorkerError:
            # A worker that just lost our connection may still be dying (its socket closes
            # before its exit status can be read): once it is gone, start a fresh one.
            if fresh or not await worker.exited(2.0):
                worker.kill()
                raise
        self._start()
        try:
            return await self._handshake()
        except WorkerError:
            worker.kill()
            raise

    async def _handshake(self) -> Welcome:
        streams: list[asyncio.StreamWriter] = []  # the writer, once open
        try:
            reader, writer, msg = await self._greet(streams)
        except WorkerError:
            for w in streams:
                w.close()
            raise
        self._writer, self.welcome, self._refusal = writer, msg, None
        self._reader_task = asyncio.create_task(self._read_loop(reader, writer))
        return msg

    async def _greet(
        self, streams: list[asyncio.StreamWriter]
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, Welcome]:
        """Open the connection (its writer goes into `streams`), send hello, read welcome;
        every failure is a WorkerError."""
        try:
            async with asyncio.timeout(self.connect_timeout):
                reader, writer = await self._open()
                streams.append(writer)
                writer.write(pack(Hello(self.token)))
                await writer.drain()
                body = await read_frame(reader, MAX_REPLY)
            if body is None:
                raise WorkerError(UNAVAILABLE, "the worker closed the connection at hello")
            msg = decode_reply(body)
        except TimeoutError:
            raise WorkerError(
                UNAVAILABLE,
                f"the worker at {self.address} did not answer within {self.connect_timeout:g} s",
            ) from None
        except ProtocolError as exc:
            raise WorkerError(exc.code, f"bad welcome from the worker: {exc}") from None
        except (ConnectionError, OSError) as exc:
            raise WorkerError(
                UNAVAILABLE,
                f"cannot connect to the worker at {self.address}: {exc.strerror or exc}",
            ) from None
        if isinstance(msg, Error):
            raise WorkerError.of(msg)
        if not isinstance(msg, Welcome):
            raise WorkerError(UNAVAILABLE, f"the worker answered hello with {msg.TYPE}")
        return reader, writer, msg

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        a = self.address
        if a.kind == "tcp":
            return await asyncio.open_connection(a.host, a.port)
        if self._worker is None or self._worker.proc is None:
            return await asyncio.open_unix_connection(a.path)
        return await self._worker.open_unix(a.path)  # once the model is loaded

    def _start(self) -> None:
        assert self._worker is not None
        try:
            self._worker.start()
        except OSError as exc:
            raise WorkerError(UNAVAILABLE, f"cannot start the worker: {exc}") from None

    def _exit_reason(self) -> str:
        if self._worker is None:
            return "the worker closed the connection"
        return self._worker.exit_reason()

    async def _read_loop(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        reason = "the worker closed the connection"
        try:
            while (body := await read_frame(reader, MAX_REPLY)) is not None:
                self._deliver(decode_reply(body))
            reason = self._exit_reason()
        except asyncio.CancelledError:
            reason = "the client closed the connection"
            raise
        except (ConnectionError, OSError) as exc:
            reason = f"{self._exit_reason()}: {exc}"
        except ProtocolError as exc:
            reason = f"the worker sent a bad frame: {exc}"
        finally:
            self._lost(writer, reason)

    def _deliver(self, msg: Message) -> None:
        rid = getattr(msg, "id", None)
        pending = self._pending.get(rid) if rid is not None else None
        if isinstance(msg, Step):
            if pending is not None and pending.on_step is not None:
                try:
                    pending.on_step(msg)
                except Exception:  # the caller's callback: its bug must not end the link
                    log.exception("on_step callback failed")
        elif pending is not None:
            if not pending.future.done():
                pending.future.set_result(msg)
        elif isinstance(msg, Error) and rid is None:
            log.warning("worker: %s: %s", msg.code, msg.message)
            if msg.code == TOO_LARGE:  # a frame refused: the worker closes the connection
                self._refusal = msg

    def _lost(self, writer: asyncio.StreamWriter | None, reason: str) -> None:
        """The connection `writer` is gone: fail every request in flight on it, now (the
        one whose frame the worker refused with the refusal, the others `unavailable`)."""
        if writer is not None:
            writer.close()
        if writer is not self._writer:
            return
        self._writer = None
        self.welcome = None
        refusal, self._refusal = self._refusal, None
        pending = [p for p in self._pending.values() if not p.future.done()]
        refused = max(pending, key=lambda p: p.size) if refusal and pending else None
        if refusal is not None:
            reason = f"the worker refused a frame and closed the connection: {refusal.message}"
        for p in pending:
            p.future.set_exception(
                WorkerError.of(refusal)
                if p is refused and refusal is not None
                else WorkerError(UNAVAILABLE, reason)
            )

    async def close(self) -> None:
        """Close the connection; stop the worker if this client started it."""
        task, self._reader_task = self._reader_task, None
        if task is not None:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task
        self._lost(self._writer, "the client was closed")
        if self._worker is not None:
            await self._worker.stop()
