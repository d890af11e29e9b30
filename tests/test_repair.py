"""The fixer's rule (infill/core/repair.py `is_suspicious`): a token is flagged only when
the written token is improbable AND the model is confident of a replacement; a clean text
is left alone; the diagnostics use the same rule and thresholds; the calibration's
helpers (benchmarks/calibrate_fix.py) follow the rule."""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pytest
from fakes import CTX_BASE, VOCAB, is_slot
from worker_fake_main import WorkerFake

from benchmarks.calibrate_fix import _arrays, _picks, pick_default
from benchmarks.heldout import BugExample
from infill.core.repair import fix_text, score_text, suspicious_spans
from infill.core.results import TokenScore
from infill.core.suspicion import DEFAULT_MIN_LIKELY, DEFAULT_MIN_SUSPICION, is_suspicious
from infill.serve.client import WorkerClient
from infill.serve.protocol import FixRequest
from lsp.diagnostics import flagged
from lsp.settings import Settings
from model.denoiser import CacheHint

TEXT = "y = x - 1\n"


class UnsureFake(WorkerFake):
    """Scores the characters in `unsure` as improbable with no likely replacement (flat
    logits: every token about 1/V); the rest like WorkerFake (`wrong` ones predicted as
    another character with p 0.99, the others as themselves)."""

    def __init__(self, unsure: str, **kw: object) -> None:
        super().__init__(**kw)
        self.unsure = unsure

    def logits(self, canvases: Sequence[Sequence[int]], positions: Sequence[Sequence[int]],
               hints: Sequence[CacheHint | None] | None = None) -> list[np.ndarray]:
        out = super().logits(canvases, positions, hints)
        for canvas, pos, rows in zip(canvases, positions, out, strict=True):
            for r, p in enumerate(pos):
                if not is_slot(canvas[p]) and self.decode([canvas[p]]) in self.unsure:
                    rows[r, CTX_BASE:] = math.log(1.0 / VOCAB)
        return out


def _score(suspicion: float, p_likely: float, text: str = "-") -> TokenScore:
    return TokenScore(6, 7, text, suspicion, "+", p_likely)


@pytest.mark.parametrize(("suspicion", "p_likely", "expected"), [
    (0.99, 0.9, True),  # improbable, and a confident replacement
    (0.99, 0.1, False),  # improbable, but no replacement the model believes in
    (0.6, 0.9, False),  # the replacement is likely, but so is what is written
    (0.6, 0.1, False),
    (0.9, 0.5, True),  # both exactly at the thresholds
])
def test_the_rule_needs_both_conditions(suspicion, p_likely, expected):
    assert is_suspicious(_score(suspicion, p_likely), 0.9, 0.5) is expected
    picked = suspicious_spans([_score(suspicion, p_likely)], text=TEXT, max_fixes=1,
                              min_suspicion=0.9, min_likely=0.5)
    assert picked == ([(6, 7, suspicion)] if expected else [])


def test_whitespace_is_never_flagged():
    assert not is_suspicious(_score(1.0, 1.0, text="  "), 0.0, 0.0)


def test_the_worst_flagged_token_is_picked_not_the_worst_token():
    scores = [TokenScore(0, 1, "y", 0.999, "z", 0.01),  # worst, but no replacement
              TokenScore(6, 7, "-", 0.95, "+", 0.9)]
    assert suspicious_spans(scores, text=TEXT, max_fixes=1, min_suspicion=0.9,
                            min_likely=0.5) == [(6, 7, 0.95)]


def test_scores_carry_the_likeliest_other_token_and_its_probability():
    scores = {s.text: s for s in score_text(TEXT, denoiser=WorkerFake())}
    minus = scores["-"]
    assert minus.suspicion > 0.99 and minus.likely == "+"
    assert minus.p_likely == pytest.approx(0.99, abs=1e-3)
    y = scores["y"]  # predicted as itself: the replacement is never the written token
    assert y.suspicion < 0.02 and y.likely != "y" and y.p_likely < 0.01


def test_a_clean_text_is_left_alone():
    result, scores = fix_text("y = x + 1\n", denoiser=WorkerFake())
    assert result is None and scores
    assert not any(is_suspicious(s) for s in scores)


