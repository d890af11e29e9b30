"""A hole right after the start of a word (infill/core/word_starts.py): the span takes the
word's head over, its first slot may only continue it, and the fill comes back for the
span as asked. The fake's tokens are characters, so a head is the word's last character."""

from __future__ import annotations

from fakes import TargetDenoiser

from diffusion_infill.infill import Span, fill_spans, fill_text

TYPED = "xs = []\nfor a in b:\n    xs.appe"


def test_a_completion_inside_a_word_writes_the_word_whole():
    # the fake's target is keyed by the text before the span: the span starts before `e`
    den = TargetDenoiser({"xs.upp": "unused", "xs.app": "end(a)"})
    at = len(TYPED)
    result = fill_spans(TYPED, [Span(at, at)], denoiser=den, eager_ends=False)
    (fill,) = result.fills
    assert fill.rejected is None
    assert fill.span == Span(at, at)
    assert fill.text == "nd(a)"
    assert result.text == TYPED + "nd(a)"
    assert [(e.start, e.end, e.new_text) for e in result.edits] == [(at, at, "nd(a)")]


def test_the_first_slot_takes_only_what_continues_the_word():
    # the model wants `X` first; only `e` continues what is typed
    den = TargetDenoiser({"xs.app": "Xnd(a)"})
    at = len(TYPED)
    (fill,) = fill_spans(TYPED, [Span(at, at)], denoiser=den, eager_ends=False).fills
    assert fill.text == "nd(a)"


def test_without_the_option_the_span_is_as_asked():
    den = TargetDenoiser({"xs.appe": "nd(a)"})
    at = len(TYPED)
    (fill,) = fill_spans(
        TYPED, [Span(at, at)], denoiser=den, eager_ends=False, word_starts=False
    ).fills
    assert fill.text == "nd(a)"


def test_a_hole_marker_inside_a_word_takes_the_head_too():
    den = TargetDenoiser({"xs.app": "end(a)"})
    result = fill_text(TYPED + "<mask>\n", denoiser=den, eager_ends=False)
    assert result.text == TYPED + "nd(a)\n"


def test_a_span_after_a_space_or_over_written_text_is_not_moved():
    text = "xs = []\nxs = "
    den = TargetDenoiser({"xs = ": "[1]"})
    (fill,) = fill_spans(text, [Span(len(text), len(text))], denoiser=den).fills
    assert fill.text == "[1]"
    # a selection being rewritten keeps its start, even right after a word character
    den = TargetDenoiser({"xs.a": "ppend(a)"})
    start = len(TYPED) - 3
    (fill,) = fill_spans(TYPED, [Span(start, len(TYPED))], denoiser=den).fills
    assert fill.span == Span(start, len(TYPED))
    assert fill.text == "ppend(a)"


def test_a_word_hole_beside_a_line_hole_comes_back_in_the_text_as_given():
    # line holes are filled as selected lines and mapped back to the text as given; the
    # word's hole after them keeps its head through that mapping
    text = "def f(xs, a):\n<mask>\n    xs.appe<mask>\n"
    den = TargetDenoiser({"def f(xs, a):\n    ": "a = 1", "xs.app": "end(a)"})
    result = fill_text(text, denoiser=den, eager_ends=False)
    assert result.text == "def f(xs, a):\n    a = 1\n    xs.append(a)\n"
    assert [f.text for f in result.fills][-1] == "nd(a)"
