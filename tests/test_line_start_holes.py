"""A hole marker at the start of a line stands for a whole line (infill/core/line_holes.py):
the engine writes its indentation and line break, the model its code, through the
command, the Python API and the language server's Fill holes."""

from __future__ import annotations

import ast
import json

import pytest
from fakes import TargetDenoiser

from diffusion_infill.infill import apply_edits, fill_text
from diffusion_infill.infill.cli import main
from diffusion_infill.infill.core.line_holes import line_hole_form, line_holes
from diffusion_infill.infill.core.spans import find_holes
from diffusion_infill.model import loading


def _fill_file(tmp_path, monkeypatch, text: str, targets, *args: str, raw: bool = False):
    """`infill fill --in-place` on a file holding `text` with a fake model that writes
    `targets` (each key also without the indentation it ends with: the depth probe's
    canvas, infill/core/indents.py, holds none); the file's text afterwards (bytes with
    `raw`), and the exit status."""
    targets = {**targets, **{k.rstrip(" \t"): v for k, v in targets.items()}}
    monkeypatch.setattr(
        loading, "load_denoiser", lambda *a, **kw: TargetDenoiser(targets, confidence=0.99)
    )
    f = tmp_path / "a.py"
    f.write_bytes(text.encode())
    status = main(["fill", "--in-place", *args, str(f)])
    return (f.read_bytes() if raw else f.read_text()), status


@pytest.mark.parametrize(
    ("text", "targets", "want"),
    [
        pytest.param(
            "def f(x):\n    y = x\n<mask>\n\n\nz = 1\n",
            {"y = x\n    ": "return y"},
            "def f(x):\n    y = x\n    return y\n\n\nz = 1\n",
            id="alone, before a blank line",
        ),
        pytest.param(
            "def f(x):\n<mask>    return y\n",
            {"):\n    ": "y = x"},
            "def f(x):\n    y = x\n    return y\n",
            id="before an indented line",
        ),
        pytest.param(
            "def f(x):\n    if x:\n        return 1\n<mask>    return 2\n",
            {"return 1\n    ": "x = -x"},
            "def f(x):\n    if x:\n        return 1\n    x = -x\n    return 2\n",
            id="before a dedented line",
        ),
        pytest.param(
            "def f(x):\n    y = x\n<mask>",
            {"y = x\n    ": "return y"},
            "def f(x):\n    y = x\n    return y",  # no line break added after it
            id="at the end of the file",
        ),
        pytest.param(
            "class A:\n\tdef f(self):\n<mask>\n",
            {"self):\n\t\t": "return 1"},
            "class A:\n\tdef f(self):\n\t\treturn 1\n",
            id="tabs",
        ),
        pytest.param(
            "X = [\n    1,\n<mask>\n]\n",
            {"1,\n    ": "2,"},
            "X = [\n    1,\n    2,\n]\n",
            id="a list element",
        ),
    ],
)
def test_a_line_start_marker_is_filled_as_a_whole_line(tmp_path, monkeypatch, text, targets, want):
    got, status = _fill_file(tmp_path, monkeypatch, text, targets)
    assert status == 0
    assert got == want
    ast.parse(got)


def test_a_hidden_header_goes_to_a_depth_where_the_file_parses(tmp_path, monkeypatch):
    # the rules read the method's header at the depth of the code before it (8: after a
    # blank line, the line below is as deep); no header parses there, one step out does
    text = (
        "class A:\n    def f(self):\n        self.x = 1\n\n<mask>\n"
        "        self, y\n    ) -> None:\n        return y\n"
    )
    got, status = _fill_file(
        tmp_path, monkeypatch, text, {"= 1\n\n    ": "def g(", "= 1\n\n        ": "def g("}
    )
    assert status == 0
    assert got == text.replace("<mask>", "    def g(")
    ast.parse(got)


