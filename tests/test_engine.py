"""fill_text / fill_spans end to end with the fake denoiser: alignment, lengths, stats."""

from __future__ import annotations

import numpy as np
import pytest
from fakes import CTX_BASE, MASK, NULL, TargetDenoiser

from diffusion_infill import infill
from diffusion_infill.infill import (
    DenoiserError,
    InputError,
    MarkerError,
    NoHolesError,
    Span,
    SpanError,
    WindowError,
    apply_edits,
    fill_spans,
    fill_text,
)


def _check_consistent(r):
    assert apply_edits(r.original, r.edits) == r.text


def test_fill_single_hole():
    d = TargetDenoiser(["x + 1"])
    r = fill_text("def f(x):\n    return <mask>\n", denoiser=d)
    assert r.text == "def f(x):\n    return x + 1\n"
    assert r.edits == [infill.Edit(21, 27, "x + 1")]
    assert r.fills[0].text == "x + 1" and r.fills[0].tokens == 5
    s = r.stats
    assert (s.spans, s.windows, s.tokens, s.nfe, s.steps) == (1, 1, 5, 1, 1)
    assert s.model == "fake" and s.nfe_per_token == pytest.approx(0.2) and s.ms >= 0
    assert s.scored == 16  # the default allocation: 16 slots, one pass
    _check_consistent(r)


TEXTS = {
    "tabs": "def f():\n\treturn <mask>\n",
    "crlf": "def f():\r\n    x = 1\r\n    return <mask>\r\n",
    "non_ascii": "s = 'héllo wörld 🎉 中文字符'\nt = <mask>  # ✓ 𝔘\n",
    "emoji_around_hole": "x = '🎉'<mask>'🎉'\n",
    "trailing_ws": "a = 1   \n\nb = <mask>\t \n   \n",
    "start": "<mask> = compute()\nprint(1)\n",
    "end": "x = 1\ny = <mask>",
    "only_hole": "<mask>x",
    "in_string": 'msg = "hello <mask>!"\n',
    "no_final_newline_crlf": "a = 1\r\nb = <mask>",
    "cr_only": "a = 1\rb = <mask>\rc = 2",
}


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_text_outside_holes_comes_back_byte_for_byte(name):
    text = TEXTS[name]
    d = TargetDenoiser(["v_é🎉"])
    r = fill_text(text, denoiser=d, language="python")
    assert r.text == text.replace("<mask>", "v_é🎉")
    assert r.text.encode("utf-8") == text.encode("utf-8").replace(b"<mask>", "v_é🎉".encode())
    _check_consistent(r)
    # The canvas context is the window text encoded segment by segment (nothing decoded).
    (canvas,), _ = d.calls[0]
    w = r.windows[0]
    s = r.fills[0].span
    ctx_left = [t for t in canvas[: canvas.index(MASK)]]
    assert d.decode(ctx_left) == text[w.start : s.start]
    tail = canvas[canvas.index(MASK) + 16 :]
    assert d.decode(tail) == text[s.end : w.end]


def test_line_windows_for_other_languages_keep_bytes():
    text = "fn main() {\r\n\tlet x = <mask>;\r\n}\r\n"
    r = fill_text(text, denoiser=TargetDenoiser(["42"]), language=None)
    assert r.text == text.replace("<mask>", "42")
    assert r.windows[0].scope == "lines"


def test_hole_marker_text_in_fill_spans_is_ordinary_text():
    text = "s = '<mask>'\nx = 1\n"
    r = fill_spans(text, [Span(17, 18)], denoiser=TargetDenoiser(["2"]))
    assert r.text == "s = '<mask>'\nx = 2\n"
    assert r.edits == [infill.Edit(17, 18, "2")]


def test_custom_marker():
    d = TargetDenoiser(["a", "bb"])
    r = fill_text("x = ??\ny = {??:2: 1}\n", denoiser=d, marker="??")
    assert r.text == "x = a\ny = {bb: 1}\n"
    assert [f.span.length for f in r.fills] == [None, 2]


