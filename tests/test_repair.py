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
from diffusion_infill.infill.core.lexer import prose_ranges
from diffusion_infill.infill.core.repair import fix_text, score_text, suspicious_spans
from diffusion_infill.infill.core.results import TokenScore
from diffusion_infill.infill.core.suspicion import (
    DEFAULT_MIN_LIKELY,
    DEFAULT_MIN_SUSPICION,
    expectation,
    is_suspicious,
    preference,
)
from diffusion_infill.infill.serve.client import WorkerClient
from diffusion_infill.infill.serve.protocol import FixRequest
from diffusion_infill.lsp.diagnostics import flagged
from diffusion_infill.lsp.settings import Settings

TEXT = "y = x - 1\n"


class UnsureFake(WorkerFake):
    """Scores the characters in `unsure` as improbable with no likely replacement (flat
    logits: every token about 1/V); the rest like WorkerFake (`wrong` ones predicted as
    another character with p 0.99, the others as themselves)."""

    def __init__(self, unsure: str, **kw: object) -> None:
        super().__init__(**kw)
        self.unsure = unsure

    def adjust(self, canvas: Sequence[int], p: int, row: np.ndarray) -> None:
        if not is_slot(canvas[p]) and self.decode([canvas[p]]) in self.unsure:
            row[CTX_BASE:] = math.log(1.0 / VOCAB)


def _score(suspicion: float, p_likely: float, text: str = "-") -> TokenScore:
    return TokenScore(6, 7, text, suspicion, "+", p_likely)


@pytest.mark.parametrize(
    ("suspicion", "p_likely", "expected"),
    [
        (0.99, 0.9, True),  # improbable, and a confident replacement
        (0.99, 0.1, False),  # improbable, but no replacement the model believes in
        (0.6, 0.9, False),  # the replacement is likely, but so is what is written
        (0.6, 0.1, False),
        (0.9, 0.5, True),  # both exactly at the thresholds
    ],
)
def test_the_rule_needs_both_conditions(suspicion, p_likely, expected):
    assert is_suspicious(_score(suspicion, p_likely), 0.9, 0.5) is expected
    picked = suspicious_spans(
        [_score(suspicion, p_likely)], text=TEXT, max_fixes=1, min_suspicion=0.9, min_likely=0.5
    )
    assert picked == ([(6, 7, _score(suspicion, p_likely))] if expected else [])


def test_whitespace_is_never_flagged():
    assert not is_suspicious(_score(1.0, 1.0, text="  "), 0.0, 0.0)


def test_the_worst_flagged_token_is_picked_not_the_worst_token():
    scores = [
        TokenScore(0, 1, "y", 0.999, "z", 0.01),  # worst, but no replacement
        TokenScore(6, 7, "-", 0.95, "+", 0.9),
    ]
    assert suspicious_spans(scores, text=TEXT, max_fixes=1, min_suspicion=0.9, min_likely=0.5) == [
        (6, 7, scores[1])
    ]


def test_the_token_whose_replacement_is_preferred_most_goes_first():
    # "y": p(written) 1e-3 but p(replacement) 0.91: 910 to 1; "-": 1e-4 against 0.05: 500 to 1
    scores = [
        TokenScore(6, 7, "-", 1 - 1e-4, "+", 0.05),
        TokenScore(0, 1, "y", 1 - 1e-3, "z", 0.91),
    ]
    assert preference(scores[1]) > preference(scores[0])
    assert suspicious_spans(scores, text=TEXT, max_fixes=1, min_suspicion=0.9, min_likely=0.0) == [
        (0, 1, scores[1])
    ]
    # without p_likely (a row from an older worker) the suspicion decides
    old = [replace(sc, p_likely=0.0) for sc in scores]
    assert max(old, key=preference) is old[0]


