"""The worker's client: an async core (for the language server) and a blocking wrapper
(for the CLI).

    async with WorkerClient.spawned(model="runs/small/export") as client:
        result = await client.fill("x = <mask>\\n")          # protocol.Result
    client = WorkerClient("tcp:gpu-box:7777", token=token)  # a worker somebody else runs

A spawned worker is `python -m infill.serve.worker --socket PATH ...`; the client waits for its
socket (bounded by `connect_timeout`, failing at once if the process exits) and restarts
it on the next request after it died. Every failure is a `WorkerError` whose `code` is one
of the worker's error codes (protocol.CODES) or the client's own: `unavailable` (the worker
cannot be reached or started, or it died: every request in flight fails at once) and
`timeout` (no reply within the request's timeout; the request is cancelled). Cancelling a
caller's task sends `cancel` to the worker.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import subprocess
import sys
from collections.abc import Callable, Coroutine, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from infill.core.options import SamplerOptions
from infill.core.repair import TokenScore
from infill.core.spans import DEFAULT_MARKER, Span
from infill.serve.protocol import (
    Cancel,
    Error,
    FillRequest,
    FixRequest,
    Hello,
    InfoRequest,
    Message,
    ProtocolError,
    Result,
    ScoreRequest,
    Scores,
    Step,
    Welcome,
    WorkerInfo,
    decode_reply,
    default_socket_dir,
    default_socket_path,
    options_to_wire,
    pack,
    parse_address,
    read_frame,
)

log = logging.getLogger("infill.serve.client")
T = TypeVar("T")
M = TypeVar("M", bound=Message)

UNAVAILABLE = "unavailable"  # the worker cannot be reached or started, or it died
TIMEOUT = "timeout"  # no reply within the request timeout
MAX_REPLY = 64 * 1024 * 1024  # bytes in one reply frame (a result holds a whole text)
_POLL = 0.05  # seconds between looks for a spawned worker's socket
_serial = itertools.count()


class WorkerError(Exception):
    """A request to the worker failed. `code`: a protocol error code, `unavailable` or
    `timeout`; `message`: for people (the engine's own message for code `input`)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def spawn_command(socket: str | Path, *, model: str | Path | None = None,
                  device: str | None = None, args: Sequence[str] = ()) -> list[str]:
    """The command line of a local worker listening on `socket`."""
    # --exit-with-stdin: the worker stops when this process goes away and its end of the
    # worker's stdin pipe closes, so an editor that kills its language server leaks nothing.
    cmd = [sys.executable, "-m", "infill.serve.worker", "--socket", str(socket),
           "--exit-with-stdin"]
    if model is not None:
        cmd += ["--model", str(model)]
    if device is not None:
        cmd += ["--device", device]
    return cmd + list(args)


def private_socket_path() -> Path:
    """A socket path for a worker of this process alone (in the per-user 0700 directory)."""
    return default_socket_dir() / f"worker-{os.getpid()}-{next(_serial)}.sock"


@dataclass
class _Pending:
    future: asyncio.Future[Message]
    on_step: Callable[[Step], None] | None