def test_length_hint_allocates_that_many_slots():
    d = TargetDenoiser(["ab"])
    r = fill_text("x = <mask:5>", denoiser=d)
    assert d.calls[0][1] == [[4, 5, 6, 7, 8]]
    assert r.text == "x = ab"


def test_joint_spans_share_one_canvas():
    d = TargetDenoiser(["a", "b"])
    r = fill_text("def f():\n    x = <mask:2>\n    y = <mask:2>\n", denoiser=d)
    assert r.text == "def f():\n    x = a\n    y = b\n"
    assert r.stats.windows == 1
    canvases, positions = d.calls[0]
    assert len(canvases) == 1 and len(d.spans_of(canvases[0])) == 2
    assert len(positions[0]) == 4


def test_far_apart_spans_go_to_separate_canvases_in_one_batch():
    filler = "".join(f"v{i} = {i}\n" for i in range(40))
    text = "a = <mask:4>\n" + filler + "b = <mask:4>\n"
    d = TargetDenoiser({"a = ": "1", "b = ": "2"}, max_length=64)
    r = fill_text(text, denoiser=d, grow=0)
    assert r.text == text.replace("<mask:4>", "1", 1).replace("<mask:4>", "2", 1)
    assert r.stats.windows == 2 and len(r.windows) == 2
    canvases, _ = d.calls[0]
    assert len(canvases) == 2  # both windows in one forward call
    assert all(len(c) <= 64 for cs, _ in d.calls for c in cs)
    # A window never holds the other group's marker.
    for w in r.windows:
        assert text[w.start : w.end].count("<mask") == 1
    assert r.stats.nfe == 2 * r.stats.steps


def test_null_tail_is_dropped_and_ends_the_span():
    d = TargetDenoiser(["ok"], confidence=lambda k, j, c: 0.99 if j in (0, 2) else 0.5)
    r = fill_text("x = <mask:6>", denoiser=d)
    # Pass 1 commits slot 0 and the null at slot 2; slots 3..5 follow it as null.
    assert r.trace[0].committed == ((0, 0), (0, 2), (0, 3), (0, 4), (0, 5))
    assert r.trace[0].spans == ((0, "o░∅∅∅∅"),)
    assert r.text == "x = ok" and r.stats.tokens == 2


def test_span_grows_when_its_allocation_fills_up():
    d = TargetDenoiser(["abcdefghij"], confidence=0.99)
    r = fill_text("x = <mask:4>\n", denoiser=d, grow=3)
    assert r.text == "x = abcdefghij\n"
    grown = [g for t in r.trace for g in t.grown]
    # 4 -> 7 -> 10 -> 13 slots; the last three take nulls and the span ends.
    assert grown == [(0, 3), (0, 3), (0, 3)]
    assert r.stats.grown == sum(n for _, n in grown)


def test_growth_stops_at_max_span_tokens():
    d = TargetDenoiser(["abcdefghijklmnop"], confidence=0.99)
    r = fill_text("x = <mask:4>", denoiser=d, grow=4, max_span_tokens=10, default_span_tokens=4)
    assert r.text == "x = abcdefghij"


def test_growth_stops_at_grow_cap_and_a_longer_hint_is_kept():
    d = TargetDenoiser(["abcdefghijklmnop"], confidence=0.99)
    r = fill_text("x = <mask:4>", denoiser=d, grow=4, grow_cap=10, default_span_tokens=4)
    assert r.text == "x = abcdefghij"
    r = fill_text("x = <mask:12>", denoiser=d, grow=4, grow_cap=10)
    assert r.text == "x = abcdefghijkl" and r.stats.grown == 0


def test_grow_zero_never_grows():
    d = TargetDenoiser(["abcdefgh"], confidence=0.99)
    r = fill_text("x = <mask:3>", denoiser=d, grow=0)
    assert r.text == "x = abc" and r.stats.grown == 0


def test_exact_length_forbids_null_and_growth():
    d = TargetDenoiser(["ab"], confidence=0.99)  # the model would end after two tokens
    r = fill_text("x = <mask:4>", denoiser=d, exact_length=True)
    assert r.stats.tokens == 4 and r.text.startswith("x = ab") and len(r.text) == 8
    assert r.stats.grown == 0


