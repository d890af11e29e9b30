"""The fixer's line prior (infill/core/line_prior.py): how often releases change a line
like it, from its text; fitted by model/training/fit_line_prior.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_suspect_lines import TEXT, DoubtFake

from diffusion_infill.infill.core.line_prior import (
    FEATURES,
    LinePrior,
    code_line_numbers,
    line_features,
    load_line_prior,
    shipped_line_prior,
)
from diffusion_infill.infill.core.repair import score_text
from diffusion_infill.infill.core.suspect_lines import PRIOR_WEIGHT, rank_lines

FIT = "diffusion_infill.model.training.fit_line_prior"
FUNCTION = '''def area(width, height):
    """The area.

    A rectangle's.
    """
    # no negative sizes
    checked = max(width, 0)
    return checked * height
'''


def test_code_lines_leave_out_blank_lines_comments_and_docstrings():
    assert code_line_numbers(FUNCTION) == [0, 6, 7]
    assert code_line_numbers("x = 1  # one\n\n  \ny = 2") == [0, 3]


def test_the_shipped_prior_ranks_a_return_above_its_def():
    prior = shipped_line_prior()
    assert prior.vocab and prior.meta["fitted"]["windows"] > 1000
    scores = prior.scores(FUNCTION, [0, 6, 7])
    assert scores.shape == (3,) and np.argmax(scores) != 0  # the `def` line is changed least
    assert scores[2] > scores[0]
    assert prior.scores(FUNCTION, []).shape == (0,)


def test_a_line_is_scored_by_its_text_not_its_place():
    prior = shipped_line_prior()
    lines = ["x = compute(a, b)", "if x is None:", "    return 0"]
    flipped = line_features(lines[::-1], prior.vocab)[::-1]
    assert np.allclose(line_features(lines, prior.vocab), flipped)


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ("{}", "is not a line prior"),
        ("not json", "is not a line prior"),
        ('{"vocab": ["x"], "weights": [1.0]}', "weights"),
        ('{"vocab": [1], "weights": []}', "non-string"),
    ],
)
def test_a_bad_prior_file_is_a_clear_error(tmp_path: Path, content: str, error: str):
    path = tmp_path / "prior.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=error):
        load_line_prior(path)
    with pytest.raises(ValueError, match=f"python -m {FIT}"):
        load_line_prior(tmp_path / "missing.json")


def _only(token: str) -> LinePrior:
    """A prior that likes the lines holding `token` and nothing else."""
    return LinePrior((token,), np.array([0.0] * len(FEATURES) + [1.0]))


def test_the_fixer_weighs_the_prior_in_the_lines_it_reads_masked():
    den = DoubtFake({"b": "x", "d": "y"})  # no sure swap: "c = 9" is the surprising line
    scores = score_text(TEXT, denoiser=den)
    assert rank_lines(TEXT, scores, denoiser=den, prior=_only("zzz"))[0].line == 2
    liked = rank_lines(TEXT, scores, denoiser=den, prior=_only("e"))
    assert PRIOR_WEIGHT > 0 and liked[0].line == 4  # "e = 5", which the prior likes
    assert {x.line for x in liked} == {0, 1, 2, 3, 4}


def _pairs(path: Path, n: int = 40) -> None:
    """Windows of five lines in which the `return` line is always the one changed."""
    rows = []
    for k in range(n):
        window = f"def f{k}(a):\n    b = a + {k}\n    c = g(b)\n    return c * {k}\n    pass"
        rows.append({"package": f"p{k % 6}", "window": window, "window_line": 3})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_the_prior_is_fitted_on_pairs_and_saved(run_module, tmp_path: Path):
    pairs, saved, out = tmp_path / "pairs.jsonl", tmp_path / "prior.json", tmp_path / "fit.json"
    _pairs(pairs)
    done = run_module(
        FIT, "--pairs", str(pairs), "--min-count", "5", "--save", str(saved),
        "--valid", str(pairs), "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    got = json.loads(out.read_text())
    assert got["windows"] == 40 and got["packages"] == 6 and got["valid"]["top1_line"] == 1.0
    assert list(got)[:2] == ["command", "machine"] and got["command"].startswith(f"python -m {FIT}")
    assert len(got["commit"].removesuffix("-dirty")) == 40
    prior = load_line_prior(saved)
    window = "def h(x):\n    y = x - 2\n    z = k(y)\n    return z / 3\n    pass"
    assert int(np.argmax(prior.scores(window, [0, 1, 2, 3, 4]))) == 3


def test_the_fit_refuses_bad_arguments(module_main, tmp_path: Path):
    code, err = module_main(FIT, "--pairs", str(tmp_path / "none.jsonl"))
    assert code == 2 and "not found" in err
    code, err = module_main(FIT, "--min-count", "0")
    assert code == 2 and "--min-count must be at least 1" in err
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"window": "x = 1"}) + "\n")
    code, err = module_main(FIT, "--pairs", str(bad), "--no-save")
    assert code == 1 and "lacks package, window_line" in err
    few = tmp_path / "few.jsonl"
    _pairs(few, n=3)
    code, err = module_main(FIT, "--pairs", str(few), "--no-save")
    assert code == 1 and "at least 5 packages" in err
