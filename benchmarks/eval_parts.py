"""The measures of benchmarks.eval_model (its `--parts`), and running them in several
processes side by side (`--jobs`): the parts shared out by the time each takes, each
process's results merged into one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# "bugs_top1": localisation only, without the repairs (an untrained model never ends one)
# "arguments": holes inside a line (a call's arguments), with code after them on the line
PARTS = (
    "single_line",
    "single_line_true_length",
    "multi_line",
    "multi_line_true_length",
    "arguments",
    "masked",
    "bugs",
    "bugs_top1",
)
# what model/training/release.py needs, the default: "arguments" (200 more holes, ~45 minutes on one
# CPU thread) only when asked for
SHIP_PARTS = (
    "single_line",
    "single_line_true_length",
    "multi_line",
    "multi_line_true_length",
    "masked",
    "bugs",
)
# Seconds each part took on one CPU thread with the defaults (the base model, fp32):
# how `--jobs` balances the parts between its processes.
PART_SECONDS = {
    "single_line": 340,
    "single_line_true_length": 195,
    "multi_line": 130,
    "multi_line_true_length": 550,
    "arguments": 200,
    "masked": 60,
    "bugs": 110,
    "bugs_top1": 60,
}


def split_parts(parts: set[str], jobs: int) -> list[list[str]]:
    """`parts` shared out among at most `jobs` groups of similar time (longest first, each
    to the group with the least so far); the parts of a group keep PARTS' order."""
    groups: list[list[str]] = [[] for _ in range(min(jobs, len(parts)))]
    load = [0] * len(groups)
    for part in sorted(parts, key=lambda p: (-PART_SECONDS[p], PARTS.index(p))):
        i = load.index(min(load))
        groups[i].append(part)
        load[i] += PART_SECONDS[part]
    return [sorted(g, key=PARTS.index) for g in groups]


def merge_results(parts: list[dict], seconds: float) -> dict:
    """One result from the results of processes that ran disjoint parts: each part's
    figures as its process wrote them, `seconds` the wall time of them all and
    `seconds_summed` their sum."""
    merged: dict = {}
    for r in parts:
        for key, value in r.items():
            merged.setdefault(key, value)
    merged["seconds"] = round(seconds, 1)
    merged["seconds_summed"] = round(sum(r["seconds"] for r in parts), 1)
    return merged


def run_jobs(argv: list[str], groups: list[list[str]]) -> dict:
    """Run `python -m benchmarks.eval_model ARGV --parts GROUP` once per group, side by
    side, and merge what they write. Each process gets cores / processes threads unless
    INFILL_THREADS is set."""
    env = dict(os.environ)
    threads = env.get("INFILL_THREADS") or str(max(1, (os.cpu_count() or 1) // len(groups)))
    env.update(INFILL_THREADS=threads, OMP_NUM_THREADS=threads)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        outs = [Path(tmp) / f"part{i}.json" for i in range(len(groups))]
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "benchmarks.eval_model",
                    *argv,
                    "--parts",
                    ",".join(g),
                    "--out",
                    str(o),
                ],
                env=env,
                stdout=subprocess.DEVNULL,
            )
            for g, o in zip(groups, outs, strict=True)
        ]
        failed = [p.args for p in procs if p.wait() != 0]
        if failed:
            raise SystemExit(f"an evaluation process failed: {' '.join(failed[0])}")
        results = [json.loads(o.read_text()) for o in outs]
    return merge_results(results, time.perf_counter() - t0)
