"""Data-parallel training on one machine's cores: N worker processes, one model.

`model.training.train --workers N` starts N processes that draw their own windows and masks, run
forward and backward on their own batch, and average their gradients (gloo all-reduce,
one flat buffer per step) before every optimiser step. All workers start from the same
weights and apply the same averaged gradients, so their weights stay identical; worker 0
evaluates, exports and checkpoints, and `Group.check_in_sync` verifies at every
checkpoint that the others still agree.

Threads inside one process are the other way to use the cores. On an idle 2-core AMD
EPYC two threads did slightly better (2,474 tokens/s against 2,352 for two
single-thread workers, 1,348 for one thread: benchmarks/bench_parallel.py); workers are
for machines whose many cores one process's small matrix products cannot keep busy.

With one worker nothing here touches torch.distributed: a `Group` of one is the plain
single-process run, bit for bit.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

# Worker r > 0 offsets its seeds by r times this: far beyond any step or token count, so
# no worker's stream ever coincides with another's, in this run or a later one.
RANK_SEED_STRIDE = 10**12


def rank_seed(seed: int, rank: int) -> int:
    """The seed of worker `rank`'s windows and masks; worker 0 keeps `seed` unchanged."""
    return seed + rank * RANK_SEED_STRIDE


@dataclass(frozen=True)
class Group:
    """This process's place among the workers of one run."""

    rank: int = 0
    world: int = 1

    @property
    def leader(self) -> bool:
        """Whether this worker evaluates, exports, checkpoints and prints."""
        return self.rank == 0

    def average_gradients(self, model: torch.nn.Module) -> None:
        """Replace every gradient by its mean over the workers (one all-reduce)."""
        if self.world == 1:
            return
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        flat /= self.world
        offset = 0
        for g in grads:
            g.copy_(flat[offset : offset + g.numel()].view_as(g))
            offset += g.numel()

    def sum(self, values: list[float]) -> list[float]:
        """Each value summed over the workers (every worker gets the same sums)."""
        if self.world == 1:
            return list(values)
        t = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(t)
        return t.tolist()

    def check_in_sync(self, model: torch.nn.Module) -> None:
        """Raise if any worker's weights differ from worker 0's (a bug, never expected)."""
        if self.world == 1:
            return
        with torch.no_grad():
            mine = torch.stack([p.detach().double().sum() for p in model.parameters()])
        leader = mine.clone()
        dist.broadcast(leader, src=0)
        if not torch.equal(mine, leader):
            worst = (mine - leader).abs().max().item()
            raise RuntimeError(
                f"worker {self.rank}'s weights drifted from worker 0's "
                f"(largest difference of a parameter's sum: {worst:.3g})"
            )


def _worker(rank: int, world: int, store: str, fn: Callable[[Group], None]) -> None:
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    try:
        fn(Group(rank, world))
    finally:
        dist.destroy_process_group()


def launch(fn: Callable[[Group], None], workers: int) -> None:
    """Run `fn(group)` in `workers` processes (here, when there is one).

    `fn` must be picklable (a module-level function or a functools.partial of one). If a
    worker fails, the others are stopped and the failure is raised here."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if workers == 1:
        fn(Group())
        return
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory(prefix="train-workers-") as tmp:
        store = str(Path(tmp) / "rendezvous")
        mp.spawn(_worker, args=(workers, store, fn), nprocs=workers, join=True)


def return_big_buffers_to_the_os() -> None:
    """Serve allocations of 1 MiB and more by mmap, so that freeing them returns memory.

    Each step allocates logits of a different size (one row per loss position); glibc's
    heap then fragments and a CPU run grew to 5.8 GB resident on a 0.5 GB corpus. With
    this (what MALLOC_MMAP_THRESHOLD_=1048576 does) the same run stayed at 1.4 GB."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if sys.platform.startswith("linux") and name:
        m_mmap_threshold = -3
        ctypes.CDLL(name).mallopt(m_mmap_threshold, 1 << 20)