class VeryWrongFake(WorkerFake):
    """WorkerFake that gives the written `-` a probability of about 1e-9."""

    def adjust(self, canvas: Sequence[int], p: int, row: np.ndarray) -> None:
        if not is_slot(canvas[p]) and self.decode([canvas[p]]) == "-":
            row[canvas[p]] = math.log(1e-9)


def test_suspicion_keeps_its_precision_for_very_improbable_tokens():
    # 1 - p in float32 is 1.0 for any p below 6e-8: the order needs p itself
    minus = next(s for s in score_text(TEXT, denoiser=VeryWrongFake()) if s.text == "-")
    assert 1.0 - minus.suspicion == pytest.approx(1e-9, rel=1e-3)


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
    assert suspicious_spans(
        score_text(TEXT, denoiser=den), text=TEXT, max_fixes=1, min_suspicion=0.9, min_likely=0.0
    )


def test_a_confident_replacement_is_made_at_the_default_thresholds():
    result, _ = fix_text(TEXT, denoiser=WorkerFake(targets=["+"], confidence=0.99))
    assert result is not None and result.text == "y = x + 1\n"


def test_a_flagged_whole_token_is_replaced_by_the_likely_one_without_a_pass():
    # the substitution the model was trained to undo: the scoring pass already names the
    # replacement, so the repair costs no pass more (and no hole lengths are raced)
    den = WorkerFake(targets=["*"], confidence=0.99)  # a re-denoise would write "*"
    result, _ = fix_text(TEXT, denoiser=den, lengths=5)
    assert result is not None and result.text == "y = x + 1\n"
    assert len(den.calls) == 1  # the scoring pass only
    assert result.stats.nfe == 0 and result.stats.candidates == 0


def test_a_flagged_part_of_a_word_has_the_word_re_denoised_at_its_length():
    text = "y = xq - 1\n"
    # "q" is flagged (likely "z"), but it is part of the word "xq": the word is masked
    # and re-denoised, exactly two tokens (a model that never writes an end does not grow
    # it into junk)
    den = WorkerFake(targets=["ab + c + d + e + f + g"], confidence=0.99, wrong={"q": "z"})
    result, _ = fix_text(text, denoiser=den)
    assert result is not None and result.text == "y = ab - 1\n"
    assert result.stats.nfe >= 1


def test_a_token_the_model_would_delete_is_deleted():
    # `<null>` on a written token: the model reads it as one that should not be there
    # (trained on inserted `not`s); the fix deletes it and changes nothing else
    text = "y = x! - 1\n"
    den = WorkerFake(targets=["*"], confidence=0.99, wrong={"!": ""})
    bang = next(s for s in score_text(text, denoiser=den) if s.text == "!")
    assert bang.likely == "" and bang.p_likely == pytest.approx(0.99, abs=1e-3)
    assert expectation(bang.likely) == "the model would delete it"
    result, _ = fix_text(text, denoiser=den, max_fixes=1)
    assert result is not None and result.text == "y = x - 1\n"
    assert [(e.start, e.end, e.new_text) for e in result.edits] == [(5, 6, "")]
    assert result.stats.nfe == 0  # decided by the scoring pass, like a substitution


PROSE = 'def f(x):\n    """x - 1 is returned."""\n    y = x - 1  # x - 1\n    return y\n'


def test_comments_and_docstrings_are_read_but_never_named():
    # the same wrong "-" in the docstring, the code and the comment: only the code's is
    # scored, and the fix changes the code alone
    minus = [s.start for s in score_text(PROSE, denoiser=WorkerFake()) if s.text == "-"]
    assert minus == [PROSE.index("x - 1  #") + 2]
    result, _ = fix_text(PROSE, denoiser=WorkerFake(targets=["+"], confidence=0.99))
    assert result is not None
    assert result.text == PROSE.replace("y = x - 1", "y = x + 1")


def test_other_languages_have_every_token_scored():
    scores = score_text(PROSE, denoiser=WorkerFake(), language=None)
    assert sum(s.text == "-" for s in scores) == 3


