"""Fit the confidence of the copies offered at a completion (infill/core/copy_offers.py).

    python -m benchmarks.fit_copy_confidence [--n 8000]

Two kinds of copy, each a logistic regression fitted on lines of the corpus's training
split in the 12,000 characters the language server sends (no model is run):

- the rest of a line: lines cut after the space nearest their middle, as a user typing
  them is (benchmarks/heldout.py `mid_line_cut`); where the file holds copies
  (copy_texts.py `context_copies`), each is right when it is the rest of the
  line. Features: the log of the tail's characters, whether several distinct copies
  follow it, whether the copy is not the first.
- the next line: the cursor on an empty line, where a line's code was (the completion
  case "empty line, one line"); where the file holds lines after the line before the
  cursor (`next_line_copies`), each is right when it is the line's code.
  Features: the log of that line's characters, whether several distinct lines follow it,
  whether the line after it reads as the line after the cursor's, whether it is not the
  first.

A row is each of the first `RANKS` copies a cursor offers (copy_offers.py).

Each fit's log loss and calibration are reported on the validation split the same way,
and, where the repository set is present (python -m benchmarks.repo_set), on copies from
the other files of its validation packages.

With `--rows TRAIN VALID` (confidence rows of the training and validation splits,
benchmarks/confidence_rows.py: inline completions as the server asks them, with their
copies), a third fit, per case: the probability that an item of a completion is right
from what vouches for its text (copy_offers.py `item_features`: the confidence the
model's decode gives it, read with the model's weights, and the surest copy that reads
as it), fitted on the training rows, reported on the validation rows; it names the
confidence weights it read (refit when they change).

    python -m benchmarks.fit_copy_confidence --rows runs/confidence/train.jsonl \
        runs/confidence/valid.jsonl

Writes benchmarks/results/fit_copy_confidence.json; the weights go into copy_offers.py
`WEIGHTS`, `LINE_WEIGHTS` and `ITEM_WEIGHTS` by hand.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np

from benchmarks.eval_completion import requests
from benchmarks.eval_confidence import Scorer, completion_candidates
from benchmarks.heldout import EDITOR_CONTEXT, infill_examples, load_test_files
from benchmarks.repo_set import DATA, PACKAGES, repo_holes
from benchmarks.results_file import RESULTS, write_results
from diffusion_infill.infill.context import ContextSettings, RepoContext
from diffusion_infill.infill.core.copy_offers import RANKS, item_features
from diffusion_infill.infill.core.copy_texts import (
    next_line_copies,
    tailed_context_copies,
    tailed_inline_copies,
)
from diffusion_infill.infill.core.snippets import Snippet
from diffusion_infill.lsp.offers import vouching
from diffusion_infill.model.loading import default_model_dir

CORPUS = Path("data/corpus_v2")
Row = tuple[list[float], bool]  # features, the first copy right
Finder = Callable[[str, int, str, list[Snippet] | None], list[Row]]
CASES = {"rest of the line": "mid-line", "next line": "empty line, one line"}
ITEM_KINDS = {"mid-line": False, "empty-line": True}  # confidence rows' kinds: an empty line


def rest_of_line(doc: str, at: int, truth: str, snippets: list[Snippet] | None) -> list[Row]:
    """The rows of a mid-line cut, one per copy offered (`RANKS`): from the file's copies,
    or with `snippets` theirs."""
    if snippets is None:
        found, tail = tailed_context_copies(doc, at, at)
    else:
        found, tail = tailed_inline_copies(doc, at, at, snippets)
    if not found or not truth.strip():
        return []
    x = [1.0, math.log(tail), float(len(found) > 1)]
    return [([*x, float(k > 0)], c.strip() == truth.strip()) for k, c in enumerate(found[:RANKS])]


def next_line(doc: str, at: int, truth: str, snippets: list[Snippet] | None) -> list[Row]:
    """The rows of a cursor on an empty line, one per line offered (`RANKS`): from the
    file's lines, or the snippets'."""
    own, other = next_line_copies(doc, at, snippets or ())
    found = own if snippets is None else other
    if not found.lines or not truth.strip():
        return []
    x = [1.0, math.log(max(found.key, 1)), float(len(found.lines) > 1)]
    return [
        ([*x, float(k < found.agree), float(k > 0)], line == truth.strip())
        for k, line in enumerate(found.lines[:RANKS])
    ]


FINDERS: dict[str, Finder] = {"rest of the line": rest_of_line, "next line": next_line}
FEATURES = {
    "rest of the line": ["bias", "log tail characters", "several distinct copies", "later"],
    "next line": [
        "bias",
        "log line characters",
        "several distinct lines",
        "next line agrees",
        "later",
    ],
}


def corpus_rows(kind: str, split: str, n: int) -> list[Row]:
    files = load_test_files(CORPUS, split)
    examples = infill_examples(files, "single-line", n, seed=0, window_chars=EDITOR_CONTEXT)
    return [r for d, a, t in requests(examples, CASES[kind]) for r in FINDERS[kind](d, a, t, None)]


def repo_rows(kind: str, n: int) -> list[Row]:
    """The rows of copies from the other files of the repository set's validation
    packages (none without the set)."""
    names = [k for k, v in PACKAGES.items() if v[2] == "validation"]
    if any(not (DATA / k).is_dir() for k in names):
        return []
    repos = {k: RepoContext.build(DATA / k, ContextSettings(), root=DATA / k) for k in names}
    rows = []
    for hole in repo_holes("validation", "cursor", n):
        ((doc, at, truth),) = requests([hole.example], CASES[kind])
        snippets = repos[hole.package].snippets(DATA / hole.package / hole.path, doc, [(at, at)])
        rows += FINDERS[kind](doc, at, truth, list(snippets))
    return rows


def item_rows(path: Path, score: Scorer) -> dict[bool, list[Row]]:
    """From confidence rows (benchmarks/confidence_rows.py), per case (an empty line or
    not), one row per distinct text an inline completion could offer (lsp/offers.py
    `vouching` of eval_confidence's `completion_candidates`: its fill, runner-ups and
    copies, the decode's confidences read with the model's weights), right or not."""
    out: dict[bool, list[Row]] = {False: [], True: []}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if r["kind"] not in ITEM_KINDS:
            continue
        fill, ups, copies, facts = completion_candidates(r, score)
        for v in vouching(fill, ups, copies):
            x = item_features(v.decoded, v.copied, v.runner_up)
            out[ITEM_KINDS[r["kind"]]].append((x, bool(facts[v.text.strip()][0])))
    return out


def fit(rows: list[Row]) -> np.ndarray:
    x = np.array([f for f, _ in rows])
    y = np.array([r for _, r in rows], dtype=float)
    w = np.zeros(x.shape[1])
    for _ in range(50):
        p = 1 / (1 + np.exp(-x @ w))
        grad = x.T @ (p - y) / len(y)
        hess = (x.T * (p * (1 - p))) @ x / len(y)
        w -= np.linalg.solve(hess + 1e-9 * np.eye(len(w)), grad)
    return w


def report(w: np.ndarray, rows: list[Row]) -> dict:
    """Log loss, mean predicted against right, and expected calibration error (10 bins)."""
    if not rows:
        return {"n": 0}
    x = np.array([f for f, _ in rows])
    y = np.array([r for _, r in rows], dtype=float)
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
    p.add_argument(
        "--rows",
        nargs=2,
        type=Path,
        metavar=("TRAIN", "VALID"),
        help="confidence rows (benchmarks/confidence_rows.py) to fit the items' weights on",
    )
    p.add_argument("--model", type=Path, default=default_model_dir(), help="its confidence")
    args = p.parse_args(argv)
    results = {}
    for kind in FINDERS:
        w = fit(corpus_rows(kind, "train", args.n))
        results[kind] = {
            "weights": [round(float(v), 4) for v in w],
            "features": FEATURES[kind],
            "train": report(w, corpus_rows(kind, "train", args.n)),
            "valid": report(w, corpus_rows(kind, "valid", args.n // 2)),
            "repository_valid": report(w, repo_rows(kind, 400)),
        }
        for k in ("train", "valid", "repository_valid"):
            print(f"{kind}, {k:17s} {results[kind][k]}")
        print(f"{kind}, weights", results[kind]["weights"])
    if args.rows:
        train_rows, valid_rows = args.rows
        score = Scorer(args.model)
        train, valid = item_rows(train_rows, score), item_rows(valid_rows, score)
        results["items"] = {"network": score.calibration.network}
        for empty_line, name in ((False, "after code"), (True, "empty line")):
            w = fit(train[empty_line])
            results["items"][name] = {
                "weights": [round(float(v), 4) for v in w],
                "train": report(w, train[empty_line]),
                "valid": report(w, valid[empty_line]),
            }
            print(f"items, {name}: {results['items'][name]}")
    write_results("fit_copy_confidence", None, results, args.out)


if __name__ == "__main__":
    main()
