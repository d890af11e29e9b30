"""The bounds of repository context (`ContextSettings`), each a setting with a default."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path

SUFFIXES = {"python": (".py", ".pyi")}  # the files of a language that are indexed


@dataclass(frozen=True)
class ContextSettings:
    """What indexing a repository may cost, and what a fill is sent. Every field is a
    positive number; `ValueError` names one that is not."""

    max_files: int = 20_000  # files indexed at most (the first in path order)
    max_file_bytes: int = 1_000_000  # a larger file is skipped (generated data, bundles)
    max_bytes: int = 64_000_000  # bytes of source read in all
    max_windows: int = 400_000  # windows indexed at most
    max_seconds: float = 10.0  # indexing stops here, with what it has
    git_seconds: float = 5.0  # `git ls-files` may take this long, else the tree is walked
    window_lines: int = 20  # lines of a window (RepoCoder's size)
    stride_lines: int = 10  # lines between the starts of two windows
    per_hole: int = 8  # windows retrieved for each hole
    max_snippets: int = 16  # windows sent with one fill at most
    query_before: int = 10  # lines before a hole that make its query
    query_after: int = 5  # and lines after it

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ValueError(f"context setting {f.name} must be a positive number: {value!r}")
        if self.stride_lines > self.window_lines:
            raise ValueError("context setting stride_lines must be at most window_lines")


def cache_dir() -> Path:
    """Where indexes are cached: $XDG_CACHE_HOME/infill, else ~/.cache/infill."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "infill"
