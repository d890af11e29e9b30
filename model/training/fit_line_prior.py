"""Fit the fixer's line prior (infill/core/line_prior.py) on the training packages' own
one-line changes between releases.

    python -m diffusion_infill.model.training.fix_pairs --releases 16 --max-archive-kb 1500 \
        --out data/fix_pairs_16_releases.jsonl
    python -m diffusion_infill.model.training.fit_line_prior \
        [--pairs data/fix_pairs_16_releases.jsonl] [--min-count 30] \
        [--valid data/real_fixes_valid.jsonl] [--save PATH | --no-save]

The pairs: the one-line changes between the last 16 releases of each training package
whose pinned archive is at most 1.5 MB (model/training/fix_pairs.py; the held-out sets'
changes dropped). Each pair's window (the older release around the changed line) is one
example: a softmax over its code lines of w . features(line), the changed line the
target. The vocabulary is every token that at least `--min-count` code lines of the pairs
hold. The L2 penalty is chosen by 5-fold cross-validation with the packages split between
folds (a package's changes are all in one fold), on top-1; the weights are then fitted on
every pair and written to infill/core/line_prior.json (`--save`; not at all with
--no-save). With `--valid`, the prior alone ranks the code lines of the validation set of
real fixes (packages outside the corpus). Prints the figures and writes its report to
benchmarks/results/line_prior_<pairs>.json (provenance.py: with the commit). About seven
minutes on one CPU thread for 12,574 pairs.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch

from diffusion_infill.infill.core.line_prior import (
    LINE_PRIOR_FILE,
    LinePrior,
    code_line_numbers,
    line_features,
    vocabulary_tokens,
)
from diffusion_infill.model.training.provenance import (
    REPORTS,
    command,
    fill_code,
    write_report,
)

PAIRS = Path("data/fix_pairs_16_releases.jsonl")
PENALTIES = (1e-3, 3e-3, 1e-2)
FOLDS = 5
Pair = tuple[list[str], int, str]  # a window's code lines, the changed one's index, package
Example = tuple[np.ndarray, int, str]  # features of the window's code lines, target, package


def read_pairs(path: Path) -> list[Pair]:
    """The pairs whose changed line is a code line of its window: the window's code
    lines (the lines the fixer can name), which of them changed, and the package."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    pairs = []
    for k, r in enumerate(rows):
        missing = {"window", "window_line", "package"} - set(r)
        if missing:
            raise SystemExit(f"{path}: row {k + 1} lacks {', '.join(sorted(missing))}")
        numbers = code_line_numbers(r["window"])
        if r["window_line"] in numbers:
            lines = r["window"].split("\n")
            code = [lines[n] for n in numbers]
            pairs.append((code, numbers.index(r["window_line"]), r["package"]))
    return pairs


def vocabulary(pairs: list[Pair], min_count: int) -> tuple[str, ...]:
    counts: Counter[str] = Counter()
    for code, _, _ in pairs:
        for line in code:
            counts.update(vocabulary_tokens(line.strip()))
    return tuple(sorted(t for t, n in counts.items() if n >= min_count))


def examples(pairs: list[Pair], vocab: tuple[str, ...]) -> list[Example]:
    return [(line_features(code, vocab), target, package) for code, target, package in pairs]


def fit(data: list[Example], penalty: float) -> np.ndarray:
    """Conditional-logit weights: mean negative log-likelihood of each window's changed
    line plus `penalty` times the squared norm, by L-BFGS."""
    torch.manual_seed(0)
    w = torch.zeros(data[0][0].shape[1], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w], max_iter=500, line_search_fn="strong_wolfe")
    windows = [(torch.from_numpy(x), t) for x, t, _ in data]

    def loss() -> torch.Tensor:
        opt.zero_grad()
        nll = sum(-torch.log_softmax(x @ w, 0)[t] for x, t in windows) / len(windows)
        total = nll + penalty * (w * w).sum()
        total.backward()
        return total

    opt.step(loss)
    return w.detach().numpy()


