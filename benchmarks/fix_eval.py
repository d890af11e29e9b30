"""The fixer on real one-line fixes (benchmarks/real_fixes.py eval): line ranking (the
fixer's, infill/core/suspect_lines.py `rank_lines`: by the worst token when the model is
sure of a swap, else each line read masked too), the worst token, exact repair, against a
random ranking of the lines."""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

from tqdm import tqdm

from benchmarks.results_file import RESULTS
from diffusion_infill.infill.core.repair import fix_text
from diffusion_infill.infill.core.suspect_lines import rank_lines
from diffusion_infill.infill.core.suspicion import preference, worst_first
from diffusion_infill.model.loading import default_model_dir, load_denoiser


def checkpoint(model: Path) -> str:
    """A model's name in a results file: the tokens it has seen (training.json
    "tokens_total"), else its folder's name."""
    training = model / "training.json"
    if training.is_file():
        tokens = json.loads(training.read_text()).get("tokens_total")
        if tokens:
            return f"{round(tokens / 1e6)}Mtok"
    return model.name


def results_path(model: Path | None) -> Path:
    return RESULTS / f"real_fixes_{checkpoint(Path(model or default_model_dir()))}.json"


def changed_range(ex: dict) -> tuple[int, int]:
    """The characters of the window that the fix changes (one on each side of an
    insertion point)."""
    lines = ex["window"].split("\n")
    base = sum(len(line) + 1 for line in lines[: ex["window_line"]])
    bad, good = ex["buggy_line"], ex["fixed_line"]
    head = 0
    while head < min(len(bad), len(good)) and bad[head] == good[head]:
        head += 1
    tail = 0
    while tail < min(len(bad), len(good)) - head and bad[-1 - tail] == good[-1 - tail]:
        tail += 1
    s, e = base + head, base + len(bad) - tail
    return (s - 1, e + 1) if s == e else (s, e)


def score_example(den, ex: dict) -> dict:  # noqa: ANN001
    """One window through the fixer: what it ranks, what it rewrites."""
    t0 = time.perf_counter()
    result, scores = fix_text(ex["window"], denoiser=den, min_suspicion=0.0, min_likely=0.0)
    ms = (time.perf_counter() - t0) * 1000
    order = [x.line for x in rank_lines(ex["window"], scores, denoiser=den)]
    worst = next(iter(worst_first(scores, preference)), None)  # None: every token is prose
    s, e = changed_range(ex)
    target = ex["window_line"]
    rank = order.index(target) + 1 if target in order else None
    return {
        "package": ex["package"],
        "path": ex["path"],
        "line": ex["line"],
        "versions": f"{ex['old_version']} -> {ex['new_version']}",
        "buggy_line": ex["buggy_line"],
        "fixed_line": ex["fixed_line"],
        "words_changed": ex["words_changed"],
        "notes_line": ex.get("notes_line"),
        "lines": len(order),
        "rank": rank,
        "top1": rank == 1,
        "top3": rank is not None and rank <= 3,
        "random_top1": 1 / len(order) if order else 0.0,
        "random_top3": min(3, len(order)) / len(order) if order else 0.0,
        "worst": worst.text if worst else None,
        "likely": worst.likely if worst else None,
        "worst_in_change": worst is not None and worst.start < e and worst.end > s,
        "repaired": result is not None and result.text == ex["fixed_window"],
        "repair": (
            result.text.split("\n")[target]
            if result is not None and len(result.text.split("\n")) > target
            else None
        ),
        "ms": round(ms, 1),
    }


def summary(records: list[dict]) -> dict:
    n = len(records)
    mean = lambda key: sum(float(r[key]) for r in records) / n  # noqa: E731
    return {
        "n": n,
        "top1_line": mean("top1"),
        "top3_line": mean("top3"),
        "random_top1_line": mean("random_top1"),
        "random_top3_line": mean("random_top3"),
        "worst_token_in_change": mean("worst_in_change"),
        "exact_repair": mean("repaired"),
        "lines_per_window": mean("lines"),
        "ms_p50": statistics.median(r["ms"] for r in records),
    }


def evaluate(examples: list[dict], model: Path | None) -> dict:
    """Every example through the fixer; the figures overall and by kind of change."""
    den = load_denoiser(model)
    records = [
        score_example(den, ex)
        for ex in tqdm(examples, desc="real fixes", file=sys.stderr, leave=False)
    ]
    groups = {
        "one word": [r for r in records if r["words_changed"] == 1],
        "more words": [r for r in records if r["words_changed"] > 1],
        "notes name it": [r for r in records if r["notes_line"]],
    }
    return {
        "model": str(Path(model or default_model_dir())),
        "checkpoint": checkpoint(Path(model or default_model_dir())),
        "all": summary(records),
        "by_change": {k: summary(v) for k, v in groups.items() if v},
        "by_package": {
            p: summary([r for r in records if r["package"] == p])
            for p in sorted({r["package"] for r in records})
        },
        "records": records,
    }


def print_table(results: dict) -> None:
    rows = [("all", results["all"])] + list(results["by_change"].items())
    print(f"real one-line fixes, model {results['checkpoint']}")
    print(
        f"{'':14s} {'n':>4s} {'top-1':>7s} {'random':>7s} {'top-3':>7s} {'random':>7s} "
        f"{'token':>7s} {'repair':>7s}"
    )
    for name, r in rows:
        print(
            f"{name:14s} {r['n']:4d} {r['top1_line']:7.1%} {r['random_top1_line']:7.1%} "
            f"{r['top3_line']:7.1%} {r['random_top3_line']:7.1%} "
            f"{r['worst_token_in_change']:7.1%} {r['exact_repair']:7.1%}"
        )
    print(
        "top-1 / top-3: the changed line is the fixer's first / among its first three "
        "lines; random: the same for a random order of the lines with a token; token: "
        "the worst token lies in the changed characters; repair: the fix is exact"
    )
