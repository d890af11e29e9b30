"""The worker's limits: what one request, and one connection, may ask of it. Each field
has its help text, from which the `infill-worker` command makes a flag
(infill/serve/worker_parser.py); `worker_info` reports them (docs/PROTOCOL.md, "Limits")."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any


def _limit(default: float, help: str) -> Any:
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class Limits:
    """What one request (and one connection) may ask of the worker."""

    max_frame: int = _limit(4 * 1024 * 1024, "bytes in one incoming frame")
    max_text: int = _limit(2_000_000, "characters in a request's text")
    max_spans: int = _limit(64, "spans (holes) in one fill, fixes in one fix")
    max_span_tokens: int = _limit(1024, "highest max_span_tokens option accepted")
    max_steps: int = _limit(4096, "denoising steps per canvas (the cap when none is asked)")
    max_requests: int = _limit(16, "requests in flight per connection")
    max_batch: int = _limit(32, "canvases in one batched forward pass")
    deadline: float = _limit(30.0, "seconds a request may take when it names no deadline")
    max_deadline: float = _limit(300.0, "the longest deadline a request may ask for")
    handshake_timeout: float = _limit(10.0, "seconds a new connection has to say hello")
    grace: float = _limit(5.0, "seconds requests in flight get to finish at shutdown")
    frame_idle: float = _limit(
        10.0, "seconds without a byte inside a begun frame before the connection is closed"
    )
    max_queued: int = _limit(
        8 * 1024 * 1024,
        "bytes of replies waiting for a client that does not read them; past it its "
        "requests are cancelled (slow_reader)",
    )
    send_grace: float = _limit(
        10.0, "seconds a client past max_queued has to read before its connection is closed"
    )

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ValueError(f"limit {f.name} must be a positive number, got {value!r}")
