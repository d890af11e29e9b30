"""The files the `infill` command reads and writes: exact text in the file's own encoding,
atomic writes, line ranges, the language."""

from __future__ import annotations

import argparse
import codecs
import contextlib
import io
import os
import stat
import struct
import sys
import tempfile
import tokenize
from dataclasses import dataclass
from pathlib import Path

from diffusion_infill.infill.core.engine import PYTHON
from diffusion_infill.infill.core.errors import InputError

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
            "encoding) cannot hold; the file is unchanged"
        ) from None


# Linux's file attributes (`chattr`; linux/fs.h): FS_IOC_GETFLAGS, _IOR('f', 1, long).
_FS_IOC_GETFLAGS = (2 << 30) | (struct.calcsize("l") << 16) | (ord("f") << 8) | 1
_FS_IMMUTABLE_FL, _FS_APPEND_FL = 0x10, 0x20


def _attribute(path: Path, st: os.stat_result) -> str | None:
    """ "immutable" or "append-only" when the file has that attribute (Linux `chattr +i`
    / `+a`; `chflags uchg` / `uappnd` and their system twins on BSD and macOS), else None,
    also where it cannot be told (then the write itself fails, and says so)."""
    flags = getattr(st, "st_flags", None)
    if flags is None:
        if not sys.platform.startswith("linux"):
            return None
        import fcntl

        buf = bytearray(8)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            return None
        try:
            fcntl.ioctl(fd, _FS_IOC_GETFLAGS, buf)
        except OSError:  # a file system without attributes
            return None
        finally:
            os.close(fd)
        flags = int.from_bytes(buf[:4], sys.byteorder)
        immutable, append = flags & _FS_IMMUTABLE_FL, flags & _FS_APPEND_FL
    else:
        immutable = flags & (stat.UF_IMMUTABLE | stat.SF_IMMUTABLE)
        append = flags & (stat.UF_APPEND | stat.SF_APPEND)
    return "immutable" if immutable else "append-only" if append else None


def _can_write(path: Path, mode: int) -> bool:
    """The owner's write bit is set and this process may write `path`. The bit is asked
    for even of root, whom the system lets write anything: a file (or directory) whose
    owner cannot write it was made read-only on purpose."""
    how = {"effective_ids": True} if os.access in os.supports_effective_ids else {}
    return bool(mode & stat.S_IWUSR) and os.access(path, os.W_OK, **how)


def check_writable(path: Path, *, force: bool = False) -> None:
    """InputError (the file is unchanged) when an in-place write must leave the file
    alone: it is immutable or append-only, on a read-only file system, read-only by its
    permission bits (unless `force`, and then only for its owner or root: a new file is
    renamed over it, which its permission bits do not forbid), or its directory is
    read-only (the new text is written beside the file, then renamed over it). A symbolic
    link is followed, as write_atomic does. A file that cannot be stat'ed passes: the
    write reports it."""
    target = Path(os.path.realpath(path))
    try:
        st = target.stat()
        folder = target.parent.stat()
        read_only_fs = bool(os.statvfs(target).f_flag & os.ST_RDONLY)
    except OSError:
        return
    attribute = _attribute(target, st)
    if attribute is not None:
        raise InputError(
            f"{attribute}: the system refuses to replace it, even for root and "
            "with --force; the file is unchanged"
        )
    if read_only_fs:
        raise InputError("on a read-only file system; the file is unchanged")
    mode = stat.S_IMODE(st.st_mode)
    if not _can_write(target, mode):
        mine = os.geteuid() in (0, st.st_uid)
        if not force:
            raise InputError(
                f"{_not_writable(mode, st.st_uid)}; the file is unchanged"
                + (" (--force writes it anyway)" if mine else "")
            )
        if not mine:
            raise InputError(
                f"{_not_writable(mode, st.st_uid)}; the file is unchanged "
                "(--force writes only your own files)"
            )
    folder_mode = stat.S_IMODE(folder.st_mode)
    if not _can_write(target.parent, folder_mode):
        raise InputError(
            f"its directory {target.parent} is "
            f"{_not_writable(folder_mode, folder.st_uid)}: the new text cannot "
            "be written beside the file; the file is unchanged"
        )


def _not_writable(mode: int, owner: int) -> str:
    """Why a file (or directory) that _can_write refused cannot be written, in words."""
    why = "read-only" if not mode & stat.S_IWUSR else "not writable by you"
    mine = os.geteuid() in (0, owner)
    return f"{why} (mode {mode:04o}" + ("" if mine else f", owner uid {owner}") + ")"


def write_atomic(path: Path, data: bytes, *, force: bool = False) -> None:
    """Replace the file's contents with `data` so that it is either the old or the new
    bytes, never in between: a temporary file in the same directory (same file system),
    flushed and fsynced, with the original's mode, renamed over the original. On any
    failure (or an interrupt) the temporary file is removed and the original is untouched.
    A symbolic link is followed: the file it points to is replaced, the link stays. A file
    check_writable refuses (a read-only one, without `force`) is not written: InputError."""
    check_writable(path, force=force)
    target = Path(os.path.realpath(path))
    st = target.stat()
    try:
        fd, tmp = tempfile.mkstemp(
            dir=target.parent, prefix=f".{target.name}.", suffix=".infill-tmp"
        )
    except PermissionError as exc:
        raise InputError(
            f"cannot create a file in its directory {target.parent} "
            f"({exc.strerror}); the file is unchanged"
        ) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
            os.fchmod(fh.fileno(), stat.S_IMODE(st.st_mode))
            with contextlib.suppress(OSError):  # keep the owner where we may (root)
                os.fchown(fh.fileno(), st.st_uid, st.st_gid)
        try:
            os.replace(tmp, target)
        except PermissionError as exc:  # immutable, append-only, a sticky directory's
            raise InputError(
                f"cannot replace it ({exc.strerror}: immutable, append-only, "
                "or another user's file in a sticky directory); the file is "
                "unchanged"
            ) from None
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
