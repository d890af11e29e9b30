"""Fit the confidence of the copies offered at a completion (infill/core/copy_offers.py) on
the rows that benchmarks/copy_rows.py makes.

    python -m benchmarks.copy_rows [--n 8000] [--rows runs/confidence/train.jsonl \
        runs/confidence/valid.jsonl] [--out runs/copy_confidence/rows.jsonl]
    python -m diffusion_infill.model.training.fit_copy_confidence \
        [--copy-rows runs/copy_confidence/rows.jsonl]

Each row (JSON lines) is one copy a cursor offers: its `case`, the `set` it is drawn from,
its `features` (a bias first) and whether it is `right`. Two cases of copy, each a
logistic regression fitted on the rows of the corpus's training split (`FEATURES` names
their features):

- the rest of a line (a line cut after the space nearest its middle): the log of the
  tail's characters, whether several distinct copies follow it, whether the copy is not
  the first;
- the next line (the cursor on an empty line): the log of the line before's characters,
  whether several distinct lines follow it, whether the line after it reads as the line
  after the cursor's, whether it is not the first.

Each fit's log loss and calibration are reported on its training rows, the validation
split's (`valid`) and the copies from other files of the repository set's validation
packages (`repository_valid`). Where the rows hold them, a third fit per case of an inline
completion (`ITEM_CASES`: after code, an empty line): the probability that an item is
right from what vouches for its text (copy_offers.py `item_features`), fitted on the
training split's rows and reported on the validation split's; it names the network whose
confidence weights read the rows (refit when they change).

Writes its report to benchmarks/results/fit_copy_confidence.json (provenance.py: with the
commit and the machine); the weights go into copy_offers.py `WEIGHTS`, `LINE_WEIGHTS` and
`ITEM_WEIGHTS` by hand.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from diffusion_infill.model.training.logistic import log_loss, reliability
from diffusion_infill.model.training.provenance import REPORTS, command, write_report

ROWS = Path("runs/copy_confidence/rows.jsonl")
Row = tuple[list[float], bool]  # features (a bias first), the copy right
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
SETS = ("train", "valid", "repository_valid")  # what a copy case is reported on
ITEM_CASES = ("after code", "empty line")  # a completion's items; index: an empty line
ITEM_SETS = ("train", "valid")
STEPS = 50  # Newton steps


def fit(rows: list[Row]) -> np.ndarray:
    """The weights (the bias first, as the features hold it) of an unpenalised logistic
    regression on the features as they are, by `STEPS` Newton steps from zero.

    Not logistic.py's `fit`: the items' features are collinear (the bias is the decode's
    presence plus the copy's less both), so many weights predict alike, and the fit on
    standardised features lands on other ones than these steps on the features as they are."""
    x = np.array([f for f, _ in rows])
    y = np.array([r for _, r in rows], dtype=float)
    w = np.zeros(x.shape[1])
    for _ in range(STEPS):
        p = 1 / (1 + np.exp(-np.clip(x @ w, -50, 50)))  # separable rows: no overflow
        grad = x.T @ (p - y) / len(y)
        hess = (x.T * (p * (1 - p))) @ x / len(y)
        w -= np.linalg.solve(hess + 1e-9 * np.eye(len(w)), grad)
    return w


def report(w: np.ndarray, rows: list[Row]) -> dict[str, Any]:
    """Log loss, mean predicted against right, and expected calibration error (10 bins)."""
    if not rows:
        return {"n": 0}
    x = np.array([f for f, _ in rows])
    y = np.array([r for _, r in rows], dtype=float)
    p = np.clip(1 / (1 + np.exp(-np.clip(x @ w, -50, 50))), 1e-9, 1 - 1e-9)
    ece, _ = reliability(p, y)
    return {
        "n": len(rows),
        "log_loss": round(log_loss(p, y), 4),
        "mean_confidence": round(float(p.mean()), 4),
        "right": round(float(y.mean()), 4),
        "ece": round(ece, 4),
    }


def read_rows(path: Path) -> tuple[dict[tuple[str, str], list[Row]], set[str | None]]:
    """The rows of a rows file by case and set, and the networks its items name."""
    rows: dict[tuple[str, str], list[Row]] = defaultdict(list)
    networks: set[str | None] = set()
    for k, line in enumerate(path.read_text().splitlines()):
        r = json.loads(line)
        missing = {"case", "set", "features", "right"} - set(r)
        if missing:
            raise SystemExit(f"{path}: row {k + 1} lacks {', '.join(sorted(missing))}")
        rows[r["case"], r["set"]].append((r["features"], bool(r["right"])))
        if r["case"] in ITEM_CASES:
            networks.add(r.get("network"))
    return rows, networks


def fitted(rows: dict[tuple[str, str], list[Row]], case: str, sets: tuple[str, ...]) -> dict:
    """A case's weights, fitted on its training rows, and their report on each of `sets`."""
    if not rows.get((case, "train")):
        hint = " --rows TRAIN VALID" if case in ITEM_CASES else ""
        raise SystemExit(f"no training rows of {case!r}: python -m benchmarks.copy_rows{hint}")
    w = fit(rows[case, "train"])
    found: dict[str, Any] = {"weights": [round(float(v), 4) for v in w]}
    if case in FEATURES:
        if len(w) != len(FEATURES[case]):
            raise SystemExit(f"{case!r} rows have {len(w)} features, not {len(FEATURES[case])}")
        found["features"] = FEATURES[case]
    for name in sets:
        found[name] = report(w, rows.get((case, name), []))
        print(f"{case}, {name:17s} {found[name]}")
    print(f"{case}, weights", found["weights"])
    return found


def items(rows: dict[tuple[str, str], list[Row]], networks: set[str | None]) -> dict:
    """The items' fits, per case, and the network whose confidence weights read their rows."""
    if len(networks) > 1 or None in networks:
        raise SystemExit(f"the items' rows name networks {sorted(map(str, networks))}")
    (network,) = networks
    return {"network": network, **{case: fitted(rows, case, ITEM_SETS) for case in ITEM_CASES}}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--copy-rows", type=Path, default=ROWS, help="benchmarks.copy_rows's rows")
    p.add_argument("--out", type=Path, default=REPORTS / "fit_copy_confidence.json")
    args = p.parse_args(argv)
    if not args.copy_rows.is_file():
        p.error(f"{args.copy_rows} not found: python -m benchmarks.copy_rows --out PATH")
    rows, networks = read_rows(args.copy_rows)
    results: dict[str, Any] = {case: fitted(rows, case, SETS) for case in FEATURES}
    if networks:
        results["items"] = items(rows, networks)
    results["command"] = command("diffusion_infill.model.training.fit_copy_confidence", argv)
    write_report(results, args.out)


if __name__ == "__main__":
    main()
