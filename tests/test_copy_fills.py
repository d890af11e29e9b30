"""Copies of the code around a hole (infill/core/copy_fills.py): an in-line hole's chosen
fill meets the text that follows the same code elsewhere, in one more pass, and a copy the
model scores higher that passes the checks replaces it."""

from __future__ import annotations

import numpy as np
import pytest
from fakes import CAPACITY, CTX_BASE, FILL_BASE, TargetDenoiser

from diffusion_infill.infill import DenoiserError, OptionError, Span, fill_spans, fill_text
from diffusion_infill.infill.core.copy_texts import LIMIT, context_copies

CHECKED = {"checks": "parse", "lengths": 4}
TWICE = (
    "def area(w, h):\n    size = w * h\n    return size\n\n\n"
    "def scaled(w, h):\n    size = <mask>\n    return size\n"
)


class Spellings(TargetDenoiser):
    """The fake, but on call `call` (the copies' pass, which reads text as it encodes) it
    likes `favoured` at every slot, and gives a character's context id (how `encode`
    spells it) what it gives its fill id."""

    def __init__(self, target: str, favoured: str | None = None, call: int = 0) -> None:
        def script(span: int, slot: int, at: int) -> tuple[str | None, float] | None:
            if favoured is None or at != call:
                return None
            return (favoured[slot] if slot < len(favoured) else None), 0.99

        super().__init__([target], script=script)
        self.call = call

    def logits(self, canvases, positions, hints=None):  # noqa: ANN001, ANN201
        out = super().logits(canvases, positions, hints)
        if len(self.calls) == self.call:
            for rows in out:
                rows[:, CTX_BASE:FILL_BASE] = rows[:, FILL_BASE : FILL_BASE + CAPACITY]
                rows[:, FILL_BASE:] = np.float32(-30.0)
        return out


def calls_without_copies(text: str, target: str) -> int:
    den = TargetDenoiser([target])
    fill_text(text, denoiser=den, context_copies=False, **CHECKED)
    return len(den.calls)


def test_a_copy_the_model_scores_higher_replaces_the_fill():
    n = calls_without_copies(TWICE, "w + h")
    den = Spellings("w + h", "w * h", n + 1)
    r = fill_text(TWICE, denoiser=den, **CHECKED)
    assert r.fills[0].text == "w * h" and r.fills[0].rejected is None
    assert "    size = w * h\n    return size\n" in r.text[r.text.index("scaled") :]
    # one more call: the model's fill and the one copy, each as masks in the same context
    canvases, positions = den.calls[-1]
    assert len(den.calls) == n + 1 and len(canvases) == 2
    assert [len(p) for p in positions] == [len("w + h"), len("w * h")]
    assert r.stats.nfe == den.nfe and r.stats.steps == len(den.calls)


def test_a_copy_the_model_scores_lower_leaves_the_fill():
    n = calls_without_copies(TWICE, "w + h")
    den = Spellings("w + h", None, n + 1)  # likes its own fill in the copies' pass too
    r = fill_text(TWICE, denoiser=den, **CHECKED)
    assert r.fills[0].text == "w + h"
    assert len(den.calls) == n + 1


def test_a_fill_that_is_its_only_copy_needs_no_pass():
    n = calls_without_copies(TWICE, "w * h")
    den = Spellings("w * h", "w - h", n + 1)
    assert fill_text(TWICE, denoiser=den, **CHECKED).fills[0].text == "w * h"
    assert len(den.calls) == n


def test_without_the_option_or_the_checks_there_is_no_copies_pass():
    n = calls_without_copies(TWICE, "w + h")
    den = Spellings("w + h", "w * h", n + 1)
    r = fill_text(TWICE, denoiser=den, context_copies=False, **CHECKED)
    assert r.fills[0].text == "w + h" and len(den.calls) == n
    unchecked = Spellings("w + h", "w * h", n + 1)
    assert fill_text(TWICE, denoiser=unchecked).fills[0].text == "w + h"


def test_a_copy_that_fails_the_checks_is_not_taken():
    text = "def f(w, h):\n    # size = w * (h\n    size = <mask>\n    return size\n"
    n = calls_without_copies(text, "w + h")
    den = Spellings("w + h", "w * (h", n + 1)
    r = fill_text(text, denoiser=den, **CHECKED)
    assert context_copies(text, text.index("<mask>"), text.index("<mask>") + 6) == ["w * (h"]
    assert r.fills[0].text == "w + h" and len(den.calls) == n + 1


def test_a_hole_at_its_lines_start_or_a_rewrite_has_no_copies():
    at_indent = TWICE.replace("    size = <mask>", "    <mask>")
    n = calls_without_copies(at_indent, "size = w")
    den = TargetDenoiser(["size = w"])
    assert fill_text(at_indent, denoiser=den, **CHECKED).fills[0].text == "size = w"
    assert len(den.calls) == n
    text = TWICE.replace("<mask>", "w - h")
    at = text.rindex("w - h")
    rewrite = Spellings("w + h", "w * h", 2)
    r = fill_spans(text, [Span(at, at + 5)], denoiser=rewrite, **CHECKED)
    assert r.fills[0].text == "w + h"


def test_copies_follow_the_longest_tail_of_the_line_and_end_where_the_line_goes_on():
    text = "a = f(x, y) + 1\nb = f(z) + 2\nc = f(___) + 3\n"
    hole = text.index("___")
    # "= f(" occurs twice; each copy ends where ") + " follows
    assert context_copies(text, hole, hole + 3) == ["x, y", "z"]
    # a hole at its line's start (only indentation before it) has none
    start = text.index("c = ")
    assert context_copies(text, start, start + 1) == []


def test_a_copy_never_reads_the_hole_itself_and_there_are_at_most_limit():
    text = "v = g(1)\n" * (LIMIT + 3) + "w = g(2) + g(___)\n"
    hole = text.index("___")
    found = context_copies(text, hole, hole + 3)
    assert found == ["1", "2"]  # each once; the hole's own "g(" and text are not copies
    many = "".join(f"v = g({k})\n" for k in range(LIMIT + 3)) + "w = g(___)\n"
    hole = many.index("___")
    assert context_copies(many, hole, hole + 3) == [str(k) for k in range(LIMIT)]


def test_the_option_must_be_a_bool():
    with pytest.raises(OptionError, match="context_copies must be true or false"):
        fill_text(TWICE, denoiser=TargetDenoiser(["x"]), context_copies="yes")


def test_a_copy_keeps_no_trailing_whitespace_or_carriage_return():
    text = "z = 1  \r\nx = ___\r\n"
    hole = text.index("___")
    assert context_copies(text, hole, hole + 3) == ["1"]


def test_raced_lengths_without_the_checks_get_no_copies():
    n = calls_without_copies(TWICE, "w + h")
    den = Spellings("w + h", "w * h", n + 1)
    r = fill_text(TWICE, denoiser=den, lengths=4)  # a CandidateJob, but no checks
    assert r.fills[0].text == "w + h"


def test_a_denoiser_that_answers_the_copies_pass_short_is_a_clear_error():
    n = calls_without_copies(TWICE, "w + h")

    class Short(Spellings):
        def logits(self, canvases, positions, hints=None):  # noqa: ANN001, ANN201
            out = super().logits(canvases, positions, hints)
            return out[:-1] if len(self.calls) == n + 1 else out

    with pytest.raises(DenoiserError, match="1 logit arrays for 2 fills scored"):
        fill_text(TWICE, denoiser=Short("w + h", "w * h", n + 1), **CHECKED)
