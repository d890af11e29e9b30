"""One client connection to the worker: the handshake, frames in, requests in flight,
replies out.

Requests on one connection run concurrently (up to `max_requests`), each as a task with
its deadline; `cancel` and a closed connection cancel them between denoising steps. Every
request ends with exactly one reply: its result, or an `error` whose code is the failure's
(the InfillError's own code; `deadline`, `cancelled`, `shutting_down`, `slow_reader`;
`internal` for a bug, which is logged).

Frames out go through an `Outbox` (infill/serve/outbox.py), which bounds what waits for a
client that does not read: past `max_queued` the connection's requests are cancelled
(`slow_reader`) and no more frames are read from it until it has read; it is closed when
it does not within `send_grace`. A frame over `max_frame` gets its `too_large` reply,
then the worker stops writing, reads the rest of that frame away (within `frame_idle`)
so that closing does not reset the connection under the reply, and closes.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import Callable
from contextlib import suppress
from typing import Protocol

from diffusion_infill.infill.core.errors import InfillError
from diffusion_infill.infill.serve.frames import FrameTooLarge, discard, read_frame
from diffusion_infill.infill.serve.outbox import Outbox
from diffusion_infill.infill.serve.protocol import (
    BAD_REQUEST,
    CANCELLED,
    DEADLINE,
    INTERNAL,
    SHUTTING_DOWN,
    SLOW_READER,
    TOO_LARGE,
    UNAUTHORIZED,
    Cancel,
    Error,
    Hello,
    InfoRequest,
    Limits,
    Message,
    ProtocolError,
    Step,
    Welcome,
    WorkerInfo,
    decode_request,
    pack,
)
from diffusion_infill.infill.serve.requests import ModelRequest

log = logging.getLogger("infill.serve.worker")

STOPPED = {  # why a request was cancelled, by the code of its error reply
    CANCELLED: "cancelled by the client",
    SHUTTING_DOWN: "the worker is shutting down",
    SLOW_READER: "the client did not read its replies",
}


class Service(Protocol):
    """What a connection needs of its worker."""

    limits: Limits
    token: str | None  # the shared secret every connection must present; None: none
    stopping: bool  # shutting down: new requests are refused
    requests: int  # requests received since start (counted as they arrive)

    def welcome(self) -> Welcome: ...

    def info(self, rid: int) -> WorkerInfo: ...

    async def answer(
        self, msg: ModelRequest, on_step: Callable[[Step], None] | None = None
    ) -> Message: ...


class Connection:
    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, service: Service
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.service = service
        self.limits = service.limits
        self.requests: dict[int, asyncio.Task[None]] = {}
        self.reasons: dict[int, str] = {}  # why a request task was cancelled
        self.outbox = Outbox(writer, self.limits, self._fell_behind)
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed or self.outbox.closed

    async def serve(self) -> None:
        """The handshake, then requests until the client goes or the worker stops."""
        try:
            if await self._handshake():
                await self._read_requests()
        except Exception:  # a bug; the connection goes, the worker stays
            log.exception("connection failed")
        finally:
            self.close()

    # -- frames out ---------------------------------------------------------------------

    def send_soon(self, msg: Message) -> None:
        """Queue a step event, unless the client is not keeping up (then it is skipped:
        the next step sent carries the spans' whole text)."""
        if not self.closed and self.outbox.takes_steps():
            self.outbox.step(pack(msg))

    def send(self, msg: Message) -> None:
        """Queue a reply. One that would take the queue past `max_queued` is dropped
        for a `slow_reader` error with its id (the client fell behind)."""
        if self.closed:
            return
        behind = self.outbox.behind  # then an error (a request stopped) is always queued
        if self.outbox.reply(pack(msg), small=behind and isinstance(msg, Error)):
            return
        if self.outbox.behind:  # this reply would have taken the queue past max_queued
            rid = getattr(msg, "id", None)
            self.outbox.reply(
                pack(Error(rid, SLOW_READER, f"{self._behind()}; a reply was dropped")),
                small=True,
            )

    def _behind(self) -> str:
        return (
            f"{STOPPED[SLOW_READER]}: more than {self.limits.max_queued} bytes waited "
            "for it (max_queued)"
        )

    def _fell_behind(self) -> None:
        """The client let more than `max_queued` bytes wait: stop its requests."""
        for rid in list(self.requests):
            self.cancel(rid, SLOW_READER)

    def cancel(self, rid: int, reason: str) -> None:
        task = self.requests.get(rid)
        if task is not None:
            self.reasons[rid] = reason
            task.cancel()

    def close(self) -> None:
        self._closed = True
        for task in list(self.requests.values()):
            task.cancel()
        self.outbox.close()

    async def finished(self) -> None:
        """Return once the request tasks of a closed connection have ended."""
        tasks = list(self.requests.values())
        if tasks:
            await asyncio.wait(tasks)

    # -- frames in ----------------------------------------------------------------------

    async def _handshake(self) -> bool:
        try:
            async with asyncio.timeout(self.limits.handshake_timeout):
                body = await read_frame(self.reader, self.limits.max_frame)
            if body is None:
                return False
            msg = decode_request(body)
        except TimeoutError:
            self.send(
                Error(None, UNAUTHORIZED, f"no hello within {self.limits.handshake_timeout:g} s")
            )
            return False
        except FrameTooLarge as exc:
            await self._refuse_frame(exc)
            return False
        except ProtocolError as exc:
            self.send(Error.of(exc.id, exc))
            return False
        except (ConnectionError, OSError):
            return False
        if not isinstance(msg, Hello):
            self.send(
                Error(
                    getattr(msg, "id", None),
                    UNAUTHORIZED,
                    f"the first frame must be hello, got {msg.TYPE}",
                )
            )
            return False
        token = self.service.token
        if token is not None and (
            msg.token is None or not hmac.compare_digest(msg.token.encode(), token.encode())
        ):
            self.send(Error(None, UNAUTHORIZED, "wrong or missing token"))
            return False
        self.send(self.service.welcome())
        return True

    async def _read_requests(self) -> None:
        while not self.closed:
            await self.outbox.caught_up()  # no new work while the client is behind
            if self.closed:
                return
            try:
                body = await read_frame(self.reader, self.limits.max_frame, self.limits.frame_idle)
            except FrameTooLarge as exc:  # the stream cannot be resynchronised
                await self._refuse_frame(exc)
                return
            except (ConnectionError, OSError):
                return
            if body is None:
                return
            try:
                msg = decode_request(body)
            except ProtocolError as exc:
                self.send(Error.of(exc.id, exc))
                continue
            await self._dispatch(msg)

    async def _refuse_frame(self, exc: FrameTooLarge) -> None:
        """Reply `too_large`, end the writing side (the client reads the reply, then the
        end), and read the rest of the refused frame away so that the close does not
        reset the connection while the client still sends it."""
        self.send(Error.of(None, exc))
        if self.writer.can_write_eof():
            with suppress(OSError, RuntimeError):
                self.writer.write_eof()
        await discard(self.reader, exc.size, self.limits.frame_idle)

    async def _dispatch(self, msg: Message) -> None:
        if isinstance(msg, InfoRequest):
            self.send(self.service.info(msg.id))
        elif isinstance(msg, Cancel):
            self.cancel(msg.id, CANCELLED)  # unknown ids: it may have just finished
        elif isinstance(msg, Hello):
            self.send(Error(None, BAD_REQUEST, "hello is only the first frame"))
        elif isinstance(msg, ModelRequest):
            refusal = self._refusal(msg.id)
            if refusal is not None:
                self.send(refusal)
            else:
                self.service.requests += 1
                self.requests[msg.id] = asyncio.create_task(self._request(msg))
        else:  # a reply type sent to the worker is refused by decode_request already
            self.send(Error(getattr(msg, "id", None), BAD_REQUEST, f"unexpected {msg.TYPE}"))

    def _refusal(self, rid: int) -> Error | None:
        """Why a new request cannot start now, or None."""
        if self.service.stopping:
            return Error(rid, SHUTTING_DOWN, "the worker is shutting down")
        if rid in self.requests:
            return Error(rid, BAD_REQUEST, f"request {rid} is already in flight on this connection")
        if len(self.requests) >= self.limits.max_requests:
            return Error(
                rid,
                TOO_LARGE,
                "too many requests in flight on this connection "
                f"(limit {self.limits.max_requests})",
            )
        return None

    # -- one request --------------------------------------------------------------------

    async def _request(self, msg: ModelRequest) -> None:
        limit = min(msg.deadline or self.limits.deadline, self.limits.max_deadline)
        reply: Message
        try:
            async with asyncio.timeout(limit):
                reply = await self.service.answer(msg, self.send_soon)
        except TimeoutError:
            reply = Error(
                msg.id, DEADLINE, f"the request did not finish within its deadline ({limit:g} s)"
            )
        except asyncio.CancelledError:
            if self.closed:
                raise  # nobody to tell
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            code = self.reasons.pop(msg.id, CANCELLED)
            reply = Error(msg.id, code, self._behind() if code == SLOW_READER else STOPPED[code])
        except InfillError as exc:
            reply = Error.of(msg.id, exc)
        except Exception as exc:  # a bug: say so, keep serving
            log.exception("request %s failed", msg.id)
            reply = Error(msg.id, INTERNAL, f"internal error: {type(exc).__name__}: {exc}")
        finally:
            self.requests.pop(msg.id, None)
        log.debug(
            "%s %d: %s",
            msg.TYPE,
            msg.id,
            f"error {reply.code}: {reply.message}" if isinstance(reply, Error) else "ok",
        )
        self.send(reply)