# -- in-line holes end where the fill writes the code after them (infill/core/echo.py) --


def test_an_in_line_fill_ends_where_it_writes_the_rest_of_its_line_again():
    # the model wrote the arguments, then the `)` that follows the hole, then new lines
    d = TargetDenoiser(["a, b)\ny = 2"], confidence=0.99)
    r = fill_text("x = f(<mask>)\ny = 2\n", denoiser=d)
    assert r.text == "x = f(a, b)\ny = 2\n"
    assert r.fills[0].text == "a, b" and r.stats.tokens == 4
    _check_consistent(r)


def test_an_echo_before_a_crlf_line_break_is_cut_too():
    d = TargetDenoiser(["a, b) + 1\r\ny"], confidence=0.99)
    r = fill_text("x = f(<mask>) + 1\r\ny = 2\r\n", denoiser=d)
    assert r.text == "x = f(a, b) + 1\r\ny = 2\r\n"


@pytest.mark.parametrize(
    ("text", "target", "expected"),
    [
        # the fill goes on past its statement into a new line: it ends with its statement
        ("x = self.parse<mask>\ny = 2\n", "()\n    a = self.parse(a)", "x = self.parse()\ny = 2\n"),
        # at the end of the text too, and a CRLF line break
        ("x = <mask>", "1\r\nz = 3", "x = 1"),
        # a line break inside brackets or a triple-quoted string is part of the statement
        ("x = <mask>\n", "f(a,\n  b)\ny = 1", "x = f(a,\n  b)\n"),
        ("x = <mask>\n", '"""a\nb"""\ny = 1', 'x = """a\nb"""\n'),
        # a trailing comment stays; a backslash continues the line
        ("x = <mask>\n", "1  # one\ny = 1", "x = 1  # one\n"),
        ("x = <mask>\n", "1 + \\\n  2\ny = 1", "x = 1 + \\\n  2\n"),
    ],
    ids=["next line", "end of text", "brackets", "triple quotes", "comment", "backslash"],
)
def test_a_hole_at_a_lines_end_after_code_ends_with_its_statement(text, target, expected):
    d = TargetDenoiser([target], confidence=0.99)
    r = fill_text(text, denoiser=d, language="python", word_starts=False)
    assert r.text == expected
    _check_consistent(r)


@pytest.mark.parametrize(
    ("text", "target", "expected"),
    [
        ("if <mask>:\n    pass\n", " rv", "if rv:\n    pass\n"),  # after a keyword's space
        ("x = <mask>\n", "  1", "x = 1\n"),  # after `= `, two spaces and a statement end
        ("f(a, <mask>)\n", " b", "f(a, b)\n"),  # inside brackets
        ("x = <mask>  # note\n", "\t1", "x = 1  # note\n"),  # a tab, a comment after
    ],
    ids=["keyword", "assignment", "arguments", "tab"],
)
def test_a_fill_after_a_space_does_not_start_with_another(text, target, expected):
    r = fill_text(text, denoiser=TargetDenoiser([target], confidence=0.99), language="python")
    assert r.text == expected
    _check_consistent(r)


@pytest.mark.parametrize(
    ("text", "target"),
    [
        ("x =<mask>\n", " 1"),  # no space before the hole: the fill's is needed
        ("s = 'a <mask>'\n", " b"),  # inside a string: spaces are the string's
        ("x = 1  # see <mask>\n", " more"),  # inside a comment
        ("    <mask>\n", " pass"),  # indentation alone before it: not after code
        ("x = <mask>\n", " "),  # whitespace alone is kept as the model wrote it
    ],
    ids=["no space", "string", "comment", "indentation", "space alone"],
)
def test_leading_spaces_are_kept_where_they_are_not_doubled(text, target):
    r = fill_text(text, denoiser=TargetDenoiser([target], confidence=0.99), language="python")
    assert r.fills[0].text == target


