"""Spans of whole lines (a selected line or block): the engine writes the indentation and
the closing line break, the model the code (infill/core/lines.py), through fill_spans."""

from __future__ import annotations

import pytest
from fakes import CTX_BASE, FILL_BASE, TargetDenoiser

from diffusion_infill.infill import OptionError, Span, apply_edits, fill_spans, fill_text

FUNC = "def total(xs):\n    t = 0\n    for x in xs:\n        t += x\n    return t\n"


def _line(text: str, needle: str, count: int = 1) -> Span:
    """The span of `count` whole lines from the line holding `needle`, line break included."""
    start = text.rfind("\n", 0, text.index(needle)) + 1
    end = start
    for _ in range(count):
        end = text.index("\n", end) + 1
    return Span(start, end)


def _shown_before_span(den: TargetDenoiser) -> str:
    """The context the model saw just before the first span of its first call."""
    canvas = den.calls[0][0][0]
    start = den.spans_of(canvas)[0][0]
    return den.decode([t for t in canvas[:start] if t >= CTX_BASE])


def test_selected_line_keeps_its_indentation_and_line_break():
    den = TargetDenoiser(["t = t + x"])
    r = fill_spans(FUNC, [_line(FUNC, "t += x")], denoiser=den)
    assert r.text == FUNC.replace("t += x", "t = t + x")
    assert r.fills[0].text == "        t = t + x\n"
    assert _shown_before_span(den).endswith("xs:\n        ")  # the indentation is context
    assert apply_edits(r.original, r.edits) == r.text


def test_without_line_holes_the_model_writes_indentation_and_line_break():
    den = TargetDenoiser(["        t = t + x\n"])
    r = fill_spans(FUNC, [_line(FUNC, "t += x")], denoiser=den, line_holes=False)
    assert _shown_before_span(den).endswith("xs:\n")
    assert r.text == FUNC.replace("t += x", "t = t + x")


def test_one_selected_line_is_filled_with_one_line():
    # the model wants two lines; a line break is forbidden in a one-line selection
    den = TargetDenoiser(["a = 1\nb = 2"], confidence=0.6)
    r = fill_spans(FUNC, [_line(FUNC, "t = 0")], denoiser=den)
    fill = r.fills[0].text
    assert fill.startswith("    ") and fill.endswith("\n") and fill.count("\n") == 1
    assert r.text.count("\n") == FUNC.count("\n")


def test_selected_lines_may_be_filled_with_several_lines():
    den = TargetDenoiser(["for x in xs:\n        t += 2 * x"])
    r = fill_spans(FUNC, [_line(FUNC, "for x in xs", count=2)], denoiser=den)
    assert r.fills[0].text == "    for x in xs:\n        t += 2 * x\n"
    assert r.text == FUNC.replace("t += x", "t += 2 * x")


def test_selected_lines_are_not_ended_before_their_line_count():
    # the model would end a 3-line selection after one line; it must go on writing
    den = TargetDenoiser(["a = 1"])
    r = fill_spans(FUNC, [_line(FUNC, "t = 0", count=3)], denoiser=den)
    code = r.fills[0].text.removeprefix("    ").removesuffix("\n")
    assert code.startswith("a = 1") and len(code) == 64  # no line break came: to the cap
    off = fill_spans(FUNC, [_line(FUNC, "t = 0", count=3)], denoiser=den, selection_lines=False)
    assert off.fills[0].text == "    a = 1\n"


def test_lines_selected_after_their_indentation_are_not_ended_before_their_line_count():
    # from the first line's code to the last line's end, as a drag selects: not framed,
    # but a rewrite of three lines all the same
    a, b = FUNC.index("t = 0"), FUNC.index("t += x") + len("t += x")
    den = TargetDenoiser(["a = 1"])
    on = fill_spans(FUNC, [Span(a, b)], denoiser=den)
    assert on.fills[0].text.startswith("a = 1") and len(on.fills[0].text) == 64
    off = fill_spans(FUNC, [Span(a, b)], denoiser=den, selection_lines=False)
    assert off.fills[0].text == "a = 1"


def test_selected_lines_end_once_their_lines_are_written():
    # two lines for a two-line selection end there; more lines than selected are the model's
    two = TargetDenoiser(["a = 1\n    b = 2"])
    r = fill_spans(FUNC, [_line(FUNC, "t = 0", count=2)], denoiser=two)
    assert r.fills[0].text == "    a = 1\n    b = 2\n"
    four = TargetDenoiser(["a = 1\n    b = 2\n    c = 3\n    d = 4"])
    r = fill_spans(FUNC, [_line(FUNC, "t = 0", count=2)], denoiser=four)
    assert r.fills[0].text.count("\n") == 4


