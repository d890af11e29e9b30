"""Progress of a file's work on stderr, never on stdout (the diff).

On a terminal (or with `--progress`) a tqdm-like line is rewritten in place; elsewhere (a
log file, a pipe, a CI job) a plain line is written every few seconds once the work has
run `first` seconds, with the rate and the time left, so that a long run is visibly moving
and a short one writes nothing."""

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


class ProgressLog:
    """`a.py: scoring 120/2000 windows (6%), 8.1 windows/s, about 3 min 52 s left`, a line
    of its own once the work has run `first` seconds, then every `every` seconds. The
    rate counts from the first report (a model still loading does not lower it)."""

    def __init__(
        self,
        label: str,
        unit: str,
        stream: TextIO | None = None,
        first: float = 2.0,
        every: float = 5.0,
    ) -> None:
        self.label, self.unit, self.every = label, unit, every
        self.stream = stream or sys.stderr
        self._next = time.monotonic() + first
        self._origin: tuple[float, int] | None = None  # (time, done) of the first report

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if self._origin is None:
            self._origin = (now, done)
        if now < self._next or done >= total:
            return
        self._next = now + self.every
        since, done_then = self._origin
        line = f"{self.label} {done}/{total} {self.unit} ({100 * done // max(total, 1)}%)"
        if done > done_then and now > since:  # a rate (none yet at the first report)
            rate = (done - done_then) / (now - since)
            line += f", {rate:.1f} {self.unit}/s, about {_duration((total - done) / rate)} left"
        self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        pass


def _duration(seconds: float) -> str:
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


def wanted(flag: bool) -> bool:
    """The line rewritten in place: --progress, or stderr is a terminal."""
    return flag or sys.stderr.isatty()
