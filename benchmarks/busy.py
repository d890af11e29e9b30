"""CPU-bound processes beside a benchmark: a machine that is not idle (a build or a test
run beside the editor), for `benchmarks.bench_lsp --busy N`."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator

# a process that holds a core until it is stopped
BUSY = "while True:\n    pass\n"


@contextlib.contextmanager
def busy_processes(n: int) -> Iterator[list[subprocess.Popen]]:
    """`n` CPU-bound processes running until the block ends (stopped and reaped then)."""
    procs = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(n)]
    try:
        yield procs
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()
