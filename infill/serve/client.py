"""The worker's client, async (the language server; infill/serve/sync_client.py wraps it
for the CLI).

    async with WorkerClient.spawned(model="runs/small/export") as client:
        result = await client.fill("x = <mask>\\n")          # protocol.Result
    client = WorkerClient("tcp:gpu-box:7777", token=token)  # a worker somebody else runs

A spawned worker (infill/serve/spawn.py) listens on a private socket; the client waits for
its socket (bounded by `connect_timeout`, failing at once if the process exits) and
restarts it on the next request after it died. Every failure is a `WorkerError` (an
InfillError) whose `code` is one of the worker's error codes (protocol.CODES) or the
client's own: `unavailable` (the worker cannot be reached or started, or it died: every
request in flight fails at once) and `timeout` (no reply within the request's timeout;
the request is cancelled). Cancelling a caller's task sends `cancel` to the worker.

The connection itself (connecting, the handshake, replies, failures) is
infill/serve/link.py's `WorkerLink`, which WorkerClient extends with the requests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from diffusion_infill.infill.core.options import SamplerOptions
from diffusion_infill.infill.core.results import TokenScore
from diffusion_infill.infill.core.snippets import Snippet, Source
from diffusion_infill.infill.core.spans import DEFAULT_MARKER, Span
from diffusion_infill.infill.core.suspicion import DEFAULT_MIN_LIKELY, DEFAULT_MIN_SUSPICION
from diffusion_infill.infill.serve.link import TIMEOUT, UNAVAILABLE, WorkerError, WorkerLink
from diffusion_infill.infill.serve.protocol import (
    FillRequest,
    FixRequest,
    InfoRequest,
    Result,
    ScoreRequest,
    Scores,
    Step,
    WorkerInfo,
)
from diffusion_infill.infill.serve.spawn import private_socket_path, spawn_command

__all__ = ["TIMEOUT", "UNAVAILABLE", "WorkerClient", "WorkerError", "spawn_command"]


def _options(options: SamplerOptions | Mapping[str, Any] | None) -> SamplerOptions:
    """SamplerOptions from a map of its fields (OptionError, code `input`, when bad)."""
    if isinstance(options, SamplerOptions):
        return options
    return SamplerOptions.build(None, **(options or {}))


class WorkerClient(WorkerLink):
    """The requests a worker answers (fill, fix, score, info), over one connection shared
    by any number of concurrent requests; the arguments are WorkerLink's: the worker's
    address, or the command that spawns it, its token and the timeouts."""

    @classmethod
    def spawned(
        cls,
        *,
        model: str | Path | None = None,
        device: str | None = None,
        args: Sequence[str] = (),
        socket: str | Path | None = None,
        **kw: Any,
    ) -> WorkerClient:
        """A client that runs its own worker (`python -m diffusion_infill.infill.serve.worker`)
        on a private socket; `args` are extra worker flags (e.g. `["--no-batching"]`)."""
        path = Path(socket) if socket is not None else private_socket_path()
        return cls(
            f"unix:{path}", spawn=spawn_command(path, model=model, device=device, args=args), **kw
        )

    # -- requests -----------------------------------------------------------------------

    async def fill(
        self,
        text: str,
        *,
        spans: Sequence[Span] | None = None,
        marker: str = DEFAULT_MARKER,
        language: str | None = "python",
        options: SamplerOptions | Mapping[str, Any] | None = None,
        deadline: float | None = None,
        on_step: Callable[[Step], None] | None = None,
        timeout: float | None = None,
        context: Sequence[Snippet] = (),
        source: Source | None = None,
    ) -> Result:
        """Fill the hole markers of `text`, or rewrite `spans` (character ranges) of it.

        `options`: SamplerOptions or a map of its fields; `deadline`: seconds the worker
        may spend (None: its default); `on_step`: called with each `Step` event (the canvas
        settling); `timeout`: seconds to wait for the reply (None: request_timeout, or more
        when the deadline is longer); `context`: windows of the user's repository
        (`Snippet`, infill.context) sent with the request; `source`: where the text lives
        (`Source`), for the worker's jedi to resolve its imports where it can."""
        return await self._call(
            lambda rid: FillRequest(
                rid,
                text,
                list(spans) if spans is not None else None,
                marker,
                language,
                _options(options),
                on_step is not None,
                deadline,
                list(context),
                source,
            ),
            Result,
            timeout=self._timeout(timeout, deadline),
            on_step=on_step,
        )

    async def fix(
        self,
        text: str,
        *,
        start: int = 0,
        end: int | None = None,
        max_fixes: int = 1,
        min_suspicion: float = DEFAULT_MIN_SUSPICION,
        min_likely: float = DEFAULT_MIN_LIKELY,
        language: str | None = "python",
        options: SamplerOptions | Mapping[str, Any] | None = None,
        deadline: float | None = None,
        timeout: float | None = None,
        source: Source | None = None,
    ) -> Result:
        """Re-denoise the most suspicious tokens of text[start:end] ("Fix selection").
        The Result's `scores` hold every token's score; no edits when no token passed
        the rule (infill/core/suspicion.py: `min_suspicion` and `min_likely`); `source`
        as for `fill`."""
        return await self._call(
            lambda rid: FixRequest(
                rid,
                text,
                start,
                end,
                max_fixes,
                min_suspicion,
                language,
                _options(options),
                deadline,
                min_likely,
                source,
            ),
            Result,
            timeout=self._timeout(timeout, deadline),
        )

    async def score(
        self,
        text: str,
        *,
        start: int = 0,
        end: int | None = None,
        language: str | None = "python",
        deadline: float | None = None,
        timeout: float | None = None,
    ) -> list[TokenScore]:
        """The suspicion of every token of text[start:end]."""
        reply = await self._call(
            lambda rid: ScoreRequest(rid, text, start, end, language, deadline),
            Scores,
            timeout=self._timeout(timeout, deadline),
        )
        return reply.scores

    async def info(self, *, timeout: float | None = None) -> WorkerInfo:
        """Model, device, versions, limits and counters of the worker."""
        return await self._call(InfoRequest, WorkerInfo, timeout=self._timeout(timeout, None))

    def _timeout(self, timeout: float | None, deadline: float | None) -> float:
        if timeout is not None:
            return timeout
        return max(self.request_timeout, (deadline or 0.0) + 10.0)