@pytest.mark.parametrize(
    ("text", "needle", "indent"),
    [
        # after a line that opens a block: one step deeper (the file's step: 2 spaces here)
        ("def f(x):\n  if x:\n    y = 1\n  z = 2\n", "y = 1", "    "),
        # inside a block: the line before's depth
        (FUNC, "t = 0", "    "),
        # after return: the block has ended
        (
            "class A:\n    def f(self):\n        return 1\n    def g(self):\n        pass\n",
            "def g",
            "    ",
        ),
        # after a blank line, a less indented line below: a new statement after the block
        ("def f():\n    return 1\n\nx = f()\nprint(x)\n", "x = f()", ""),
        # tabs where the line before is indented with tabs
        ("def f(x):\n\tif x:\n\t\ty = 1\n", "y = 1", "\t\t"),
        # at the top of the text
        ("import os\nimport sys\n", "import os", ""),
    ],
)
def test_indentation_is_read_from_the_code_around_the_span(text, needle, indent):
    den = TargetDenoiser(["pass"])
    r = fill_spans(text, [_line(text, needle)], denoiser=den)
    assert r.fills[0].text == indent + "pass\n"


def test_last_line_without_line_break():
    text = "def f(x):\n    return x"
    den = TargetDenoiser(["return 2 * x"])
    r = fill_spans(text, [Span(text.index("    return"), len(text))], denoiser=den)
    assert r.text == "def f(x):\n    return 2 * x"


def test_part_of_a_line_and_hole_markers_are_not_framed():
    den = TargetDenoiser(["t + 1"])
    r = fill_spans(FUNC, [Span(FUNC.index("t\n"), FUNC.index("t\n") + 1)], denoiser=den)
    assert r.text.endswith("    return t + 1\n")
    # a marker inside a line is a hole of its own, not a selected line
    den = TargetDenoiser(["1\n"])
    r = fill_text("def f():\n    x = <mask>\n    return 1\n", denoiser=den)
    assert r.text == "def f():\n    x = 1\n    return 1\n"


def test_fill_ids_never_hold_the_framed_text():
    den = TargetDenoiser(["t = t + x"])
    r = fill_spans(FUNC, [_line(FUNC, "t += x")], denoiser=den)
    assert r.stats.tokens == len("t = t + x")  # the model wrote only the code
    assert all(
        t < FILL_BASE or den.decode([t]) != "\n" for t in den.calls[-1][0][0] if t >= FILL_BASE
    )


@pytest.mark.parametrize("name", ["line_holes", "selection_lines"])
def test_line_options_must_be_bools(name):
    with pytest.raises(OptionError, match=f"{name} must be true or false"):
        fill_spans(FUNC, [_line(FUNC, "t = 0")], denoiser=TargetDenoiser(["x"]), **{name: "yes"})


def test_checks_see_a_selected_line_where_its_indentation_puts_it():
    # the text the checks compare against holds the hole at column 0, which would end
    # the function: a name of the function's own is visible where the fill's code stands
    text = "def scale(x):\n    return x + x\n\n\nprint(scale(2))\n"
    den = TargetDenoiser(["return 2 * x"])
    r = fill_spans(
        text, [_line(text, "return x")], denoiser=den, checks="parse,name,comment,keyword,line"
    )
    assert r.fills[0].rejected is None
    assert r.text == text.replace("x + x", "2 * x")
    # a name that is not there is still refused
    den = TargetDenoiser(["return 2 * y"], confidence=0.99)
    r = fill_spans(text, [_line(text, "return x")], denoiser=den, checks="name", candidates=1)
    assert r.fills[0].rejected is not None and "'y'" in r.fills[0].rejected


def test_a_line_holes_edit_covers_the_marker_not_the_line_break_it_writes_again():
    # the fill writes the line's break again; the edit, which an editor applies to the
    # user's buffer, is the marker's characters only (a minimal diff)
    for text, at in (("<mask>\nx = 1\n", 0), ("y = 0\n<mask>\nx = 1\n", 6)):
        r = fill_text(text, denoiser=TargetDenoiser(["pass"]), checks="parse")
        (edit,) = r.edits
        assert (edit.start, edit.end, edit.new_text) == (at, at + len("<mask>"), "pass")
        assert r.text == text.replace("<mask>", "pass")


@pytest.mark.parametrize(
    "text",
    [
        "x = 0\n<mask>  \ny = 1\n",
        "x = 0\r\n<mask>\r\n",
        "x = 0\n<mask>",
        "<mask>\r\r",
        "<mask>\t\n",
    ],
)
def test_a_line_hole_leaves_what_follows_its_marker_on_its_line_as_it_was(text):
    # trailing blanks, a lone carriage return, no line break at the end: the fill takes
    # the marker's place and the rest of the line stays the user's
    r = fill_text(text, denoiser=TargetDenoiser(["pass"]), checks="parse")
    at = text.index("<mask>")
    assert r.text == text.replace("<mask>", "pass")
    assert [(e.start, e.end, e.new_text) for e in r.edits] == [(at, at + 6, "pass")]
