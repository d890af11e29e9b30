"""The study of blocks filled one line at a time (benchmarks/block_lines_study.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.block_lines_study import repeats_a_line


def test_a_line_written_twice_in_a_row_is_a_repeat() -> None:
    assert repeats_a_line("    x = 1\n    x = 1\n")
    assert repeats_a_line("a\n\n  a\n")  # blank lines and indentation aside
    assert not repeats_a_line("    x = 1\n    y = 1\n    x = 1\n")
    assert not repeats_a_line("")


@pytest.mark.slow
def test_end_to_end_against_the_engines_fills(
    run_benchmark, tiny_model_dir: Path, modules_corpus: Path, tmp_path: Path
) -> None:
    records = tmp_path / "blocks.json"
    done = run_benchmark(
        "eval_shapes", "--model", str(tiny_model_dir), "--corpus", str(modules_corpus),
        "--split", "test", "--n", "2", "--shapes", "block", "--lengths-only", "engine",
        "--out", str(records),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    for mode in ("plain", "insert"):
        out = tmp_path / f"{mode}.json"
        done = run_benchmark(
            "block_lines_study", str(records), "--model", str(tiny_model_dir),
            "--corpus", str(modules_corpus), "--split", "test", "--mode", mode,
            "--out", str(out),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        found = json.loads(out.read_text())
        assert found["n"] == 2 and len(found["records"]) == 2
        for r in found["records"]:  # one line written for each line of the block
            assert r["fill"].count("\n") <= r["truth"].count("\n")
            assert 0.0 <= r["similarity"] <= 1.0
        assert "similarity" in done.stdout


def test_refuses_a_missing_file_or_one_without_block_records(run_benchmark, tmp_path) -> None:
    done = run_benchmark("block_lines_study", str(tmp_path / "missing.json"))
    assert done.returncode == 2 and "not found" in done.stderr
    empty = tmp_path / "shapes.json"
    empty.write_text('{"shapes": {"cursor": {}}}')
    done = run_benchmark("block_lines_study", str(empty))
    assert done.returncode == 2 and "holds no engine-length records of block holes" in done.stderr
