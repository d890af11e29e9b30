"""A worker process that a client starts for itself, on a private Unix socket.

    cmd = spawn_command(private_socket_path(), model="runs/small/export")

The command is `python -m diffusion_infill.infill.serve.worker --socket PATH --exit-with-stdin
...`: the worker stops when its parent goes away (the parent's end of the worker's stdin
closes), so an editor that kills its language server leaks nothing. `WorkerProcess` starts it,
says why it ended, and stops it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import subprocess
import sys
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path

from diffusion_infill.infill.serve.sockets import default_socket_dir

log = logging.getLogger("infill.serve.client")
_serial = itertools.count()


def spawn_command(
    socket: str | Path,
    *,
    model: str | Path | None = None,
    device: str | None = None,
    args: Sequence[str] = (),
) -> list[str]:
    """The command line of a local worker listening on `socket`."""
    cmd = [
        sys.executable,
        "-m",
        "diffusion_infill.infill.serve.worker",
        "--socket",
        str(socket),
        "--exit-with-stdin",
    ]
    if model is not None:
        cmd += ["--model", str(model)]
    if device is not None:
        cmd += ["--device", device]
    return cmd + list(args)


def private_socket_path() -> Path:
    """A socket path for a worker of this process alone (in the per-user 0700 directory)."""
    return default_socket_dir() / f"worker-{os.getpid()}-{next(_serial)}.sock"


POLL = 0.05  # seconds between looks for a spawned worker's socket


class WorkerProcess:
    """The worker process of one client: started (again) on demand, stopped at close.

    `proc` is None until `start()`. `log`: a file for the worker's stderr (appended);
    None: it inherits ours. Its stdout is never ours: a language server's stdout is its
    protocol."""

    def __init__(self, command: Sequence[str], log: Path | None = None) -> None:
        self.command = list(command)
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        proc = self.proc  # read once: stop() may forget it meanwhile (another thread)
        return proc is not None and proc.poll() is None

    async def open_unix(self, path: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """Connect to the worker's socket, which appears once its model is loaded;
        ConnectionError when the process exits (or is stopped) before it listens."""
        proc = self.proc
        while True:
            if proc is None or proc.poll() is not None or proc is not self.proc:
                raise ConnectionError(
                    f"the worker exited before listening: "
                    f"{self.exit_reason() if proc is self.proc else 'stopped'}"
                )
            try:
                return await asyncio.open_unix_connection(path)
            except (FileNotFoundError, ConnectionRefusedError):
                await asyncio.sleep(POLL)

    def start(self) -> None:
        """Start a fresh worker; OSError when the command cannot run."""
        self.reap()
        err = self.log.open("ab") if self.log is not None else None
        try:
            self.proc = subprocess.Popen(
                self.command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err
            )
        finally:
            if err is not None:
                err.close()
        log.info("started worker %d: %s", self.proc.pid, " ".join(self.command))

    async def exited(self, timeout: float) -> bool:
        """Whether the process has ended, waiting up to `timeout` seconds for it."""
        proc = self.proc
        if proc is None:
            return True
        with suppress(subprocess.TimeoutExpired):  # still running: the answer is no
            await asyncio.get_running_loop().run_in_executor(None, proc.wait, timeout)
        return proc.poll() is not None

    def exit_reason(self) -> str:
        proc = self.proc
        rc = proc.poll() if proc is not None else None
        if rc is None:
            return "the worker closed the connection"
        how = f"killed by signal {-rc}" if rc < 0 else f"exit status {rc}"
        where = f"; see {self.log}" if self.log is not None else ""
        return f"the worker process ended ({how}{where})"

    def kill(self) -> None:
        """Kill a worker we started but cannot use."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            self.reap()

    def reap(self) -> None:
        proc = self.proc
        if proc is not None:
            with suppress(subprocess.TimeoutExpired):  # a zombie we cannot wait for: leave it
                proc.wait(timeout=5)

    async def stop(self) -> None:
        """Ask the worker to stop (SIGTERM: it finishes what is in flight), kill it after
        10 s; forget it."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, proc.wait, 10)
        except subprocess.TimeoutExpired:
            proc.kill()
            await loop.run_in_executor(None, proc.wait)
