"""The worker: one process that owns the model and serves fills over a socket.

    infill-worker                          # Unix socket $XDG_RUNTIME_DIR/infill/worker.sock
    infill-worker --socket /tmp/w.sock --model DIR --device cuda
    INFILL_WORKER_TOKEN=... infill-worker --listen tcp:0.0.0.0:7777

Frames and messages are those of infill/protocol.py (docs/PROTOCOL.md). The model lives on
one thread (`infill-model`): request preparation (windows, tokenization), forward passes
and result building all run there, so the event loop only moves frames and stays
responsive. The `Scheduler` drives the DenoiseJobs of every request in flight: each step it
takes jobs in round-robin order up to `max_batch` canvases, makes ONE `denoiser.logits`
call for all their canvases, splits the logits back and advances each job. Jobs join and
leave between steps; a cancelled or late request leaves at the next step. With
`batching=False` (`--no-batching`) each forward pass serves one job, for comparison.

SIGTERM / SIGINT: stop accepting, remove the socket file, give requests in flight `grace`
seconds to finish, fail the rest with `shutting_down`, exit 0.
"""

from __future__ import annotations

import argparse
import asyncio
import hmac
import logging
import os
import signal
import socket
import stat
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import asdict, dataclass, field, fields, replace
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from infill.core.canvas import render as render_slots
from infill.core.engine import Fill, check_text, prepare_fill
from infill.core.errors import InfillError
from infill.core.options import SamplerOptions
from infill.core.repair import TokenScore, prepare_fix, score_text
from infill.core.sampler import DenoiseJob
from infill.core.spans import find_holes, neutralise
from infill.serve.protocol import (
    BAD_REQUEST,
    CANCELLED,
    DEADLINE,
    INPUT,
    INTERNAL,
    PROTOCOL_VERSION,
    SHUTTING_DOWN,
    TOO_LARGE,
    UNAUTHORIZED,
    Address,
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
    decode_request,
    default_socket_dir,
    default_socket_path,
    pack,
    parse_address,
    read_frame,
)
from infill.serve.scheduler import Refused, Scheduler
from model.denoiser import Denoiser, ModelLoadError
from model.loading import load_denoiser

log = logging.getLogger("infill.serve.worker")
T = TypeVar("T")


