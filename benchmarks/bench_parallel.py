"""Threads or worker processes: which uses this machine's cores better for training?

    python -m benchmarks.bench_parallel [--steps 16] [--layouts 1x1,1x2,2x1]

Each layout (`WORKERSxTHREADS`) runs `python -m diffusion_infill.model.training.train` for a few
real steps, warm from model/weights on the training corpus, in a fresh process as the long run
does, and reads tokens and training seconds (start-up and evaluation excluded) from the export's
training.json. A worker layout counts all workers' tokens. Run it on an idle machine: the
figures are only comparable with nothing else on the cores. Prints a table and writes
benchmarks/results/train_parallel.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

from tqdm import tqdm

from benchmarks.results_file import RESULTS, write_results


def parse_layout(text: str) -> tuple[int, int]:
    workers, sep, threads = text.partition("x")
    if not sep or not workers.isdigit() or not threads.isdigit() or "0" in (workers, threads):
        raise argparse.ArgumentTypeError(f"{text!r}: expected WORKERSxTHREADS, e.g. 2x1")
    return int(workers), int(threads)


def run_layout(
    workers: int, threads: int, steps: int, init_from: Path, corpus: Path, out: Path
) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "diffusion_infill.model.training.train",
        "--init-from",
        str(init_from),
        "--corpus",
        str(corpus),
        "--out",
        str(out),
        "--max-steps",
        str(steps),
        "--eval-every",
        "100000",
        "--save-every",
        "100000",
        "--workers",
        str(workers),
        "--threads",
        str(threads),
        "--lr",
        "1.5e-4",
        "--quiet",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    record = json.loads((out / "export" / "training.json").read_text())
    seconds = record["minutes"] * 60
    return {
        "layout": f"{workers}x{threads}",
        "workers": workers,
        "threads": threads,
        "steps": record["step"],
        "tokens": record["tokens"],
        "seconds": seconds,
        "tokens_per_s": record["tokens"] / seconds,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=16, help="optimiser steps per layout")
    parser.add_argument(
        "--layouts",
        type=lambda s: [parse_layout(x) for x in s.split(",")],
        default=[(1, 1), (1, 2), (2, 1)],
        help="e.g. 1x1,1x2,2x1",
    )
    parser.add_argument("--init-from", type=Path, default=Path("model/weights"))
    parser.add_argument("--corpus", type=Path, default=Path("data/corpus_v2"))
    parser.add_argument("--out", type=Path, default=RESULTS / "train_parallel.json")
    args = parser.parse_args(argv)

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-parallel-") as tmp:
        for workers, threads in tqdm(args.layouts, desc="layouts", file=sys.stderr):
            rows.append(
                run_layout(
                    workers,
                    threads,
                    args.steps,
                    args.init_from,
                    args.corpus,
                    Path(tmp) / f"{workers}x{threads}",
                )
            )
    base = rows[0]["tokens_per_s"]
    print(
        f"{'workers x threads':>18} {'steps':>6} {'tokens':>9} {'seconds':>8} "
        f"{'tokens/s':>9} {'vs first':>9}"
    )
    for r in rows:
        print(
            f"{r['layout']:>18} {r['steps']:>6} {r['tokens']:>9,} {r['seconds']:>8.1f} "
            f"{r['tokens_per_s']:>9,.0f} {r['tokens_per_s'] / base:>8.2f}x"
        )
    write_results(
        "train",
        None,
        {
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "steps": args.steps,
            "rows": rows,
        },
        out=args.out,
    )


if __name__ == "__main__":
    main()