class WorkerClient:
    """One connection to a worker, shared by any number of concurrent requests.

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

    def __init__(self, address: str | None = None, *, spawn: Sequence[str] | None = None,
                 token: str | None = None, connect_timeout: float = 60.0,
                 request_timeout: float = 120.0, log: str | Path | None = None) -> None:
        if address is None:
            if spawn is not None:
                raise ValueError("a spawned worker needs the address it will listen on")
            address = str(default_socket_path())
        self.address = parse_address(address)
        self.spawn = list(spawn) if spawn is not None else None
        self.token = token
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self.log = Path(log) if log is not None else None
        self.welcome: Welcome | None = None  # the worker's greeting on the live connection
        self._proc: subprocess.Popen[bytes] | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._pending: dict[int, _Pending] = {}
        self._ids = itertools.count(1)
        self._lock = asyncio.Lock()

    @classmethod
    def spawned(cls, *, model: str | Path | None = None, device: str | None = None,
                args: Sequence[str] = (), socket: str | Path | None = None,
                **kw: Any) -> WorkerClient:
        """A client that runs its own worker (`python -m infill.serve.worker`) on a private
        socket; `args` are extra worker flags (e.g. `["--no-batching"]`)."""
        path = Path(socket) if socket is not None else private_socket_path()
        return cls(f"unix:{path}", spawn=spawn_command(path, model=model, device=device,
                                                       args=args), **kw)

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        """The spawned worker process (None when not spawned or not started)."""
        return self._proc

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    async def __aenter__(self) -> WorkerClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- requests -----------------------------------------------------------------------

    async def fill(self, text: str, *, spans: Sequence[Span] | None = None,
                   marker: str = DEFAULT_MARKER, language: str | None = "python",
                   options: SamplerOptions | Mapping[str, Any] | None = None,
                   deadline: float | None = None, on_step: Callable[[Step], None] | None = None,
                   timeout: float | None = None) -> Result:
        """Fill the hole markers of `text`, or rewrite `spans` (character ranges) of it.

        `options`: SamplerOptions or a map of its fields; `deadline`: seconds the worker
        may spend (None: its default); `on_step`: called with each `Step` event (the canvas
        settling); `timeout`: seconds to wait for the reply (None: request_timeout, or more
        when the deadline is longer)."""
        return await self._call(
            lambda rid: FillRequest(rid, text, list(spans) if spans is not None else None,
                                    marker, language, options_to_wire(options),
                                    on_step is not None, deadline),
            Result, timeout=self._timeout(timeout, deadline), on_step=on_step)

    async def fix(self, text: str, *, start: int = 0, end: int | None = None,
                  max_fixes: int = 1, min_suspicion: float = 0.5,
                  language: str | None = "python",
                  options: SamplerOptions | Mapping[str, Any] | None = None,
                  deadline: float | None = None, timeout: float | None = None) -> Result:
        """Re-denoise the most suspicious tokens of text[start:end] ("Fix selection").
        The Result's `scores` hold every token's suspicion; no edits when none reached
        `min_suspicion`."""
        return await self._call(
            lambda rid: FixRequest(rid, text, start, end, max_fixes, min_suspicion, language,
                                   options_to_wire(options), deadline),
            Result, timeout=self._timeout(timeout, deadline))

    async def score(self, text: str, *, start: int = 0, end: int | None = None,
                    language: str | None = "python", deadline: float | None = None,
                    timeout: float | None = None) -> list[TokenScore]:
        """The suspicion of every token of text[start:end]."""
        reply = await self._call(
            lambda rid: ScoreRequest(rid, text, start, end, language, deadline),
            Scores, timeout=self._timeout(timeout, deadline))
        return reply.scores

    async def info(self, *, timeout: float | None = None) -> WorkerInfo:
        """Model, device, versions, limits and counters of the worker."""
        return await self._call(InfoRequest, WorkerInfo, timeout=self._timeout(timeout, None))

    def _timeout(self, timeout: float | None, deadline: float | None) -> float:
        if timeout is not None:
            return timeout
        return max(self.request_timeout, (deadline or 0.0) + 10.0)

    async def _call(self, make: Callable[[int], Message], kind: type[M], *, timeout: float,
                    on_step: Callable[[Step], None] | None = None) -> M:
        await self.connect()
        rid = next(self._ids)
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._pending[rid] = _Pending(future, on_step)
        try:
            await self._send(make(rid))
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
            raise WorkerError(reply.code, reply.message)
        if not isinstance(reply, kind):
            raise WorkerError(UNAVAILABLE, f"the worker answered {reply.TYPE} to a request "
                              f"expecting {kind.TYPE}")
        return reply

    async def _send(self, msg: Message) -> None:
        writer = self._writer
        if writer is None or writer.is_closing():
            raise WorkerError(UNAVAILABLE, "not connected to the worker")
        try:
            writer.write(pack(msg))
            await writer.drain()
        except (ConnectionError, OSError) as exc:
            raise WorkerError(UNAVAILABLE, f"lost the connection to the worker: {exc}") from None

    def _cancel(self, rid: int) -> None:
        """Tell the worker to drop request `rid` (best effort, never blocks)."""
        writer = self._writer
        if writer is not None and not writer.is_closing():
            with suppress(Exception):
                writer.write(pack(Cancel(rid)))

    # -- connection ---------------------------------------------------------------------

    async def connect(self) -> Welcome:
        """Connect (starting the worker first when this client spawns one) unless connected.
        Requests call this themselves."""
        async with self._lock:
            if self._proc is not None and self._proc.poll() is not None and self.connected:
                self._lost(self._writer, self._exit_reason())  # died between two calls
            if self.connected and self.welcome is not None:
                return self.welcome
            return await self._connect()

    async def _connect(self) -> Welcome:
        if self.spawn is None:
            return await self._handshake()
        fresh = self._proc is None or self._proc.poll() is not None
        if fresh:
            self._start()
        try:
            return await self._handshake()
        except WorkerError:
            # A worker that just lost our connection may still be dying (its socket closes
            # before its exit status can be read): once it is gone, start a fresh one.
            if fresh or not await self._exited(2.0):
                self._stop_process()
                raise
        self._start()
        try:
            return await self._handshake()
        except WorkerError:
            self._stop_process()
            raise

    async def _exited(self, timeout: float) -> bool:
        proc = self._proc
        if proc is None:
            return True
        with suppress(subprocess.TimeoutExpired):
            await asyncio.get_running_loop().run_in_executor(None, proc.wait, timeout)
        return proc.poll() is not None

    def _stop_process(self) -> None:
        """Kill a worker we started but cannot use."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._reap()

    async def _handshake(self) -> Welcome:
        writer: asyncio.StreamWriter | None = None
        try:
            async with asyncio.timeout(self.connect_timeout):
                reader, writer = await self._open()
                writer.write(pack(Hello(self.token)))
                await writer.drain()
                body = await read_frame(reader, MAX_REPLY)
            if body is None:
                raise WorkerError(UNAVAILABLE, "the worker closed the connection at hello")
            msg = decode_reply(body)
        except TimeoutError:
            self._give_up(writer)
            raise WorkerError(UNAVAILABLE, f"the worker at {self.address} did not answer "
                              f"within {self.connect_timeout:g} s") from None
        except WorkerError:
            self._give_up(writer)
            raise
        except ProtocolError as exc:
            self._give_up(writer)
            raise WorkerError(exc.code, f"bad welcome from the worker: {exc}") from None
        except (ConnectionError, OSError) as exc:
            self._give_up(writer)
            raise WorkerError(UNAVAILABLE, f"cannot connect to the worker at {self.address}: "
                              f"{exc.strerror or exc}") from None
        if isinstance(msg, Error):
            self._give_up(writer)
            raise WorkerError(msg.code, msg.message)
        if not isinstance(msg, Welcome):
            self._give_up(writer)
            raise WorkerError(UNAVAILABLE, f"the worker answered hello with {msg.TYPE}")
        self._writer, self.welcome = writer, msg
        self._reader_task = asyncio.create_task(self._read_loop(reader, writer))
        return msg

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        a = self.address
        if a.kind == "tcp":
            return await asyncio.open_connection(a.host, a.port)
        if self._proc is None:
            return await asyncio.open_unix_connection(a.path)
        while True:  # a spawned worker: its socket appears once the model is loaded
            if self._proc.poll() is not None:
                raise WorkerError(UNAVAILABLE, f"the worker exited before listening: "
                                  f"{self._exit_reason()}")
            try:
                return await asyncio.open_unix_connection(a.path)
            except (FileNotFoundError, ConnectionRefusedError):
                await asyncio.sleep(_POLL)

    def _start(self) -> None:
        assert self.spawn is not None
        self._reap()
        err = self.log.open("ab") if self.log is not None else None
        try:
            # stdout is never the worker's: a language server's stdout is its protocol.
            self._proc = subprocess.Popen(self.spawn, stdin=subprocess.PIPE,
                                          stdout=subprocess.DEVNULL, stderr=err)
        except OSError as exc:
            raise WorkerError(UNAVAILABLE, f"cannot start the worker: {exc}") from None
        finally:
            if err is not None:
                err.close()
        log.info("started worker %d: %s", self._proc.pid, " ".join(self.spawn))

    def _exit_reason(self) -> str:
        rc = self._proc.poll() if self._proc is not None else None
        if rc is None:
            return "the worker closed the connection"
        how = f"killed by signal {-rc}" if rc < 0 else f"exit status {rc}"
        where = f"; see {self.log}" if self.log is not None else ""
        return f"the worker process ended ({how}{where})"

    def _give_up(self, writer: asyncio.StreamWriter | None) -> None:
        if writer is not None:
            writer.close()

    def _reap(self) -> None:
        if self._proc is not None:
            with suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=5)

    async def _read_loop(self, reader: asyncio.StreamReader,
                         writer: asyncio.StreamWriter) -> None:
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

    def _lost(self, writer: asyncio.StreamWriter | None, reason: str) -> None:
        """The connection `writer` is gone: fail every request in flight on it, now."""
        if writer is not None:
            writer.close()
        if writer is not self._writer:
            return
        self._writer = None
        self.welcome = None
        for p in list(self._pending.values()):
            if not p.future.done():
                p.future.set_exception(WorkerError(UNAVAILABLE, reason))

    async def close(self) -> None:
        """Close the connection; stop the worker if this client started it."""
        task, self._reader_task = self._reader_task, None
        if task is not None:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task
        self._lost(self._writer, "the client was closed")
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            loop = asyncio.get_running_loop()
            try:
                await loop.run_in_executor(None, proc.wait, 10)
            except subprocess.TimeoutExpired:
                proc.kill()
                await loop.run_in_executor(None, proc.wait)


class SyncWorkerClient:
    """Blocking calls to a worker over a private event loop (for the CLI and scripts).
    Same arguments as WorkerClient; use as a context manager or call `close()`."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self.client = WorkerClient(*args, **kw)

    @classmethod
    def spawned(cls, **kw: Any) -> SyncWorkerClient:
        self = cls.__new__(cls)
        self._loop = asyncio.new_event_loop()
        self.client = WorkerClient.spawned(**kw)
        return self

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._loop.run_until_complete(coro)

    def connect(self) -> Welcome:
        return self._run(self.client.connect())

    def fill(self, text: str, **kw: Any) -> Result:
        return self._run(self.client.fill(text, **kw))

    def fix(self, text: str, **kw: Any) -> Result:
        return self._run(self.client.fix(text, **kw))

    def score(self, text: str, **kw: Any) -> list[TokenScore]:
        return self._run(self.client.score(text, **kw))

    def info(self, **kw: Any) -> WorkerInfo:
        return self._run(self.client.info(**kw))

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            self._run(self.client.close())
        finally:
            self._loop.close()

    def __enter__(self) -> SyncWorkerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
