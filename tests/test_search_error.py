"""benchmarks/search_error.py: its scores and its beam search on fakes whose answers are
known, and the whole study end to end on a tiny model."""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from benchmarks.search_error import beam_search, best_first_score, l2r_score
from benchmarks.search_error import main as search_error_main
from tests.fakes import FILL_BASE, MASK, NULL, PAD, VOCAB, TargetDenoiser


def _canvas(den: TargetDenoiser, left: str, slots: int, right: str) -> tuple[list[int], int]:
    ids = den.encode(left) + [MASK] * slots + den.encode(right)
    return ids, len(den.encode(left))


def test_l2r_and_best_first_sum_the_chain_rule() -> None:
    den = TargetDenoiser(["xyz"], confidence=0.9)
    ids, first = _canvas(den, "a = ", 3, "\n")
    truth = [den.tok.fill_id(c) for c in "xyz"]
    assert l2r_score(den, ids, first, truth) == pytest.approx(3 * math.log(0.9), abs=1e-2)
    assert best_first_score(den, ids, first, truth) == pytest.approx(3 * math.log(0.9), abs=1e-2)
    wrong = [den.tok.fill_id(c) for c in "xqz"]  # one token the model gives 0.1/400
    assert l2r_score(den, ids, first, wrong) < l2r_score(den, ids, first, truth) - 5


class Trap(TargetDenoiser):
    """Two slots. Slot 0: 'a' 0.6, 'b' 0.4. Slot 1 after 'b': 'c' 0.99; after anything
    else: spread evenly, so the greedy path 'a?' scores far below 'bc'."""

    def logits(
        self,
        canvases: Sequence[Sequence[int]],
        positions: Sequence[Sequence[int]],
        hints: object = None,
    ) -> list[np.ndarray]:
        self.calls.append(([list(c) for c in canvases], [list(p) for p in positions]))
        a, b, c = (self.tok.fill_id(ch) for ch in "abc")
        out = []
        for canvas, pos in zip(canvases, positions, strict=True):
            first = next(i for i, t in enumerate(canvas) if t == MASK or t >= FILL_BASE)
            rows = np.full((len(pos), VOCAB), -30.0, dtype=np.float32)
            for r, p in enumerate(pos):
                if p == first:
                    rows[r, a], rows[r, b] = math.log(0.6), math.log(0.4)
                elif canvas[first] == b:
                    rows[r, FILL_BASE:] = math.log(0.01 / 400)
                    rows[r, c] = math.log(0.99)
                else:
                    rows[r, FILL_BASE : FILL_BASE + 10] = math.log(0.1)
            out.append(rows)
        return out


def test_beam_search_finds_what_greedy_misses() -> None:
    den = Trap([])
    ids, first = _canvas(den, "v = ", 2, "\n")
    banned = [MASK, NULL, PAD]
    ((greedy, g_score),) = beam_search(den, ids, first, 2, 1, banned)
    best, b_score = beam_search(den, ids, first, 2, 2, banned)[0]
    assert den.decode(greedy)[0] == "a"
    assert den.decode(best) == "bc"
    assert b_score == pytest.approx(math.log(0.4) + math.log(0.99), abs=1e-2)
    assert b_score > g_score
    # the beam's score is the l2r score of what it returns
    assert l2r_score(den, ids, first, best) == pytest.approx(b_score, abs=1e-5)


def _single_lines(
    run_benchmark, model: Path, corpus: Path, out: Path, *, n: int, beam: int, samples: int
):  # noqa: ANN001, ANN202
    """`python -m benchmarks.search_error` on `n` single-line test holes of `corpus`."""
    return run_benchmark(
        "search_error",
        *("--model", str(model), "--corpus", str(corpus), "--split", "test"),
        *("--kind", "single-line", "--n", str(n), "--beam", str(beam)),
        *("--samples", str(samples), "--out", str(out)),
    )


@pytest.mark.slow
def test_study_end_to_end(
    run_benchmark, tiny_model_dir: Path, modules_corpus: Path, tmp_path: Path
) -> None:
    out = tmp_path / "search.json"
    done = _single_lines(run_benchmark, tiny_model_dir, modules_corpus, out, n=2, beam=2, samples=1)
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    summary = result["summary"]
    assert summary["n"] == 2 and len(result["records"]) == 2
    for key in (
        "greedy_exact_match",
        "beam_exact_match",
        "samples_reranked_exact_match",
        "truth_beats_greedy_l2r",
        "truth_beats_greedy_best_first",
    ):
        assert 0.0 <= summary[key] <= 1.0, key
    assert all(math.isfinite(r["beam_l2r"]) for r in result["records"])
    # per token, the truth's and the fill's scores and their difference agree
    assert summary["mean_l2r_per_token_truth"] <= 0 and summary["mean_l2r_per_token_greedy"] <= 0
    assert summary["mean_l2r_per_token_truth_minus_greedy"] == pytest.approx(
        summary["mean_l2r_per_token_truth"] - summary["mean_l2r_per_token_greedy"], abs=2e-3
    )
    assert result["tokens_total"] is None  # a model without a training record


@pytest.mark.slow
def test_without_beam_or_samples_their_figures_are_absent(
    run_benchmark, tiny_model_dir: Path, modules_corpus: Path, tmp_path: Path
) -> None:
    out = tmp_path / "search.json"
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    (model / "training.json").write_text(json.dumps({"tokens_total": 12345}))
    done = _single_lines(run_benchmark, model, modules_corpus, out, n=1, beam=0, samples=0)
    assert done.returncode == 0, done.stderr
    summary = json.loads(out.read_text())["summary"]
    assert summary["beam_exact_match"] is None and summary["beam_beats_greedy_l2r"] is None
    assert summary["samples_reranked_exact_match"] is None
    assert 0.0 <= summary["truth_beats_greedy_l2r"] <= 1.0
    # the tokens the model has seen and its depth, for benchmarks.gap_curve
    result = json.loads(out.read_text())
    assert result["tokens_total"] == 12345
    assert result["layers"] == json.loads((model / "config.json").read_text())["num_hidden_layers"]


def test_refuses_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    # in this process: the refusals come before any model or corpus is read
    for args in (("--n", "0"), ("--beam", "-1"), ("--temperature", "0")):
        with pytest.raises(SystemExit) as done:
            search_error_main(list(args))
        assert done.value.code == 2 and "must" in capsys.readouterr().err, args


@pytest.mark.slow
def test_missing_corpus_is_a_usage_error(run_benchmark, tmp_path: Path) -> None:
    done = run_benchmark("search_error", "--corpus", str(tmp_path / "none"))
    assert done.returncode == 2, done.stderr
    assert "valid.jsonl not found" in done.stderr and "model.training.corpus" in done.stderr
