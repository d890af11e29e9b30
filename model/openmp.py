"""How long torch's OpenMP threads spin before they sleep: set before torch loads.

torch's CPU kernels run on libgomp threads, which by default busy-wait at the end of
every parallel region for a long while before they yield the core. With two threads on a
2-core machine whose other core is busy (a build, a training run, the editor), each region
then waits for a thread that is not running: one forward pass of the shipped model over
256 tokens took ~1,975 ms instead of ~50 (2-core EPYC, bf16, one core held by
a training run). A short spin keeps the idle speed and gives the core back under load
(same pass, p50 of 15, two runs each):

| GOMP_SPINCOUNT | idle | other core busy |
|---|---|---|
| libgomp's default | 46-57 ms | 1,944-2,008 ms |
| **3000** | **44-52 ms** | **126-127 ms** |
| 10000 | 43-50 ms | 209-212 ms |
| OMP_WAIT_POLICY=PASSIVE (never spin) | 63-67 ms | 86-95 ms |
| one thread | 84 ms | 85 ms |

The main job, `infill fill examples/holes.py` (bf16, 2 threads), took 96 s with libgomp's
default beside a one-thread training run and 6.6 s with the short spin; on the idle machine
3.4 s either way.

libgomp reads its settings once, when it is loaded (the first `import torch`), so the
`model` package applies this on import, before any of its modules imports torch. A user's
own GOMP_SPINCOUNT or OMP_WAIT_POLICY is left alone.

The processes that serve fills (the worker, the `infill` command) spin longer,
`SERVING_SPINCOUNT`: their passes run their products back to back with a little Python
between them, and a thread that has gone to sleep in between must be woken for the next
product. On a 2-core Xeon with AMX (bf16, idle), a pass over a completion's 16 rows took
8.3 ms at 3000 and 6.0-6.3 at 10,000 (6.1-6.5 at 30,000 and 100,000), a pass over 256 tokens
19.3 and 17.6 ms. The cost of the longer spin beside a busy process is taken off by their
passes running on fewer threads there (model/threads.py), which other torch work (training,
the tests) does not have: it keeps the short spin. Their entry points call
`serving_spin` before torch loads; a value of this module's is replaced, a user's kept.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping

SPINCOUNT = "3000"  # spins before a waiting OpenMP thread sleeps (libgomp: 300,000)
SERVING_SPINCOUNT = "10000"  # in the worker and the command, whose passes are governed
OURS = frozenset({SPINCOUNT, SERVING_SPINCOUNT})  # values this module may replace


def settle_spin(environ: MutableMapping[str, str] = os.environ, spin: str = SPINCOUNT) -> None:
    """Set GOMP_SPINCOUNT to `spin` unless the user chose a spin (a value not in OURS) or
    a wait policy."""
    if "OMP_WAIT_POLICY" in environ or environ.get("GOMP_SPINCOUNT", spin) not in OURS:
        return
    environ["GOMP_SPINCOUNT"] = spin


def serving_spin(environ: MutableMapping[str, str] = os.environ) -> None:
    """The spin of a process that serves fills (`SERVING_SPINCOUNT`), where torch has not
    loaded yet (libgomp has read its settings then) and the user chose none."""
    if "torch" not in sys.modules:
        settle_spin(environ, SERVING_SPINCOUNT)