def _limit(default: float, help: str) -> Any:
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class Limits:
    """What one request (and one connection) may ask of the worker."""

    max_frame: int = _limit(4 * 1024 * 1024, "bytes in one incoming frame")
    max_text: int = _limit(2_000_000, "characters in a request's text")
    max_spans: int = _limit(64, "spans (holes) in one fill, fixes in one fix")
    max_span_tokens: int = _limit(1024, "highest max_span_tokens option accepted")
    max_steps: int = _limit(4096, "denoising steps per canvas (the cap when none is asked)")
    max_requests: int = _limit(16, "requests in flight per connection")
    max_batch: int = _limit(32, "canvases in one batched forward pass")
    deadline: float = _limit(30.0, "seconds a request may take when it names no deadline")
    max_deadline: float = _limit(300.0, "the longest deadline a request may ask for")
    handshake_timeout: float = _limit(10.0, "seconds a new connection has to say hello")
    grace: float = _limit(5.0, "seconds requests in flight get to finish at shutdown")

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ValueError(f"limit {f.name} must be a positive number, got {value!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class WorkerSetupError(Exception):
    """The worker cannot start: the address is in use or unsafe, TCP without a token."""


class _Conn:
    """One client connection: its requests in flight, and frame writing."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.requests: dict[int, asyncio.Task[None]] = {}
        self.reasons: dict[int, str] = {}  # why a request task was cancelled
        self.closed = False
        self._lock = asyncio.Lock()

    def send_soon(self, msg: Message) -> None:
        """Queue a frame without waiting for the socket (step events)."""
        if not self.closed:
            self.writer.write(pack(msg))

    async def send(self, msg: Message) -> None:
        if self.closed:
            return
        async with self._lock:  # one drain at a time
            try:
                self.writer.write(pack(msg))
                await self.writer.drain()
            except (ConnectionError, OSError):
                self.closed = True

    def cancel(self, rid: int, reason: str) -> None:
        task = self.requests.get(rid)
        if task is not None:
            self.reasons[rid] = reason
            task.cancel()

    def close(self) -> None:
        self.closed = True
        for task in list(self.requests.values()):
            task.cancel()
        self.writer.close()


# -- the worker -------------------------------------------------------------------------


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


class Worker:
    """Serves fill / fix / score requests for one denoiser.

    Args:
        denoiser: the network; None: `load_denoiser(model_dir, device=...)` at start (on
            the model thread). Tests pass a fake here.
        model_dir, device, trust_remote_code: for loading (CUDA when present, else CPU).
        token: the shared secret every connection must present in `hello`; required for
            TCP, optional for a Unix socket (whose 0600 mode already restricts it).
        limits: `Limits`.
        batching: share forward passes between concurrent requests.

    `serve(address)` runs until `stop()` (thread-safe). `ready` (a threading.Event) is set
    once the worker listens; `address` is then the bound address (its real TCP port).
    """

    def __init__(self, denoiser: Denoiser | None = None, *, model_dir: str | Path | None = None,
                 device: str | None = None, trust_remote_code: bool = False,
                 token: str | None = None, limits: Limits | None = None,
                 batching: bool = True) -> None:
        self.denoiser = denoiser
        self.model_dir, self.device, self.trust_remote_code = model_dir, device, trust_remote_code
        self.token = token
        self.limits = limits or Limits()
        self.batching = batching
        self.scheduler: Scheduler | None = None
        self.address: Address | None = None
        self.ready = threading.Event()
        self.requests = 0  # requests received since start
        self._conns: set[_Conn] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._stop_asked = False
        self._stopping = False
        self._executor: ThreadPoolExecutor | None = None

    # -- life cycle ---------------------------------------------------------------------

    def stop(self) -> None:
        """Ask `serve` to shut down; callable from any thread or a signal handler."""
        self._stop_asked = True
        if self._loop is not None and self._stop_event is not None:
            with suppress(RuntimeError):  # the loop is already closed
                self._loop.call_soon_threadsafe(self._stop_event.set)

    async def serve(self, address: str | Address | None = None) -> None:
        """Load the model (unless given), listen on `address` (default: the per-user Unix
        socket), serve until `stop()`. Raises ModelLoadError / WorkerSetupError."""
        addr = (parse_address(address) if isinstance(address, str)
                else address or Address("unix", path=str(default_socket_path())))
        if addr.kind == "tcp" and not self.token:
            raise WorkerSetupError("a TCP worker needs a token (--token-file or "
                                   "INFILL_WORKER_TOKEN)")
        loop = asyncio.get_running_loop()
        self._loop, self._stop_event = loop, asyncio.Event()
        if self._stop_asked:
            self._stop_event.set()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="infill-model")
        try:
            if self.denoiser is None:
                self.denoiser = await loop.run_in_executor(self._executor, partial(
                    load_denoiser, self.model_dir, device=self.device,
                    trust_remote_code=self.trust_remote_code))
            self.scheduler = Scheduler(self.denoiser, self._executor, batching=self.batching,
                                       max_batch=self.limits.max_batch)
            server, cleanup = await self._listen(addr)
            scheduling = asyncio.create_task(self.scheduler.serve())
            log.info("listening on %s (model %s on %s, batching %s)", self.address,
                     self.denoiser.name, self._device(), "on" if self.batching else "off")
            self.ready.set()
            try:
                await self._stop_event.wait()
            finally:
                self._stopping = True
                server.close()
                cleanup()
                await self._drain()
                for conn in list(self._conns):
                    conn.close()
                scheduling.cancel()
                with suppress(asyncio.CancelledError):
                    await scheduling
                log.info("stopped")
        finally:
            self._executor.shutdown(wait=False, cancel_futures=True)

    async def _drain(self) -> None:
        """Let requests in flight finish for `grace` seconds; fail the rest."""
        tasks = {t: (conn, rid) for conn in self._conns for rid, t in conn.requests.items()}
        if not tasks:
            return
        _, late = await asyncio.wait(tasks, timeout=self.limits.grace)
        for task in late:
            conn, rid = tasks[task]
            conn.cancel(rid, SHUTTING_DOWN)
        if late:
            await asyncio.wait(late, timeout=1.0)  # their error replies

    async def _listen(self, addr: Address) -> tuple[asyncio.AbstractServer, Callable[[], None]]:
        if addr.kind == "tcp":
            server = await asyncio.start_server(self._connection, addr.host, addr.port)
            port = server.sockets[0].getsockname()[1]
            self.address = Address("tcp", host=addr.host, port=port)
            return server, lambda: None
        path = Path(addr.path)
        sock = bind_unix(path)
        server = await asyncio.start_unix_server(self._connection, sock=sock)
        self.address = Address("unix", path=str(path))
        inode = path.stat().st_ino

        def cleanup() -> None:  # remove the socket file, unless another worker replaced it
            with suppress(FileNotFoundError):
                if path.stat().st_ino == inode:
                    path.unlink()

        return server, cleanup

    def _device(self) -> str:
        return str(getattr(self.denoiser, "device", "cpu"))

    # -- connections --------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        conn = _Conn(writer)
        self._conns.add(conn)
        try:
            if await self._handshake(reader, conn):
                await self._read_requests(reader, conn)
        except Exception:  # a bug; the connection goes, the worker stays
            log.exception("connection failed")
        finally:
            self._conns.discard(conn)
            conn.close()

    async def _handshake(self, reader: asyncio.StreamReader, conn: _Conn) -> bool:
        try:
            async with asyncio.timeout(self.limits.handshake_timeout):
                body = await read_frame(reader, self.limits.max_frame)
            if body is None:
                return False
            msg = decode_request(body)
        except TimeoutError:
            await conn.send(Error(None, UNAUTHORIZED, "no hello within "
                                  f"{self.limits.handshake_timeout:g} s"))
            return False
        except ProtocolError as exc:
            await conn.send(Error(exc.id, exc.code, exc.message))
            return False
        except (ConnectionError, OSError):
            return False
        if not isinstance(msg, Hello):
            await conn.send(Error(getattr(msg, "id", None), UNAUTHORIZED,
                                  f"the first frame must be hello, got {msg.TYPE}"))
            return False
        if self.token is not None and (msg.token is None or not hmac.compare_digest(
                msg.token.encode(), self.token.encode())):
            await conn.send(Error(None, UNAUTHORIZED, "wrong or missing token"))
            return False
        assert self.denoiser is not None
        await conn.send(Welcome(self.denoiser.name, self._device()))
        return True

    async def _read_requests(self, reader: asyncio.StreamReader, conn: _Conn) -> None:
        while not conn.closed:
            try:
                body = await read_frame(reader, self.limits.max_frame)
            except ProtocolError as exc:  # too large: the stream cannot be resynchronised
                await conn.send(Error(None, exc.code, exc.message))
                return
            except (ConnectionError, OSError):
                return
            if body is None:
                return
            try:
                msg = decode_request(body)
            except ProtocolError as exc:
                await conn.send(Error(exc.id, exc.code, exc.message))
                continue
            await self._dispatch(conn, msg)

    async def _dispatch(self, conn: _Conn, msg: Message) -> None:
        if isinstance(msg, InfoRequest):
            await conn.send(self._info(msg.id))
        elif isinstance(msg, Cancel):
            conn.cancel(msg.id, CANCELLED)  # unknown ids: it may have just finished
        elif isinstance(msg, Hello):
            await conn.send(Error(None, BAD_REQUEST, "hello is only the first frame"))
        elif isinstance(msg, FillRequest | FixRequest | ScoreRequest):
            rid = msg.id
            if self._stopping:
                await conn.send(Error(rid, SHUTTING_DOWN, "the worker is shutting down"))
            elif rid in conn.requests:
                await conn.send(Error(rid, BAD_REQUEST, f"request {rid} is already in flight "
                                      "on this connection"))
            elif len(conn.requests) >= self.limits.max_requests:
                await conn.send(Error(rid, TOO_LARGE, "too many requests in flight on this "
                                      f"connection (limit {self.limits.max_requests})"))
            else:
                self.requests += 1
                conn.requests[rid] = asyncio.create_task(self._request(conn, msg))
        else:  # a reply type sent to the worker is refused by decode_request already
            await conn.send(Error(getattr(msg, "id", None), BAD_REQUEST,
                                  f"unexpected {msg.TYPE}"))

    def _info(self, rid: int) -> WorkerInfo:
        assert self.denoiser is not None and self.scheduler is not None
        s = self.scheduler
        return WorkerInfo(
            rid, self.denoiser.name, self._device(),
            {"infill": _version("diffusion-infill"), "torch": _version("torch"),
             "transformers": _version("transformers"), "protocol": PROTOCOL_VERSION},
            self.limits.to_dict(), self.batching,
            {"requests": self.requests, "passes": s.passes, "canvases": s.canvases,
             "shared_passes": s.shared, "active": len(s)})

    # -- requests -----------------------------------------------------------------------

    async def _request(self, conn: _Conn, msg: FillRequest | FixRequest | ScoreRequest) -> None:
        limit = min(msg.deadline or self.limits.deadline, self.limits.max_deadline)
        reply: Message
        try:
            async with asyncio.timeout(limit):
                reply = await self._handle(conn, msg)
        except TimeoutError:
            reply = Error(msg.id, DEADLINE, f"the request did not finish within its deadline "
                          f"({limit:g} s)")
        except asyncio.CancelledError:
            if conn.closed:
                raise  # nobody to tell
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            code = conn.reasons.pop(msg.id, CANCELLED)
            reply = Error(msg.id, code, "cancelled by the client" if code == CANCELLED
                          else "the worker is shutting down")
        except Refused as exc:
            reply = Error(msg.id, exc.code, exc.message)
        except InfillError as exc:
            reply = Error(msg.id, INPUT, str(exc))
        except Exception as exc:  # a bug: say so, keep serving
            log.exception("request %s failed", msg.id)
            reply = Error(msg.id, INTERNAL, f"internal error: {type(exc).__name__}: {exc}")
        finally:
            conn.requests.pop(msg.id, None)
        log.debug("%s %d: %s", msg.TYPE, msg.id,
                  f"error {reply.code}: {reply.message}" if isinstance(reply, Error) else "ok")
        await conn.send(reply)

    async def _on_model_thread(self, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, partial(fn, *args, **kw))

    async def _handle(self, conn: _Conn, msg: FillRequest | FixRequest | ScoreRequest
                      ) -> Message:
        assert self.scheduler is not None and self.denoiser is not None
        if len(msg.text) > self.limits.max_text:
            raise Refused(TOO_LARGE, f"the text has {len(msg.text)} characters; the limit is "
                          f"{self.limits.max_text}")
        if isinstance(msg, ScoreRequest):
            scores = await self._on_model_thread(
                score_text, msg.text, denoiser=self.denoiser, start=msg.start, end=msg.end,
                language=msg.language)
            return Scores(msg.id, scores)
        options = self._options(msg.options)
        if isinstance(msg, FixRequest):
            if msg.max_fixes > self.limits.max_spans:
                raise Refused(TOO_LARGE, f"max_fixes {msg.max_fixes} exceeds the limit of "
                              f"{self.limits.max_spans}")
            fix, scores = await self._on_model_thread(self._prepare_fix, msg, options)
            if fix is None:
                return Result(msg.id, msg.text, [], [], {}, scores)
            await self.scheduler.run(fix.job)
            return Result.of(msg.id, await self._on_model_thread(fix.result), scores)
        if msg.spans is not None and len(msg.spans) > self.limits.max_spans:
            raise Refused(TOO_LARGE, f"{len(msg.spans)} spans; the limit is "
                          f"{self.limits.max_spans}")
        fill = await self._on_model_thread(self._prepare_fill, msg, options)
        if msg.stream:
            rid = msg.id
            await self.scheduler.run(fill.job, render=lambda job: self._step_event(rid, job),
                                     on_step=conn.send_soon)
        else:
            await self.scheduler.run(fill.job)
        return Result.of(msg.id, await self._on_model_thread(fill.result))

    def _options(self, raw: dict[str, Any]) -> SamplerOptions:
        o = SamplerOptions.build(None, **raw)  # OptionError (an InfillError): `input`
        lim = self.limits
        if o.max_span_tokens > lim.max_span_tokens:
            raise Refused(TOO_LARGE, f"max_span_tokens {o.max_span_tokens} exceeds the "
                          f"worker's limit of {lim.max_span_tokens}")
        if o.max_steps is None:
            return replace(o, max_steps=lim.max_steps)
        if o.max_steps > lim.max_steps:
            raise Refused(TOO_LARGE, f"max_steps {o.max_steps} exceeds the worker's limit of "
                          f"{lim.max_steps}")
        return o

    # on the model thread ---------------------------------------------------------------

    def _prepare_fill(self, msg: FillRequest, options: SamplerOptions) -> Fill:
        assert self.denoiser is not None
        check_text(msg.text)
        if msg.spans is None:
            spans, rewrite = find_holes(msg.text, msg.marker), False
            parse_text: str | None = neutralise(msg.text, spans)
        else:
            spans, rewrite, parse_text = msg.spans, True, None
        if len(spans) > self.limits.max_spans:
            raise Refused(TOO_LARGE, f"{len(spans)} holes; the limit is {self.limits.max_spans}")
        return prepare_fill(msg.text, spans, denoiser=self.denoiser, options=options,
                            rewrite=rewrite, language=msg.language, parse_text=parse_text)

    def _prepare_fix(self, msg: FixRequest, options: SamplerOptions
                     ) -> tuple[Fill | None, list[TokenScore]]:
        assert self.denoiser is not None
        return prepare_fix(msg.text, denoiser=self.denoiser, options=options,
                           start=msg.start, end=msg.end, max_fixes=msg.max_fixes,
                           min_suspicion=msg.min_suspicion, language=msg.language)

    def _step_event(self, rid: int, job: DenoiseJob) -> Step:
        den = self.denoiser
        assert den is not None
        spans = sorted((s.index, render_slots(s.ids, den.special, den.decode))
                       for c in job.canvases for s in c.spans)
        return Step(rid, job.steps, spans)


# -- the socket file --------------------------------------------------------------------


def bind_unix(path: Path) -> socket.socket:
    """A Unix socket bound at `path` with mode 0600; a stale socket file is replaced.

    The parent directory is created 0700 when missing; the default directory must be the
    user's own and not open to others (so nobody can plant a socket there)."""
    parent = path.parent
    if not parent.exists():
        parent.mkdir(mode=0o700, parents=True)
    if parent == default_socket_dir():
        st = parent.stat()
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise WorkerSetupError(f"{parent} must belong to you and have mode 0700")
    if path.is_symlink() or path.exists():
        if not stat.S_ISSOCK(path.lstat().st_mode):
            raise WorkerSetupError(f"{path} exists and is not a socket")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(1.0)
            try:
                probe.connect(str(path))
            except (ConnectionRefusedError, FileNotFoundError):
                path.unlink(missing_ok=True)  # stale: its worker is gone
            else:
                raise WorkerSetupError(f"a worker is already listening on {path}")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)  # the file is created 0600, never briefly wider
    try:
        sock.bind(str(path))
    except OSError as exc:
        sock.close()
        raise WorkerSetupError(f"cannot listen on {path}: {exc.strerror or exc}") from exc
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    return sock


