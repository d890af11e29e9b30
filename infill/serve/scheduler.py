"""The scheduler: the denoising steps of concurrent requests share forward passes.

Each step it takes the active DenoiseJobs in round-robin order up to `max_batch` canvases,
makes ONE `denoiser.logits` call for all their canvases on the model thread, splits the
logits back and advances each job. Jobs join and leave between steps; a cancelled or late
request leaves at the next step. With `batching=False` each pass serves one job.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from diffusion_infill.infill.core.errors import DenoiserError
from diffusion_infill.infill.core.sampler import DenoiseJob, LogitsRequest, hint_keys
from diffusion_infill.model.denoiser import Denoiser

log = logging.getLogger("infill.serve.worker")


@dataclass(eq=False)
class _Entry:
    job: DenoiseJob
    future: asyncio.Future[None]  # done when the job is; cancelled when its request is
    snapshot: Callable[[], Any] | None  # on the model thread, after each step of the job
    on_step: Callable[[Any], None] | None  # on the event loop, with the snapshot


# What one step did to one entry: (entry, its error or None, its snapshot or None).
_Outcome = tuple[_Entry, BaseException | None, Any]


class Scheduler:
    """Drives every active DenoiseJob; the steps of concurrent jobs share forward passes.

    Args:
        denoiser: the network.
        executor: the model thread (one worker); forward passes run there.
        batching: put the steps of several jobs into one pass (False: one job per pass).
        max_batch: the most canvases per pass (a job bigger than that runs alone).

    Counters (since start): `passes` (logits calls), `canvases` (canvases scored),
    `shared` (passes that served more than one job).
    """

    def __init__(
        self,
        denoiser: Denoiser,
        executor: ThreadPoolExecutor,
        *,
        batching: bool = True,
        max_batch: int = 32,
    ) -> None:
        self.denoiser = denoiser
        self.executor = executor
        self.batching = batching
        self.max_batch = max_batch
        self._queue: deque[_Entry] = deque()  # round-robin order
        self._running: list[_Entry] = []  # the entries of the pass in progress
        self._wake = asyncio.Event()
        self.passes = 0
        self.canvases = 0
        self.shared = 0

    def __len__(self) -> int:
        """Jobs still in the scheduler (queued or in the pass in progress)."""
        return sum(not e.future.done() for e in (*self._queue, *self._running))

    async def denoise(
        self,
        job: DenoiseJob,
        *,
        snapshot: Callable[[], Any] | None = None,
        on_step: Callable[[Any], None] | None = None,
    ) -> None:
        """Denoise `job` to the end among the others. After each of its steps, `snapshot()`
        runs on the model thread and `on_step` gets its value on the event loop (a live
        view). Cancelling the caller removes the job before its next step; a failed pass
        raises DenoiserError (code `model`)."""
        if job.done:
            return
        entry = _Entry(job, asyncio.get_running_loop().create_future(), snapshot, on_step)
        self._queue.append(entry)
        self._wake.set()
        try:
            await entry.future
        finally:
            if not entry.future.done():
                entry.future.cancel()
            with suppress(ValueError):
                self._queue.remove(entry)
            self._forget(job)

    async def serve(self) -> None:
        """The scheduling loop; runs until cancelled."""
        loop = asyncio.get_running_loop()
        while True:
            picked = self._pick()
            if not picked:
                self._wake.clear()
                await self._wake.wait()
                continue
            self._running = picked
            try:
                outcome = await loop.run_in_executor(self.executor, self._step, picked)
            except Exception as exc:  # a bug in _step: its jobs fail (and are logged as
                outcome = [(e, exc, None) for e in picked]  # internal), the others go on
            finally:
                self._running = []
            self._settle(outcome)

    def _settle(self, outcome: list[_Outcome]) -> None:
        """Hand each entry its step's result: an error, a snapshot, the end, or a place at
        the back of the queue."""
        for entry, error, snap in outcome:
            if entry.future.done():  # cancelled while its step ran
                continue
            if error is not None:
                entry.future.set_exception(error)
                continue
            if entry.snapshot is not None and entry.on_step is not None:
                entry.on_step(snap)
            if entry.job.done:
                entry.future.set_result(None)
            else:
                self._queue.append(entry)  # behind the jobs that waited: round robin

    def _pick(self) -> list[_Entry]:
        picked: list[_Entry] = []
        size = 0
        while self._queue:
            entry = self._queue[0]
            if entry.future.done():
                self._queue.popleft()
                continue
            weight = len(entry.job.canvases)  # an upper bound: done canvases are skipped
            if picked and (not self.batching or size + weight > self.max_batch):
                break
            picked.append(self._queue.popleft())
            size += weight
        return picked

    def _step(self, entries: list[_Entry]) -> list[_Outcome]:
        """One batched forward pass for `entries` (on the model thread)."""
        out: list[_Outcome] = []
        live: list[tuple[_Entry, list[LogitsRequest]]] = []
        for e in entries:
            if e.future.done():  # cancelled since it was picked
                continue
            try:
                live.append((e, e.job.requests()))
            except Exception as exc:  # noqa: BLE001 - a bug: its request logs it as internal
                out.append((e, exc, None))
        flat = [r for _, reqs in live for r in reqs]
        if not flat:
            return out
        try:
            logits = self._forward(flat)
        except DenoiserError as exc:
            return out + [(e, exc, None) for e, _ in live]
        self.passes += 1
        self.canvases += len(flat)
        self.shared += len(live) > 1
        at = 0
        for e, reqs in live:
            part = list(logits[at : at + len(reqs)])
            at += len(reqs)
            try:
                e.job.advance(part)
                out.append((e, None, e.snapshot() if e.snapshot is not None else None))
            except Exception as exc:  # noqa: BLE001 - DenoiserError (model), or a bug
                out.append((e, exc, None))
        return out

    def _forward(self, flat: list[LogitsRequest]) -> list[Any]:
        """One `logits` call for all the canvases; any failure is a DenoiserError."""
        canvases, positions = [r.canvas for r in flat], [r.positions for r in flat]
        try:
            if any(r.hint is not None for r in flat):
                logits = self.denoiser.logits(canvases, positions, [r.hint for r in flat])
            else:
                logits = self.denoiser.logits(canvases, positions)
        except Exception as exc:  # noqa: BLE001 - CUDA OOM, a broken checkpoint, ...
            log.exception("forward pass failed")
            raise DenoiserError(f"the forward pass failed: {type(exc).__name__}: {exc}") from exc
        if len(logits) != len(flat):
            raise DenoiserError(
                f"the denoiser returned {len(logits)} logit arrays for {len(flat)} canvases"
            )
        return logits

    def _forget(self, job: DenoiseJob) -> None:
        """Drop the job's cached context keys/values (on the model thread, later)."""
        forget = getattr(self.denoiser, "forget", None)
        keys = hint_keys(job) if callable(forget) else []
        if not keys:
            return
        with suppress(RuntimeError):  # the executor is shut down: nothing to free
            self.executor.submit(lambda: [forget(k) for k in keys])
