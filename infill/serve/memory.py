"""Handing the memory that a connection's work freed back to the system.

CPython and torch free their buffers with the C library's `free`, and glibc keeps freed
heap memory for later instead of returning it: after a burst of concurrent fills the
worker's resident size stayed at its peak (twice its idle size) long after the client had
gone. `malloc_trim(0)` returns the free pages of every arena. It runs on the model thread,
between forward passes, once a connection closes. Elsewhere (another C library) it is a
no-op.
"""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Callable
from concurrent.futures import Executor
from contextlib import suppress

log = logging.getLogger("infill.serve.worker")


def _malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL(None).malloc_trim  # type: ignore[no-any-return]
    except (OSError, AttributeError):  # not glibc
        return None


_TRIM = _malloc_trim()


def release_freed_memory() -> bool:
    """Return the C heap's free pages to the system; False where that is not available."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True


def release_soon(executor: Executor) -> None:
    """`release_freed_memory` on `executor` (the model thread), after the work queued
    there; nothing when it is shut down."""
    with suppress(RuntimeError):
        executor.submit(release_freed_memory)
