"""Inline completion on the repository set: the model alone, with the file's copies, and
with the copies of the package's other files too, paired on the same cursors.

    python -m benchmarks.eval_repo_completion [--split validation] [--n 400]
                                              [--case mid-line|empty-line]

Each line of a hole of benchmarks/repo_set.py (a file of a package outside the corpus, the
rest of the package present), in the file as the language server sends it (its excerpt,
lsp/excerpt.py), is cut after the space nearest its middle, the rest of it deleted: the
truth is the rest of the line (`mid-line`); or with `--case empty-line`, its code is
deleted, the cursor after its indentation: the truth is the line. The server's
completion runs on it (lsp/completion_ask.py `completion_ask`, its default settings, the
engine in this process; on an empty line the model is asked as the server asks it at its
default floor: for nothing where a copy is sure alone or none is found, else for one line,
lsp/offers.py `one_line_enough`), and its items are ranked as the server ranks them (`offered`):
the fill and its runner-ups alone; with the copies of the excerpt
(infill/core/copy_offers.py); and with the copies of the snippets that infill/context
retrieves from the package's other files too (`repositoryContext`).

Per arm: the top item exactly right (no confidence floor), the truth among the items,
the share of cursors a copy answers without the model's fill (lsp/offers.py
`answers_alone`), and for each floor of `completionMinConfidence` the positions shown and
the share of them exactly right. Won / lost against the model alone: positions right only
with / without.

Writes benchmarks/results/repo_completion_<checkpoint>_<split>.json (for an empty line
repo_completion_empty_line_<checkpoint>_<split>.json; or --out).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

from tqdm import tqdm

from benchmarks.eval_completion import requests
from benchmarks.eval_repo_context import editor_hole
from benchmarks.eval_shapes import checkpoint
from benchmarks.repo_set import DATA, PACKAGES, SPLITS, repo_holes
from benchmarks.results_file import RESULTS, write_results
from diffusion_infill import infill
from diffusion_infill.infill.context import ContextSettings, RepoContext
from diffusion_infill.infill.core.copy_offers import completion_copies
from diffusion_infill.lsp.completion_ask import CompletionAsk, completion_ask
from diffusion_infill.lsp.offers import answers_alone, offered, one_line_enough
from diffusion_infill.lsp.settings import DEFAULT_MIN_CONFIDENCE, Settings
from diffusion_infill.model.loading import default_model_dir, load_denoiser

ARMS = ("model", "file_copies", "repository_copies")
FLOORS = tuple(sorted({0.0, 0.2, 0.3, 0.4, 0.5, 0.6, DEFAULT_MIN_CONFIDENCE}))
CASES = {"mid-line": "mid-line", "empty-line": "empty line, one line"}  # eval_completion's


def _record(den, hole, repo: RepoContext, settings: Settings, case: str) -> dict | None:  # noqa: ANN001
    """One cursor's items in each arm (no floor), with their confidences; None where no
    completion belongs."""
    ((doc, at, truth),) = requests([hole.example], CASES[case])
    line_end = doc.find("\n", at)
    bounds = (doc.rfind("\n", 0, at) + 1, len(doc) if line_end < 0 else line_end)
    ask = completion_ask(doc, at, bounds, settings)
    if ask is None or not truth.strip():
        return None
    text, cursor = ask.excerpt.text, ask.span.start
    t0 = time.perf_counter()
    snippets = repo.snippets(repo.root / hole.path, text, [(cursor, cursor)])
    copies = {
        "model": [],
        "file_copies": completion_copies(text, cursor),
        "repository_copies": completion_copies(text, cursor, snippets),
    }
    copy_ms = (time.perf_counter() - t0) * 1000
    every = replace(settings, completion_min_confidence=0.0)
    record = {"package": hole.package, "path": hole.path, "truth": truth, "ms": None}
    record["copies_ms"] = round(copy_ms, 2)
    # as the server does at its default floor: a copy sure enough on its own is offered
    # without the fill; above LONE_LINE an empty line's fill is one line, and none at all
    # without a copy (lsp/offers.py `one_line_enough`)
    one_line = one_line_enough(ask.multiline, settings)
    asked = completion_ask(doc, at, bounds, settings, one_line=one_line) or ask
    decoded = None  # the fill and its ms, once an arm asks the model (the same for each)
    for arm, found in copies.items():
        alone = answers_alone(found, ask.multiline)
        fill, shaped = None, ask
        if not alone and not (one_line and not found):
            if decoded is None:
                decoded = _fill(den, asked)
                record["ms"] = round(decoded[1], 1)
            fill, shaped = decoded[0], asked
        record[arm] = offered(shaped.offer, fill, every, found, ask.multiline)
        record[f"{arm}_alone"] = alone
    return record


def _fill(den, ask: CompletionAsk) -> tuple:  # noqa: ANN001
    """The server's fill of `ask` (None where it fails) and its milliseconds."""
    t0 = time.perf_counter()
    options = replace(ask.options, carry_key="")
    try:
        result = infill.fill_spans(ask.excerpt.text, [ask.span], denoiser=den, options=options)
        fill = result.fills[0] if result.fills else None
    except infill.InfillError:
        fill = None
    return fill, (time.perf_counter() - t0) * 1000