@pytest.mark.parametrize(
    ("text", "target"),
    [
        ("if y:<mask>\n", "\n    a = 1\n    b = 2"),  # after a block's `:`: its body
        ("for x in <mask>\n", "items:\n    a = 1"),  # the fill opens the block itself
        ("x = foo(a,\n  <mask>\n", "b)\ny = 1"),  # inside brackets opened before it
        ("    <mask>\n", "a = 1\nb = 2"),  # no code before it on its line
        ("x = 1  # <mask>\n", "see\nmore"),  # in a comment
    ],
    ids=["block", "fill opens a block", "in brackets", "line start", "comment"],
)
def test_a_hole_that_may_take_lines_is_not_cut_at_its_statement(text, target):
    r = fill_text(text, denoiser=TargetDenoiser([target], confidence=0.99), language="python")
    assert r.fills[0].text == target


def test_the_statement_end_is_for_python_only():
    r = fill_text(
        "x = <mask>\n", denoiser=TargetDenoiser(["1\ny = 2"], confidence=0.99), language=None
    )
    assert r.fills[0].text == "1\ny = 2"


def test_the_statement_end_can_be_turned_off():
    d = TargetDenoiser(["1\ny = 2"], confidence=0.99)
    r = fill_text("x = <mask>\n", denoiser=d, language="python", statement_ends=False)
    assert r.fills[0].text == "1\ny = 2"
    with pytest.raises(infill.OptionError, match="statement_ends must be true or false"):
        fill_text("x = <mask>\n", denoiser=d, statement_ends="yes")


@pytest.mark.parametrize(
    ("text", "ended", "expected", "going"),
    [
        # four slots hold "a)\nz": the fill has ended; growing it would only add what is cut
        ("x = f(<mask:4>)\n", "a)\nzzzzzzzzzzzz", "x = f(a)\n", "a, bzzzzzzzzzzz"),
        # two slots hold "a)": the call's `)`, though no line break follows
        ("x = f(<mask:2>)\n", "a)zzzzzzzzzzzz", "x = f(a)\n", "a,zzzzzzzzzzzz"),
        # four slots hold "a\na": the fill loops (infill/core/echo.py `cut_loop`)
        ("<mask:4>\nb = 2\n", "a\na\nzzzzzzzzzzzz", "a\nb = 2\n", "a\nbzzzzzzzzzzzzz"),
    ],
    ids=["echo", "echo without a line break", "loop"],
)
def test_a_fill_that_has_ended_is_not_grown(text, ended, expected, going):
    r = fill_text(text, denoiser=TargetDenoiser([ended], confidence=0.99), grow=4)
    assert r.text == expected and r.stats.grown == 0
    # a fill that has not ended, in the same allocation, grows
    assert (
        fill_text(text, denoiser=TargetDenoiser([going], confidence=0.99), grow=4).stats.grown > 0
    )


@pytest.mark.parametrize(
    ("text", "target", "fill"),
    [
        ("x = f(<mask>)\n", "a, b)", "a, b"),  # ends with the call's `)`: no line break
        ("x = f(<mask>) + 1\n", "a, b)", "a, b"),  # with the start of the line's rest
        ("x = g(f(<mask>))\n", "a)", "a"),  # one of the two `)` after it
        ("x = f(<mask>)\n", 's = ")", b)', 's = ")", b'),  # a quoted `)` closes nothing
    ],
)
def test_a_fill_that_ends_by_closing_what_it_never_opened_ends_before(text, target, fill):
    d = TargetDenoiser([target], confidence=0.99)
    r = fill_text(text, denoiser=d, grow=0)
    assert r.fills[0].text == fill
    _check_consistent(r)


@pytest.mark.parametrize(
    ("text", "target"),
    [
        ("x = f(<mask>)\n", "g(y)"),  # a nested call on one line: its `)` is no echo
        ("x = g(f(<mask>))\n", "h(y)"),  # nor the first of two
        ("def f():\n    <mask>\n    return 1\n", "x = 1\n    return 1"),  # nothing after it
        ("x = f(<mask>)\n", "a\n    b"),  # a line break, but the fill never writes `)`
    ],
)
def test_fills_that_do_not_echo_are_kept(text, target):
    r = fill_text(text, denoiser=TargetDenoiser([target], confidence=0.99))
    assert r.fills[0].text == target


