"""Fit the confidence of a copy offered at a completion (infill/core/copy_offers.py).

    python -m benchmarks.fit_copy_confidence [--n 8000]

Lines of the corpus's training split cut after the space nearest their middle, as a user
typing them is (benchmarks/heldout.py `mid_line_cut`), in the 12,000 characters the
language server sends: where the file holds copies (copy_texts.py `context_copies`), the
first one is right when it is the rest of the line. A logistic regression on the log of
the tail's characters and whether several distinct copies follow it is fitted on those
rows (Newton's method); its log loss and calibration are reported on the validation split
the same way, and, where the repository set is present (python -m benchmarks.repo_set),
on copies from the other files of its validation packages. No model is run.

Writes benchmarks/results/fit_copy_confidence.json; the weights go into copy_offers.py
`WEIGHTS` by hand.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

from benchmarks.eval_completion import requests
from benchmarks.heldout import EDITOR_CONTEXT, infill_examples, load_test_files
from benchmarks.repo_set import DATA, PACKAGES, repo_holes
from benchmarks.results_file import RESULTS, write_results
from diffusion_infill.infill.context import ContextSettings, RepoContext
from diffusion_infill.infill.core.copy_texts import tailed_context_copies, tailed_inline_copies

CORPUS = Path("data/corpus_v2")


def features(tail: int, found: int) -> list[float]:
    return [1.0, math.log(tail), float(found > 1)]


def corpus_rows(split: str, n: int) -> list[tuple[int, int, bool]]:
    """(tail, distinct copies, first copy right) of each mid-line cut with copies."""
    files = load_test_files(CORPUS, split)
    examples = infill_examples(files, "single-line", n, seed=0, window_chars=EDITOR_CONTEXT)
    rows = []
    for doc, at, truth in requests(examples, "mid-line"):
        found, tail = tailed_context_copies(doc, at, at)
        if found and truth.strip():
            rows.append((tail, len(found), found[0].strip() == truth.strip()))
    return rows


def repo_rows(n: int) -> list[tuple[int, int, bool]]:
    """The same from the other files of the repository set's validation packages."""
    names = [k for k, v in PACKAGES.items() if v[2] == "validation"]
    if any(not (DATA / k).is_dir() for k in names):
        return []
    repos = {k: RepoContext.build(DATA / k, ContextSettings(), root=DATA / k) for k in names}
    rows = []
    for hole in repo_holes("validation", "cursor", n):
        ex = hole.example
        ((doc, at, truth),) = requests([ex], "mid-line")
        snippets = repos[hole.package].snippets(DATA / hole.package / hole.path, doc, [(at, at)])
        found, tail = tailed_inline_copies(doc, at, at, snippets)
        if found and truth.strip():
            rows.append((tail, len(found), found[0].strip() == truth.strip()))
    return rows


def fit(rows: list[tuple[int, int, bool]]) -> np.ndarray:
    x = np.array([features(t, k) for t, k, _ in rows])
    y = np.array([r for _, _, r in rows], dtype=float)
    w = np.zeros(x.shape[1])
    for _ in range(50):
        p = 1 / (1 + np.exp(-x @ w))
        grad = x.T @ (p - y) / len(y)
        hess = (x.T * (p * (1 - p))) @ x / len(y)
        w -= np.linalg.solve(hess + 1e-9 * np.eye(len(w)), grad)
    return w


def report(w: np.ndarray, rows: list[tuple[int, int, bool]]) -> dict:
    """Log loss, mean predicted against right, and expected calibration error (10 bins)."""
    if not rows:
        return {"n": 0}
    x = np.array([features(t, k) for t, k, _ in rows])
    y = np.array([r for _, _, r in rows], dtype=float)
    p = np.clip(1 / (1 + np.exp(-x @ w)), 1e-9, 1 - 1e-9)
    bins = np.minimum((p * 10).astype(int), 9)
    ece = sum(abs(p[bins == b].mean() - y[bins == b].mean()) * (bins == b).sum() for b in set(bins))
    return {
        "n": len(rows),
        "log_loss": round(float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))), 4),
        "mean_confidence": round(float(p.mean()), 4),
        "right": round(float(y.mean()), 4),
        "ece": round(float(ece / len(rows)), 4),
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=8000, help="training lines")
    p.add_argument("--out", type=Path, default=RESULTS / "fit_copy_confidence.json")
    args = p.parse_args(argv)
    train = corpus_rows("train", args.n)
    w = fit(train)
    results = {
        "weights": [round(float(v), 4) for v in w],
        "features": ["bias", "log tail characters", "several distinct copies"],
        "train": report(w, train),
        "valid": report(w, corpus_rows("valid", args.n // 2)),
        "repository_valid": report(w, repo_rows(400)),
    }
    for k in ("train", "valid", "repository_valid"):
        print(f"{k:17s} {results[k]}")
    print("weights", results["weights"])
    write_results("fit_copy_confidence", None, results, args.out)


if __name__ == "__main__":
    main()
