"""The engine's error types: one base class, `InfillError`, whose message is user-facing.

Callers at a boundary (the CLI, the worker, the language server) catch `InfillError` and
show its message as it is; anything else escaping the engine is a bug.
"""

from __future__ import annotations


class InfillError(Exception):
    """Bad input to the engine. The message names what is wrong and where (line:col)."""


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


class DenoiserError(InfillError):
    """The denoiser broke its contract (e.g. returned logits of the wrong shape)."""


def line_col(text: str, offset: int) -> str:
    """`line:col` (both 1-based, col in characters) of a character offset, for messages."""
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return f"{line}:{col}"
