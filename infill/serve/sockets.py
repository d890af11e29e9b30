"""Where a worker listens: addresses, the per-user socket directory, the socket file.

Addresses are strings: `unix:/path/worker.sock` (or a bare path) and `tcp:HOST:PORT`
(`tcp:[::1]:7777` for IPv6). The default is a Unix socket in a directory only its user
may enter (`$XDG_RUNTIME_DIR/infill`, or `/tmp/infill-<uid>`); the socket file itself is
0600 (docs/PROTOCOL.md, "Transport").
"""

from __future__ import annotations

import os
import socket
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal


class WorkerSetupError(Exception):
    """The worker cannot start: the address is in use or unsafe, TCP without a token.
    (A startup failure, reported by the `infill-worker` command; not a request error.)"""


@dataclass(frozen=True)
class Address:
    kind: Literal["unix", "tcp"]
    path: str = ""  # unix
    host: str = ""  # tcp
    port: int = 0  # tcp (0: any free port, when listening)

    def __str__(self) -> str:
        if self.kind == "unix":
            return f"unix:{self.path}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"tcp:{host}:{self.port}"


def parse_address(text: str) -> Address:
    """`unix:PATH`, a bare path, or `tcp:HOST:PORT`; ValueError when malformed."""
    if text.startswith("tcp:"):
        host, sep, port = text[4:].rpartition(":")
        host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError(f"bad TCP address {text!r}; expected tcp:HOST:PORT")
        return Address("tcp", host=host, port=int(port))
    path = text[5:] if text.startswith("unix:") else text
    if not path:
        raise ValueError(f"bad address {text!r}; expected unix:PATH or tcp:HOST:PORT")
    return Address("unix", path=path)


def default_socket_dir() -> Path:
    """`$XDG_RUNTIME_DIR/infill`, or `/tmp/infill-<uid>`; the worker makes it 0700."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime):
        return Path(runtime) / "infill"
    return Path(f"/tmp/infill-{os.getuid()}")


def default_socket_path() -> Path:
    return default_socket_dir() / "worker.sock"


def bind_unix(path: Path) -> socket.socket:
    """A Unix socket bound at `path` with mode 0600; a stale socket file is replaced.

    The parent directory is created 0700 when missing; the default directory must be the
    user's own and not open to others (so nobody can plant a socket there)."""
    parent = path.parent
    if not parent.exists():
        parent.mkdir(mode=0o700, parents=True)
    if parent == default_socket_dir():
        st = parent.stat()
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise WorkerSetupError(f"{parent} must belong to you and have mode 0700")
    if path.is_symlink() or path.exists():
        if not stat.S_ISSOCK(path.lstat().st_mode):
            raise WorkerSetupError(f"{path} exists and is not a socket")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(1.0)
            try:
                probe.connect(str(path))
            except (ConnectionRefusedError, FileNotFoundError):
                path.unlink(missing_ok=True)  # stale: its worker is gone
            else:
                raise WorkerSetupError(f"a worker is already listening on {path}")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)  # the file is created 0600, never briefly wider
    try:
        sock.bind(str(path))
    except OSError as exc:
        sock.close()
        raise WorkerSetupError(f"cannot listen on {path}: {exc.strerror or exc}") from exc
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    return sock
