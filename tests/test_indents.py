"""A whole-line span's depth, chosen by the model where the code around it allows several
(infill/core/indents.py), through fill_spans with a fake whose vocabulary spells
indentation as the real tokenizer does: a token of k spaces starts a line of depth k + 1."""

from __future__ import annotations

import pytest
from fakes import CTX_BASE, TargetDenoiser

from diffusion_infill.infill import OptionError, Span, fill_spans
from diffusion_infill.infill.core.lines import depths

CODE = "def f(x):\n    if x:\n        y = 1\n    else:\n        y = 2\n    return y\n"


def _line(text: str, needle: str) -> Span:
    start = text.rfind("\n", 0, text.index(needle)) + 1
    return Span(start, text.index("\n", start) + 1)


class WholeRuns(TargetDenoiser):
    """A fake whose tokenizer spells a line's indentation as one token of all its spaces
    (`        ` + `else`, as some tokenizers do), not one space short."""

    def encode(self, text: str) -> list[int]:
        out, i = [], 0
        while i < len(text):
            j = i + 1
            if text[i] == " " and (i == 0 or text[i - 1] == "\n"):
                while j < len(text) and text[j] == " ":
                    j += 1
            out.append(CTX_BASE + self.tok.index(text[i:j]))
            i = j
        return out


def _den(depth: int, p: float = 0.9, *, probe: bool = True) -> TargetDenoiser:
    """Fills `else:`; in its first call (the depth probe, when there is one) it puts `p`
    on the token of `depth - 1` spaces at the first slot."""
    piece = " " * (depth - 1)

    def script(span: int, slot: int, call: int):  # noqa: ANN202
        return (piece, p) if probe and call == 1 and slot == 0 else None

    den = TargetDenoiser(["else:"], script=script)
    for spaces in (3, 7):  # depths 4 and 8, in the vocabulary before the engine reads it
        den.tok.index(" " * spaces)
    return den


def test_the_model_closes_the_block_the_code_leaves_open():
    den = _den(4)
    r = fill_spans(CODE, [_line(CODE, "else:")], denoiser=den)
    assert r.text == CODE
    assert r.fills[0].text == "    else:\n"
    probe_canvas, probe_positions = den.calls[0][0][0], den.calls[0][1][0]
    assert den.decode(probe_canvas[: probe_positions[0]]).endswith("y = 1\n")  # no indent
    assert r.stats.nfe == den.nfe  # the probe is counted


def test_a_tokenizer_that_spells_the_whole_indentation_in_one_token():
    def script(span: int, slot: int, call: int):  # noqa: ANN202
        return ("    ", 0.9) if call == 1 and slot == 0 else None  # depth 4 there

    den = WholeRuns(["else:"], script=script)
    for spaces in (4, 8):
        den.tok.index(" " * spaces)
    r = fill_spans(CODE, [_line(CODE, "else:")], denoiser=den)
    assert r.fills[0].text == "    else:\n"


def test_without_the_pass_the_line_before_sets_the_depth():
    den = _den(4, probe=False)
    r = fill_spans(CODE, [_line(CODE, "else:")], denoiser=den, indent_pass=False)
    assert r.fills[0].text == "        else:\n"


def test_a_depth_only_slightly_likelier_keeps_the_rules():
    # 0.003 on depth 4's token, 0.997 spread over the 400 others: depth 8's token gets
    # 0.0025, 0.18 nats less than depth 4's (MARGIN: 0.5); depth 0 is ruled out by the
    # line below (at 8) however likely
    den = _den(4, p=0.003)
    r = fill_spans(CODE, [_line(CODE, "else:")], denoiser=den)
    assert r.fills[0].text == "        else:\n"


def test_no_pass_where_the_code_settles_the_depth():
    den = TargetDenoiser(["y = 3"])
    r = fill_spans(CODE, [_line(CODE, "y = 1")], denoiser=den)  # after `if x:`
    assert r.fills[0].text == "        y = 3\n"
    assert r.stats.nfe == den.nfe
    assert len(den.calls[0][1][0]) > 1  # the first call already decodes the fill


def test_depths_the_code_allows():
    start = CODE.index("    else:")
    end = CODE.index("\n", start) + 1
    assert depths(CODE, start, end) == ["        ", "    "]  # not 0: the line below is at 8
    start = CODE.index("    return")
    assert depths(CODE, start, len(CODE)) == ["        ", "    ", ""]
    start = CODE.index("        y = 1")
    assert depths(CODE, start, CODE.index("\n", start) + 1) == []  # after `if x:`
    inside = "        a = 1\n        b = 2\n\n    c = 3\n"  # an excerpt: no header above
    start = inside.index("    c = 3")
    assert depths(inside, start, len(inside)) == ["        ", "    ", ""]
    tabs = "if x:\n\ty = 1\n\tz = 2\n"
    assert depths(tabs, tabs.index("\tz"), len(tabs)) == []


def test_indent_pass_must_be_a_bool():
    with pytest.raises(OptionError, match="indent_pass must be true or false"):
        fill_spans(CODE, [_line(CODE, "else:")], denoiser=_den(4), indent_pass="yes")


@pytest.mark.slow
def test_the_shipped_model_puts_else_where_it_belongs():
    # its depth scores here: 4 spaces -0.14, 8 spaces -2.6 (fp32, bf16 and int8 alike)
    from diffusion_infill.model.loading import load_denoiser

    code = "def sign(x):\n    if x >= 0:\n        s = 1\n    else:\n        s = -1\n    return s\n"
    span = _line(code, "else:")
    den = load_denoiser(None)
    assert fill_spans(code, [span], denoiser=den).fills[0].text.startswith("    else")
    without = fill_spans(code, [span], denoiser=den, indent_pass=False).fills[0].text
    assert without.startswith("        ")  # the line before's depth