def _right(offer: str, truth: str) -> bool:
    return offer.strip() == truth.strip()


def arm_figures(records: list[dict], arm: str) -> dict:
    """An arm's figures: top item right, truth among the items, won / lost against the
    model alone, and shown / right at each floor (the top item's confidence)."""
    n = len(records)
    top = [bool(r[arm]) and _right(r[arm][0][0], r["truth"]) for r in records]
    alone = [bool(r["model"]) and _right(r["model"][0][0], r["truth"]) for r in records]
    floors = {}
    for floor in FLOORS:
        shown = [
            (r, items[0])
            for r in records
            if (items := r[arm]) and (items[0][1] is None or items[0][1] >= floor)
        ]
        right = sum(_right(item[0], r["truth"]) for r, item in shown)
        floors[str(floor)] = {
            "shown": round(len(shown) / n, 4),
            "right_of_shown": round(right / len(shown), 4) if shown else None,
        }
    return {
        "n": n,
        "exact_top": round(sum(top) / n, 4),
        "truth_among_items": round(
            sum(any(_right(o, r["truth"]) for o, _ in r[arm]) for r in records) / n, 4
        ),
        "won": sum(t and not a for t, a in zip(top, alone, strict=True)),
        "lost": sum(a and not t for t, a in zip(top, alone, strict=True)),
        "without_the_model": round(sum(bool(r.get(f"{arm}_alone")) for r in records) / n, 4),
        "floors": floors,
    }


def _p50(values: list[float]) -> float | None:
    return sorted(values)[len(values) // 2] if values else None


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--split", default="validation", choices=SPLITS)
    p.add_argument("--n", type=int, default=400, help="cursors")
    p.add_argument("--case", default="mid-line", choices=CASES)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--model", type=Path, default=None)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    if args.n < 1:
        p.error(f"--n must be at least 1, got {args.n}")
    names = [k for k, v in PACKAGES.items() if v[2] == args.split]
    if any(not (args.data / k).is_dir() for k in names):
        p.error(f"{args.data} lacks the packages: python -m benchmarks.repo_set")
    den = load_denoiser(args.model)
    repos = {
        k: RepoContext.build(args.data / k, ContextSettings(), root=args.data / k) for k in names
    }
    settings = Settings()
    holes = repo_holes(args.split, "cursor", args.n, args.seed, args.data)
    records = []
    for hole in tqdm(holes, desc="cursors", file=sys.stderr):
        wide = editor_hole(hole, args.data)
        if wide is not None and (r := _record(den, wide, repos[hole.package], settings, args.case)):
            records.append(r)
    model = args.model or default_model_dir()
    results = {
        "model": str(model),
        "split": args.split,
        "case": args.case,
        "settings": "the server's defaults; items ranked without a floor, then floors applied",
        "arms": {arm: arm_figures(records, arm) for arm in ARMS},
        "ms_p50_completion": _p50([r["ms"] for r in records if r["ms"] is not None]),
        "ms_p95_copies": sorted(r["copies_ms"] for r in records)[int(0.95 * (len(records) - 1))],
        "records": records,
    }
    for arm, row in results["arms"].items():
        at = row["floors"][str(settings.completion_min_confidence)]
        print(
            f"{arm:18s} top {row['exact_top']:.2%} among items {row['truth_among_items']:.2%} "
            f"won {row['won']} lost {row['lost']}; at the default floor shown {at['shown']:.1%}"
            f", right {at['right_of_shown']}"
        )
    case = "" if args.case == "mid-line" else "empty_line_"
    name = f"repo_completion_{case}{checkpoint(Path(model))}_{args.split}.json"
    write_results("repo_completion", args.model, results, args.out or RESULTS / name)


if __name__ == "__main__":
    main()
