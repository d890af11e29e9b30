"""A progress line on stderr, tqdm-like: shown when stderr is a terminal or with
`--progress`, so that a long file's work is visibly moving; never on stdout (the diff)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressLine:
    """`a.py: scoring  120/2000 windows   6%  12.3 s`, rewritten in place (carriage
    return) at most every `every` seconds and on the last unit; `close()` ends the line."""

    def __init__(
        self, label: str, unit: str, stream: TextIO | None = None, every: float = 0.2
    ) -> None:
        self.label, self.unit, self.every = label, unit, every
        self.stream = stream or sys.stderr
        self._start = self._last = time.monotonic()
        self._shown = False

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self._last < self.every and done < total:
            return
        self._last = now
        pct = 100 * done // max(total, 1)
        self.stream.write(
            f"\r{self.label} {done}/{total} {self.unit} {pct:3d}% {now - self._start:.1f} s"
        )
        self.stream.flush()
        self._shown = True

    def close(self) -> None:
        if self._shown:
            self.stream.write("\n")
            self.stream.flush()
            self._shown = False


def wanted(flag: bool) -> bool:
    """--progress, or stderr is a terminal."""
    return flag or sys.stderr.isatty()
