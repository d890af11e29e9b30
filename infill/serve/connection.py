"""One client connection to the worker: the handshake, frames in, requests in flight,
replies out.

Requests on one connection run concurrently (up to `max_requests`), each as a task with
its deadline; `cancel` and a closed connection cancel them between denoising steps. Every
request ends with exactly one reply: its result, or an `error` whose code is the failure's
(the InfillError's own code; `deadline`, `cancelled`, `shutting_down`; `internal` for a
bug, which is logged).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import Callable
from typing import Protocol

from diffusion_infill.infill.core.errors import InfillError
from diffusion_infill.infill.serve.frames import read_frame
from diffusion_infill.infill.serve.protocol import (
    BAD_REQUEST,
    CANCELLED,
    DEADLINE,
    INTERNAL,
    SHUTTING_DOWN,
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
        self.closed = False
        self._lock = asyncio.Lock()

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
        """Queue a frame without waiting for the socket (step events)."""
        if not self.closed:
            self.writer.write(pack(msg))

    async def send(self, msg: Message) -> None:
        if self.closed:
            return
        async with self._lock:  # one drain at a time
            try:
                self.writer.write(pack(msg))
                await self.writer.drain()
            except (ConnectionError, OSError):  # the client is gone: nobody to tell
                self.closed = True

    def cancel(self, rid: int, reason: str) -> None:
        task = self.requests.get(rid)
        if task is not None:
            self.reasons[rid] = reason
            task.cancel()

    def close(self) -> None:
        self.closed = True
        for task in list(self.requests.values()):
            task.cancel()
        self.writer.close()

    # -- frames in ----------------------------------------------------------------------

    async def _handshake(self) -> bool:
        try:
            async with asyncio.timeout(self.limits.handshake_timeout):
                body = await read_frame(self.reader, self.limits.max_frame)
            if body is None:
                return False
            msg = decode_request(body)
        except TimeoutError:
            await self.send(
                Error(None, UNAUTHORIZED, f"no hello within {self.limits.handshake_timeout:g} s")
            )
            return False
        except ProtocolError as exc:
            await self.send(Error.of(exc.id, exc))
            return False
        except (ConnectionError, OSError):
            return False
        if not isinstance(msg, Hello):
            await self.send(
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
            await self.send(Error(None, UNAUTHORIZED, "wrong or missing token"))
            return False
        await self.send(self.service.welcome())
        return True

    async def _read_requests(self) -> None:
        while not self.closed:
            try:
                body = await read_frame(self.reader, self.limits.max_frame, self.limits.frame_idle)
            except ProtocolError as exc:  # too large: the stream cannot be resynchronised
                await self.send(Error.of(None, exc))
                return
            except (ConnectionError, OSError):
                return
            if body is None:
                return
            try:
                msg = decode_request(body)
            except ProtocolError as exc:
                await self.send(Error.of(exc.id, exc))
                continue
            await self._dispatch(msg)

    async def _dispatch(self, msg: Message) -> None:
        if isinstance(msg, InfoRequest):
            await self.send(self.service.info(msg.id))
        elif isinstance(msg, Cancel):
            self.cancel(msg.id, CANCELLED)  # unknown ids: it may have just finished
        elif isinstance(msg, Hello):
            await self.send(Error(None, BAD_REQUEST, "hello is only the first frame"))
        elif isinstance(msg, ModelRequest):
            refusal = self._refusal(msg.id)
            if refusal is not None:
                await self.send(refusal)
            else:
                self.service.requests += 1
                self.requests[msg.id] = asyncio.create_task(self._request(msg))
        else:  # a reply type sent to the worker is refused by decode_request already
            await self.send(Error(getattr(msg, "id", None), BAD_REQUEST, f"unexpected {msg.TYPE}"))

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
            reply = Error(
                msg.id,
                code,
                "cancelled by the client" if code == CANCELLED else "the worker is shutting down",
            )
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
        await self.send(reply)
