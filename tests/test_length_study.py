"""benchmarks/length_study.py end to end on a tiny model: the records and results it
writes, and the same holes in a larger part of their files with --window-chars."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.mark.slow
def test_window_chars_keeps_the_holes(
    run_benchmark, tiny_model_dir: Path, modules_corpus: Path, tmp_path: Path
) -> None:
    got = {}
    for chars in ("700", "2400"):
        out, records = tmp_path / f"study{chars}.json", tmp_path / f"records{chars}.json"
        done = run_benchmark(
            "length_study",
            "--model",
            str(tiny_model_dir),
            "--corpus",
            str(modules_corpus),
            "--split",
            "test",
            "--n",
            "2",
            "--lengths",
            "1,2",
            "--window-chars",
            chars,
            "--records",
            str(records),
            "--out",
            str(out),
        )
        assert done.returncode == 0, done.stderr
        result = json.loads(out.read_text())
        assert result["window_chars"] == int(chars) and result["n"] == 2
        got[chars] = json.loads(records.read_text())
    # the same holes: the true lengths agree record by record
    assert [r["true_len"] for r in got["2400"]] == [r["true_len"] for r in got["700"]]


def test_refuses_bad_arguments(run_benchmark) -> None:
    for args in (("--window-chars", "0"), ("--n", "0"), ("--lengths", "1,x"), ("--lengths", "0,2")):
        done = run_benchmark("length_study", *args)
        assert done.returncode == 2 and "must" in done.stderr, (args, done.stderr)


@pytest.mark.slow
def test_part_of_line_holes(
    run_benchmark, tiny_model_dir: Path, modules_corpus: Path, tmp_path: Path
) -> None:
    out, records = tmp_path / "study.json", tmp_path / "records.json"
    done = run_benchmark(
        "length_study",
        *("--model", str(tiny_model_dir), "--corpus", str(modules_corpus), "--split", "test"),
        *("--n", "2", "--lengths", "1,2", "--shape", "part-of-line"),
        *("--records", str(records), "--out", str(out)),
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert result["shape"] == "part-of-line" and result["n"] == 2
    assert "commit sum + 0.1 prior" in result
    assert len(json.loads(records.read_text())) == 2


def test_refuses_an_unknown_shape(run_benchmark) -> None:
    done = run_benchmark("length_study", "--shape", "block")
    assert done.returncode == 2 and "invalid choice" in done.stderr
