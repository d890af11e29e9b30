"""Frames out on one worker connection, with a bound on what waits for a peer that does
not read.

Frames go to the connection's asyncio transport, whose buffer holds what the socket has
not taken yet. `step` events (a streamed fill's live view) are skipped while
`pause_mark` bytes or more wait: each step carries its spans' whole text, so the next one
sent after the peer catches up shows where the fill is. A reply is queued unless more
than `pause_mark` bytes wait already and it would take them past `Limits.max_queued` (so
a peer that keeps up gets any reply, however big): then the connection is `behind`, its
owner cancels its requests, and the peer has `Limits.send_grace` seconds to read the
buffer down to a quarter of `pause_mark`; if it does not, the connection is aborted,
which drops everything queued for it at once (a plain close would wait for the peer to
read)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import suppress

from diffusion_infill.infill.serve.limits import Limits

log = logging.getLogger("infill.serve.worker")

PAUSE_MARK = 64 * 1024  # bytes waiting past which step events are skipped


class Outbox:
    """The sending side of one connection (see the module docstring). `on_behind` is
    called once each time the peer falls behind past `max_queued`."""

    def __init__(
        self, writer: asyncio.StreamWriter, limits: Limits, on_behind: Callable[[], None]
    ) -> None:
        self.writer = writer
        self.transport = writer.transport
        self.limit = limits.max_queued
        self.grace = limits.send_grace
        self.pause_mark = max(1, min(PAUSE_MARK, self.limit // 2))
        # drain() waits while more than `pause_mark` bytes wait, until a quarter is left
        self.transport.set_write_buffer_limits(
            high=self.pause_mark, low=max(0, self.pause_mark // 4)
        )
        self.on_behind = on_behind
        self.closed = False
        self._watch: asyncio.Task[None] | None = None  # the grace period, while behind

    def queued(self) -> int:
        """Bytes queued for the peer that the socket has not taken yet."""
        return 0 if self.closed else self.transport.get_write_buffer_size()

    @property
    def behind(self) -> bool:
        """The peer let more than `max_queued` bytes wait and has not read them since."""
        return self._watch is not None and not self._watch.done()

    def takes_steps(self) -> bool:
        """Whether a streamed update would be queued now (the peer keeps up)."""
        return not (self.closed or self.behind or self.queued() >= self.pause_mark)

    def step(self, frame: bytes) -> bool:
        """Queue a streamed update unless the peer is not keeping up; False: skipped."""
        return self.takes_steps() and self._write(frame)

    def reply(self, frame: bytes, *, small: bool = False) -> bool:
        """Queue a reply; False when it would take the queue past `max_queued` (then it
        is not queued, and the peer is behind). `small`: always queued (the error that
        ends a request while the peer is behind: one per request in flight)."""
        if self.closed:
            return False
        waiting = self.queued()
        if small or waiting <= self.pause_mark or waiting + len(frame) <= self.limit:
            return self._write(frame)
        self._fall_behind(waiting)
        return False

    async def caught_up(self) -> None:
        """Return once the peer is not behind (at once when it is not)."""
        watch = self._watch
        if watch is not None and not watch.done():
            await asyncio.wait({watch})

    def close(self) -> None:
        """Close the connection; whatever is still queued gets `send_grace` seconds to
        reach the peer, then is dropped."""
        if self.closed:
            return
        self.closed = True
        if self._watch is not None:
            self._watch.cancel()
        waiting = self.transport.get_write_buffer_size()
        self.writer.close()
        if waiting:
            asyncio.get_running_loop().call_later(self.grace, self.transport.abort)

    def abort(self) -> None:
        """Close the connection now, dropping what is queued."""
        self.closed = True
        self.transport.abort()

    def _write(self, frame: bytes) -> bool:
        if self.transport.is_closing():  # the peer is gone, or the connection closing
            self.closed = True
            return False
        try:
            self.writer.write(frame)
        except (ConnectionError, OSError, RuntimeError):  # the transport is gone
            self.closed = True
            return False
        return True

    def _fall_behind(self, waiting: int) -> None:
        if self.behind:
            return
        log.info(
            "a client is not reading: %d bytes wait for it (limit %d); its requests are "
            "cancelled and it has %g s to read",
            waiting,
            self.limit,
            self.grace,
        )
        self._watch = asyncio.get_running_loop().create_task(self._wait_for_the_peer())
        self.on_behind()

    async def _wait_for_the_peer(self) -> None:
        try:
            async with asyncio.timeout(self.grace):
                await self.writer.drain()
            if self.transport.is_closing():  # drain() returns when the connection is lost
                self.abort()
        except TimeoutError:
            log.info(
                "closing a connection that read nothing for %g s (%d bytes dropped)",
                self.grace,
                self.queued(),
            )
            self.abort()
        except (ConnectionError, OSError):
            with suppress(RuntimeError):
                self.abort()
