"""The held-out evaluation: `--jobs` (parts shared out among processes, one merged result
with the figures one process would have written), how near a fill came, `--remask-threshold`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.eval_model import (
    PARTS,
    SHIP_PARTS,
    _without,
    closeness,
    merge_results,
    split_parts,
)
from benchmarks.eval_model import main as eval_model_main
from benchmarks.heldout import infill_examples, load_test_files

ROOT = Path(__file__).resolve().parents[1]


def test_split_parts_balances_the_ship_parts_over_two_processes() -> None:
    groups = split_parts(set(SHIP_PARTS), 2)
    assert sorted(p for g in groups for p in g) == sorted(SHIP_PARTS)
    assert len(groups) == 2
    # the slow multi-line true-length part goes alone with the cheap ones
    assert "multi_line_true_length" not in next(g for g in groups if "single_line" in g)
    for g in groups:
        assert g == sorted(g, key=PARTS.index)


def test_split_parts_never_makes_an_empty_process() -> None:
    assert split_parts({"bugs"}, 4) == [["bugs"]]


def test_without_drops_options_and_their_values() -> None:
    argv = ["--model", "m", "--jobs", "2", "--parts=bugs", "--out", "o.json", "--n", "5"]
    assert _without(argv, "--jobs", "--parts", "--out") == ["--model", "m", "--n", "5"]


def test_merge_keeps_each_part_and_counts_wall_and_summed_seconds() -> None:
    a = {"model": "m", "single_line": {"exact_match": 0.1}, "seconds": 10.0}
    b = {"model": "m", "bugs": {"top1_localisation": 0.3}, "seconds": 7.0}
    merged = merge_results([a, b], seconds=10.5)
    assert merged["single_line"] == a["single_line"] and merged["bugs"] == b["bugs"]
    assert merged["seconds"] == 10.5 and merged["seconds_summed"] == 17.0


def test_closeness_counts_lines_in_place_and_loops() -> None:
    truth = "a = 1\n    b = 2\n    return a + b"
    assert closeness(truth, truth) == {"similarity": 1.0, "lines_in_place": 1.0, "repeats": False}
    near = closeness("a = 1\n    b = 3\n    return a + b", truth)
    assert near["lines_in_place"] == 2 / 3 and 0.9 < near["similarity"] < 1
    # in place means at the same line: one line more at the top shifts every line
    assert closeness("x = 0\na = 1\n    b = 2", truth)["lines_in_place"] == 0
    loop = closeness("a = 1\n    a = 1\n\n    a = 1", truth)
    assert loop["repeats"] and loop["lines_in_place"] == 1 / 3
    assert not closeness("a = 1\n    a = 1\n    b = 2", truth)["repeats"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A test split of this repository's own modules (whole files, long enough)."""
    folder = tmp_path_factory.mktemp("corpus")
    files = [
        ROOT / "infill" / "core" / name
        for name in ("ends.py", "diff.py", "spans.py", "limits.py", "scoring.py")
    ]
    with (folder / "test.jsonl").open("w") as fh:
        for f in files:
            fh.write(json.dumps({"text": f.read_text()}) + "\n")
    return folder


@pytest.fixture(scope="module")
def plain(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The evaluation with its defaults, run once for the tests that compare against it."""
    return _eval(corpus, tmp_path_factory.mktemp("plain") / "plain.json")


def _refused(corpus: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    """The usage error of the evaluation given `extra` (in this process: no model loads)."""
    with pytest.raises(SystemExit) as done:
        eval_model_main(["--corpus", str(corpus), "--out", "unused.json", *extra])
    assert done.value.code == 2
    return capsys.readouterr().err


def _eval(corpus: Path, out: Path, *extra: str) -> dict:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.eval_model",
            "--corpus",
            str(corpus),
            "--n",
            "2",
            "--n-multi",
            "2",
            "--n-bugs",
            "2",
            "--parts",
            "single_line,single_line_true_length,bugs_top1",
            "--out",
            str(out),
            *extra,
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=300,
        env={**os.environ, "INFILL_THREADS": "1", "INFILL_DTYPE": "fp32"},
    )
    return json.loads(out.read_text())


@pytest.mark.slow
def test_jobs_write_the_figures_one_process_writes(
    corpus: Path, plain: dict, tmp_path: Path
) -> None:
    one = plain
    two = _eval(corpus, tmp_path / "two.json", "--jobs", "2")
    assert one["single_line"]["n"] == 2 and one["bugs"]["n"] == 2
    for part in ("single_line", "single_line_true_length"):
        assert [r["fill"] for r in two[part]["records"]] == [
            r["fill"] for r in one[part]["records"]
        ]
        assert two[part]["exact_match"] == one[part]["exact_match"]
    assert two["bugs"]["top1_localisation"] == one["bugs"]["top1_localisation"]
    assert "seconds_summed" in two and "seconds_summed" not in one


@pytest.mark.slow
def test_remask_threshold_reaches_the_sampler(
    corpus: Path, plain: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    off = plain
    on = _eval(corpus, tmp_path / "on.json", "--remask-threshold", "0.85")
    assert off["remask_threshold"] is None and on["remask_threshold"] == 0.85
    # each record says how many tokens were remasked (the model seldom unsays a token)
    assert all(r["remasks"] == 0 for r in off["single_line"]["records"])
    assert all(r["remasks"] >= 0 for r in on["single_line"]["records"])
    assert {"similarity", "lines_in_place", "repeated_line_fills"} <= set(on["single_line"])
    refused = _refused(corpus, capsys, "--remask-threshold", "0.95")  # must be below the commit
    assert "remask_threshold" in refused


def test_jobs_must_be_positive(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "--jobs must be at least 1" in _refused(corpus, capsys, "--jobs", "0")


def test_a_larger_window_holds_the_same_holes(corpus: Path) -> None:
    files = load_test_files(corpus)
    for kind, seed in (("single-line", 0), ("multi-line", 1)):
        small = infill_examples(files, kind, 20, seed=seed)
        big = infill_examples(files, kind, 20, seed=seed, window_chars=2400, draw_chars=700)
        assert [e.truth for e in big] == [e.truth for e in small]
        for s, b in zip(small, big, strict=True):
            assert s.text in b.text and len(b.text) > len(s.text)
            # the hole sits in the same code: the small window's text around it is kept
            assert b.text[: b.start].endswith(s.text[: s.start])
            assert b.text[b.end :].startswith(s.text[s.end :])
    # without draw_chars the size changes the random draws, so later holes differ
    plain = infill_examples(files, "single-line", 20, seed=0, window_chars=2400)
    assert [e.truth for e in plain] != [e.truth for e in small]


@pytest.mark.slow
def test_window_chars_reaches_the_results_and_is_checked(
    corpus: Path, plain: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    small = plain
    big = _eval(corpus, tmp_path / "big.json", "--window-chars", "2400")
    assert small["window_chars"] == 700 and big["window_chars"] == 2400
    assert [r["truth"] for r in big["single_line"]["records"]] == [
        r["truth"] for r in small["single_line"]["records"]
    ]
    assert "--window-chars must be at least 1" in _refused(corpus, capsys, "--window-chars", "0")


@pytest.mark.slow
def test_the_arguments_part_runs(corpus: Path, tmp_path: Path) -> None:
    got = _eval(corpus, tmp_path / "arguments.json", "--parts", "arguments")
    assert got["arguments"]["n"] >= 1 and "exact_match" in got["arguments"]