@pytest.mark.parametrize(
    ("text", "prose"),
    [
        ("x = 1  # one\n", ["# one"]),
        ('def f():\n    """Doc."""\n', ['"""Doc."""']),
        ("    'one line'  # c\n", ["'one line'", "# c"]),
        ('f(\n    "an argument"\n)\n', []),  # inside brackets: a value
        ('y = "a value"\n', []),  # assigned: a value
        ('doc.\n"""\nx = 1\n', []),  # a window that starts in a docstring
    ],
    ids=["comment", "docstring", "string statement", "argument", "assigned", "unclosed"],
)
def test_prose_is_comments_and_strings_that_stand_alone(text, prose):
    assert [text[a:b] for a, b in prose_ranges(text)] == prose


def test_a_substitution_that_breaks_the_code_is_rejected_by_the_checks():
    den = WorkerFake(targets=["+"], confidence=0.99, wrong={"-": "("})
    result, _ = fix_text(TEXT, denoiser=den, checks="parse")
    assert result is not None and result.text == TEXT
    assert result.fills[0].rejected


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
    scores = [
        TokenScore(0, 1, "y", 0.999, "z", 0.01),  # improbable, no replacement
        TokenScore(4, 5, "x", 0.95, "w", 0.9),
        TokenScore(6, 7, "-", 0.999, "+", 0.99),
        TokenScore(7, 8, " ", 1.0, "x", 1.0),
    ]  # whitespace
    s = replace(Settings(), diagnostics_threshold=0.9, diagnostics_likely_threshold=0.5)
    assert [sc.text for sc in flagged(scores, s)] == ["-", "x"]  # worst first
    assert [sc.text for sc in flagged(scores, replace(s, diagnostics_threshold=0.99))] == ["-"]
    # by preference: "-" 0.99 / 0.001, "x" 0.9 / 0.05, "y" 0.01 / 0.001
    assert [sc.text for sc in flagged(scores, replace(s, diagnostics_likely_threshold=0.0))] == [
        "-",
        "x",
        "y",
    ]
    assert [sc.text for sc in flagged(scores, replace(s, max_diagnostics=1))] == ["-"]
    for sc in scores:  # exactly the fixer's rule
        assert (sc in flagged(scores, s)) == is_suspicious(sc, 0.9, 0.5)


def test_the_calibration_picks_what_the_fixer_would_pick():
    bug = BugExample("y = x + 1\n", TEXT, 6, 7, "operator")
    scores = [TokenScore(0, 1, "y", 0.999, "z", 0.01), TokenScore(6, 7, "-", 0.95, "+", 0.9)]
    arrays = [_arrays(scores, bug)]
    for t, r in ((0.9, 0.5), (0.9, 0.0), (0.99, 0.5)):
        flag, on_bug = _picks(arrays, lambda s, q, t=t, r=r: (s >= t) & (q >= r))
        picked = suspicious_spans(scores, text=TEXT, max_fixes=1, min_suspicion=t, min_likely=r)
        assert bool(flag[0]) == bool(picked)
        assert bool(on_bug[0]) == bool(picked and picked[0][0] == 6)


def test_the_default_is_the_best_recall_that_changes_few_clean_files():
    rows = [
        {"min_suspicion": 0.5, "min_likely": 0.0, "clean_files_changed": 0.9, "recall": 0.3},
        {"min_suspicion": 0.9, "min_likely": 0.5, "clean_files_changed": 0.1, "recall": 0.1},
        {"min_suspicion": 0.99, "min_likely": 0.5, "clean_files_changed": 0.02, "recall": 0.1},
        {"min_suspicion": 0.999, "min_likely": 0.9, "clean_files_changed": 0.0, "recall": 0.02},
    ]
    assert pick_default(rows) is rows[2]  # same recall, fewer clean files changed
    assert pick_default(rows[3:]) is rows[3]
