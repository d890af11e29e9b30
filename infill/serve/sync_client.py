"""Blocking calls to a worker, for the `infill` command and scripts: `WorkerClient` over a
private event loop.

    with SyncWorkerClient("unix:/run/user/1000/infill/worker.sock") as client:
        result = client.fill("x = <mask>\\n")
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from diffusion_infill.infill.core.results import TokenScore
from diffusion_infill.infill.serve.client import WorkerClient
from diffusion_infill.infill.serve.protocol import Result, Welcome, WorkerInfo

T = TypeVar("T")


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
