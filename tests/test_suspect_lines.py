"""When the model is sure of no swap, the fixer reads each line masked and rewrites the
line it least expects (infill/core/suspect_lines.py); a sure swap is repaired as before,
with no pass more; the default thresholds never get there; the work is bounded."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pytest
from fakes import CTX_BASE, FILL_BASE, VOCAB, is_slot
from worker_fake_main import WorkerFake

from benchmarks.fix_eval import score_example
from diffusion_infill.infill.cli import main
from diffusion_infill.infill.core.repair import fix_text, score_text
from diffusion_infill.infill.core.suspect_lines import (
    LINE_BATCH,
    LINE_GATE,
    MAX_MASKED_LINES,
    rank_lines,
)
from diffusion_infill.infill.core.suspicion import preference
from diffusion_infill.model import loading

TEXT = "a = 1\nb = 2\nc = 9\nd = 4\ne = 5\n"
# masked, each line is predicted from the text above it: all as written but line 3
BELIEVED = {"d = 4\n": "e = 5", "c = 9\n": "d = 4", "b = 2\n": "c = 3", "a = 1\n": "b = 2"}
BELIEVED = {**BELIEVED, "": "a = 1"}


class DoubtFake(WorkerFake):
    """WorkerFake whose in-view pass doubts the characters of `doubt` mildly: p 0.3 for
    the written one against p 0.5 for its replacement (a preference of 0.51, below the
    gate), every other character read as itself with p 0.99. At a masked slot the
    character it predicts has its context id nearly as likely as its fill id, so that a
    line read masked scores what is written (the fake's fill ids alone are never in a
    text)."""

    def __init__(self, doubt: Mapping[str, str], **kw: object) -> None:
        super().__init__(BELIEVED, wrong={}, confidence=0.99, **kw)
        self.doubt = dict(doubt)

    def adjust(self, canvas: Sequence[int], p: int, row: np.ndarray) -> None:
        if is_slot(canvas[p]):
            row[CTX_BASE:FILL_BASE] = row[FILL_BASE:] - 1e-3
            return
        ch = self.decode([canvas[p]])
        if ch in self.doubt:
            row[CTX_BASE:] = math.log(0.2 / VOCAB)
            row[canvas[p]] = math.log(0.3)
            row[self.encode(self.doubt[ch])[0]] = math.log(0.5)


def test_with_no_sure_swap_the_line_the_model_least_expects_is_rewritten():
    den = DoubtFake({"b": "x", "d": "y"})  # two mild doubts, neither on line 3
    scores = score_text(TEXT, denoiser=den)
    assert max(preference(s) for s in scores) < LINE_GATE
    assert rank_lines(TEXT, scores, denoiser=den)[0].line == 2  # "c = 9" read masked
    result, _ = fix_text(TEXT, denoiser=den, min_suspicion=0.0, min_likely=0.0)
    assert result is not None and result.text == TEXT.replace("c = 9", "c = 3")
    assert [(f.span.start, f.span.end) for f in result.fills] == [(12, 17)]
    assert result.stats.nfe >= 1  # re-denoised, not substituted


def test_a_doubted_token_on_the_line_the_model_least_expects_is_substituted():
    den = DoubtFake({"9": "3"})  # the doubt and the surprise on the same line
    result, _ = fix_text(TEXT, denoiser=den, min_suspicion=0.0, min_likely=0.0)
    assert result is not None and result.text == TEXT.replace("c = 9", "c = 3")
    assert [(f.span.start, f.span.end) for f in result.fills] == [(16, 17)]  # the token
    assert result.stats.nfe == 0  # decided by the scoring pass


def test_at_the_default_thresholds_nothing_is_named():
    den = DoubtFake({"b": "x", "d": "y"})
    result, scores = fix_text(TEXT, denoiser=den)
    assert result is None and scores
    assert len(den.calls) == 1  # the scoring pass alone: no line was read masked


def test_a_sure_swap_is_repaired_without_reading_lines():
    den = WorkerFake(targets=["*"], confidence=0.99)  # "-" read as "+" with p 0.99
    result, _ = fix_text("y = x - 1\n", denoiser=den, min_suspicion=0.0, min_likely=0.0)
    assert result is not None and result.text == "y = x + 1\n"
    assert len(den.calls) == 1


def test_at_most_so_many_lines_are_read_masked_a_batch_at_a_time():
    text = "".join(f"v{i} = {i}\n" for i in range(MAX_MASKED_LINES + 12))
    den = DoubtFake({"v": "w"})  # every line doubted alike: no sure swap
    den.targets = {"": "v0 = 0"}
    scores = score_text(text, denoiser=den)
    ranked = rank_lines(text, scores, denoiser=den)
    assert len(ranked) == MAX_MASKED_LINES + 12  # every line ranked ...
    read = [c for canvases, _ in den.calls[1:] for c in canvases]
    assert len(read) == MAX_MASKED_LINES  # ... the first so many read masked
    assert max(len(canvases) for canvases, _ in den.calls[1:]) <= LINE_BATCH
    assert sum(x.surprise is not None for x in ranked) == MAX_MASKED_LINES


def test_the_command_says_which_line_it_rewrote(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(loading, "load_denoiser", lambda *a, **kw: DoubtFake({"b": "x", "d": "y"}))
    f = tmp_path / "five.py"
    f.write_text(TEXT)
    assert main(["fix", "--min-suspicion", "0", "--min-likely", "0", str(f)]) == 0
    out, err = capsys.readouterr()
    assert "-c = 9\n+c = 3\n" in out
    assert "no token is a sure swap: line 3, the likeliest wrong line, re-denoised" in err
    assert f.read_text() == TEXT  # a diff, not an edit, without --in-place


@pytest.mark.parametrize("doubt", [{"b": "x", "d": "y"}, {"9": "3"}])
def test_the_evaluation_ranks_lines_as_the_fixer_names_them(doubt):
    ex = {
        "package": "p",
        "path": "p.py",
        "line": 3,
        "old_version": "1",
        "new_version": "2",
        "window": TEXT,
        "fixed_window": TEXT.replace("c = 9", "c = 3"),
        "window_line": 2,
        "buggy_line": "c = 9",
        "fixed_line": "c = 3",
        "words_changed": 1,
    }
    record = score_example(DoubtFake(doubt), ex)
    assert record["rank"] == 1 and record["top1"] and record["repaired"]


def test_a_line_rewritten_for_a_selection_stays_inside_it():
    den = DoubtFake({"d": "y"})
    start = TEXT.index("= 9")  # a selection from the middle of line 3 to the end
    result, scores = fix_text(TEXT, denoiser=den, start=start, min_suspicion=0.0, min_likely=0.0)
    assert min(s.start for s in scores) >= start
    assert result is not None
    assert [(f.span.start, f.span.end) for f in result.fills] == [(start, TEXT.index("\nd"))]
    assert all(e.start >= start for e in result.edits)


def test_the_command_names_a_repaired_token_as_before(tmp_path, monkeypatch, capsys):
    # a sure swap ("-" read as "+"): the token is named, not a line
    monkeypatch.setattr(loading, "load_denoiser", lambda *a, **kw: WorkerFake(["*"]))
    f = tmp_path / "one.py"
    f.write_text("y = x - 1\n")
    assert main(["fix", "--min-suspicion", "0", "--min-likely", "0", str(f)]) == 0
    out, err = capsys.readouterr()
    assert "+y = x + 1\n" in out
    assert "most suspicious '-' at 1:7" in err and "sure swap" not in err
