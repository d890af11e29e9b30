"""The files the `infill` command reads and writes: exact text in the file's own encoding,
atomic writes, line ranges, the language."""

from __future__ import annotations

import argparse
import codecs
import contextlib
import io
import os
import stat
import tempfile
import tokenize
from dataclasses import dataclass
from pathlib import Path

from infill.core.engine import PYTHON
from infill.core.errors import InputError

PYTHON_SUFFIXES = {".py", ".pyi", ".pyw"}
_UTF8 = {"utf-8", "utf-8-sig"}  # read as UTF-8 (a BOM stays in the text, as written)


@dataclass(frozen=True)
class Source:
    """A file's text, exactly (no newline translation), and the encoding to write it in."""

    text: str
    encoding: str = "utf-8"


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _declared_encoding(data: bytes) -> str:
    """The PEP 263 encoding of the first two lines (a coding cookie or a BOM), normalised;
    "utf-8" when none is declared or the lines are not decodable (decoding reports it)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        if "unknown encoding" in str(exc):
            raise InputError(str(exc).split(" for ")[0]) from None
        return "utf-8"
    return codecs.lookup(encoding).name


def read_source(path: Path) -> Source:
    """The file's text in its declared encoding; InputError when unusable. Only regular
    files are read: a FIFO, socket or device is refused before it is opened (opening a FIFO
    that nobody writes to would block forever)."""
    try:
        mode = path.stat().st_mode
        if stat.S_ISDIR(mode):
            raise InputError("is a directory")
        if not stat.S_ISREG(mode):
            raise InputError(f"{_kind(mode)}, not a regular file")
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError("no such file") from None
    except PermissionError:
        raise InputError("permission denied") from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}") from None
    if b"\x00" in data:
        raise InputError("binary file (contains NUL bytes)")
    encoding = _declared_encoding(data)
    try:
        if encoding in _UTF8:
            return Source(data.decode("utf-8"))
        return Source(data.decode(encoding), encoding)
    except UnicodeDecodeError as exc:
        name = "UTF-8" if encoding in _UTF8 else f"{encoding} (its declared encoding)"
        raise InputError(f"not valid {name} (byte {exc.start})") from None


def encode(text: str, encoding: str) -> bytes:
    """`text` in `encoding`; InputError naming the first character it cannot hold."""
    try:
        return text.encode(encoding)
    except UnicodeEncodeError as exc:
        raise InputError(
            f"the result has {exc.object[exc.start]!r}, which {encoding} (the file's declared "
            "encoding) cannot hold; the file is unchanged") from None


def write_atomic(path: Path, data: bytes) -> None:
    """Replace the file's contents with `data` so that it is either the old or the new
    bytes, never in between: a temporary file in the same directory (same file system),
    flushed and fsynced, with the original's mode, renamed over the original. On any
    failure (or an interrupt) the temporary file is removed and the original is untouched.
    A symbolic link is followed: the file it points to is replaced, the link stays."""
    target = Path(os.path.realpath(path))
    st = target.stat()
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.",
                               suffix=".infill-tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
            os.fchmod(fh.fileno(), stat.S_IMODE(st.st_mode))
            with contextlib.suppress(OSError):  # keep the owner where we may (root)
                os.fchown(fh.fileno(), st.st_uid, st.st_gid)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # the rename itself, durable
        dir_fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


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
