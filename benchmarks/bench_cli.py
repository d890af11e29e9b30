"""The `infill fill` command as a user runs it, timed from outside: one process, the model
loaded in it, held-out one-line holes.

    python -m benchmarks.bench_cli                      # 100 files of one hole, a file of 70
    python -m benchmarks.bench_cli --files 20 --holes 30 --fill-args "--lengths 1"

Two jobs, each one `python -m diffusion_infill.infill.cli fill --json` process:

- files: `--files` held-out windows (about 700 characters each), each with one one-line
  hole (a line's content after its indentation), given to one process. Reported: wall
  seconds per hole (model load included), seconds to the first filled file (the first JSON
  line on stdout: what a user waits for), exact match, forward passes per produced token.
- one file: `--holes` one-line holes spread evenly over one held-out file (the first of the
  split with enough usable lines), filled by one process. Reported: wall seconds, forward
  passes, exact match.

`--fill-args` is added to the command line (e.g. the previous defaults, to compare in the
same run). The environment passes through (INFILL_THREADS, INFILL_DTYPE); the model is
loaded in the process (INFILL_WORKER=off) unless `--fill-args` names a `--worker`. Figures go to
stdout and to benchmarks/results/cli_<model>.json (`--out`).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.heldout import (
    _good_line,
    _lines,
    heldout_arguments,
    heldout_files,
    infill_examples,
)
from benchmarks.results_file import write_results

MARKER = "<mask>"


def one_hole_files(texts: list[str], n: int, seed: int, folder: Path) -> list[tuple[Path, str]]:
    """`n` held-out windows with one one-line hole each, written under `folder`:
    (path, the hole's true text)."""
    out = []
    for i, ex in enumerate(infill_examples(texts, "single-line", n, seed=seed)):
        path = folder / f"hole_{i:03d}.py"
        path.write_text(ex.text[: ex.start] + MARKER + ex.text[ex.end :])
        out.append((path, ex.truth))
    return out


def many_holes_file(texts: list[str], holes: int) -> tuple[str, list[str]]:
    """The first held-out file with at least 3 usable lines per hole, with `holes` of them
    (evenly spread, none in the first or last 3 lines) masked: (text, truths in order)."""
    for text in texts:
        if MARKER in text:
            continue
        lines = _lines(text)
        usable = [(s, e) for s, e in lines[3:-3] if _good_line(text, s, e)]
        if len(usable) < 3 * holes:
            continue
        step = len(usable) / holes
        picked = [usable[int(k * step)] for k in range(holes)]
        parts, truths, pos = [], [], 0
        for s, e in picked:
            start = s + len(text[s:e]) - len(text[s:e].lstrip())
            parts += [text[pos:start], MARKER]
            truths.append(text[start:e])
            pos = e
        return "".join(parts) + text[pos:], truths
    raise SystemExit(f"no held-out file has {3 * holes} usable lines")


def run_fill(
    paths: list[Path], model: Path | None, fill_args: list[str]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One `infill fill --json` process over `paths`: its JSON objects, and its wall
    seconds, CPU seconds (user + system: what it costs on a machine others share too),
    seconds to its first JSON line and peak memory."""
    cmd = [
        sys.executable,
        "-m",
        "diffusion_infill.infill.cli",
        "fill",
        "--json",
        *fill_args,
        *(["--model", str(model)] if model else []),
        *map(str, paths),
    ]
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    first = None
    objs = []
    # the model loaded in the process, unless --fill-args names a worker
    env = {**os.environ, "INFILL_WORKER": "on" if "--worker" in fill_args else "off"}
    with subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            if first is None:
                first = time.perf_counter() - t0
            objs.append(json.loads(line))
        err = proc.stderr.read() if proc.stderr else ""
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"infill fill exited {proc.returncode}:\n{err}")
    now = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = now.ru_utime - used.ru_utime + now.ru_stime - used.ru_stime
    # the largest child so far (Linux: KiB): this process's when it is the first or largest
    return objs, {
        "wall_s": wall,
        "cpu_s": cpu,
        "first_fill_s": first,
        "peak_rss_mib": now.ru_maxrss / 1024,
    }


def _fills(obj: dict[str, Any]) -> list[str | None]:
    """Each span's fill text, None where the checks left it."""
    return [None if f.get("rejected") else f["text"] for f in obj["fills"]]


def _figures(objs: list[dict[str, Any]], truths: list[str]) -> dict[str, Any]:
    fills = [f for obj in objs for f in _fills(obj)]
    nfe = sum(obj["stats"]["nfe"] for obj in objs)
    tokens = sum(obj["stats"]["tokens"] for obj in objs)
    return {
        "holes": len(truths),
        "exact_match": sum(
            f is not None and f.strip() == t.strip() for f, t in zip(fills, truths, strict=True)
        )
        / len(truths),
        "left_as_they_were": sum(f is None for f in fills) / len(truths),
        "nfe": nfe,
        "tokens": tokens,
        "nfe_per_token": nfe / max(1, tokens),
        "candidates": sum(obj["stats"].get("candidates", 0) for obj in objs),
    }


def bench_files(texts: list[str], args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    holes = one_hole_files(texts, args.files, args.seed, folder)
    objs, times = run_fill([p for p, _ in holes], args.model, args.fill_args)
    fig = _figures(objs, [t for _, t in holes]) | times
    fig.update(s_per_hole=times["wall_s"] / len(holes), cpu_s_per_hole=times["cpu_s"] / len(holes))
    print(
        f"{len(holes)} files of one hole, one process: {times['wall_s']:.1f} s "
        f"({fig['s_per_hole']:.2f} s per hole; CPU {fig['cpu_s_per_hole']:.2f} s), "
        f"first fill after {times['first_fill_s']:.2f} s, exact match "
        f"{fig['exact_match']:.1%}, {fig['nfe_per_token']:.2f} passes/token"
    )
    return fig


def bench_one_file(texts: list[str], args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    text, truths = many_holes_file(texts, args.holes)
    path = folder / "many_holes.py"
    path.write_text(text)
    objs, times = run_fill([path], args.model, args.fill_args)
    fig = _figures(objs, truths) | times
    fig.update(s_per_hole=times["wall_s"] / len(truths), chars=len(text))
    print(
        f"one file of {len(truths)} holes ({len(text):,} characters): "
        f"{times['wall_s']:.1f} s (CPU {times['cpu_s']:.1f} s), "
        f"{fig['nfe']} forward passes ({fig['nfe_per_token']:.2f}/token), "
        f"exact match {fig['exact_match']:.1%}"
    )
    return fig


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    heldout_arguments(parser)
    parser.add_argument(
        "--files",
        type=int,
        default=100,
        help="files of one one-line hole, filled by one process (0: skip)",
    )
    parser.add_argument(
        "--holes",
        type=int,
        default=70,
        help="one-line holes in one file, filled by one process (0: skip)",
    )
    parser.add_argument("--seed", type=int, default=0, help="hole selection seed")
    parser.add_argument(
        "--fill-args",
        type=shlex.split,
        default=[],
        help="more arguments for `infill fill` (one string)",
    )
    parser.add_argument("--out", type=Path, default=None, help="results JSON path")
    args = parser.parse_args(argv)
    texts = heldout_files(parser, args)
    command = ["python -m benchmarks.bench_cli", *(sys.argv[1:] if argv is None else argv)]
    results: dict[str, Any] = {
        "command": " ".join(command),
        "split": args.split,
        "seed": args.seed,
        "fill_args": args.fill_args,
    }
    with tempfile.TemporaryDirectory() as tmp:
        if args.files:
            results["files"] = bench_files(texts, args, Path(tmp))
        if args.holes:
            results["one_file"] = bench_one_file(texts, args, Path(tmp))
    write_results("cli", args.model, results, args.out)


if __name__ == "__main__":
    main()
