"""Hole markers and explicit spans."""

from __future__ import annotations

import pytest

from diffusion_infill.infill import MarkerError, NoHolesError, OptionError, Span, SpanError
from diffusion_infill.infill.core.spans import check_spans, find_holes, neutralise


def test_default_markers_with_and_without_hints():
    text = "a = <mask>\nb = <mask:12>\n"
    assert find_holes(text) == [Span(4, 10), Span(15, 24, length=12)]


def test_marker_inside_angle_brackets_is_a_hole():
    assert find_holes("List<<mask>> x") == [Span(5, 11)]


def test_similar_text_is_not_a_marker():
    assert find_holes("<masked> <mask > <MASK> <mask>") == [Span(24, 30)]


@pytest.mark.parametrize(
    ("text", "where", "snippet"),
    [
        ("x = <mask:>", "1:5", "'<mask:>'"),
        ("x = <mask:0>", "1:5", "'<mask:0>'"),
        ("x = <mask:x>", "1:5", "'<mask:x>'"),
        ("x = <mask:-3>", "1:5", "'<mask:-3>'"),
        ("x = <mask:abc>", "1:5", "'<mask:abc>'"),
        ("ok <mask>\n  <mask:<mask>>", "2:3", "'<mask:<mask>'"),
    ],
)
def test_malformed_hints_are_errors(text, where, snippet):
    with pytest.raises(MarkerError) as err:
        find_holes(text)
    message = str(err.value)
    assert message.startswith(f"{where}: malformed hole marker {snippet}")
    assert "'<mask:8>'" in message


@pytest.mark.parametrize(
    "text", ["x = <mask:12\ny", "x = <mask:", "x = <mask:3 + 4 + 5 + 6 + 7 + 8 + 9>"]
)
def test_unclosed_hint_is_an_error(text):
    with pytest.raises(MarkerError, match="1:5: unclosed hole marker"):
        find_holes(text)


def test_custom_marker_and_hint():
    text = "a = ??\nb = ??:3\nd = {??: 1}\n"
    holes = find_holes(text, "??")
    d = text.index("{??") + 1
    assert holes == [Span(4, 6), Span(11, 15, length=3), Span(d, d + 2)]
    assert text[d : d + 3] == "??:"  # a hole followed by a colon: ordinary code


def test_custom_marker_occurrences_do_not_overlap():
    assert find_holes("???", "??") == [Span(0, 2)]


def test_custom_bracketed_marker():
    assert find_holes("x = <hole:2> + <hole>", "<hole>") == [Span(4, 12, length=2), Span(15, 21)]
    with pytest.raises(MarkerError, match="'<hole:8>'"):
        find_holes("<hole:0>", "<hole>")


def test_custom_marker_zero_hint_is_an_error():
    with pytest.raises(MarkerError, match="1:1: malformed hole marker '\\?\\?:0'"):
        find_holes("??:0", "??")


def test_no_holes():
    with pytest.raises(NoHolesError, match="no holes: the text has no '<mask>' marker"):
        find_holes("x = 1\n")


@pytest.mark.parametrize("marker", ["", "a b", "\n", "x" * 65])
def test_bad_marker_option(marker):
    with pytest.raises(OptionError, match="marker"):
        find_holes("x", marker)


def test_check_spans_sorts_and_validates():
    assert check_spans("abcdef", [Span(4, 6), Span(0, 0), Span(1, 3)]) == [
        Span(0, 0),
        Span(1, 3),
        Span(4, 6),
    ]
    assert check_spans("ab", [Span(0, 1), Span(1, 2)])  # adjacent is fine
    with pytest.raises(SpanError, match="integers"):
        check_spans("ab", [Span(0.5, 1)])  # type: ignore[arg-type]
    with pytest.raises(SpanError, match="not a Span"):
        check_spans("ab", [(0, 1)])  # type: ignore[list-item]


def test_neutralise_keeps_offsets():
    text = "é = <mask:3> + 🎉"
    spans = find_holes(text)
    assert neutralise(text, spans) == "é = ________ + 🎉"


def test_neutralise_keeps_the_lines_of_a_span_over_line_breaks():
    # a span of whole lines reads as lines of identifiers at their depth: the block
    # around it still parses, so the checks can tell a fill's errors from the stand-in's
    text = "def f():\n    x = 1\n    if x:\n        y = 2\n    return y\n"
    start, end = text.index("    x"), text.index("    return")
    out = neutralise(text, [Span(start, end)])
    assert out == "def f():\n    _____\n    _____\n        _____\n    return y\n"
    assert len(out) == len(text)
    inside = text.index("x = 1")  # a span inside a line: one identifier, as before
    assert neutralise(text, [Span(inside, inside + 5)]).split("\n")[1] == "    _____"
