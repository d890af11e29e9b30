"""benchmarks/gap_curve.py over search-study results files whose figures are known."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def _study(
    path: Path,
    tokens: int | None,
    records: list[dict],
    kind: str = "multi-line",
    seed: int = 1,
    layers: int | None = 6,
) -> None:
    data = {"model": "m", "split": "valid", "kind": kind, "seed": seed, "records": records}
    if tokens is not None:
        data["tokens_total"] = tokens
    if layers is not None:
        data["layers"] = layers
    path.write_text(json.dumps(data))


def _hole(length: int, truth: float, fill: float, hit: bool = False) -> dict:
    """A record with per-token scores `truth` and `fill` (best first as left to right)."""
    return {
        "length": length,
        "greedy_hit": hit,
        "truth_l2r": truth * length,
        "greedy_l2r": fill * length,
        "truth_best_first": truth * length,
        "greedy_best_first": fill * length,
    }


@pytest.fixture
def results(tmp_path: Path) -> Path:
    folder = tmp_path / "results"
    folder.mkdir()
    # the same two multi-line holes at 1B and 2B tokens: the gap -1.4 then -1.2 per token
    _study(
        folder / "search_study_multi_line_a.json",
        2**30,
        [_hole(20, -2.0, -0.6), _hole(40, -1.8, -0.4)],
    )
    _study(
        folder / "search_study_multi_line_b.json",
        2**31,
        [_hole(20, -1.7, -0.5, hit=False), _hole(40, -1.7, -0.5)],
    )
    # single-line holes of another seed at 2B tokens: a group of their own
    _study(
        folder / "search_study_single_line.json",
        2**31,
        [_hole(2, -0.1, -0.1, hit=True), _hole(2, -3.0, -0.2), _hole(12, -0.3, -0.4)],
        kind="single-line",
        seed=0,
    )
    return folder


def test_points_trend_and_lengths(run_benchmark, results: Path, tmp_path: Path) -> None:
    out, png = tmp_path / "gap.json", tmp_path / "gap.png"
    done = run_benchmark(
        "gap_curve", "--results", str(results), "--out", str(out), "--png", str(png)
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())
    multi, single = sorted(data["groups"], key=lambda g: g["kind"])
    assert multi["kind"] == "multi-line" and multi["n"] == 2
    assert [p["tokens_total"] for p in multi["points"]] == [2**30, 2**31]
    first, second = multi["points"]
    assert first["truth_per_token"] == pytest.approx(-1.9)
    assert first["fill_per_token"] == pytest.approx(-0.5)
    assert first["gap_per_token"] == pytest.approx(-1.4)
    assert second["gap_per_token"] == pytest.approx(-1.2)
    # +0.2 nats a token per doubling; -1.2 left: 6 more doublings
    assert multi["gap_per_doubling"] == pytest.approx(0.2)
    assert multi["doublings_to_close"] == pytest.approx(6.0)
    assert "6.0 more doublings" in done.stdout
    # one checkpoint: no trend
    assert single["gap_per_doubling"] is None and single["doublings_to_close"] is None
    # the truth beats a missed fill in one single-line hole of three; one exact
    assert single["points"][0]["truth_beats_fill"] == pytest.approx(0.333)
    assert single["points"][0]["greedy_exact_match"] == pytest.approx(0.333)
    # by length at the checkpoints both groups scored (2B only), their holes pooled
    (curve,) = data["by_length"]
    assert curve["tokens_total"] == 2**31 and curve["layers"] == 6
    assert curve["buckets"] == [
        {"tokens": "1-2", "n": 2, "hits": 1, "exact_match": 0.5},
        {"tokens": "9-16", "n": 1, "hits": 0, "exact_match": 0.0},
        {"tokens": "17-32", "n": 1, "hits": 0, "exact_match": 0.0},
        {"tokens": "33-64", "n": 1, "hits": 0, "exact_match": 0.0},
    ]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_gap_that_does_not_close(run_benchmark, tmp_path: Path) -> None:
    folder = tmp_path / "results"
    folder.mkdir()
    _study(folder / "search_study_1.json", 2**30, [_hole(10, -1.0, -0.5)])
    _study(folder / "search_study_2.json", 2**31, [_hole(10, -1.2, -0.5)])
    done = run_benchmark(
        "gap_curve",
        "--results",
        str(folder),
        "--out",
        str(tmp_path / "g.json"),
        "--png",
        str(tmp_path / "g.png"),
    )
    assert done.returncode == 0, done.stderr
    (group,) = json.loads((tmp_path / "g.json").read_text())["groups"]
    assert group["gap_per_doubling"] == pytest.approx(-0.2)
    assert group["doublings_to_close"] is None
    assert "not closing" in done.stdout


def test_a_deeper_model_is_a_curve_of_its_own(run_benchmark, results: Path, tmp_path: Path) -> None:
    """A grown model scored on the same holes: its own group and its own by-length curve,
    not a point on the 6-layer line (its tokens carry over from the model it grew from)."""
    _study(
        results / "search_study_multi_line_grown.json",
        2**31 + 2**29,
        [_hole(20, -1.0, -0.5, hit=True), _hole(40, -1.5, -0.5)],
        layers=12,
    )
    done = run_benchmark(
        "gap_curve",
        "--results",
        str(results),
        "--out",
        str(tmp_path / "g.json"),
        "--png",
        str(tmp_path / "g.png"),
    )
    assert done.returncode == 0, done.stderr
    data = json.loads((tmp_path / "g.json").read_text())
    six = [g for g in data["groups"] if g["kind"] == "multi-line" and g["layers"] == 6]
    twelve = [g for g in data["groups"] if g["layers"] == 12]
    assert len(six) == 1 and len(six[0]["points"]) == 2
    assert six[0]["gap_per_doubling"] == pytest.approx(0.2)  # unchanged by the grown point
    assert len(twelve) == 1 and twelve[0]["gap_per_doubling"] is None
    assert [(c["layers"], c["tokens_total"]) for c in data["by_length"]] == [
        (6, 2**31),
        (12, 2**31 + 2**29),
    ]
    assert data["by_length"][1]["buckets"][0] == {
        "tokens": "17-32",
        "n": 1,
        "hits": 1,
        "exact_match": 1.0,
    }
    assert "12 layers" in done.stdout


def test_bad_results_are_usage_errors(run_benchmark, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    done = run_benchmark("gap_curve", "--results", str(empty))
    assert done.returncode == 2 and "benchmarks.search_error" in done.stderr

    untagged = tmp_path / "untagged"
    untagged.mkdir()
    _study(untagged / "search_study_old.json", None, [_hole(5, -1.0, -0.5)])
    done = run_benchmark("gap_curve", "--results", str(untagged))
    assert done.returncode == 2
    assert "search_study_old.json" in done.stderr and "tokens_total" in done.stderr

    no_depth = tmp_path / "no_depth"
    no_depth.mkdir()
    _study(no_depth / "search_study_old.json", 2**30, [_hole(5, -1.0, -0.5)], layers=None)
    done = run_benchmark("gap_curve", "--results", str(no_depth))
    assert done.returncode == 2 and "layers" in done.stderr

    twice = tmp_path / "twice"
    twice.mkdir()
    for name in ("search_study_a.json", "search_study_b.json"):
        _study(twice / name, 2**30, [_hole(5, -1.0, -0.5)])
    done = run_benchmark("gap_curve", "--results", str(twice))
    assert done.returncode == 2
    assert "search_study_a.json and search_study_b.json" in done.stderr

    unscored = tmp_path / "unscored"
    unscored.mkdir()
    _study(unscored / "search_study_u.json", 2**30, [{"length": 5, "greedy_hit": False}])
    done = run_benchmark("gap_curve", "--results", str(unscored))
    assert done.returncode == 2 and "search_study_u.json" in done.stderr

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "search_study_x.json").write_text("{not json")
    done = run_benchmark("gap_curve", "--results", str(broken))
    assert done.returncode == 2 and "search_study_x.json" in done.stderr
