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
    bad = (("--window-chars", "0"), ("--n", "0"), ("--lengths", "1,x"), ("--lengths", "0,2"))
    for args in (*bad, ("--head-top", "-1")):
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


def test_head_top_needs_a_model_with_a_length_head(
    run_benchmark, tiny_model_dir: Path, modules_corpus: Path, tmp_path: Path
) -> None:
    done = run_benchmark(
        "length_study",
        *("--model", str(tiny_model_dir), "--corpus", str(modules_corpus), "--split", "test"),
        *("--n", "1", "--head-top", "2", "--out", str(tmp_path / "study.json")),
    )
    assert done.returncode != 0 and "--head-top needs a model with a length head" in done.stderr


def test_contest_rules_replay_the_engines_choice() -> None:
    from benchmarks.length_rules import replay

    def record(own_hit: bool, own_len: int, own_csum: float, cands: dict) -> dict:
        head = [-5.0] * 17
        head[3], head[4] = -0.5, -1.0  # the head likes 3 tokens, then 4
        return {
            "true_len": 3,
            "own_hit": own_hit,
            "own_len": own_len,
            "own_csum": own_csum,
            "own_cmean": own_csum / own_len,
            "own_mean": -1.0,
            "head": head,
            "cands": {
                n: {"hit": hit, "csum": c, "cmean": c, "sum": c, "mean": c, "prior": 0.0,
                    "in_set": True}
                for n, (hit, c) in cands.items()
            },
        }  # fmt: skip

    records = [
        # the own fill is wrong and unsure; 3 tokens are right and sure: the contest wins
        record(False, 6, -6.0, {3: (True, -0.5), 4: (False, -3.0)}),
        # the own fill (3 tokens) is right and surer than any candidate: it stays
        record(True, 3, -0.2, {3: (False, -1.0), 4: (False, -1.2)}),
    ]
    got = replay(records)
    rule = got["contest: own or the head's 2 likeliest, commit sum + 0.5 x head"]
    assert rule == {"exact_match": 1.0, "won_lost": [1, 0]}
    assert got["engine's own length"] == 0.5
