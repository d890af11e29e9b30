"""A fill never writes U+FFFD that the model did not mean: byte-level tokens can
spell invalid UTF-8, which a decode turns into U+FFFD. `BrokenBytes` decodes '¤' the way a
byte-level tokenizer decodes a lone continuation byte."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from fakes import TargetDenoiser

from diffusion_infill.infill import fill_text
from diffusion_infill.infill.core.errors import DenoiserError


class BrokenBytes(TargetDenoiser):
    def decode(self, ids: Sequence[int]) -> str:
        return super().decode(ids).replace("¤", "\ufffd")


def test_a_fill_ending_inside_a_character_loses_the_partial_tokens():
    r = fill_text("a = <mask:3>\n", denoiser=BrokenBytes(["xy¤"]), language=None)
    assert r.text == "a = xy\n" and "\ufffd" not in r.text


def test_invalid_bytes_inside_a_fill_decline_it():
    with pytest.raises(DenoiserError, match="not valid UTF-8"):
        fill_text("a = <mask:3>\n", denoiser=BrokenBytes(["x¤y"]), language=None)


def test_a_replacement_character_already_in_the_text_may_be_copied():
    r = fill_text("s = '\ufffd'\nt = <mask:3>\n", denoiser=BrokenBytes(["'¤'"]), language=None)
    assert r.text == "s = '\ufffd'\nt = '\ufffd'\n"
