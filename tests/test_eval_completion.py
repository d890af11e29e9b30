"""The held-out completion evaluation (benchmarks/eval_completion.py): what each case asks
for, the scores of the offers, and the script end to end on a tiny model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.eval_completion import CASES, alternatives_score, copies_score, requests, score
from benchmarks.heldout import Example


def test_requests_cut_the_line_or_empty_it() -> None:
    text = "def f(a):\n    total = compute(a, 2)\n    return total\n"
    start = text.index("total =")
    ex = Example(text, start, text.index("\n", start), "single-line")
    ((doc, at, truth),) = requests([ex], "mid-line")
    assert doc[:at].endswith("    total = ") and truth == "compute(a, 2)"
    assert doc == text.replace("compute(a, 2)", "")
    ((doc, at, truth),) = requests([ex], "empty line, one line")
    assert doc[:at].endswith("\n    ") and doc[at:].startswith("\n    return")
    assert truth == "total = compute(a, 2)"
    # inside the word nearest the line's middle, after its first half: typing a name
    ((doc, at, truth),) = requests([ex], "mid-word")
    assert doc[:at].endswith("    total = com") and truth == "pute(a, 2)"
    short = Example("x = a.b\n", 0, 7, "single-line")  # no word of four characters
    assert requests([short], "mid-word") == []


def test_scores_of_offers() -> None:
    got = score(
        ["a = 1", "b = 2\n    c = 3", "", "x\n\n\ny"],
        ["a = 1", "b = 2\n    d = 4", "z", "q"],
        [10.0, 20.0, 30.0, 40.0],
    )
    assert got["n"] == 4 and got["exact_match"] == 0.25
    assert got["first_line_right"] == 0.5  # "a = 1", and "b = 2" of the block
    assert got["no_offer"] == 0.25 and got["blank_line_runs"] == 0.25
    assert got["lines_offered"] == (1 + 2 + 0 + 4) / 4
    assert got["ms_p50"] == 25.0 and 0 < got["similarity"] < 1


def test_the_offers_without_copies_are_paired_with_those_with_them() -> None:
    got = copies_score(["a = 1", "b", "c", ""], ["a = 1", "x", "c", "d"], ["a = 1", "b", "z", "d"])
    assert got == {"exact_match": 0.5, "won": 1, "lost": 1}


@pytest.mark.slow
def test_the_script_writes_every_case(
    run_benchmark, tiny_model_dir: Path, modules_corpus: Path, tmp_path: Path
) -> None:
    out = tmp_path / "completion.json"
    done = run_benchmark(
        "eval_completion",
        "--model",
        str(tiny_model_dir),
        "--corpus",
        str(modules_corpus),
        "--n",
        "2",
        "--setting",
        "multilineSteps=2",
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(out.read_text())
    assert got["settings"] == {"multilineSteps": 2}
    assert list(got["cases"]) == list(CASES)
    for case in got["cases"].values():
        assert case["n"] == 2 and len(case["records"]) == 2
        assert {
            "exact_match",
            "first_line_right",
            "similarity",
            "lines_offered",
            "blank_line_runs",
            "no_offer",
            "ms_p50",
            "nfe_per_request",
        } <= set(case)
        assert {"exact_match", "won", "lost"} == set(case["without_copies"])
        assert all("model" in r for r in case["records"])
    # a one-line completion never offers more than a line
    assert all("\n" not in r["offer"] for r in got["cases"]["mid-line"]["records"])
    # --cases runs only those asked for, in the usual order
    done = run_benchmark(
        "eval_completion",
        *("--model", str(tiny_model_dir), "--corpus", str(modules_corpus), "--n", "2"),
        *("--cases", "empty-block,mid-line", "--out", str(out)),
    )
    assert done.returncode == 0, done.stderr
    assert list(json.loads(out.read_text())["cases"]) == ["mid-line", "empty line, block"]


@pytest.mark.slow
def test_alternatives_are_distinct_and_scored(
    run_benchmark, tiny_model_dir: Path, modules_corpus: Path, tmp_path: Path
) -> None:
    out = tmp_path / "completion.json"
    done = run_benchmark(
        "eval_completion",
        "--model",
        str(tiny_model_dir),
        "--corpus",
        str(modules_corpus),
        "--n",
        "2",
        "--setting",
        "multilineSteps=2",
        "--alternatives",
        "3",
        "--temperature",
        "1.5",
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    for case in json.loads(out.read_text())["cases"].values():
        assert case["exact_match"] <= case["any_exact"] <= 1.0
        for r in case["records"]:
            offers = [o.strip() for o in [r["offer"], *r["alternatives"]]]
            assert len(r["alternatives"]) <= 3 and len(set(offers)) == len(offers)
            assert all(a.strip() for a in r["alternatives"])  # no empty alternative
        assert case["offers_per_request"] == pytest.approx(
            sum(1 + len(r["alternatives"]) for r in case["records"]) / case["n"]
        )


def test_alternatives_score_counts_the_truth_among_all_offers() -> None:
    got = alternatives_score(["a", "x", ""], [["b"], ["y", "z"], []], ["b", "q", ""])
    assert got["any_exact"] == pytest.approx(2 / 3)  # "b" among the alternatives; "" == ""
    assert got["offers_per_request"] == pytest.approx((2 + 3 + 1) / 3)


@pytest.mark.slow
def test_bad_settings_are_clear_errors(run_benchmark, modules_corpus: Path) -> None:
    def run(*args: str):
        return run_benchmark("eval_completion", "--corpus", str(modules_corpus), *args)

    done = run("--setting", "bogus=1")
    assert done.returncode == 2 and "infill.bogus: unknown setting" in done.stderr
    done = run("--setting", "multilineSteps=0")
    assert done.returncode == 2 and "multilineSteps must be a whole number" in done.stderr
    done = run("--alternatives", "-1")
    assert done.returncode == 2 and "--alternatives must be 0 or more" in done.stderr
    done = run("--alternatives", "2", "--temperature", "0")
    assert done.returncode == 2 and "--temperature must be above 0" in done.stderr
    done = run("--n", "0")
    assert done.returncode == 2 and "--n must be at least 1" in done.stderr
    done = run("--cases", "mid-line,sideways")
    assert done.returncode == 2 and "--cases: unknown case(s) sideways" in done.stderr


def test_stages_turned_off_reach_the_engine_s_options(monkeypatch) -> None:
    """`offer(..., off=...)` (the command's `--no-word-starts`, `--no-statement-ends`)
    asks the engine with those `SamplerOptions` switches off, and only those."""
    from types import SimpleNamespace

    from benchmarks import eval_completion
    from diffusion_infill.lsp.settings import Settings

    asked = []

    def fill_spans(text, spans, denoiser, options):  # noqa: ANN001, ANN202
        asked.append(options)
        return SimpleNamespace(fills=[], stats=SimpleNamespace(nfe=1))

    monkeypatch.setattr(eval_completion.infill, "fill_spans", fill_spans)
    doc = "def f(a):\n    total = \n    return total\n"
    at = doc.index("= ") + 2
    for off in ((), ("statement_ends",), ("word_starts", "statement_ends")):
        eval_completion.offer(None, doc, at, Settings(), off=off)
    assert [(o.word_starts, o.statement_ends) for o in asked] == [
        (True, True),
        (True, False),
        (False, False),
    ]
    args = eval_completion._parser().parse_args(["--no-statement-ends"])
    assert eval_completion._off(args) == ["statement_ends"]
