"""How many CPU threads a pass computes with: all it was given while they all run, fewer
while another process holds a core.

torch splits each product of a pass over its threads and waits for the last one at the
end of every parallel region. When another CPU-bound process holds one of the cores, the
thread on it runs only when the scheduler lets it, and every region of the pass waits for
it: on a 2-core Xeon with AMX, a pass over a completion's 16 rows took 8 ms on two threads
when idle, 18 ms beside one busy process, and 10 ms on one thread beside it (a full pass
over 256 tokens: 17, 42 and 28 ms). The choice cannot be made once: the same machine is
idle one minute and compiling the next.

A pass tells which it was. Two readings of the process, around the pass: the CPU time its
threads got against the wall time (near the thread count when each ran, near one thread
less when one did not), and the times the scheduler took a core from them (involuntary
context switches: 0-3 a pass when idle, tens beside a busy process). A pass is *crowded*
when both say so (`CROWDED_SWITCHES` or more switches, and at least half a thread's time
missing); two crowded passes in a row and the next pass runs on one thread fewer. From
there, after `PROBE_SECONDS`, one pass tries one thread more: not crowded, it stays; crowded,
it goes back and the next try waits twice as long (at most `PROBE_MOST_SECONDS`).

Passes shorter than `SHORTEST_SECONDS` are not read (a core taken for one time slice
decides them). Where the platform has no involuntary switch count (no `resource` module),
or one thread was asked for, the thread count is left as it is.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

try:
    import resource  # Unix: involuntary context switches
except ImportError:  # pragma: no cover - Windows
    resource = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

T = TypeVar("T")

CROWDED_SWITCHES = 4  # involuntary context switches in a pass, at least, to be crowded
MISSING_THREAD = 0.5  # threads' worth of CPU time missing from a pass, at least
CROWDED_IN_A_ROW = 2  # crowded passes before a thread is dropped
SHORTEST_SECONDS = 0.002  # passes shorter than this are not read
PROBE_SECONDS = 1.0  # after a thread is dropped, the first try of one more
# the longest wait between tries while they fail: a failed try costs one pass on a taken
# core (tens of ms) this often, and after the other process ends the threads come back
# within it (a burst of work in the language server must not leave one thread for long)
PROBE_MOST_SECONDS = 8.0


@dataclass(frozen=True)
class Reading:
    """What the process had during one pass."""

    wall: float  # seconds
    cpu: float  # seconds of CPU time of all its threads
    switches: int  # involuntary context switches (the scheduler took a core)


def read_process() -> tuple[float, float, int] | None:
    """(wall clock, process CPU time, involuntary switches) now; None where the platform
    counts no involuntary switches."""
    if resource is None:
        return None
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return time.perf_counter(), time.process_time(), usage.ru_nivcsw


@dataclass
class ThreadGovernor:
    """The thread count of the next pass (`threads`), from `most` (what was asked for), and
    `run`, which runs a pass on it and reads the pass. `set_threads` applies a count
    (torch.set_num_threads); `read` and `clock` are the readings (`read_process`,
    time.monotonic), given by tests."""

    most: int
    set_threads: Callable[[int], None]
    read: Callable[[], tuple[float, float, int] | None] = read_process
    clock: Callable[[], float] = time.monotonic
    threads: int = field(init=False)
    crowded_in_a_row: int = field(default=0, init=False)
    probe_wait: float = field(default=PROBE_SECONDS, init=False)
    next_probe: float | None = field(default=None, init=False)  # None: nothing to try
    probing: bool = field(default=False, init=False)  # this pass tries one thread more

    def __post_init__(self) -> None:
        self.threads = self.most

    @property
    def active(self) -> bool:
        return self.most > 1

    def run(self, work: Callable[[], T]) -> T:
        """`work()` (one pass) on the governed thread count; the pass read after."""
        if not self.active:
            return work()
        self._before()
        start = self.read()
        result = work()
        end = self.read()
        if start is not None and end is not None:
            self.observe(Reading(end[0] - start[0], end[1] - start[1], end[2] - start[2]))
        return result

    def crowded(self, r: Reading) -> bool:
        """Whether another process held one of the pass's cores."""
        missing = self.threads - r.cpu / r.wall
        return r.switches >= CROWDED_SWITCHES and missing >= MISSING_THREAD

    def observe(self, r: Reading) -> None:
        """Take one pass's reading: drop a thread after `CROWDED_IN_A_ROW` crowded passes,
        keep or give back a thread tried."""
        if r.wall < SHORTEST_SECONDS or self.threads < 2:
            return  # too short to tell (a tried thread waits for a pass that tells)
        crowded = self.crowded(r)
        if self.probing:
            self.probing = False
            if crowded:
                self.probe_wait = min(2 * self.probe_wait, PROBE_MOST_SECONDS)
                self._apply(self.threads - 1, r, "still crowded")
            else:
                self.probe_wait = PROBE_SECONDS
                self.next_probe = None if self.threads >= self.most else self.clock()
                log.info("%d CPU threads: the cores are free again", self.threads)
            return
        self.crowded_in_a_row = self.crowded_in_a_row + 1 if crowded else 0
        if self.crowded_in_a_row >= CROWDED_IN_A_ROW:
            self._apply(self.threads - 1, r, "another process holds a core")

    def _before(self) -> None:
        """Try one thread more where it is time to."""
        if self.next_probe is None or self.threads >= self.most:
            return
        if self.clock() - self.next_probe >= self.probe_wait:
            self.probing = True
            self.crowded_in_a_row = 0
            self.threads += 1
            self.set_threads(self.threads)

    def _apply(self, threads: int, r: Reading, why: str) -> None:
        self.crowded_in_a_row = 0
        self.threads = max(1, threads)
        self.set_threads(self.threads)
        self.next_probe = self.clock()
        log.info(
            "%d CPU threads: %s (%.2f threads' CPU time, %d preemptions in a %.1f ms pass)",
            self.threads,
            why,
            r.cpu / r.wall,
            r.switches,
            r.wall * 1000,
        )
