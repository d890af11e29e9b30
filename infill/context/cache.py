"""The on-disk cache of a repository's index: each file's block tokens by content hash.

One JSON file per repository root under the user's cache directory
(`settings.cache_dir()`/repo-index/<hash of the root>.json), written atomically (a
temporary file renamed over it). A file whose content hash is known is not tokenized
again; the repository itself is never written. A cache that cannot be read (corrupt,
another version) counts as empty; one that cannot be written is left as it was.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path

VERSION = 1


def content_hash(text: str) -> str:
    """The key of a file's tokens: a hash of its text."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def cache_path(folder: Path, root: Path, window_lines: int, stride_lines: int) -> Path:
    """The cache file of the repository at `root`, windows of this shape."""
    key = hashlib.blake2b(
        f"{root}\0{window_lines}\0{stride_lines}".encode("utf-8", "surrogateescape"),
        digest_size=12,
    ).hexdigest()
    return folder / "repo-index" / f"{key}.json"


def load(path: Path) -> dict[str, list[str]]:
    """Content hash -> block tokens, or nothing where the cache is absent or unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != VERSION:
        return {}
    blocks = data.get("blocks")
    return blocks if isinstance(blocks, dict) else {}


def save(path: Path, blocks: dict[str, list[str]]) -> str | None:
    """Write the cache; None, or why it could not be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".index-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"version": VERSION, "blocks": blocks}, fh, separators=(",", ":"))
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(NameError, OSError):
            os.unlink(tmp)
        return f"{type(exc).__name__}: {exc.strerror or exc}"
    return None