# -- command line -----------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="infill-worker",
        description="Host the infilling engine and model; serve requests over a socket "
        "until SIGTERM/SIGINT.")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--socket", metavar="PATH",
                       help=f"Unix socket to listen on (default: {default_socket_path()})")
    where.add_argument("--listen", metavar="ADDRESS",
                       help="unix:PATH, PATH, or tcp:HOST:PORT (TCP needs a token)")
    p.add_argument("--token-file", metavar="FILE",
                   help="file holding the shared token (else $INFILL_WORKER_TOKEN)")
    p.add_argument("--model", metavar="DIR", help="model directory (default: shipped)")
    p.add_argument("--device", help="torch device (default: cuda when present, else cpu)")
    p.add_argument("--trust-remote-code", action="store_true",
                   help="allow a model directory's own code (LLaDA, Dream)")
    p.add_argument("--no-batching", action="store_true",
                   help="one request per forward pass (to measure what batching brings)")
    p.add_argument("--exit-with-stdin", action="store_true",
                   help="stop when stdin reaches end of file (set by a client that spawns "
                   "the worker, so the worker ends with its parent)")
    p.add_argument("-v", "--verbose", action="store_true", help="log every request")
    lim = p.add_argument_group("limits")
    for f in fields(Limits):
        lim.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default),
                         default=f.default, metavar="N", help=f"{f.metadata['help']} "
                         f"(default {f.default})")
    return p


