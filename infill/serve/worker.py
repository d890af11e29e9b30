"""The worker: one process that owns the model and serves fills over a socket.

    infill-worker                          # Unix socket $XDG_RUNTIME_DIR/infill/worker.sock
    infill-worker --socket /tmp/w.sock --model DIR --device cuda
    INFILL_WORKER_TOKEN=... infill-worker --listen tcp:0.0.0.0:7777

This is where a model is loaded (model.loading) and handed to the engine. Frames and
messages are those of infill/serve/protocol.py (docs/PROTOCOL.md); each client connection
is an infill.serve.connection.Connection, and infill.serve.requests turns its requests
into engine work. The model lives on one thread (`infill-model`): request preparation
(windows, tokenization), forward passes and result building all run there, so the event
loop only moves frames and stays responsive. The `Scheduler` drives the DenoiseJobs of
every request in flight: each step it takes jobs in round-robin order up to `max_batch`
canvases, makes ONE `denoiser.logits` call for all their canvases, splits the logits back
and advances each job. With `batching=False` (`--no-batching`) each forward pass serves
one job, for comparison.

SIGTERM / SIGINT: stop accepting, remove the socket file, give requests in flight `grace`
seconds to finish, fail the rest with `shutting_down`, exit 0. The command's arguments are
infill/serve/worker_parser.py's.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import fields
from functools import partial
from importlib import metadata
from pathlib import Path

from diffusion_infill.infill.serve.connection import Connection
from diffusion_infill.infill.serve.memory import release_soon
from diffusion_infill.infill.serve.protocol import (
    PROTOCOL_VERSION,
    SHUTTING_DOWN,
    Counters,
    Limits,
    Message,
    Step,
    Versions,
    Welcome,
    WorkerInfo,
)
from diffusion_infill.infill.serve.requests import ModelRequest, RequestHandler
from diffusion_infill.infill.serve.scheduler import Scheduler
from diffusion_infill.infill.serve.sockets import (
    Address,
    WorkerSetupError,
    bind_unix,
    default_socket_path,
    parse_address,
)
from diffusion_infill.infill.serve.worker_parser import build_parser
from diffusion_infill.model.denoiser import Denoiser, ModelLoadError
from diffusion_infill.model.loading import load_denoiser
from diffusion_infill.model.openmp import serving_spin

log = logging.getLogger("infill.serve.worker")


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
        quantize, prompt: a DiffusionGemma's 8-bit / 4-bit weights and prompt layout
            (model.loading.load_denoiser; None: $INFILL_QUANTIZE / $INFILL_PROMPT).
        dtype: auto, fp32, bf16 or int8 (model.precision; None: $INFILL_DTYPE, else auto).
        order: the order a request with the default order ("confidence") is decoded with;
            None: the model's own (`denoiser.preferred_order`: entropy-bound for
            DiffusionGemma), else as asked.
        token: the shared secret every connection must present in `hello`; required for
            TCP, optional for a Unix socket (whose 0600 mode already restricts it).
        limits: `Limits`.
        batching: share forward passes between concurrent requests.

    `serve(address)` runs until `stop()` (thread-safe). `ready` (a threading.Event) is set
    once the worker listens; `address` is then the bound address (its real TCP port).
    """

    def __init__(
        self,
        denoiser: Denoiser | None = None,
        *,
        model_dir: str | Path | None = None,
        device: str | None = None,
        trust_remote_code: bool = False,
        token: str | None = None,
        limits: Limits | None = None,
        batching: bool = True,
        quantize: str | None = None,
        prompt: str | None = None,
        order: str | None = None,
        dtype: str | None = None,
    ) -> None:
        self.denoiser = denoiser
        self.dtype = dtype
        self.model_dir, self.device, self.trust_remote_code = model_dir, device, trust_remote_code
        self.quantize, self.prompt, self.order = quantize, prompt, order
        self.token = token
        self.limits = limits or Limits()
        self.batching = batching
        self.scheduler: Scheduler | None = None
        self.address: Address | None = None
        self.ready = threading.Event()
        self.requests = 0  # requests received since start
        self.stopping = False  # new requests are refused
        self._handler: RequestHandler | None = None
        self._conns: set[Connection] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._stop_asked = False
        self._executor: ThreadPoolExecutor | None = None  # the model thread, once serving

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
        addr = (
            parse_address(address)
            if isinstance(address, str)
            else address or Address("unix", path=str(default_socket_path()))
        )
        if addr.kind == "tcp" and not self.token:
            raise WorkerSetupError(
                "a TCP worker needs a token (--token-file or INFILL_WORKER_TOKEN)"
            )
        loop = asyncio.get_running_loop()
        self._loop, self._stop_event = loop, asyncio.Event()
        if self._stop_asked:
            self._stop_event.set()
        executor = self._executor = ThreadPoolExecutor(1, thread_name_prefix="infill-model")
        try:
            denoiser = await self._load(executor)
            self.scheduler = Scheduler(
                denoiser, executor, batching=self.batching, max_batch=self.limits.max_batch
            )
            order = self.order or getattr(denoiser, "preferred_order", None)
            self._handler = RequestHandler(
                denoiser, self.scheduler, executor, self.limits, default_order=order
            )
            server, cleanup = await self._listen(addr)
            scheduling = asyncio.create_task(self.scheduler.serve())
            log.info(
                "listening on %s (model %s on %s, batching %s)",
                self.address,
                denoiser.name,
                self._device(),
                "on" if self.batching else "off",
            )
            self.ready.set()
            try:
                await self._stop_event.wait()
            finally:
                await self._shut_down(server, cleanup, scheduling)
        finally:
            executor.shutdown(wait=False, cancel_futures=True)

    async def _load(self, executor: ThreadPoolExecutor) -> Denoiser:
        if self.denoiser is None:
            self.denoiser = await asyncio.get_running_loop().run_in_executor(
                executor,
                partial(
                    load_denoiser,
                    self.model_dir,
                    device=self.device,
                    trust_remote_code=self.trust_remote_code,
                    quantize=self.quantize,
                    prompt=self.prompt,
                    dtype=self.dtype,
                ),
            )
        return self.denoiser

    async def _shut_down(
        self,
        server: asyncio.AbstractServer,
        cleanup: Callable[[], None],
        scheduling: asyncio.Task[None],
    ) -> None:
        self.stopping = True
        server.close()
        cleanup()
        await self._drain()
        for conn in list(self._conns):
            conn.close()
        scheduling.cancel()
        with suppress(asyncio.CancelledError):
            await scheduling
        log.info("stopped")

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

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Connection(reader, writer, self)
        self._conns.add(conn)
        try:
            await conn.serve()
        finally:
            self._conns.discard(conn)
        await conn.finished()
        if self._executor is not None:  # what its requests freed goes back to the system
            release_soon(self._executor)

    # -- what connections ask of the worker (connection.Service) ------------------------

    def welcome(self) -> Welcome:
        assert self.denoiser is not None
        return Welcome(
            self.denoiser.name,
            self._device(),
            self._precision(),
            bool(getattr(self.denoiser, "cpu_bf16", False)),
            getattr(self.denoiser, "calibration", None) is not None,
        )

    def info(self, rid: int) -> WorkerInfo:
        assert self.denoiser is not None and self.scheduler is not None
        s = self.scheduler
        versions = Versions(
            _version("diffusion-infill"),
            _version("torch"),
            _version("transformers"),
            PROTOCOL_VERSION,
        )
        counters = Counters(self.requests, s.passes, s.canvases, s.shared, len(s))
        return WorkerInfo(
            rid,
            self.denoiser.name,
            self._device(),
            versions,
            self.limits,
            self.batching,
            counters,
            self._precision(),
        )

    async def answer(
        self, msg: ModelRequest, on_step: Callable[[Step], None] | None = None
    ) -> Message:
        assert self._handler is not None
        return await self._handler.answer(msg, on_step)

    def _device(self) -> str:
        return str(getattr(self.denoiser, "device", "cpu"))

    def _precision(self) -> str:
        """The loaded model's compute precision (model/precision.py), "" when it has none."""
        return str(getattr(getattr(self.denoiser, "precision", None), "name", ""))