def test_crlf_line_endings_are_kept(tmp_path, monkeypatch):
    text = "def f(x):\r\n<mask>\r\n    return y\r\n"
    got, status = _fill_file(tmp_path, monkeypatch, text, {"):\r\n    ": "y = x"}, raw=True)
    assert status == 0
    assert got == b"def f(x):\r\n    y = x\r\n    return y\r\n"


def test_a_marker_before_code_at_column_0_stays_a_hole_in_the_line(tmp_path, monkeypatch):
    got, status = _fill_file(tmp_path, monkeypatch, "<mask>(1)\n", {"": "print"})
    assert status == 0
    assert got == "print(1)\n"


def test_a_line_hole_is_one_line_unless_its_hint_asks_for_more():
    text = "def f(x):\n<mask>\n    return y\n"
    two = "y = x\n    y += 1"
    one = fill_text(text, denoiser=TargetDenoiser({"):\n    ": two}, confidence=0.99))
    assert one.text.count("\n") == text.count("\n")  # a line break is forbidden
    assert one.text.startswith("def f(x):\n    y = x")
    hinted = text.replace("<mask>", "<mask:24>")
    more = fill_text(hinted, denoiser=TargetDenoiser({"):\n    ": two}, confidence=0.99))
    assert more.text == "def f(x):\n    y = x\n    y += 1\n    return y\n"


def test_the_result_is_read_in_the_text_as_given():
    text = "a = 1\n<mask>    \nb = <mask>\n"
    den = TargetDenoiser({"= 1\n": "c = 2", "b = ": "3"}, confidence=0.99)
    r = fill_text(text, denoiser=den)
    assert r.text == "a = 1\nc = 2    \nb = 3\n"  # the blanks after the marker stay
    assert r.original == text
    assert apply_edits(text, r.edits) == r.text
    line, inline = r.fills
    assert (line.span.start, line.span.end) == (6, 17)  # the marker, its blanks, its break
    assert line.text == "c = 2    \n" and inline.text == "3"
    assert text[inline.span.start : inline.span.end] == "<mask>"
    assert all(0 <= w.start <= w.end <= len(text) for w in r.windows)


def test_a_line_fill_that_would_break_the_file_is_left_out_with_one_line(
    tmp_path, monkeypatch, capsys
):
    text = "def f(x):\n<mask>\n    return x\n"
    got, status = _fill_file(tmp_path, monkeypatch, text, {"):\n    ": "return (x"})
    assert got == text  # nothing passed the checks: the hole is left as it was
    err = capsys.readouterr().err.strip().splitlines()
    left = [line for line in err if "left as it was" in line]
    assert len(left) == 1 and "a.py:2:1:" in left[0] and "syntax error" in left[0], err
    assert status == 0  # not an error: filled as well as it could be


def test_json_gives_each_span_in_the_text_as_given(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(
        loading,
        "load_denoiser",
        lambda *a, **kw: TargetDenoiser({"):\n    ": "y = x"}, confidence=0.99),
    )
    f = tmp_path / "a.py"
    f.write_text("def f(x):\n<mask>    return y\n")
    assert main(["fill", "--json", str(f)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["text"] == "def f(x):\n    y = x\n    return y\n"


@pytest.mark.parametrize(
    ("text", "form"),
    [
        ("<mask>\n", "alone"),
        ("x\n<mask>   \r\n", "alone"),
        ("<mask>", "alone"),
        ("<mask>    return 1\n", "before"),
        ("<mask>\treturn 1\n", "before"),
        ("<mask>return 1\n", None),
        ("<mask> = compute()\n", None),
        ("<mask>  x = 1\n", "before"),
        ("x = <mask>\n", None),
        ("    <mask>\n", None),
    ],
)
def test_which_markers_are_line_holes(text, form):
    (span,) = find_holes(text)
    assert line_hole_form(text, span) == form
    recast = line_holes(text, [span])
    assert (0 in recast.lines) == (form is not None)
    assert recast.given[0].start == span.start
