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
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

SPINCOUNT = "3000"  # spins before a waiting OpenMP thread sleeps (libgomp: 300,000)


def settle_spin(environ: MutableMapping[str, str] = os.environ) -> None:
    """Set GOMP_SPINCOUNT to SPINCOUNT unless the user chose a spin or wait policy."""
    if "GOMP_SPINCOUNT" not in environ and "OMP_WAIT_POLICY" not in environ:
        environ["GOMP_SPINCOUNT"] = SPINCOUNT
