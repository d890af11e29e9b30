"""The files the `infill` command reads: exact text, line ranges, the language."""

from __future__ import annotations

import argparse
from pathlib import Path

from infill.core.engine import PYTHON
from infill.core.errors import InputError

PYTHON_SUFFIXES = {".py", ".pyi", ".pyw"}


def read_text(path: Path) -> str:
    """The file's text, exactly (no newline translation); InputError when unusable."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError("no such file") from None
    except IsADirectoryError:
        raise InputError("is a directory") from None
    except PermissionError:
        raise InputError("permission denied") from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}") from None
    if b"\x00" in data:
        raise InputError("binary file (contains NUL bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not valid UTF-8 (byte {exc.start})") from None


def line_range(text: str, first: int, last: int) -> tuple[int, int]:
    """Character range of lines first..last (1-based, inclusive); InputError if past the end."""
    starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]
    if text.endswith("\n"):
        starts.pop()
    if last > len(starts):
        raise InputError(f"--lines {first}:{last}: the file has {len(starts)} lines")
    return starts[first - 1], starts[last] if last < len(starts) else len(text)


def language_for(args: argparse.Namespace, path: str) -> str | None:
    """`--language`, else "python" for Python suffixes, else None (line windows)."""
    if args.language is not None:
        return args.language
    return PYTHON if Path(path).suffix in PYTHON_SUFFIXES else None
