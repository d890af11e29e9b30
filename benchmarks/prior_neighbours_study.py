"""Does the fixer's line prior gain from a line's neighbours? A study, with the windows'
edges in the softmax and without.

    python -m benchmarks.prior_neighbours_study [--pairs data/fix_pairs_16_releases.jsonl]
        [--valid data/real_fixes_valid.jsonl] [--lines all|inner] [--penalty 1e-3] [--out PATH]

The prior (infill/core/line_prior.py) scores a line by its text. Here 16 features of the
code lines around it are added (NEIGHBOURS: the code line before ends with `:`, the one
after is indented less or more, it is indented as the one before, another code line holds
the same code, which of 11 keywords starts the code line before) and both priors are
fitted as benchmarks/fit_line_prior.py fits the shipped one (5 folds across packages at
one penalty, then on every pair), then rank the validation set of real fixes.

The pairs' windows are cut around the changed line, so a window's first and last code
lines are seldom the line changed, and they are the lines with no neighbour on one side.
`--lines inner` reads them as neighbours only, out of the softmax (a window whose changed
line is one of them is left out), which is how a file the fixer reads is: its edges are
no less likely to hold a bug. Prints both priors' figures, how often each puts a window's
edge first, and writes benchmarks/results/line_prior_neighbours_<lines>.json. About ten
minutes on one CPU thread for 12,574 pairs.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch

from benchmarks.fit_line_prior import (
    PAIRS,
    Example,
    Pair,
    cross_validate,
    fit,
    read_pairs,
    vocabulary,
)
from benchmarks.fit_line_prior import top as top_lines
from benchmarks.results_file import RESULTS, write_results
from diffusion_infill.infill.core.line_prior import _FIRST_WORD, line_features

BLOCK_WORDS = (
    "if", "elif", "else", "for", "while", "def", "class", "with", "try", "except", "return",
)  # fmt: skip
NEIGHBOURS = (
    "the code line before ends with ':'",
    "the code line after is indented less",
    "the code line after is indented more",
    "indented as the code line before",
    "the same code on another line",
    *(f"the code line before starts with {k!r}" for k in BLOCK_WORDS),
)


def neighbour_features(code: list[str]) -> np.ndarray:
    """NEIGHBOURS for each of `code`, a window's code lines in order."""
    out = np.zeros((len(code), len(NEIGHBOURS)))
    indent = [len(x) - len(x.lstrip()) for x in code]
    same = Counter(x.strip() for x in code)
    for i, line in enumerate(code):
        before = code[i - 1].strip() if i > 0 else ""
        after = indent[i + 1] if i + 1 < len(code) else indent[i]
        first = _FIRST_WORD.match(before)
        out[i, :5] = (
            before.endswith(":"),
            after < indent[i],
            after > indent[i],
            i > 0 and indent[i - 1] == indent[i],
            same[line.strip()] > 1,
        )
        out[i, 5:] = [bool(first) and first.group(0) == k for k in BLOCK_WORDS]
    return out


def study_examples(
    pairs: list[Pair], vocab: tuple[str, ...], neighbours: bool, inner: bool
) -> list[Example]:
    """The prior's examples, with NEIGHBOURS appended when `neighbours`; with `inner`
    the windows' first and last code lines left out of the softmax."""
    out = []
    for code, target, package in pairs:
        x = line_features(code, vocab)
        if neighbours:
            x = np.concatenate([x, neighbour_features(code)], axis=1)
        if not inner:
            out.append((x, target, package))
        elif 0 < target < len(code) - 1:
            out.append((x[1:-1], target - 1, package))
    return out


def edge_first(weights: np.ndarray, data: list[Example]) -> float:
    """How often the window's first or last candidate is ranked first."""
    return float(np.mean([int(np.argmax(x @ weights)) in (0, len(x) - 1) for x, _, _ in data]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=Path, default=PAIRS)
    parser.add_argument("--valid", type=Path, default=Path("data/real_fixes_valid.jsonl"))
    parser.add_argument("--lines", choices=("all", "inner"), default="inner")
    parser.add_argument("--penalty", type=float, default=1e-3, help="the shipped prior's")
    parser.add_argument("--min-count", type=int, default=30)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.penalty <= 0:
        parser.error(f"--penalty must be positive, got {args.penalty}")
    if args.min_count < 1:
        parser.error(f"--min-count must be at least 1, got {args.min_count}")
    makers = {
        args.pairs: "python -m diffusion_infill.model.training.fix_pairs --releases 16 "
        f"--max-archive-kb 1500 --out {args.pairs}",
        args.valid: "python -m benchmarks.real_fixes build --split valid",
    }
    for path, maker in makers.items():
        if not path.is_file():
            parser.error(f"{path} not found: {maker}")
    t0 = time.perf_counter()
    torch.set_num_threads(1)
    pairs, valid = read_pairs(args.pairs), read_pairs(args.valid)
    vocab = vocabulary(pairs, args.min_count)
    inner = args.lines == "inner"
    found: dict[str, object] = {
        "command": " ".join(
            ["python -m benchmarks.prior_neighbours_study", *(argv or sys.argv[1:])]
        ),
        "machine": f"{platform.platform()}, one torch thread",
        "pairs": str(args.pairs),
        "lines": args.lines,
        "penalty": args.penalty,
        "vocab": len(vocab),
    }
    for name, neighbours in (("text", False), ("text and neighbours", True)):
        data = study_examples(pairs, vocab, neighbours, inner)
        held = study_examples(valid, vocab, neighbours, inner)
        weights = fit(data, args.penalty)
        found[name] = {
            "windows": len(data),
            "cross_validation": cross_validate(data, args.penalty, 0),
            "valid": {"n": len(held), **top_lines(weights, held)},
            "valid_edge_first": edge_first(weights, held),
        }
        print(f"{name:20} {found[name]}", flush=True)
    found["seconds"] = round(time.perf_counter() - t0, 1)
    out = args.out or RESULTS / f"line_prior_neighbours_{args.lines}.json"
    write_results("prior_neighbours_study", None, found, out)


if __name__ == "__main__":
    main()
