"""benchmarks/bench_cli.py end to end on a tiny random model (its timings are printed and
recorded, never asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.bench_cli import MARKER, many_holes_file
from benchmarks.heldout import load_test_files


def test_many_holes_are_spread_over_one_file(modules_corpus: Path) -> None:
    texts = load_test_files(modules_corpus, "test")
    text, truths = many_holes_file(texts, 5)
    assert text.count(MARKER) == len(truths) == 5
    original = next(
        t for t in texts if len(t) == len(text) - 5 * len(MARKER) + sum(map(len, truths))
    )
    for line, truth in zip([ln for ln in text.splitlines() if MARKER in ln], truths, strict=True):
        assert line.strip() == MARKER and truth.strip() == truth and truth in original


@pytest.mark.slow
def test_end_to_end(
    run_benchmark, tiny_model_dir: Path, modules_corpus: Path, tmp_path: Path
) -> None:
    out = tmp_path / "cli.json"
    done = run_benchmark(
        "bench_cli",
        "--model",
        str(tiny_model_dir),
        "--corpus",
        str(modules_corpus),
        "--files",
        "2",
        "--holes",
        "3",
        "--fill-args",
        "--lengths 1",
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert result["fill_args"] == ["--lengths", "1"]
    assert result["files"]["holes"] == 2 and result["one_file"]["holes"] == 3
    assert result["files"]["first_fill_s"] <= result["files"]["wall_s"]
    assert result["one_file"]["cpu_s"] > 0
    assert "files of one hole" in done.stdout and "one file of 3 holes" in done.stdout
