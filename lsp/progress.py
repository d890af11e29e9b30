"""Work-done progress (`$/progress`) for requests that take a while, and the live view.

With a token from the request (`workDoneToken`) the progress begins at once. Otherwise,
when the client supports `window/workDoneProgress/create`, the server creates a token only
once the work has run for `delay` seconds, so quick requests show nothing. The progress is
cancellable: the client's `window/workDoneProgress/cancel` cancels the request's task,
which cancels the worker's job like `$/cancelRequest` does.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException

from diffusion_infill.infill.serve.protocol import Step
from diffusion_infill.lsp.host import Host, Snapshot

log = logging.getLogger("infill.lsp")

STEP_NOTIFICATION = "infill/denoiseStep"  # the live view (docs/LSP.md)


def server_progress_supported(host: Host) -> bool:
    window = host.client_capabilities.window
    return bool(window is not None and window.work_done_progress)


class WorkProgress:
    def __init__(
        self, host: Host, title: str, *, token: types.ProgressToken | None, delay: float | None
    ) -> None:
        """`delay`: seconds before a server-created progress; None: never create one."""
        self.host = host
        self.title = title
        self.given = token
        self.delay = delay
        self.token: types.ProgressToken | None = None  # set once begun
        self._task: asyncio.Task[Any] | None = None
        self._timer: asyncio.Task[None] | None = None
        self._last = ""
        self._creating = False  # the create request is out
        self._ended = False

    async def __aenter__(self) -> WorkProgress:
        self._task = asyncio.current_task()
        if self.given is not None:
            self._begin(self.given)
        elif self.visible:
            self._timer = asyncio.get_running_loop().create_task(self._start_later())
        return self

    @property
    def visible(self) -> bool:
        """Whether the client may see this progress at all."""
        return self.given is not None or (
            self.delay is not None and server_progress_supported(self.host)
        )

    async def _start_later(self) -> None:
        await asyncio.sleep(self.delay or 0.0)
        token = f"infill-{uuid.uuid4()}"
        # From here on the timer is not cancelled: pygls cannot take the reply to a
        # request whose future was cancelled. A reply after the work ended begins nothing.
        self._creating = True
        try:
            await self.host.work_done_progress.create_async(token)
        except JsonRpcException as exc:  # the client refused: no progress, the work goes on
            log.info("window/workDoneProgress/create failed: %s", exc)
            return
        if not self._ended:
            self._begin(token)

    def _begin(self, token: types.ProgressToken) -> None:
        self.token = token
        progress = self.host.work_done_progress
        progress.begin(
            token,
            types.WorkDoneProgressBegin(
                title=self.title, cancellable=True, message=self._last or None
            ),
        )
        future = progress.tokens.get(token)
        task, loop = self._task, asyncio.get_running_loop()
        if future is not None and task is not None:
            future.add_done_callback(
                lambda f: loop.call_soon_threadsafe(task.cancel) if f.cancelled() else None
            )

    def report(self, message: str) -> None:
        self._last = message
        if self.token is not None:
            self.host.work_done_progress.report(
                self.token, types.WorkDoneProgressReport(message=message)
            )

    async def __aexit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        self._ended = True
        if self._timer is not None and not self._creating:
            self._timer.cancel()  # it is parked in its sleep: cancel ends it
        if self.token is not None:
            if exc is None:
                message = "done"
            elif isinstance(exc, asyncio.CancelledError):
                message = "cancelled"
            else:
                message = "failed"
            progress = self.host.work_done_progress
            progress.end(self.token, types.WorkDoneProgressEnd(message=message))
            future = progress.tokens.pop(self.token, None)
            if future is not None and not future.done():
                future.set_result(None)  # release the cancel callback


def live_view(
    host: Host, snap: Snapshot, kind: str, progress: WorkProgress
) -> Callable[[Step], None] | None:
    """The `on_step` callback of a fill: progress reports, and with `liveView` the custom
    `infill/denoiseStep` notification (docs/LSP.md) with each span's text after the step
    (`░` a masked slot, `∅` a null one). None when nobody would see the steps (the worker
    then streams nothing)."""
    request_id = host.request_id()
    live = host.settings.live_view
    if not live and not progress.visible:
        return None

    def on_step(step: Step) -> None:
        progress.report(f"step {step.step}")
        if live:
            host.notify(
                STEP_NOTIFICATION,
                {
                    "uri": snap.uri,
                    "version": snap.version,
                    "requestId": request_id,
                    "operation": kind,
                    "step": step.step,
                    "spans": [{"index": i, "text": t} for i, t in step.spans],
                },
            )

    return on_step
