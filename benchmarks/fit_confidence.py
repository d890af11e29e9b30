"""Fit the fills' confidence (infill/core/confidence.py): a logistic regression over what a
decode knows of a fill, on fills of the training split, its form chosen on validation.

    python -m benchmarks.confidence_rows --split train --n 600 --out runs/confidence/train.jsonl
    python -m benchmarks.confidence_rows --split valid --n 400 --out runs/confidence/valid.jsonl
    python -m benchmarks.fit_confidence [--train runs/confidence/train.jsonl]
                                        [--valid runs/confidence/valid.jsonl] [--no-save]

The rows (benchmarks/confidence_rows.py) are fills as `infill fill` makes them and inline
completions as the language server asks them, each with every feature and whether it is
right; a fill the checks held back, or a completion that offers nothing, is never shown
and is left out. Each feature set of `SETS` and each L2 penalty of `PENALTIES` is fitted
on the training rows (Newton's method on the standardised features) and scored on the
validation rows by log loss (and expected calibration error, `ece`); the best by log loss
is fitted again on the training rows alone and written beside the model's weights
(model/weights/confidence.json, naming the network; `--no-save`: not written). Prints the
table and writes benchmarks/results/fit_confidence_<model>.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.results_file import write_results
from diffusion_infill.infill.core.confidence import FEATURES
from diffusion_infill.model.calibration import Calibration, save_calibration
from diffusion_infill.model.loading import default_model_dir, load_denoiser

BASE = ("mean log p", "min log p", "first log p", "log tokens", "empty")
SHAPES = ("shape cursor", "shape line", "shape inline", "shape lines")
ODDS = ("mean log odds", "min log odds", "last log p", "sum log p")
ENDS = ("end log p", "no end")
DECODE = ("first pass share", "forced share", "retried", "copied", "checked", "gapped")
LINE = (
    "line balanced",
    "line left open",
    "line overclosed",
    "line ends with ':'",
    "log chars",
    "open before",
)
TEXT = ("copy agrees", "repeated tokens")
SETS: dict[str, tuple[str, ...]] = {
    "probabilities": BASE + SHAPES,
    "+ odds": BASE + SHAPES + ODDS,
    "+ ends": BASE + SHAPES + ODDS + ENDS,
    "+ decode": BASE + SHAPES + ODDS + ENDS + DECODE,
    "+ the line": BASE + SHAPES + ODDS + ENDS + DECODE + LINE,
    "+ copies": BASE + SHAPES + ODDS + ENDS + DECODE + LINE + TEXT,
    "+ capped apart": tuple(FEATURES),
}
PENALTIES = (1e-4, 1e-3, 1e-2, 1e-1)  # L2 on the standardised weights, per row
BINS = 10  # equal-width confidence bins of the calibration error


def read_rows(path: Path, runner_ups: bool = False) -> list[tuple[dict[str, float], bool, str]]:
    """(features, right, kind) of every shown fill of a rows file, and with `runner_ups`
    of its runner-ups too."""
    out = []
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if r["offer"] is None or r["features"] is None:
            continue
        out.append((r["features"], bool(r["right"]), r["kind"]))
        if runner_ups:
            ups = [u for u in r["runner_ups"] if u["features"] is not None]
            out += [(u["features"], bool(u["right"]), r["kind"]) for u in ups]
    return out


def matrix(rows: list, names: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    x = np.array([[f[n] for n in names] for f, _, _ in rows], dtype=np.float64)
    return x, np.array([right for _, right, _ in rows], dtype=np.float64)


def fit(
    x: np.ndarray, y: np.ndarray, penalty: float
) -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
    """(mean, scale, bias, weights) of an L2 logistic regression on standardised `x`
    (Newton's method; the bias is not penalised)."""
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    z = np.hstack([np.ones((len(x), 1)), (x - mean) / scale])
    w = np.zeros(z.shape[1])
    reg = penalty * len(x) * np.eye(z.shape[1])
    reg[0, 0] = 0.0
    for _ in range(100):
        p = 1 / (1 + np.exp(-np.clip(z @ w, -50, 50)))
        grad = z.T @ (p - y) + reg @ w
        hess = (z * (p * (1 - p))[:, None]).T @ z + reg + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return mean, scale, float(w[0]), w[1:]


def predict(
    x: np.ndarray, mean: np.ndarray, scale: np.ndarray, bias: float, w: np.ndarray
) -> np.ndarray:
    return 1 / (1 + np.exp(-np.clip(bias + ((x - mean) / scale) @ w, -50, 50)))


def log_loss(p: np.ndarray, y: np.ndarray) -> float:
    p = np.clip(p, 1e-9, 1 - 1e-9)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def reliability(
    p: np.ndarray, y: np.ndarray, bins: int = BINS
) -> tuple[float, list[dict[str, Any]]]:
    """Expected calibration error (equal-width bins, weighted by their share of rows)
    and each bin's rows, mean confidence and share right."""
    rows, ece = [], 0.0
    for k in range(bins):
        lo, hi = k / bins, (k + 1) / bins
        inside = (p >= lo) & ((p < hi) if k < bins - 1 else (p <= hi))
        n = int(inside.sum())
        if not n:
            rows.append({"bin": [lo, hi], "n": 0, "confidence": None, "right": None})
            continue
        conf, right = float(p[inside].mean()), float(y[inside].mean())
        ece += n / len(p) * abs(conf - right)
        rows.append({"bin": [lo, hi], "n": n, "confidence": conf, "right": right})
    return ece, rows


def _table(train: list, valid: list) -> list[dict[str, Any]]:
    """Each feature set and penalty fitted on `train`, scored on `valid`."""
    out = []
    for name, names in SETS.items():
        x, y = matrix(train, names)
        vx, vy = matrix(valid, names)
        for penalty in PENALTIES:
            p = predict(vx, *fit(x, y, penalty))
            ece, _ = reliability(p, vy)
            out.append(
                {"features": name, "penalty": penalty, "log_loss": log_loss(p, vy), "ece": ece}
            )
            print(
                f"{name:18s} {penalty:6g}  log loss {out[-1]['log_loss']:.4f}  ECE {ece:.4f}",
                flush=True,
            )
    return out


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    for path in (args.train, args.valid):
        if not path.is_file():
            parser.error(f"{path} not found: python -m benchmarks.confidence_rows ... --out {path}")
    train = read_rows(args.train, args.runner_ups)
    valid = read_rows(args.valid, args.runner_ups)
    if not train or not valid:
        parser.error("no shown fills in the rows")
    print(
        f"{len(train)} training rows ({sum(r for _, r, _ in train)} right), {len(valid)} validation"
    )
    table = _table(train, valid)
    best = min(table, key=lambda r: r["log_loss"])
    names = SETS[best["features"]]
    x, y = matrix(train, names)
    mean, scale, bias, w = fit(x, y, best["penalty"])
    vx, vy = matrix(valid, names)
    ece, bins = reliability(predict(vx, mean, scale, bias, w), vy)
    den = load_denoiser(args.model)
    calibration = Calibration(
        network=den.network,
        features=names,
        mean=tuple(float(v) for v in mean),
        scale=tuple(float(v) for v in scale),
        weights=tuple(float(v) for v in w),
        bias=bias,
        fit={
            "rows": len(train),
            "right": int(y.sum()),
            "penalty": best["penalty"],
            "split": "train",
        },
    )
    model = Path(args.model or default_model_dir())
    if not args.no_save:
        print(f"wrote {save_calibration(calibration, model)}")
    results = {
        "command": " ".join(["python -m benchmarks.fit_confidence", *(argv or sys.argv[1:])]),
        "model": str(model),
        "train_rows": len(train),
        "valid_rows": len(valid),
        "runner_ups": args.runner_ups,
        "valid_ece": ece,
        "chosen": {**best, "names": list(names)},
        "table": table,
        "valid_reliability": bins,
        "weights": dict(zip(names, (float(v) for v in w), strict=True)),
    }
    write_results("fit_confidence", args.model, results, args.out)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", type=Path, default=Path("runs/confidence/train.jsonl"))
    parser.add_argument("--valid", type=Path, default=Path("runs/confidence/valid.jsonl"))
    parser.add_argument(
        "--model", type=Path, default=None, help="model directory (default: shipped)"
    )
    parser.add_argument("--runner-ups", action="store_true", help="fit on the runner-ups' rows too")
    parser.add_argument("--no-save", action="store_true", help="do not write confidence.json")
    parser.add_argument("--out", type=Path, default=None)
    return parser


if __name__ == "__main__":
    main()