def test_an_improbable_token_without_a_likely_replacement_is_left_alone():
    den = UnsureFake("-", wrong={})
    (minus,) = [s for s in score_text(TEXT, denoiser=den) if s.text == "-"]
    assert minus.suspicion > 0.99 and minus.p_likely < 0.01
    result, _ = fix_text(TEXT, denoiser=den, min_suspicion=0.9, min_likely=0.5)
    assert result is None
    # suspicion alone (the old rule) would have rewritten it
    assert suspicious_spans(score_text(TEXT, denoiser=den), text=TEXT, max_fixes=1,
                            min_suspicion=0.9, min_likely=0.0)


def test_a_confident_replacement_is_made_at_the_default_thresholds():
    result, _ = fix_text(TEXT, denoiser=WorkerFake(targets=["+"], confidence=0.99))
    assert result is not None and result.text == "y = x + 1\n"


def test_a_repair_keeps_its_length_whatever_lengths_says():
    # the command and the server race hole lengths; a repair's length is the token's own
    den = WorkerFake(targets=["+"], confidence=0.99)
    result, _ = fix_text(TEXT, denoiser=den, lengths=5)
    assert result is not None and result.text == "y = x + 1\n"
    assert result.stats.candidates == 0
    assert all(len(canvases) == 1 for canvases, _ in den.calls)


def test_the_defaults_are_one_setting_everywhere():
    s = Settings()
    assert s.fix_threshold == s.diagnostics_threshold == DEFAULT_MIN_SUSPICION
    assert s.fix_likely_threshold == s.diagnostics_likely_threshold == DEFAULT_MIN_LIKELY
    req = FixRequest(1, TEXT)
    assert (req.min_suspicion, req.min_likely) == (DEFAULT_MIN_SUSPICION, DEFAULT_MIN_LIKELY)
    params = inspect.signature(WorkerClient.fix).parameters
    assert params["min_suspicion"].default == DEFAULT_MIN_SUSPICION
    assert params["min_likely"].default == DEFAULT_MIN_LIKELY


def test_diagnostics_use_the_same_rule_and_thresholds():
    scores = [TokenScore(0, 1, "y", 0.999, "z", 0.01),  # improbable, no replacement
              TokenScore(4, 5, "x", 0.95, "w", 0.9),
              TokenScore(6, 7, "-", 0.999, "+", 0.99),
              TokenScore(7, 8, " ", 1.0, "x", 1.0)]  # whitespace
    s = replace(Settings(), diagnostics_threshold=0.9, diagnostics_likely_threshold=0.5)
    assert [sc.text for sc in flagged(scores, s)] == ["-", "x"]  # worst first
    assert [sc.text for sc in flagged(scores, replace(s, diagnostics_threshold=0.99))] == ["-"]
    assert [sc.text for sc in flagged(scores, replace(s, diagnostics_likely_threshold=0.0))
            ] == ["y", "-", "x"]
    assert [sc.text for sc in flagged(scores, replace(s, max_diagnostics=1))] == ["-"]
    for sc in scores:  # exactly the fixer's rule
        assert (sc in flagged(scores, s)) == is_suspicious(sc, 0.9, 0.5)


def test_the_calibration_picks_what_the_fixer_would_pick():
    bug = BugExample("y = x + 1\n", TEXT, 6, 7, "operator")
    scores = [TokenScore(0, 1, "y", 0.999, "z", 0.01), TokenScore(6, 7, "-", 0.95, "+", 0.9)]
    arrays = [_arrays(scores, bug)]
    for t, r in ((0.9, 0.5), (0.9, 0.0), (0.99, 0.5)):
        flag, on_bug = _picks(arrays, lambda s, q, t=t, r=r: (s >= t) & (q >= r))
        picked = suspicious_spans(scores, text=TEXT, max_fixes=1, min_suspicion=t,
                                  min_likely=r)
        assert bool(flag[0]) == bool(picked)
        assert bool(on_bug[0]) == bool(picked and picked[0][0] == 6)


def test_the_default_is_the_best_recall_that_changes_few_clean_files():
    rows = [{"min_suspicion": 0.5, "min_likely": 0.0, "clean_files_changed": 0.9,
             "recall": 0.3},
            {"min_suspicion": 0.9, "min_likely": 0.5, "clean_files_changed": 0.1,
             "recall": 0.1},
            {"min_suspicion": 0.99, "min_likely": 0.5, "clean_files_changed": 0.02,
             "recall": 0.1},
            {"min_suspicion": 0.999, "min_likely": 0.9, "clean_files_changed": 0.0,
             "recall": 0.02}]
    assert pick_default(rows) is rows[2]  # same recall, fewer clean files changed
    assert pick_default(rows[3:]) is rows[3]