def test_an_exact_length_is_never_cut():
    d = TargetDenoiser(["a)\nb"], confidence=0.99)
    r = fill_text("x = f(<mask:4>)\n", denoiser=d, exact_length=True)
    assert r.fills[0].text == "a)\nb"


# -- a line written again ends the fill (infill/core/echo.py `cut_loop`) --


@pytest.mark.parametrize(
    ("target", "fill"),
    [
        ("x = 1\n    x = 1\n    x = 1", "x = 1"),  # the model's loop: the first line stays
        ("y = g(x)\n    log(y)\n    log(y)", "y = g(x)\n    log(y)"),  # up to the second copy
        ("a\n\n    a", "a\n\n    a"),  # not the line before it: a blank line between
        ("f(g(\n        x,\n    )\n    )", "f(g(\n        x,\n    )\n    )"),  # brackets
        ("a = 1\n    b = 2\n    a = 1", "a = 1\n    b = 2\n    a = 1"),  # not in a row
    ],
)
def test_a_fill_ends_before_a_line_that_says_the_line_before_again(target, fill):
    r = fill_text(
        "def f():\n    <mask>\n    return 1\n", denoiser=TargetDenoiser([target], confidence=0.99)
    )
    assert r.fills[0].text == fill
    _check_consistent(r)


def test_a_loop_before_a_crlf_line_break_is_cut_too():
    d = TargetDenoiser(["x = 1\r\n    x = 1"], confidence=0.99)
    r = fill_text("def f():\r\n    <mask>\r\n    return 1\r\n", denoiser=d)
    assert r.fills[0].text == "x = 1"


def test_an_exact_length_never_loses_its_loop():
    d = TargetDenoiser(["a\na\na"], confidence=0.99)
    r = fill_text("<mask:5>\n", denoiser=d, exact_length=True)
    assert r.fills[0].text == "a\na\na\n"  # a line hole: its line break is the engine's
    assert r.text == "a\na\na\n"


def test_a_text_that_is_one_marker_is_one_line():
    r = fill_text("<mask>", denoiser=TargetDenoiser(["v_é🎉"]))
    # the line ends as it did (no line break at the end of the text): only the marker changes
    assert r.text == "v_é🎉" and r.edits == [infill.Edit(0, 6, "v_é🎉")]


def test_holes_on_one_line_echo_up_to_the_next_hole():
    d = TargetDenoiser(["a,\nzz", "b) + 1\nzz"], confidence=0.99)
    r = fill_text("y = f(<mask>, <mask>) + 1\n", denoiser=d)
    assert r.text == "y = f(a, b) + 1\n"


def test_a_checked_fill_is_checked_as_cut():
    # the cut fill passes the line check: no alternatives are decoded
    d = TargetDenoiser(["values)\nvalues"], confidence=0.99)
    r = fill_text("values = 1\nx = f(<mask>)\n", denoiser=d, checks="line,parse", candidates=2)
    assert r.text == "values = 1\nx = f(values)\n"
    assert r.stats.candidates == 0 and r.stats.rejected == 0


def test_exact_span_via_fill_spans():
    d = TargetDenoiser(["abcdefgh"], confidence=0.99)
    r = fill_spans("x = 12", [Span(4, 6, length=3, exact=True)], denoiser=d)
    assert r.text == "x = abc"


def test_exact_length_needs_hints():
    with pytest.raises(SpanError, match="1:5: exact length needs a length"):
        fill_text("x = <mask>", denoiser=TargetDenoiser(["a"]), exact_length=True)


def test_hint_above_max_span_tokens_is_an_error():
    with pytest.raises(SpanError, match="asks for 300 tokens; max_span_tokens is 256"):
        fill_text("x = <mask:300>", denoiser=TargetDenoiser(["a"]))


def test_span_longer_than_the_model_window_is_an_error():
    with pytest.raises(WindowError, match="needs 100 tokens but a canvas holds at most 64"):
        fill_text("x = <mask:100>", denoiser=TargetDenoiser(["a"], max_length=64))


