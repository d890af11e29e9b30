"""Calibrate the fixer's rule (infill/core/repair.py `is_suspicious`) so that it leaves
correct code alone.

    python -m benchmarks.calibrate_fix [--model DIR] [--corpus data/corpus_v2] [--n-bugs 80]

The rule flags a token when its suspicion (1 - p(written)) is at least t AND the model's
likeliest other token has p >= r. On the VALIDATION split it scores
- clean files: every file of the split, unmodified (each cut to its first `--max-chars`
  characters of whole lines, about the test split's median file, to bound the time);
- `--n-bugs` windows with one injected bug (benchmarks/heldout.py `bug_examples`) and the
  same windows clean;
and for a grid of (t, r) reports: the share of clean files the fixer would change (it
proposes an edit when any token passes), recall (the token the fixer picks first is the
bug's), precision (of the windows the fixer would edit, bug and clean pooled, the share
where it picked the bug). The default is the grid point with the best recall among
those that change at most 10% of clean validation files (`pick_default`). At that
default, on the TEST split: clean files flagged and actually changed (fix run), recall,
precision and exact repair (the fix run restores the clean window). Also on the grid:
one combined score, p(likely) - p(written) >= m, for comparison.

Prints a table, writes benchmarks/results/fix_calibration.json and the curve at
docs/img/fix_calibration.png. About 25 minutes on 2 shared CPU cores (`--cache DIR`
keeps the scores between runs). The scoring and the fixer's runs are
benchmarks/fix_scoring.py's; the rule over the grid is worked out here, on the scores.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.fix_scoring import Split, at_setting, collect
from benchmarks.heldout import BugExample
from benchmarks.results_file import write_results
from diffusion_infill.infill.core.results import TokenScore
from diffusion_infill.infill.core.suspicion import (
    DEFAULT_MIN_LIKELY,
    DEFAULT_MIN_SUSPICION,
    worst_first,
)
from diffusion_infill.model.loading import default_model_dir, load_denoiser

ROOT = Path(__file__).resolve().parent.parent
PLOT = ROOT / "docs" / "img" / "fix_calibration.png"
SUSPICION_GRID = [0.5, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.998, 0.999, 0.9995]
LIKELY_GRID = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95]
MARGIN_GRID = [-0.5, 0.0, 0.2, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98]
MAX_CHANGED = 0.10  # the requirement: at most 1 clean file in 10 changed


# -- the rule on arrays: the first token the fixer would pick, per text -----------------


def _arrays(
    scores: list[TokenScore], bug: BugExample | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(suspicion, p_likely, on the bug) of the non-whitespace tokens, worst first (the
    order `suspicious_spans` picks in)."""
    kept = worst_first(scores)
    sus = np.array([s.suspicion for s in kept], dtype=np.float64)
    lik = np.array([s.p_likely for s in kept], dtype=np.float64)
    hit = np.array(
        [bug is not None and s.start < bug.end and s.end > bug.start for s in kept], dtype=bool
    )
    return sus, lik, hit


def _picks(arrays, passes) -> tuple[np.ndarray, np.ndarray]:
    """Per text: does any token pass, and is the first that passes on the bug."""
    flagged, on_bug = [], []
    for sus, lik, hit in arrays:
        ok = passes(sus, lik)
        k = int(ok.argmax()) if len(ok) else 0
        flagged.append(bool(len(ok) and ok[k]))
        on_bug.append(bool(len(ok) and ok[k] and hit[k]))
    return np.array(flagged), np.array(on_bug)


def _row(data: dict[str, list], passes) -> dict[str, float | None]:
    files, _ = _picks(data["files"], passes)
    bug_flagged, located = _picks(data["bugs"], passes)
    clean_flagged, _ = _picks(data["clean"], passes)
    edited = bug_flagged.sum() + clean_flagged.sum()
    return {
        "clean_files_changed": float(files.mean()),
        "clean_windows_changed": float(clean_flagged.mean()),
        "bug_windows_flagged": float(bug_flagged.mean()),
        "recall": float(located.mean()),
        "precision": float(located.sum() / edited) if edited else None,  # None: no edit
    }


def grid(split: Split) -> tuple[list[dict], list[dict]]:
    data = {
        "files": [_arrays(s) for s in split.file_scores],
        "bugs": [_arrays(s, b) for s, b in zip(split.bug_scores, split.bugs, strict=True)],
        "clean": [_arrays(s) for s in split.clean_scores],
    }
    rule = [
        {
            "min_suspicion": t,
            "min_likely": r,
            **_row(data, lambda s, q, t=t, r=r: (s >= t) & (q >= r)),
        }
        for r in LIKELY_GRID
        for t in SUSPICION_GRID
    ]
    margin = [
        {"min_margin": m, **_row(data, lambda s, q, m=m: q - (1 - s) >= m)} for m in MARGIN_GRID
    ]
    return rule, margin


def pick_default(rows: list[dict]) -> dict:
    """The most permissive safe setting: the best recall among the rows that change at
    most MAX_CHANGED of the clean files. Among equal recalls, the one that changes the
    fewest clean files (changing more buys nothing), then the lowest thresholds."""
    safe = [r for r in rows if r["clean_files_changed"] <= MAX_CHANGED]
    return max(
        safe,
        key=lambda r: (
            r["recall"],
            -r["clean_files_changed"],
            -r["min_suspicion"],
            -r["min_likely"],
        ),
    )


# -- output -----------------------------------------------------------------------------


def _pct(x: float | None) -> str:
    return "   -  " if x is None else f"{100 * x:5.1f}%"


