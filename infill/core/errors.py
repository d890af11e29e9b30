"""The one error type of the engine and of what is built on it: `InfillError`.

Every failure a user may see is an `InfillError` whose `code` says what kind it is and
whose message, for people, names what is wrong and where (line:col). The code travels
unchanged across each boundary, mapped once there: a worker answers a failed request with
an `error` reply of that code (infill.serve.protocol), its client raises it again on the
other side, and the language server turns it into an LSP error (a warning for `input`,
an error otherwise). Anything else escaping the engine is a bug.

Codes the engine raises are defined here; the serving layer adds its own
(infill.serve.protocol.CODES, and the client's `unavailable` and `timeout`).
"""

from __future__ import annotations

INPUT = "input"  # the request's text, spans, markers or options cannot be used
TOO_LARGE = "too_large"  # the request asks for more than a limit allows
MODEL = "model"  # the network failed or broke its contract


class InfillError(Exception):
    """A failure with a `code` (a class default, or given) and a message for people."""

    code: str = INPUT

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class InputError(InfillError):
    """The text itself cannot be used: binary (NUL bytes), not valid Unicode, unreadable."""


class MarkerError(InfillError):
    """A malformed hole marker, e.g. `<mask:>`, `<mask:0>`, `<mask:x>`, `<mask:12`."""


class NoHolesError(InfillError):
    """The request has nothing to fill: no hole markers, or an empty span list."""


class SpanError(InfillError):
    """An explicit span is out of range or overlaps another, or its length is not allowed."""


class OptionError(InfillError):
    """An option is out of range, unknown, or illegal in combination with another."""


class WindowError(InfillError):
    """The spans cannot be placed in a canvas of at most `max_length` tokens."""


class LimitError(InfillError):
    """The request is over a limit of whoever serves it (text size, spans, steps)."""

    code = TOO_LARGE


class DenoiserError(InfillError):
    """The denoiser failed (a forward pass raised) or broke its contract (e.g. returned
    logits of the wrong shape)."""

    code = MODEL


def line_col(text: str, offset: int) -> str:
    """`line:col` (both 1-based, col in characters) of a character offset, for messages."""
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return f"{line}:{col}"
