"""A worker on a deterministic fake denoiser, for tests over real sockets.

    python tests/worker_fake_main.py --socket PATH [--delay S] [--confidence P] [--token T]
        [--max-queued BYTES] [--send-grace S]

Runs the production `infill.serve.worker.serve_until_stopped` (signals, socket file,
shutdown) with a `WorkerFake` instead of a model, so tests can SIGKILL / SIGTERM a real
worker process.
The tests that run a worker in a thread import `WorkerFake` from here too.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import socket
import struct
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fakes import CTX_BASE, NULL, VOCAB, TargetDenoiser, is_slot  # noqa: E402

from diffusion_infill.infill.serve.protocol import (  # noqa: E402
    Hello,
    Limits,
    Message,
    Welcome,
    decode_reply,
    pack,
)
from diffusion_infill.infill.serve.sockets import parse_address  # noqa: E402
from diffusion_infill.infill.serve.worker import Worker, serve_until_stopped  # noqa: E402
from diffusion_infill.model.denoiser import CacheHint  # noqa: E402

HERE = Path(__file__).resolve()

# What the fake fills after each context (the text just before a hole).
TARGETS = {
    "a = ": "1 + 2",
    "b = ": "'xyz'",
    "c = ": "[1, 2, 3]",
    "slow = ": "x" * 120,  # confidence < 0.9: one slot per step, 64 steps (grow_cap)
    "return ": "x + 1",
    "y = x ": "+",  # the fix tests: `-` is the suspicious token
}


class WorkerFake(TargetDenoiser):
    """TargetDenoiser that also scores context (each context character is predicted as
    itself, except those in `wrong`, predicted as another character, or as `<null>`
    where `wrong` maps it to "": a character that should go) and may take `delay`
    seconds per forward pass, like a real network."""

    def __init__(
        self,
        targets: Sequence[str] | Mapping[str, str] | None = None,
        *,
        delay: float = 0.0,
        wrong: Mapping[str, str] | None = None,
        **kw: object,
    ) -> None:
        super().__init__(TARGETS if targets is None else targets, **kw)  # type: ignore[arg-type]
        self.delay = delay
        self.wrong = dict(wrong if wrong is not None else {"-": "+"})

    def logits(
        self,
        canvases: Sequence[Sequence[int]],
        positions: Sequence[Sequence[int]],
        hints: Sequence[CacheHint | None] | None = None,
    ) -> list[np.ndarray]:
        if self.delay:
            time.sleep(self.delay)  # stands in for the network's compute time
        out = super().logits(canvases, positions, hints)
        for canvas, pos, rows in zip(canvases, positions, out, strict=True):
            for r, p in enumerate(pos):
                t = canvas[p]
                if not is_slot(t):  # a context position: the fake's parent left it flat
                    ch = self.decode([t])
                    want = self.wrong.get(ch, ch)
                    guess = self.tok.encode(want)[0] if want else NULL
                    rows[r, CTX_BASE:] = math.log(0.01 / VOCAB)
                    rows[r, guess] = math.log(0.99)
                self.adjust(canvas, p, rows[r])
        return out

    def adjust(self, canvas: Sequence[int], p: int, row: np.ndarray) -> None:
        """Change the logits `row` of position `p` of `canvas` in place (a subclass's
        rule for some characters); by default nothing."""


@contextmanager
def running(worker: Worker, address: str) -> Iterator[Worker]:
    """`worker` serving `address` on a background thread (its own event loop)."""
    failed: list[BaseException] = []

    def serve() -> None:
        try:
            asyncio.run(worker.serve(address))
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            failed.append(exc)
            worker.ready.set()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert worker.ready.wait(10), "the worker did not start"
    if failed:
        raise failed[0]
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(10)
        assert not thread.is_alive(), "the worker did not stop"
        assert not failed, failed


class Raw:
    """A blocking connection that speaks frames by hand (for malformed input)."""

    def __init__(self, address: str, *, hello: bool = True, token: str | None = None) -> None:
        a = parse_address(address)
        if a.kind == "unix":
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(10)
            self.sock.connect(a.path)
        else:
            self.sock = socket.create_connection((a.host, a.port), timeout=10)
        if hello:
            self.send(Hello(token))
            assert isinstance(self.recv(), Welcome)

    def send(self, msg: Message) -> None:
        self.sock.sendall(pack(msg))

    def send_body(self, body: bytes) -> None:
        self.sock.sendall(struct.pack(">I", len(body)) + body)

    def _exactly(self, n: int) -> bytes | None:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    def recv(self) -> Message | None:
        """The next message, or None when the worker closed the connection."""
        head = self._exactly(4)
        if head is None:
            return None
        body = self._exactly(struct.unpack(">I", head)[0])
        assert body is not None, "connection closed inside a frame"
        return decode_reply(body)

    def close(self) -> None:
        self.sock.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--socket", required=True)
    p.add_argument("--delay", type=float, default=0.0)
    p.add_argument("--confidence", type=float, default=0.5)
    p.add_argument("--token")
    p.add_argument("--exit-with-stdin", action="store_true")
    p.add_argument("--max-queued", type=int, default=Limits().max_queued)
    p.add_argument("--send-grace", type=float, default=Limits().send_grace)
    args = p.parse_args(argv)
    worker = Worker(
        denoiser=WorkerFake(delay=args.delay, confidence=args.confidence),
        token=args.token,
        limits=Limits(grace=5.0, max_queued=args.max_queued, send_grace=args.send_grace),
    )
    return serve_until_stopped(worker, f"unix:{args.socket}", exit_with_stdin=args.exit_with_stdin)


if __name__ == "__main__":
    sys.exit(main())
