"""Where the `infill` command's fills come from: the engine in this process (the model
loaded once, on the first file that needs it), or a worker (`--worker`).

Both answer `fill` and `fix` alike, so the command's output does not depend on which one
ran. A worker's errors that concern one file (its input, a limit, its deadline) are
reported for that file, like the engine's own; the others end the run.
"""

from __future__ import annotations

import argparse
import os
import socket
import stat
from collections.abc import Callable, Sequence
from typing import Protocol

from diffusion_infill.infill.core.engine import fill_text
from diffusion_infill.infill.core.errors import INPUT, TOO_LARGE, InfillError
from diffusion_infill.infill.core.options import SamplerOptions
from diffusion_infill.infill.core.repair import fix_text
from diffusion_infill.infill.core.results import FillResult, TokenScore
from diffusion_infill.infill.core.snippets import Snippet, Source
from diffusion_infill.infill.serve.client import WorkerError
from diffusion_infill.infill.serve.protocol import DEADLINE, Result
from diffusion_infill.infill.serve.sockets import default_socket_path
from diffusion_infill.infill.serve.sync_client import SyncWorkerClient
from diffusion_infill.model import loading
from diffusion_infill.model.denoiser import Denoiser

Repair = tuple[FillResult | None, list[TokenScore]]  # the repair (None: none), every score
Progress = Callable[[int, int], None]  # (done, in all): slots filled, or windows scored


class Backend(Protocol):
    def fill(
        self,
        text: str,
        *,
        marker: str,
        language: str | None,
        options: SamplerOptions,
        progress: Progress | None = None,
        context: Sequence[Snippet] = (),
        source: Source | None = None,
    ) -> FillResult: ...

    def fix(
        self,
        text: str,
        *,
        start: int,
        end: int,
        max_fixes: int,
        min_suspicion: float,
        min_likely: float,
        language: str | None,
        options: SamplerOptions,
        progress: Progress | None = None,
        source: Source | None = None,
    ) -> Repair: ...

    def close(self) -> None: ...


class InProcess:
    """The engine in this process; the model is loaded on first use, once."""

    def __init__(
        self, model_dir: str | None, device: str | None, trust_remote_code: bool = False
    ) -> None:
        self.model_dir, self.device = model_dir, device
        self.trust_remote_code = trust_remote_code
        self._denoiser: Denoiser | None = None

    def denoiser(self) -> Denoiser:
        """The model (ModelLoadError when it cannot be loaded)."""
        if self._denoiser is None:
            self._denoiser = loading.load_denoiser(
                self.model_dir, device=self.device, trust_remote_code=self.trust_remote_code
            )
        return self._denoiser

    def fill(
        self,
        text: str,
        *,
        marker: str,
        language: str | None,
        options: SamplerOptions,
        progress: Progress | None = None,
        context: Sequence[Snippet] = (),
        source: Source | None = None,
    ) -> FillResult:
        return fill_text(
            text,
            denoiser=self.denoiser(),
            marker=marker,
            language=language,
            options=options,
            progress=progress,
            context=context,
            source=source,
        )

    def fix(
        self,
        text: str,
        *,
        start: int,
        end: int,
        max_fixes: int,
        min_suspicion: float,
        min_likely: float,
        language: str | None,
        options: SamplerOptions,
        progress: Progress | None = None,
        source: Source | None = None,
    ) -> Repair:
        return fix_text(
            text,
            denoiser=self.denoiser(),
            start=start,
            end=end,
            max_fixes=max_fixes,
            min_suspicion=min_suspicion,
            min_likely=min_likely,
            language=language,
            options=options,
            progress=progress,
            source=source,
        )

    def close(self) -> None:
        pass


class ThroughWorker:
    """A running worker (`--worker ADDRESS`) or one started for this run (`spawn`),
    connected on first use."""

    PER_FILE = {INPUT, TOO_LARGE, DEADLINE}  # worker errors that concern one file only

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self._client: SyncWorkerClient | None = None

    def _connected(self) -> SyncWorkerClient:
        a = self.args
        if self._client is None:
            if a.worker == "spawn":
                extra = ("--trust-remote-code",) if a.trust_remote_code else ()
                self._client = SyncWorkerClient.spawned(model=a.model, device=a.device, args=extra)
            else:
                self._client = SyncWorkerClient(
                    a.worker, token=os.environ.get("INFILL_WORKER_TOKEN") or None
                )
        return self._client

    # A worker reports no progress: `progress` is accepted and not called.
    def fill(
        self,
        text: str,
        *,
        marker: str,
        language: str | None,
        options: SamplerOptions,
        progress: Progress | None = None,
        context: Sequence[Snippet] = (),
        source: Source | None = None,
    ) -> FillResult:
        reply = self._ask(
            lambda c: c.fill(
                text,
                marker=marker,
                language=language,
                options=options,
                context=context,
                source=source,
            )
        )
        return reply.to_fill_result(text)

    def fix(
        self,
        text: str,
        *,
        start: int,
        end: int,
        max_fixes: int,
        min_suspicion: float,
        min_likely: float,
        language: str | None,
        options: SamplerOptions,
        progress: Progress | None = None,
        source: Source | None = None,
    ) -> Repair:
        reply = self._ask(
            lambda c: c.fix(
                text,
                start=start,
                end=end,
                max_fixes=max_fixes,
                min_suspicion=min_suspicion,
                min_likely=min_likely,
                language=language,
                options=options,
                source=source,
            )
        )
        scores = list(reply.scores or [])
        return (None if reply.stats is None else reply.to_fill_result(text)), scores

    def _ask(self, call: Callable[[SyncWorkerClient], Result]) -> Result:
        try:
            return call(self._connected())
        except WorkerError as exc:
            if exc.code in self.PER_FILE:  # the file's own error, as the engine reports it
                raise InfillError(exc.message, code=exc.code) from None
            raise

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


def running_worker() -> str | None:
    """The address of the worker listening on the default socket (`infill-worker` started
    without arguments), or None: no such socket, or a stale one (a connect is refused at
    once). $INFILL_WORKER=off: never."""
    if os.environ.get("INFILL_WORKER") == "off":
        return None
    path = default_socket_path()
    try:
        if not stat.S_ISSOCK(path.stat().st_mode):
            return None
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(0.5)
            probe.connect(str(path))
    except OSError:
        return None
    return f"unix:{path}"


def backend_for(args: argparse.Namespace) -> Backend:
    """A worker when asked for (--worker), or when one is running on the default socket and
    the command asks for nothing it would not do (another model or device, a trace): its
    model is loaded already, so the first fill comes without the seconds of a load. Else
    the engine in this process."""
    if args.worker is None and not (
        args.model or args.device or args.trust_remote_code or getattr(args, "trace", False)
    ):
        args.worker = running_worker()
    if args.worker is not None:
        return ThroughWorker(args)
    return InProcess(args.model, args.device, args.trust_remote_code)
