"""Fit the fills' confidence (infill/core/confidence.py): a logistic regression over what a
decode knows of a fill, on fills of the training split, its form chosen on validation.

    python -m benchmarks.confidence_rows --split train --n 600 --out runs/confidence/train.jsonl
    python -m benchmarks.confidence_rows --split valid --n 400 --out runs/confidence/valid.jsonl
    python -m diffusion_infill.model.training.fit_confidence \
        [--train runs/confidence/train.jsonl] [--valid runs/confidence/valid.jsonl] [--no-save]

The rows (benchmarks/confidence_rows.py) are fills as `infill fill` makes them and inline
completions as the language server asks them, each with every feature and whether it is
right; a fill the checks held back, or a completion that offers nothing, is never shown
and is left out. Each feature set of `SETS` and each L2 penalty of `PENALTIES` is fitted
on the training rows (logistic.py: Newton's method on the standardised features) and
scored on the validation rows by log loss (and expected calibration error, `ece`); the
best by log loss is fitted again on the training rows alone and written beside the model's
weights (model/weights/confidence.json, naming the network; `--no-save`: not written).
Prints the table and writes its report to benchmarks/results/fit_confidence_<model>.json
(provenance.py: with the commit and the machine).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from diffusion_infill.infill.core.confidence import FEATURES
from diffusion_infill.model.calibration import Calibration, save_calibration
from diffusion_infill.model.loading import default_model_dir, load_denoiser
from diffusion_infill.model.training.logistic import fit, log_loss, predict, reliability
from diffusion_infill.model.training.provenance import (
    REPORTS,
    command,
    fill_code,
    model_name,
    write_report,
)

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
        "command": command("diffusion_infill.model.training.fit_confidence", argv),
        "model": str(model),
        "train_rows": len(train),
        "valid_rows": len(valid),
        "runner_ups": args.runner_ups,
        "valid_ece": ece,
        "chosen": {**best, "names": list(names)},
        "table": table,
        "valid_reliability": bins,
        "weights": dict(zip(names, (float(v) for v in w), strict=True)),
        "fill_code": fill_code(),  # with what it wrote: the fill code it leaves
    }
    write_report(results, args.out or REPORTS / f"fit_confidence_{model_name(args.model)}.json")


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