def test_rewrite_with_identical_fill_gives_no_edit():
    text = "def f(x):\n    return x * 2\n"
    start = text.index("x * 2")
    d = TargetDenoiser(["x * 2"])
    r = fill_spans(text, [Span(start, start + 5)], denoiser=d)
    assert r.text == text and r.edits == [] and r.diff("f.py") == ""
    # A rewrite span's default allocation is the old text's length in tokens.
    assert d.calls[0][1] == [[start + i for i in range(5)]]


def test_rewrite_edit_touches_only_changed_characters():
    text = "def f(x):\n    if x > 0:\n        return x * 2\n    return 0\n"
    start, end = text.index("    if"), text.index("    return 0")
    # whole lines: the engine writes the indentation and the last line break
    new = "if x >= 0:\n        return x * 2"
    d = TargetDenoiser([new], confidence=0.99)
    r = fill_spans(text, [Span(start, end)], denoiser=d)
    assert r.text == text.replace("x > 0", "x >= 0")
    assert r.edits == [infill.Edit(text.index("> 0") + 1, text.index("> 0") + 1, "=")]
    _check_consistent(r)


def test_insertion_span_at_cursor():
    text = "total = \nprint(total)\n"
    d = TargetDenoiser(["sum(xs)"])
    r = fill_spans(text, [Span(8, 8)], denoiser=d)
    assert r.text == "total = sum(xs)\nprint(total)\n"
    assert r.edits == [infill.Edit(8, 8, "sum(xs)")]


def test_fills_are_reported_in_text_order():
    d = TargetDenoiser(["A", "B"])
    r = fill_spans("x = 1; y = 2", [Span(11, 12), Span(4, 5)], denoiser=d)
    assert [f.span.start for f in r.fills] == [4, 11] and r.text == "x = A; y = B"


@pytest.mark.parametrize(
    ("spans", "message"),
    [
        ([Span(3, 20)], "out of range"),
        ([Span(-1, 2)], "out of range"),
        ([Span(5, 3)], "out of range"),
        ([Span(0, 4), Span(2, 6)], "spans overlap: 1:1-1:5 and 1:3-1:7"),
        ([Span(2, 2), Span(2, 2)], "spans overlap"),
        ([Span(0, 1, length=0)], "length must be an integer >= 1"),
        ([Span(0, 1, exact=True)], "exact-length span needs a length"),
        ([], "no spans"),
    ],
)
def test_bad_spans_are_rejected(spans, message):
    d = TargetDenoiser(["a"])
    with pytest.raises((SpanError, NoHolesError)) as err:
        fill_spans("abcdefghij", spans, denoiser=d)
    assert message in str(err.value)
    assert d.calls == []


def test_adjacent_spans_are_allowed():
    # The fake sees adjacent spans as one run of slots, so one target covers both.
    spans = [Span(0, 1, length=1, exact=True), Span(1, 2, length=1, exact=True)]
    r = fill_spans("xy", spans, denoiser=TargetDenoiser(["ab"]))
    assert r.text == "ab" and [f.text for f in r.fills] == ["a", "b"]


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        ("x = 1\n", NoHolesError, "no holes"),
        ("x = <mask:>", MarkerError, "1:5: malformed hole marker '<mask:>'"),
        ("x = <mask:0>", MarkerError, "malformed hole marker '<mask:0>'"),
        ("x = <mask:abc>", MarkerError, "malformed hole marker '<mask:abc>'"),
        ("x = 1\ny = <mask:12\n", MarkerError, "2:5: unclosed hole marker '<mask:12'"),
        ("x = \x00<mask>", InputError, "NUL"),
        ("x = \ud800<mask>", InputError, "lone surrogate"),
    ],
)
def test_bad_text_is_rejected_with_a_clear_error(text, error, message):
    d = TargetDenoiser(["a"])
    with pytest.raises(error) as err:
        fill_text(text, denoiser=d)
    assert message in str(err.value)
    assert isinstance(err.value, infill.InfillError)
    assert d.calls == []


class _Untouchable:
    """A denoiser that fails the test if the engine asks it anything."""

    def __getattr__(self, name):
        raise AssertionError(f"the engine used the denoiser ({name}) for nothing")