# -- command line -----------------------------------------------------------------------


def _stop_at_stdin_eof(worker: Worker) -> None:
    """Stop the worker once stdin reaches end of file (the spawning parent is gone)."""

    # os.read on the descriptor, not sys.stdin.buffer: a daemon thread blocked inside the
    # buffered reader holds its lock, and interpreter shutdown (after SIGTERM) then aborts
    # with "Fatal Python error: _enter_buffered_busy".
    fd = sys.stdin.fileno()

    def watch() -> None:
        with suppress(OSError, ValueError):  # stdin closed or unreadable: the parent is gone
            while os.read(fd, 4096):
                pass
        worker.stop()

    threading.Thread(target=watch, name="infill-stdin", daemon=True).start()


def serve_until_stopped(
    worker: Worker, address: str | Address | None, *, exit_with_stdin: bool = False
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
    serving_spin()  # before torch loads: this process's passes are governed
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        format="infill-worker: %(message)s",
        level=logging.DEBUG if args.verbose else logging.INFO,
    )
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
    worker = Worker(
        model_dir=args.model,
        device=args.device,
        trust_remote_code=args.trust_remote_code,
        token=token,
        limits=limits,
        batching=not args.no_batching,
        quantize=args.quantize,
        prompt=args.prompt,
        order=args.order,
        dtype=args.dtype,
    )
    status = serve_until_stopped(worker, address, exit_with_stdin=args.exit_with_stdin)
    # Exit without interpreter finalization: with torch loaded, finalizing next to its
    # thread pools and the stdin watcher (a daemon thread) could abort the process after a
    # clean stop ("terminate called without an active exception", status -6). Everything
    # is stopped and the socket file removed by now; the logs are flushed here.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    sys.exit(main())