def _stop_at_stdin_eof(worker: Worker) -> None:
    """Stop the worker once stdin reaches end of file (the spawning parent is gone)."""

    def watch() -> None:
        with suppress(OSError, ValueError):
            while sys.stdin.buffer.read(4096):
                pass
        worker.stop()

    threading.Thread(target=watch, name="infill-stdin", daemon=True).start()


def run(worker: Worker, address: str | Address | None, *, exit_with_stdin: bool = False
        ) -> int:
    """Serve until SIGTERM / SIGINT (or stdin's end, with `exit_with_stdin`). Exit status:
    0 after a clean stop, 1 when the model or the address cannot be used."""

    async def amain() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, worker.stop)
        if exit_with_stdin:
            _stop_at_stdin_eof(worker)
        await worker.serve(address)

    try:
        asyncio.run(amain())
    except ModelLoadError as exc:
        print(f"infill-worker: cannot load the model: {exc}", file=sys.stderr)
        return 1
    except WorkerSetupError as exc:
        print(f"infill-worker: {exc}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(stream=sys.stderr, format="infill-worker: %(message)s",
                        level=logging.DEBUG if args.verbose else logging.INFO)
    try:
        limits = Limits(**{f.name: getattr(args, f.name) for f in fields(Limits)})
        address = args.listen or (f"unix:{args.socket}" if args.socket else None)
        if address is not None:
            parse_address(address)
    except ValueError as exc:
        print(f"infill-worker: error: {exc}", file=sys.stderr)
        return 2
    token = os.environ.get("INFILL_WORKER_TOKEN") or None
    if args.token_file:
        try:
            token = Path(args.token_file).read_text().strip() or None
        except OSError as exc:
            print(f"infill-worker: cannot read the token file: {exc}", file=sys.stderr)
            return 2
    worker = Worker(model_dir=args.model, device=args.device,
                    trust_remote_code=args.trust_remote_code, token=token, limits=limits,
                    batching=not args.no_batching)
    return run(worker, address, exit_with_stdin=args.exit_with_stdin)


if __name__ == "__main__":
    sys.exit(main())