def test_errors_in_input_come_before_any_use_of_the_denoiser():
    with pytest.raises(NoHolesError):
        fill_text("x = 1", denoiser=_Untouchable())
    with pytest.raises(SpanError):
        fill_spans("x", [Span(0, 5)], denoiser=_Untouchable())
    with pytest.raises(MarkerError):
        fill_text("x = <mask:0>", denoiser=_Untouchable())


def test_denoiser_returning_wrong_shapes_is_a_denoiser_error():
    class Broken(TargetDenoiser):
        def logits(self, canvases, positions):
            return [np.zeros((1, 3), dtype=np.float32) for _ in canvases]

    with pytest.raises(DenoiserError, match="shape"):
        fill_text("x = <mask>", denoiser=Broken(["a"]))


def test_trace_shows_each_step():
    d = TargetDenoiser(["abc"], confidence=lambda k, j, c: [0.99, 0.5, 0.95][j])
    r = fill_text("<mask:3>", denoiser=d, exact_length=True)
    assert [t.spans for t in r.trace] == [((0, "a░c"),), ((0, "abc"),)]
    text = r.trace_text()
    assert "step 1 canvas 0: scored 3, committed 0:0 0:2" in text
    assert "span 0: 'a░c'" in text


def test_stats_nfe_per_token():
    d = TargetDenoiser(["abcd"], confidence=lambda k, j, c: 0.99 if j != 1 else 0.5)
    r = fill_text("<mask:4>", denoiser=d, exact_length=True)
    assert r.stats.nfe == 2 and r.stats.tokens == 4
    assert r.stats.nfe_per_token == pytest.approx(0.5)


def test_empty_fill_deletes_the_marker():
    d = TargetDenoiser([""], confidence=0.99)
    r = fill_text("x = 1<mask>\n", denoiser=d, word_starts=False)
    assert r.text == "x = 1\n" and r.stats.tokens == 0
    assert r.edits == [infill.Edit(5, 11, "")]
    assert r.stats.nfe_per_token == 1.0


def test_engine_never_imports_torch():
    import subprocess
    import sys

    code = (
        "import sys, infill, infill.cli; "
        "sys.exit(1 if {'torch', 'transformers'} & set(sys.modules) else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_context_ids_are_context_and_slots_are_masks():
    d = TargetDenoiser(["q"])
    fill_text("a<mask:2>b", denoiser=d, language=None, word_starts=False)
    (canvas,), (positions,) = d.calls[0]
    assert canvas == [CTX_BASE + 0, MASK, MASK, CTX_BASE + 1]
    assert positions == [1, 2]
    assert NULL not in canvas


def test_decided_spans_take_no_pass_and_the_others_are_denoised():
    from diffusion_infill.infill.core.engine import prepare_fill
    from diffusion_infill.infill.core.options import SamplerOptions
    from diffusion_infill.infill.core.sampler import denoise

    d = TargetDenoiser(["zz"])
    text = "a = b - c\n"
    plus = d.encode("+")
    opts = SamplerOptions()
    fill = prepare_fill(
        text,
        [Span(6, 7, length=1, exact=True)],
        denoiser=d,
        options=opts,
        rewrite=True,
        decided=[plus],
    )
    assert fill.job.done  # nothing masked: no pass
    assert fill.result().text == "a = b + c\n" and d.calls == []
    # a decided span beside one to denoise: the canvas is denoised, the decided one kept
    fill = prepare_fill(
        text,
        [Span(0, 1), Span(6, 7, length=1, exact=True)],
        denoiser=d,
        options=opts,
        rewrite=True,
        decided=[None, plus],
    )
    denoise(fill.job, d)
    assert fill.result().text == "zz = b + c\n"


@pytest.mark.parametrize("decided", [[[5, 6]], [None, None], []])
def test_decided_tokens_must_match_their_exact_spans(decided):
    from diffusion_infill.infill.core.engine import prepare_fill
    from diffusion_infill.infill.core.options import SamplerOptions

    d = TargetDenoiser(["x"])
    with pytest.raises(SpanError, match="decided tokens"):
        prepare_fill(
            "a = b - c\n",
            [Span(6, 7, length=1, exact=True)],
            denoiser=d,
            options=SamplerOptions(),
            rewrite=True,
            decided=decided,
        )
