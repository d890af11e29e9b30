"""The language server's one way to the model: a connection to a worker, chosen by the
settings.

`workerAddress` set: connect to a worker somebody runs (`infill-worker --socket PATH`, or
TCP with the token in `$INFILL_WORKER_TOKEN`). Otherwise the server spawns its own worker
on a private Unix socket with `modelDir` / `device`; the client restarts it on the next
request if it died. Every failure is the client's `WorkerError`, an InfillError whose code
says what failed (`input`: the user's text or options); cancelling the awaiting task sends
`cancel` to the worker (infill.serve.client does that). A request cancelled while the
connection is being made (a completion past its deadline while the model loads) does not
cut the handshake short: it goes on, for the next request.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from typing import Any

from diffusion_infill.infill.core.options import SamplerOptions
from diffusion_infill.infill.core.results import TokenScore
from diffusion_infill.infill.core.snippets import Snippet, Source
from diffusion_infill.infill.core.spans import Span
from diffusion_infill.infill.serve.client import WorkerClient
from diffusion_infill.infill.serve.protocol import Result, Step, WorkerInfo
from diffusion_infill.lsp.budgets import UNKNOWN, Machine
from diffusion_infill.lsp.settings import Settings

CONNECT_TIMEOUT = 180.0  # seconds: a spawned worker imports torch and loads the model first
REQUEST_TIMEOUT = 120.0


def _key(s: Settings) -> tuple[Any, ...]:
    return (s.worker_address, s.model_dir, s.device, s.precision)


class WorkerConnection:
    def __init__(self) -> None:
        self._client: WorkerClient | None = None
        self._key: tuple[Any, ...] | None = None
        self._closing: set[asyncio.Task[None]] = set()

    def configure(self, settings: Settings) -> bool:
        """Use the worker these settings name; True when that changed (the old connection
        is closed in the background, requests in flight on it fail)."""
        key = _key(settings)
        if key == self._key:
            return False
        old, self._client, self._key = self._client, self._make(settings), key
        if old is not None:
            task = asyncio.get_running_loop().create_task(old.close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
        return True

    @staticmethod
    def _make(s: Settings) -> WorkerClient:
        if s.worker_address is not None:
            return WorkerClient(
                s.worker_address,
                token=os.environ.get("INFILL_WORKER_TOKEN"),
                connect_timeout=30.0,
                request_timeout=REQUEST_TIMEOUT,
            )
        return WorkerClient.spawned(
            model=s.model_dir,
            device=s.device,
            args=["--dtype", s.precision] if s.precision else [],
            connect_timeout=CONNECT_TIMEOUT,
            request_timeout=REQUEST_TIMEOUT,
        )

    @property
    def client(self) -> WorkerClient:
        if self._client is None:
            self.configure(Settings())
        assert self._client is not None
        return self._client

    @property
    def machine(self) -> Machine:
        """What the worker said it computes on: device, precision, whether its CPU has bf16
        instructions, whether its fills carry a confidence (`UNKNOWN` until it has
        greeted this connection)."""
        c = self._client
        if c is None or c.welcome is None:
            return UNKNOWN
        w = c.welcome
        return Machine(w.device, w.precision, w.cpu_bf16, w.confidence)

    @property
    def description(self) -> str:
        c = self._client
        if c is None:
            return "no worker yet"
        where = f"worker at {c.address}" if c.spawn is None else "local worker"
        if c.welcome is not None:
            precision = f" ({c.welcome.precision})" if c.welcome.precision else ""
            return f"{where}: {c.welcome.model} on {c.welcome.device}{precision}"
        return where

    async def connect(self) -> str:
        """Connect now (a spawned worker loads its model) unless connected; returns
        `description`. Every request connects through here first."""
        await asyncio.shield(self.client.connect())
        return self.description

    async def fill(
        self,
        text: str,
        *,
        spans: Sequence[Span] | None = None,
        marker: str,
        language: str | None,
        options: SamplerOptions,
        on_step: Callable[[Step], None] | None = None,
        context: Sequence[Snippet] = (),
        source: Source | None = None,
    ) -> Result:
        await self.connect()
        return await self.client.fill(
            text,
            spans=spans,
            marker=marker,
            language=language,
            options=options,
            on_step=on_step,
            context=context,
            source=source,
        )

    async def fix(
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
        source: Source | None = None,
    ) -> Result:
        await self.connect()
        return await self.client.fix(
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

    async def score(
        self, text: str, *, start: int, end: int, language: str | None
    ) -> list[TokenScore]:
        await self.connect()
        return await self.client.score(text, start=start, end=end, language=language)

    async def info(self) -> WorkerInfo:
        await self.connect()
        return await self.client.info()

    async def close(self) -> None:
        client, self._client, self._key = self._client, None, None
        if client is not None:
            await client.close()
        for task in list(self._closing):
            await task

    def kill(self) -> None:
        """Stop a spawned worker now (at exit, when the event loop is gone)."""
        proc = self._client.process if self._client is not None else None
        if proc is not None and proc.poll() is None:
            proc.terminate()
