"""benchmarks/prior_neighbours_study.py: the line prior with a line's neighbours, the
windows' edges in the softmax or not."""

from __future__ import annotations

import json
from pathlib import Path

from test_line_prior import _pairs

from benchmarks.prior_neighbours_study import NEIGHBOURS, neighbour_features


def test_the_neighbours_are_read_from_the_code_lines_around():
    code = ["def f(a):", "    b = a", "    return b", "x = 1", "x = 1"]
    rows = [dict(zip(NEIGHBOURS, row, strict=True)) for row in neighbour_features(code)]
    assert rows[1]["the code line before ends with ':'"] == 1.0
    assert rows[1]["the code line before starts with 'def'"] == 1.0
    assert rows[1]["indented as the code line before"] == 0.0
    assert rows[2]["the code line after is indented less"] == 1.0
    assert rows[2]["indented as the code line before"] == 1.0
    assert rows[3]["the same code on another line"] == 1.0
    assert rows[0]["the code line after is indented more"] == 1.0
    assert not any(rows[0][k] for k in NEIGHBOURS if "before" in k)  # nothing before it


def test_both_priors_are_fitted_and_ranked(run_benchmark, tmp_path: Path):
    pairs, out = tmp_path / "pairs.jsonl", tmp_path / "study.json"
    _pairs(pairs)
    done = run_benchmark(
        "prior_neighbours_study", "--pairs", str(pairs), "--valid", str(pairs),
        "--min-count", "5", "--lines", "inner", "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    got = json.loads(out.read_text())
    assert list(got)[:2] == ["command", "machine"] and got["lines"] == "inner"
    for name in ("text", "text and neighbours"):
        assert got[name]["windows"] == 40 and got[name]["valid"]["n"] == 40
        assert got[name]["valid"]["top1_line"] == 1.0
        assert 0.0 <= got[name]["valid_edge_first"] <= 1.0


def test_the_study_refuses_bad_arguments(benchmark_main, tmp_path: Path):
    code, err = benchmark_main("prior_neighbours_study", "--pairs", str(tmp_path / "none.jsonl"))
    assert code == 2 and "not found" in err
    assert "model.training.fix_pairs" in err
    code, err = benchmark_main("prior_neighbours_study", "--min-count", "0")
    assert code == 2 and "--min-count must be at least 1" in err
    code, err = benchmark_main("prior_neighbours_study", "--penalty", "0")
    assert code == 2 and "--penalty must be positive" in err
    code, err = benchmark_main("prior_neighbours_study", "--lines", "edges")
    assert code == 2 and "invalid choice" in err
