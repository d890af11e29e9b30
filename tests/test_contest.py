"""The length contest (infill/core/contest.py): a hole after code on its line that the
length head is not sure of decodes its likeliest lengths beside the network's own ending,
in the same passes, and the fill the model was surest of when it wrote it wins, weighed
with the head's prior."""

from __future__ import annotations

import math

import pytest
from fakes import TargetDenoiser
from test_head_lengths import HeadDenoiser

from diffusion_infill.infill import OptionError, fill_text
from diffusion_infill.infill.core.contest import CONTEST, PRIOR_WEIGHT, commit_sum
from diffusion_infill.infill.core.head_lengths import MIN_PROBABILITY
from diffusion_infill.infill.core.steps import StepRecord
from diffusion_infill.model.length_head import SLOTS

IN_LINE = "def area(w, h):\n    return <mask>\n\nprint(area(2, 3))\n"
AT_INDENT = "def area(w, h):\n    <mask>\n\nprint(area(2, 3))\n"
CHECKED = {"checks": "parse", "lengths": 4}
UNSURE = MIN_PROBABILITY - 0.05


def canvases_per_call(den: TargetDenoiser) -> list[int]:
    return [len(canvases) for canvases, _ in den.calls]


def test_an_in_line_hole_takes_the_contest_length_the_model_is_surest_of():
    # the network writes on to 17 tokens; the head likes 5 without being sure of it
    den = HeadDenoiser(["w * h  # the area"], length=5, probability=UNSURE)
    r = fill_text(IN_LINE, denoiser=den, **CHECKED)
    assert r.fills[0].text == "w * h"
    # the first pass is the primary's alone (the head reads it); from the second on,
    # the contest's lengths decode beside it in the same calls
    counts = canvases_per_call(den)
    assert counts[0] == 1 and counts[1] == 1 + CONTEST
    assert r.stats.nfe == den.nfe == sum(counts)
    assert r.stats.steps == len(den.calls)
    off = HeadDenoiser(["w * h  # the area"], length=5, probability=UNSURE)
    r_off = fill_text(IN_LINE, denoiser=off, length_contest=False, **CHECKED)
    assert r_off.fills[0].text == "w * h  # the area"
    assert set(canvases_per_call(off)) == {1}


def test_a_hole_at_its_lines_indentation_has_no_contest():
    den = HeadDenoiser(["area = w * h"], length=5, probability=UNSURE)
    r = fill_text(AT_INDENT, denoiser=den, **CHECKED)
    assert r.fills[0].text == "area = w * h"
    assert set(canvases_per_call(den)) == {1}


def test_a_contest_fill_that_fails_its_checks_gives_way_to_the_next_best():
    # five tokens, "w + (", do not parse; one token, "w", does and scores next
    den = HeadDenoiser(["w + (h)  # sum"], length=5, probability=UNSURE)
    r = fill_text(IN_LINE, denoiser=den, **CHECKED)
    assert r.fills[0].text == "w"
    assert r.fills[0].rejected is None


def test_the_networks_own_fill_wins_when_no_contest_fill_passes():
    # the head leans to "16 or more": the contest decodes 1, 2 and 3 tokens, "(", "(w",
    # "(w ", none of which parses
    den = HeadDenoiser(["(w * h)"], length=SLOTS, probability=UNSURE)
    r = fill_text(IN_LINE, denoiser=den, **CHECKED)
    assert r.fills[0].text == "(w * h)"
    # the network's fill was done in its first pass; the contest went on alone
    assert canvases_per_call(den) == [1, CONTEST]
    assert r.stats.steps == 2


def test_the_head_sure_of_a_length_decides_it_without_a_contest():
    den = HeadDenoiser(["w * h  # the area"], length=5, probability=MIN_PROBABILITY + 0.05)
    r = fill_text(IN_LINE, denoiser=den, **CHECKED)
    assert r.fills[0].text == "w * h"
    assert set(canvases_per_call(den)) == {1}


def test_two_holes_in_one_window_contest_only_the_one_inside_a_line():
    text = "def area(w, h):\n    <mask>\n    return <mask>\n"
    targets = {"):\n    ": "a = w * h", "return ": "a  # the area"}
    den = HeadDenoiser(targets, length=1, probability=UNSURE)
    r = fill_text(text, denoiser=den, **CHECKED)
    assert [f.text for f in r.fills] == ["a = w * h", "a"]
    assert canvases_per_call(den) == [1, CONTEST]  # one copy of the window per length


def test_without_the_checks_there_is_no_contest():
    den = HeadDenoiser(["w * h  # the area"], length=5, probability=UNSURE)
    assert fill_text(IN_LINE, denoiser=den).fills[0].text == "w * h  # the area"
    assert set(canvases_per_call(den)) == {1}


def test_the_option_must_be_a_bool():
    with pytest.raises(OptionError, match="length_contest must be true or false"):
        fill_text(IN_LINE, denoiser=TargetDenoiser(["x"]), length_contest=1)


def test_commit_sum_counts_a_remasked_slot_from_its_next_commit():
    def step(committed, logp, remasked=()):
        return StepRecord(1, 0, 3, tuple(committed), tuple(remasked), (), (), tuple(logp))

    trace = [
        step([(0, 0), (0, 1), (1, 0)], [-0.1, -2.0, -5.0]),
        step([(0, 1)], [-0.3], remasked=[(0, 1)]),
        step([(0, 2)], [0.0]),  # a null counts 0
    ]
    assert math.isclose(commit_sum(trace, 0, 0), -0.4)
    assert commit_sum(trace, 1, 0) == 0.0  # another canvas
    assert PRIOR_WEIGHT > 0


def test_a_contest_copy_builds_its_first_context_entries_from_its_windows():
    den = HeadDenoiser(["w * h  # the area"], length=5, probability=UNSURE)
    den.confidence = 0.5  # below the threshold: one token a pass, so several passes
    fill_text(IN_LINE, denoiser=den, cache_refresh=2, **CHECKED)
    primary = den.hints[0][0].key  # the head's pass: the window alone
    second = den.hints[1]
    assert len(second) == 1 + CONTEST and second[0].key == primary
    assert [h.source for h in second[1:]] == [primary] * CONTEST  # the copies' first pass
    assert all(h.refresh for h in second[1:])
    later = [h for hints in den.hints[2:] for h in hints]
    assert later and all(h.source is None for h in later)
    assert any(h.refresh for h in later[1:])  # the copies' later refreshes are full passes