def print_grid(rows: list[dict], default: dict) -> None:
    print("validation: the rule suspicion >= t AND p(likely) >= r")
    print(
        f"{'t':>7} {'r':>5}  {'clean files changed':>19}  {'clean windows':>13}  "
        f"{'recall':>7}  {'precision':>9}"
    )
    for row in rows:
        mark = "  <- default" if row is default else ""
        print(
            f"{row['min_suspicion']:7.4f} {row['min_likely']:5.2f}  "
            f"{_pct(row['clean_files_changed']):>19}  {_pct(row['clean_windows_changed']):>13}"
            f"  {_pct(row['recall']):>7}  {_pct(row['precision']):>9}{mark}"
        )


def plot(rows: list[dict], margin: list[dict], default: dict, test: dict, path: Path) -> None:
    """Left: precision against recall; right: recall against the clean files changed.
    One line per r, sweeping t; the combined score (dotted) for comparison."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (pr, fp) = plt.subplots(1, 2, figsize=(11, 4.4))
    lines = [
        (f"r = {r:g}", [x for x in rows if x["min_likely"] == r], ".-") for r in LIKELY_GRID[::2]
    ] + [("p(likely) - p(written) >= m", margin, "k.:")]
    for label, line, style in lines:
        pts = [x for x in line if x["precision"] is not None]
        pr.plot([x["recall"] for x in pts], [x["precision"] for x in pts], style, label=label)
        fp.plot(
            [x["clean_files_changed"] for x in line],
            [x["recall"] for x in line],
            style,
            label=label,
        )
    star = f"default: t = {default['min_suspicion']:g}, r = {default['min_likely']:g} (validation)"
    pr.plot([default["recall"]], [default["precision"]], "r*", markersize=14, label=star)
    fp.plot([default["clean_files_changed"]], [default["recall"]], "r*", markersize=14, label=star)
    fp.plot(
        [test["clean_files_changed"]],
        [test["recall"]],
        "bx",
        markersize=10,
        mew=2,
        label="the default on the test split",
    )
    fp.axvline(MAX_CHANGED, color="r", lw=0.8, ls="--")
    pr.set_xlabel("recall: the fixer's first pick is the injected bug")
    pr.set_ylabel("precision (bug and clean windows pooled)")
    fp.set_xlabel("clean files the fixer would change (dashed: the 10% limit)")
    fp.set_ylabel("recall")
    for ax in (pr, fp):
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=-0.002)
    fp.set_xlim(-0.02, 1.02)
    pr.legend(fontsize=7)
    fp.legend(fontsize=7, loc="upper left")
    fig.suptitle(
        "Fixer calibration, validation split (suspicion >= t AND p(likely) >= r; "
        "each line sweeps t from 0.5 to 0.9995)",
        fontsize=10,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    den = load_denoiser(args.model)
    valid = collect(den, args.corpus, "valid", args.n_bugs, args.seed, args.max_chars, args.cache)
    rows, margin = grid(valid)
    default = pick_default(rows)
    print_grid(rows, default)
    t, r = default["min_suspicion"], default["min_likely"]
    valid_fix = at_setting(den, valid, t, r, "valid")
    test = collect(den, args.corpus, "test", args.n_bugs, args.seed + 1, args.max_chars, args.cache)
    test_fix = at_setting(den, test, t, r, "test")
    for name, row in (("validation", valid_fix), ("test", test_fix)):
        print(
            f"{name:>10} at t = {t:g}, r = {r:g}: clean files flagged "
            f"{_pct(row['clean_files_flagged'])}, changed {_pct(row['clean_files_changed'])} "
            f"(of {row['files']}); bug windows: recall {_pct(row['recall'])}, precision "
            f"{_pct(row['precision'])}, exact repair {_pct(row['exact_repair'])} "
            f"(of {row['bug_windows']})"
        )
    shipped = (DEFAULT_MIN_SUSPICION, DEFAULT_MIN_LIKELY)
    if shipped != (t, r):
        print(
            f"note: infill/core/repair.py ships t = {shipped[0]:g}, r = {shipped[1]:g}, "
            f"not the calibrated t = {t:g}, r = {r:g}"
        )
    plot(rows, margin, default, test_fix, args.plot)
    write_results(
        "fix_calibration",
        args.model,
        {
            "model": str(args.model or default_model_dir()),
            "command": "python -m benchmarks.calibrate_fix " + " ".join(sys.argv[1:]),
            "corpus": str(args.corpus),
            "max_chars": args.max_chars,
            "n_bugs": args.n_bugs,
            "rule": "suspicion >= min_suspicion AND p_likely >= min_likely",
            "default": {"min_suspicion": t, "min_likely": r},
            "shipped": {"min_suspicion": shipped[0], "min_likely": shipped[1]},
            "validation_grid": rows,
            "validation_margin_grid": margin,
            "validation_at_default": valid_fix,
            "test_at_default": test_fix,
            "seconds": round(time.perf_counter() - t0, 1),
        },
        args.out or ROOT / "benchmarks" / "results" / "fix_calibration.json",
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model", type=Path, default=None, help="model directory (default: the shipped model)"
    )
    parser.add_argument(
        "--corpus",
        type=Path,
        default=Path("data/corpus_v2"),
        help="corpus folder with valid.jsonl and test.jsonl",
    )
    parser.add_argument(
        "--n-bugs",
        type=int,
        default=80,
        help="injected-bug windows per split (and as many clean ones)",
    )
    parser.add_argument(
        "--max-chars",
        type=int,
        default=8000,
        help="each clean file cut to its first whole lines within this",
    )
    parser.add_argument("--seed", type=int, default=0, help="bug selection seed")
    parser.add_argument(
        "--cache", type=Path, default=None, help="folder keeping the scores between runs"
    )
    parser.add_argument("--out", type=Path, default=None, help="results JSON path")
    parser.add_argument("--plot", type=Path, default=PLOT, help="curve PNG path")
    return parser


if __name__ == "__main__":
    main()
