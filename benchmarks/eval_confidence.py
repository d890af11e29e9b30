"""How well the fills' confidence is calibrated, and what its gate and the runner-ups give.

    python -m benchmarks.confidence_rows --split test --n 400 --out runs/confidence/test.jsonl
    python -m benchmarks.confidence_rows --real --n 400 --out runs/confidence/real.jsonl
    python -m benchmarks.eval_confidence --rows runs/confidence/test.jsonl \
        --rows runs/confidence/real.jsonl [--model DIR] [--min-confidence P]

Per rows file (benchmarks/confidence_rows.py: fills as `infill fill` makes them, inline
completions as the server asks them), the confidence of every fill is computed again from
its features with the model's weights (confidence.json; the rows' own, where recorded,
must agree), then:

- calibration: the reliability diagram (10 equal-width bins: rows, mean confidence, share
  right) and the expected calibration error, of the shown fills of every kind and per kind;
- precision and coverage per kind as the threshold moves (0 to 0.95): a completion shows
  its surest item at or above it (lsp/offers.py `ranked`), a fill is written at or above
  it (`--min-confidence`); coverage is the share of positions shown, precision the share
  of those exactly right (and for completions, whose text is the start of the truth);
  and the point at `--min-confidence` (default: the server's completionMinConfidence);
- runner-ups: how often the truth is among the (up to 3) items against the first one;
- for completions, the positions where no copy is found: how many show an item, and the
  surest item's confidence there.

Prints the figures and writes benchmarks/results/confidence_<model>_<split>.json (the
first rows file's split; or --out).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.results_file import write_results
from diffusion_infill.infill.core.confidence import Calibrator
from diffusion_infill.lsp.offers import completion_items
from diffusion_infill.lsp.settings import DEFAULT_MIN_CONFIDENCE
from diffusion_infill.model.calibration import CALIBRATION, parse_calibration
from diffusion_infill.model.loading import default_model_dir
from diffusion_infill.model.training.logistic import reliability

COMPLETIONS = ("mid-line", "empty-line")
THRESHOLDS = [round(0.05 * k, 2) for k in range(20)]
ITEMS = 3  # the items a completion offers (completionItems)
RUNNER_UPS = ITEMS - 1  # the runner-ups the server asks a fill for (lsp/completion.py)


class Scorer:
    """The model's calibration applied to a row's features."""

    def __init__(self, model: Path) -> None:
        path = model / CALIBRATION
        self.calibration = parse_calibration(json.loads(path.read_text()), str(path))
        self.calibrator = Calibrator(self.calibration)
        self.drift = 0.0  # the largest difference from a confidence the engine recorded

    def __call__(self, features: dict[str, float], recorded: float | None) -> float:
        p = self.calibrator.probability_of([features[n] for n in self.calibrator.names])
        if recorded is not None:
            self.drift = max(self.drift, abs(p - recorded))
        return p


def items(row: dict[str, Any], score: Scorer) -> list[tuple[float, bool, bool]]:
    """(confidence, right, prefix) of a row's items: its fill, then the engine's
    `RUNNER_UPS` surest runner-ups (of those recorded, by the weights' confidence); for a
    completion as the server offers them (lsp/offers.py `completion_items`): the fill, its
    runner-ups and the copies of its document, each distinct text once with the
    confidence of what vouches for it, surest first, none blank, at most `ITEMS`."""
    if row["kind"] in COMPLETIONS:
        fill, ups, copies, facts = completion_candidates(row, score)
        offers = completion_items(fill, ups, copies, row["kind"] == "empty-line", 0.0, ITEMS)
        return [(confidence, *facts[text.strip()]) for text, confidence in offers]
    if row["offer"] is None or row["features"] is None:
        return []
    own = (score(row["features"], row["confidence"]), row["right"], row["prefix"])
    return [own, *((c, right, prefix) for c, right, prefix, _ in _runner_ups(row, score))]


def completion_candidates(row: dict[str, Any], score: Scorer) -> tuple[Any, ...]:
    """A completion row's fill (None: none), its `RUNNER_UPS` surest runner-ups and its
    copies as lsp/offers.py `completion_items` takes them, (text, confidence) each, the
    decode's confidences read with the model's weights; and (right, prefix) of each text
    (stripped)."""
    copies = row.get("copies", [])
    facts = {c["offer"].strip(): (c["right"], c["prefix"]) for c in copies}
    found = [(c["offer"], c["confidence"]) for c in copies]
    if row["offer"] is None or row["features"] is None:
        return None, [], found, facts
    ups = _runner_ups(row, score)
    facts |= {offer.strip(): (right, prefix) for _, right, prefix, offer in ups}
    facts[row["offer"].strip()] = (row["right"], row["prefix"])
    fill = (row["offer"], score(row["features"], row["confidence"]))
    return fill, [(offer, c) for c, _, _, offer in ups], found, facts


def _runner_ups(row: dict[str, Any], score: Scorer) -> list[tuple[float, bool, bool, str]]:
    """(confidence, right, prefix, offer) of a row's `RUNNER_UPS` surest runner-ups."""
    scored = [
        (score(u["features"], u["confidence"]), u["right"], u["prefix"], u["offer"])
        for u in row["runner_ups"]
        if u["features"] is not None
    ]
    return sorted(scored, key=lambda t: -t[0])[:RUNNER_UPS]


def curve(ranked: list[list[tuple[float, bool, bool]]], t: float) -> dict[str, float]:
    """Coverage and precision at threshold `t`: the first item, the engine's fill, is
    shown when its confidence is at or above it."""
    shown = [r[0] for r in ranked if r and r[0][0] >= t]
    n = len(ranked)
    return {
        "threshold": t,
        "coverage": len(shown) / n if n else 0.0,
        "precision": sum(s[1] for s in shown) / len(shown) if shown else None,
        "prefix_precision": sum(s[2] for s in shown) / len(shown) if shown else None,
        "right_per_position": sum(s[1] for s in shown) / n if n else 0.0,
    }


def kind_figures(rows: list[dict], score: Scorer, floor: float) -> dict[str, Any]:
    """One kind's figures: calibration, the curve, the point at `floor`, runner-ups."""
    ranked = [items(r, score) for r in rows]
    firsts = [r[0] for r in ranked if r]
    p = np.array([f[0] for f in firsts])
    y = np.array([f[1] for f in firsts], dtype=np.float64)
    ece, bins = reliability(p, y) if len(p) else (None, [])
    points = [curve(ranked, t) for t in THRESHOLDS]
    at = curve(ranked, floor)
    # the items ranked by confidence, a runner-up before the fill where it scores higher:
    # what the server does not do (lsp/offers.py `ranked`)
    mixed = curve([sorted(r, key=lambda i: -i[0]) for r in ranked], floor)
    return {
        "positions": len(rows),
        "shown_at_default": at["coverage"],  # of the positions
        "exact_at_default": at["precision"],  # of those shown
        "prefix_at_default": at["prefix_precision"],
        "ranked_together_at_default": {k: mixed[k] for k in ("coverage", "precision")},
        "shown_ungated": len(firsts),
        "right_first": float(y.mean()) if len(y) else 0.0,
        "ece": ece,
        "reliability": bins,
        "curve": points,
        # the lowest threshold whose shown fills are at least half exactly right (the rule
        # completionMinConfidence's default was chosen by, on validation completions)
        "lowest_half_right": next(
            (p["threshold"] for p in points if (p["precision"] or 0) >= 0.5), None
        ),
        "top1_right_per_position": sum(r[0][1] for r in ranked if r) / len(rows),
        "any_of_items_right_per_position": sum(any(i[1] for i in r) for r in ranked) / len(rows),
        "items_per_position": float(np.mean([len(r) for r in ranked])),
        # every runner-up recorded (confidence_rows --runner-ups 8: the engine's whole pool)
        "any_recorded_right_per_position": sum(
            r["offer"] is not None and (r["right"] or any(u["right"] for u in r["runner_ups"]))
            for r in rows
        )
        / len(rows),
        "no_copy": _no_copy(rows, ranked, floor),
    }


def _no_copy(rows: list[dict], ranked: list[list[tuple[float, bool, bool]]], floor: float) -> Any:
    """A completion kind's positions where no copy is found: how many, how many show an
    item at `floor`, and the surest item's confidence there (what lsp/offers.py
    `LONE_LINE` rests on); None for fills."""
    if not rows or rows[0]["kind"] not in COMPLETIONS:
        return None
    alone = [r for r, row in zip(ranked, rows, strict=True) if not row.get("copies")]
    return {
        "positions": len(alone),
        "shown_at_default": sum(bool(r) and r[0][0] >= floor for r in alone),
        "surest": max((r[0][0] for r in alone if r), default=None),
    }


def split_figures(path: Path, score: Scorer, floor: float) -> dict[str, Any]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    kinds = sorted(
        {r["kind"] for r in rows},
        key=[*COMPLETIONS, *["cursor", "whole-line", "part-of-line"]].index,
    )
    out: dict[str, Any] = {
        "rows": str(path),
        "split": rows[0]["split"] if rows else None,
        "ece": None,  # of every kind's shown fills (below)
        "fills_ece": None,  # of the code actions' fills alone
        "kinds": {},
    }
    for kind in kinds:
        out["kinds"][kind] = kind_figures([r for r in rows if r["kind"] == kind], score, floor)
    everything = [items(r, score) for r in rows]
    p = np.array([r[0][0] for r in everything if r])
    y = np.array([r[0][1] for r in everything if r], dtype=np.float64)
    out["ece"], out["reliability"] = reliability(p, y)
    fills = [r for r in rows if r["kind"] not in COMPLETIONS]
    fp = np.array([r[0][0] for r in (items(x, score) for x in fills) if r])
    fy = np.array([r[0][1] for r in (items(x, score) for x in fills) if r], dtype=np.float64)
    out["fills_ece"] = reliability(fp, fy)[0] if len(fp) else None
    return out


def _print(name: str, fig: dict[str, Any], floor: float) -> None:
    print(f"== {name}: ECE {fig['ece']:.4f} over all shown fills (fills alone {fig['fills_ece']})")
    for kind, k in fig["kinds"].items():
        prec = "-" if k["exact_at_default"] is None else f"{k['exact_at_default']:.1%}"
        pref = "-" if k["prefix_at_default"] is None else f"{k['prefix_at_default']:.1%}"
        ece = "-" if k["ece"] is None else f"{k['ece']:.4f}"
        print(
            f"{kind:13s} n {k['positions']:4d}  ECE {ece}"
            f"  at {floor:g}: shown {k['shown_at_default']:.1%}, exact {prec}, prefix {pref}"
            f"  | top-1 {k['top1_right_per_position']:.1%}, any of {k['items_per_position']:.1f} "
            f"items {k['any_of_items_right_per_position']:.1%}"
            f" | half right from {k['lowest_half_right']}"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=Path, action="append", required=True, help="a rows file")
    parser.add_argument(
        "--model", type=Path, default=None, help="model directory (default: shipped)"
    )
    parser.add_argument("--min-confidence", type=float, default=DEFAULT_MIN_CONFIDENCE)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    model = Path(args.model or default_model_dir())
    if not (model / CALIBRATION).is_file():
        parser.error(
            f"{model / CALIBRATION} not found: "
            "python -m diffusion_infill.model.training.fit_confidence"
        )
    for path in args.rows:
        if not path.is_file():
            parser.error(f"{path} not found: python -m benchmarks.confidence_rows --out {path}")
    score = Scorer(model)
    splits = {}
    for path in args.rows:
        fig = split_figures(path, score, args.min_confidence)
        splits[fig["split"]] = fig
        _print(fig["split"], fig, args.min_confidence)
    print(f"largest difference from the engine's recorded confidence: {score.drift:.2e}")
    results = {
        "command": " ".join(["python -m benchmarks.eval_confidence", *(argv or sys.argv[1:])]),
        "model": str(model),
        "min_confidence": args.min_confidence,
        "calibration": score.calibration.to_json(),
        "recorded_drift": score.drift,
        "splits": splits,
    }
    first = next(iter(splits))
    out = args.out or Path("benchmarks/results") / f"confidence_{_name(model)}_{first}.json"
    write_results("confidence", args.model, results, out)


def _name(model: Path) -> str:
    from benchmarks.eval_shapes import checkpoint

    return checkpoint(model)


if __name__ == "__main__":
    main()
