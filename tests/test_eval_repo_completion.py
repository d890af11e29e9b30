"""The repository completion benchmark's figures (benchmarks/eval_repo_completion.py) and
the copies' rows (benchmarks/copy_rows.py) and the fits of their confidence
(model/training/fit_copy_confidence.py), on made-up records and texts."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from benchmarks.copy_rows import next_line, rest_of_line
from benchmarks.eval_repo_completion import arm_figures
from diffusion_infill.infill.core.snippets import Snippet
from diffusion_infill.model.training import fit_copy_confidence
from diffusion_infill.model.training.fit_copy_confidence import FEATURES, fit, report


def _records() -> list[dict]:
    # three cursors: items (text, confidence) per arm, surest first
    return [
        {"truth": "a)", "model": [("b)", 0.1)], "with": [("a)", 0.6), ("b)", 0.1)]},
        {"truth": "c", "model": [("c", 0.4)], "with": [("d", 0.5), ("c", 0.4)], "with_alone": True},
        {"truth": "e", "model": [], "with": []},
    ]


def test_an_arm_counts_its_top_item_the_truth_among_items_and_wins_against_the_model():
    got = arm_figures(_records(), "with")
    assert got["n"] == 3 and got["exact_top"] == pytest.approx(1 / 3, abs=1e-4)
    assert got["truth_among_items"] == pytest.approx(2 / 3, abs=1e-4)
    assert (got["won"], got["lost"]) == (1, 1)
    assert got["without_the_model"] == pytest.approx(1 / 3, abs=1e-4)
    # at 0.5 both tops are shown (0.6 and 0.5), one right; at 0.6 the right one alone
    assert got["floors"]["0.5"] == {"shown": pytest.approx(2 / 3, abs=1e-4), "right_of_shown": 0.5}
    assert got["floors"]["0.6"]["right_of_shown"] == 1.0
    alone = arm_figures(_records(), "model")
    assert (alone["won"], alone["lost"]) == (0, 0)
    assert alone["floors"]["0.5"] == {"shown": 0.0, "right_of_shown": None}


def test_mid_line_rows_read_the_tail_and_whether_each_copy_is_right():
    doc = "total = compute(items, 2)\nprice = compute(items, \n"
    at = doc.index("\n", 30)
    ((x, right),) = rest_of_line(doc, at, "2)", None)
    assert right and x == [1.0, math.log(len(" = compute(items, ")), 0.0, 0.0]
    other = [Snippet("b.py", "x = compute(items, 9)\ny = compute(items, 2)\n")]
    (x1, wrong), (x2, right) = rest_of_line(doc, at, "2)", other)  # "9)", then "2)"
    assert not wrong and right and x1[2:] == [1.0, 0.0] and x2[2:] == [1.0, 1.0]
    assert rest_of_line("nothing here\n", 8, "x", None) == []


def test_next_line_rows_read_the_line_and_whether_the_line_after_agrees():
    doc = "if ok:\n    go()\n    stop()\nif ok:\n    \n    stop()\n"
    at = doc.rindex("    \n") + 4
    ((x, right),) = next_line(doc, at, "go()", None)
    assert right and x == [1.0, math.log(len("if ok:")), 0.0, 1.0, 0.0]
    assert next_line(doc, at, "   ", None) == []  # no truth to be right about


def test_the_fit_is_calibrated_on_its_own_rows():
    rng = np.random.default_rng(0)
    rows = [
        ([1.0, float(v)], bool(rng.random() < 1 / (1 + math.exp(-v))))
        for v in rng.normal(size=2000)
    ]
    w = fit(rows)
    assert w[1] == pytest.approx(1.0, abs=0.2)
    got = report(w, rows)
    assert got["n"] == 2000 and got["ece"] < 0.05
    assert got["mean_confidence"] == pytest.approx(got["right"], abs=0.02)
    assert report(w, []) == {"n": 0}


def test_the_fit_reads_the_rows_file_and_writes_its_report(tmp_path: Path):
    rng = np.random.default_rng(1)
    rows = []
    for case, names in FEATURES.items():
        for name, n in (("train", 300), ("valid", 100)):
            for _ in range(n):
                x = [1.0, *rng.normal(size=len(names) - 1).round(3).tolist()]
                rows.append({"case": case, "set": name, "features": x, "right": x[1] > 0})
    path, out = tmp_path / "rows.jsonl", tmp_path / "fit.json"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    fit_copy_confidence.main(["--copy-rows", str(path), "--out", str(out)])
    got = json.loads(out.read_text())
    case = got["rest of the line"]
    assert case["features"] == FEATURES["rest of the line"] and case["weights"][1] > 1
    assert case["train"]["n"] == 300 and case["repository_valid"] == {"n": 0}
    assert "items" not in got and {"command", "commit", "machine"} <= set(got)
    assert got["command"].startswith("python -m diffusion_infill.model.training.fit_copy")
    item = {"case": "after code", "set": "train", "features": [1.0], "right": True}
    path.write_text(path.read_text() + json.dumps({**item, "network": "n"}) + "\n")
    with pytest.raises(SystemExit, match="no training rows of 'empty line'"):
        fit_copy_confidence.main(["--copy-rows", str(path), "--out", str(out)])
