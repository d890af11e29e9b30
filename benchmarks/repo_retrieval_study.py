"""Which ranking retrieves the windows whose lines hold a hole's truth: token-set Jaccard
(what infill/context ships) against BM25 over the same index and windows.

    python -m benchmarks.repo_retrieval_study [--split validation] [--n 400]

For each hole of benchmarks/repo_set.py, each ranking retrieves its windows (four a hole,
the hole's own file left out) and infill/core/cross_copies.py draws the copies from them:
how many holes get copies, for how many the truth is among them, and the retrieval's
milliseconds. BM25 is Okapi's (k1 1.2, b 0.75) over the windows' identifier sets, every
posting counted, in pure Python as the language server would run it. No model.

Writes benchmarks/results/repo_context_retrieval_<split>.json (or --out).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from benchmarks.repo_set import DATA, SPLITS, repo_holes
from benchmarks.results_file import RESULTS, machine, write_results
from diffusion_infill.infill.context import RepoContext
from diffusion_infill.infill.context.index import RepoIndex, tokens
from diffusion_infill.infill.core.cross_copies import repo_copies
from diffusion_infill.infill.core.spans import Span, neutralise

SHAPES = ("cursor", "whole-line", "part-of-line")


def bm25_search(self: RepoIndex, query: str, k: int, exclude: str | None = None) -> list:
    """RepoIndex.search ranked by BM25 instead of Jaccard (the same windows kept apart)."""
    q = tokens(query)
    live = [w for w in range(self.windows()) if self._owner[w]]
    if not q or not live:
        return []
    avg = sum(self._size[w] for w in live) / len(live)
    scores: Counter[int] = Counter()
    for t in q:
        posting = self._postings.get(t)
        if posting is None:
            continue
        idf = math.log(1 + (len(live) - len(posting) + 0.5) / (len(posting) + 0.5))
        for w in posting:
            scores[w] += idf * 2.2 / (1 + 1.2 * (0.25 + 0.75 * self._size[w] / avg))
    out: list = []
    taken: dict[str, list[int]] = {}
    for w, score in scores.most_common(50 * k):
        path, start = self._owner[w], self._start[w]
        if path is None or path == exclude:
            continue
        if any(abs(start - s) < self.window_lines for s in taken.get(path, [])):
            continue
        taken.setdefault(path, []).append(start)
        out.append((path, start, score))
        if len(out) == k:
            break
    return out


def _row(holes: list, repos: dict, search: Callable) -> dict:
    RepoIndex.search = search  # type: ignore[method-assign]
    got = truth = 0
    ms = []
    for h in holes:
        repo, ex = repos[h.package], h.example
        t0 = time.perf_counter()
        snippets = repo.snippets(repo.root / h.path, ex.text, [(ex.start, ex.end)])
        ms.append((time.perf_counter() - t0) * 1000)
        before = neutralise(ex.text, [Span(ex.start, ex.end)])
        copies = repo_copies(before, ex.start, ex.end, snippets)
        got += bool(copies)
        truth += any(c.strip() == ex.truth.strip() for c in copies)
    ms.sort()
    return {
        "n": len(holes),
        "holes_with_copies": got,
        "truth_among_copies": truth,
        "retrieval_ms_p50": round(ms[len(ms) // 2], 2),
        "retrieval_ms_p95": round(ms[int(0.95 * len(ms))], 2),
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--split", default="validation", choices=SPLITS)
    p.add_argument("--n", type=int, default=400)
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    jaccard = RepoIndex.search
    found: dict = {
        "command": " ".join(["python -m benchmarks.repo_retrieval_study", *(argv or sys.argv[1:])]),
        "machine": machine(),
        "rankings": {},
    }
    holes = {s: repo_holes(args.split, s, args.n, data=args.data) for s in SHAPES}
    names = {h.package for hs in holes.values() for h in hs}
    repos = {k: RepoContext.build(args.data / k, root=args.data / k) for k in names}
    for name, search in (("jaccard", jaccard), ("bm25", bm25_search)):
        found["rankings"][name] = {s: _row(holes[s], repos, search) for s in SHAPES}
        print(name, found["rankings"][name], flush=True)
    RepoIndex.search = jaccard  # type: ignore[method-assign]
    out = args.out or RESULTS / f"repo_context_retrieval_{args.split}.json"
    write_results("repo_context", None, found, out)


if __name__ == "__main__":
    main()