def top(weights: np.ndarray, data: list[Example]) -> dict[str, float]:
    scores = [(x @ weights, t) for x, t, _ in data]
    ranks = [int((s > s[t]).sum()) for s, t in scores]
    return {
        "top1_line": sum(r == 0 for r in ranks) / len(data),
        "top3_line": sum(r < 3 for r in ranks) / len(data),
    }


def cross_validate(data: list[Example], penalty: float, seed: int) -> dict[str, float]:
    packages = sorted({p for *_, p in data})
    random.Random(seed).shuffle(packages)
    fold = {p: k % FOLDS for k, p in enumerate(packages)}
    hits = {"top1_line": 0.0, "top3_line": 0.0}
    for f in range(FOLDS):
        held = [d for d in data if fold[d[2]] == f]
        if not held:
            continue
        found = top(fit([d for d in data if fold[d[2]] != f], penalty), held)
        for k in hits:
            hits[k] += found[k] * len(held)
    return {k: v / len(data) for k, v in hits.items()}


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.min_count < 1:
        parser.error(f"--min-count must be at least 1, got {args.min_count}")
    for path in (args.pairs, *([args.valid] if args.valid else [])):
        if not path.is_file():
            parser.error(
                f"{path} not found: python -m diffusion_infill.model.training.fix_pairs "
                f"--releases 16 --max-archive-kb 1500 --out {PAIRS}"
            )
    t0 = time.perf_counter()
    torch.set_num_threads(1)
    pairs = read_pairs(args.pairs)
    if len({package for *_, package in pairs}) < FOLDS:
        raise SystemExit(f"{args.pairs}: changes of at least {FOLDS} packages are needed")
    vocab = vocabulary(pairs, args.min_count)
    data = examples(pairs, vocab)
    cv = {p: cross_validate(data, p, args.seed) for p in PENALTIES}
    penalty = max(PENALTIES, key=lambda p: cv[p]["top1_line"])
    weights = fit(data, penalty)
    found: dict[str, object] = {
        "command": command("diffusion_infill.model.training.fit_line_prior", argv),
        "machine": f"{platform.platform()}, one torch thread",
        "pairs": str(args.pairs),
        "windows": len(data),
        "packages": len({p for *_, p in data}),
        "code_lines_per_window": float(np.mean([len(x) for x, *_ in data])),
        "random_top1_line": float(np.mean([1 / len(x) for x, *_ in data])),
        "vocab": len(vocab),
        "min_count": args.min_count,
        "cross_validation": {str(p): v for p, v in cv.items()},
        "penalty": penalty,
    }
    prior = LinePrior(vocab, weights, {"fitted": {k: found[k] for k in list(found)[2:]}})
    if args.valid:
        valid = read_pairs(args.valid)
        found["valid"] = {"n": len(valid), **top(weights, examples(valid, vocab))}
    for k, v in found.items():
        print(f"{k:24} {v}")
    if not args.no_save:
        args.save.write_text(json.dumps(prior.to_json()) + "\n")
        print(f"wrote {args.save}", file=sys.stderr)
    found["seconds"] = round(time.perf_counter() - t0, 1)
    found["fill_code"] = fill_code()  # with what it wrote: the fill code it leaves
    write_report(found, args.out or REPORTS / f"line_prior_{args.pairs.stem}.json")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", type=Path, default=PAIRS)
    p.add_argument("--min-count", type=int, default=30, help="code lines a vocabulary token needs")
    p.add_argument("--valid", type=Path, default=None, help="rank this real-fix set's lines too")
    p.add_argument("--seed", type=int, default=0, help="the packages' shuffle into folds")
    p.add_argument("--save", type=Path, default=LINE_PRIOR_FILE, help="where the prior goes")
    p.add_argument("--no-save", action="store_true", help="report only; keep the shipped prior")
    p.add_argument("--out", type=Path, default=None)
    return p


if __name__ == "__main__":
    main()
