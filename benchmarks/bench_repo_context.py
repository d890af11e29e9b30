"""Repository context's costs: indexing, re-indexing one file, retrieval, memory.

    python -m benchmarks.bench_repo_context [--files 2000] [--tiny 100000] [--queries 300]

A repository of `--files` real Python files (this Python's standard library, then the
corpus's training split, data/corpus_v2; in a temporary folder, with a pyproject.toml)
is indexed cold (no cache), then again with its cache (as a new process would), one file
is changed and indexed again (`update`), and `--queries` holes drawn from its files
retrieve their snippets (`snippets`, the hole's own file left out). Memory is what Python
allocated for the index (tracemalloc), for this repository and for one of `--tiny` small
generated files (max_files raised to hold them). One thread; the machine's other load as it is.

Writes benchmarks/results/repo_context_latency.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import sysconfig
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

from benchmarks.results_file import RESULTS, machine, write_results
from diffusion_infill.infill.context import ContextSettings, RepoContext


def _sources(corpus: Path) -> Iterator[tuple[str, str]]:
    """Real Python files: this Python's standard library, then the corpus's training
    split (data/corpus_v2); (name, text)."""
    lib = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(lib.rglob("*.py")):
        if "site-packages" not in path.parts:
            yield f"stdlib/{path.relative_to(lib)}", path.read_text(errors="replace")
    train = corpus / "train.jsonl"
    if train.is_file():
        with train.open() as fh:
            for k, line in enumerate(fh):
                yield f"corpus/m{k:05d}.py", json.loads(line)["text"]


def _real_repo(folder: Path, corpus: Path, files: int) -> list[Path]:
    """`files` real Python files (`_sources`) written under `folder`, as a package."""
    folder.mkdir(parents=True)
    (folder / "pyproject.toml").write_text("[project]\nname = 'bench'\n")
    out = []
    for name, text in _sources(corpus):
        if len(out) == files:
            break
        path = folder / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, errors="replace")
        out.append(path)
    return out


def _tiny_repo(folder: Path, files: int) -> None:
    folder.mkdir(parents=True)
    (folder / "setup.py").write_text("")
    for k in range(files):
        path = folder / f"d{k // 1000:03d}" / f"t{k:06d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"def f{k}(x):\n    y = x + {k}\n    return helper_{k % 97}(y)\n")


def _timed(fn):  # noqa: ANN001, ANN202
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def _memory(build) -> float:  # noqa: ANN001
    """MB Python holds for what `build()` returns (tracemalloc)."""
    tracemalloc.start()
    kept = build()
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del kept
    return round(current / 1e6, 1)


def _queries(repo: RepoContext, paths: list[Path], n: int) -> list[float]:
    rng = random.Random(0)
    ms = []
    for _ in range(n):
        path = rng.choice(paths)
        text = path.read_text(errors="replace")
        at = rng.randrange(max(1, len(text)))
        t0 = time.perf_counter()
        repo.snippets(path, text, [(at, at)])
        ms.append((time.perf_counter() - t0) * 1000)
    return ms


def _measure_real(args: argparse.Namespace, tmp: Path) -> dict:
    folder, cache = tmp / "real", tmp / "cache"
    paths = _real_repo(folder, args.corpus, args.files)
    settings = ContextSettings()
    cold, cold_s = _timed(
        lambda: RepoContext.build(folder / "pyproject.toml", settings, cache=cache)
    )
    _, warm_s = _timed(lambda: RepoContext.build(folder / "pyproject.toml", settings, cache=cache))
    by_size = sorted(cold.index.files, key=lambda p: len(cold.index.files[p].text))
    changed = folder / by_size[len(by_size) // 2]  # a file of the median size
    edited = changed.read_text(errors="replace") + "\n\ndef added_here():\n    return 1\n"
    reindex_ms = []
    for _ in range(20):
        _, s = _timed(lambda: cold.update(changed, edited))
        reindex_ms.append(s * 1000)
    ms = sorted(_queries(cold, paths, args.queries))
    mb = _memory(lambda: RepoContext.build(folder / "pyproject.toml", settings, cache=tmp / "c2"))
    return {
        "files": len(paths),
        "files_indexed": len(cold.index.files),
        "windows": cold.index.live,
        "megabytes_of_source": round(sum(p.stat().st_size for p in paths) / 1e6, 1),
        "index_s_cold": round(cold_s, 2),
        "index_s_cached": round(warm_s, 2),
        "reindex_one_file_ms_p50": round(statistics.median(reindex_ms), 2),
        "reindex_one_file_ms_max": round(max(reindex_ms), 2),
        "retrieval_ms_p50": round(ms[len(ms) // 2], 2),
        "retrieval_ms_p95": round(ms[int(0.95 * len(ms))], 2),
        "index_memory_mb": mb,
        "notes": cold.notes,
    }


def _measure_tiny(args: argparse.Namespace, tmp: Path) -> dict:
    folder = tmp / "tiny"
    _tiny_repo(folder, args.tiny)
    settings = ContextSettings(max_files=args.tiny, max_seconds=600)
    repo, s = _timed(lambda: RepoContext.build(folder / "setup.py", settings, cache=tmp / "c3"))
    mb = _memory(lambda: RepoContext.build(folder / "setup.py", settings, cache=tmp / "c4"))
    return {
        "files": args.tiny,
        "files_indexed": len(repo.index.files),
        "index_s_cold": round(s, 2),
        "index_memory_mb": mb,
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--files", type=int, default=2000)
    p.add_argument("--tiny", type=int, default=100_000)
    p.add_argument("--queries", type=int, default=300)
    p.add_argument("--corpus", type=Path, default=Path("data/corpus_v2"))
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as name:
        real = _measure_real(args, Path(name))
        print(f"{args.files} files: {real}", flush=True)
        tiny = _measure_tiny(args, Path(name)) if args.tiny else {}
        print(f"{args.tiny} tiny files: {tiny}", flush=True)
    found = {
        "command": " ".join(["python -m benchmarks.bench_repo_context", *(argv or sys.argv[1:])]),
        "machine": machine(),
        "repository": real,
        "tiny_files": tiny,
    }
    write_results("repo_context", None, found, args.out or RESULTS / "repo_context_latency.json")


if __name__ == "__main__":
    main()
