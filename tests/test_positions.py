"""lsp.positions: LSP positions <-> str offsets in UTF-8, UTF-16 and UTF-32, with emoji,
CJK, CRLF, lone CR, form feeds, and out-of-range positions; engine edits -> TextEdits."""

from __future__ import annotations

import pytest
from lsprotocol import types

from diffusion_infill.infill.core.diff import Edit
from diffusion_infill.lsp.documents import Document
from diffusion_infill.lsp.positions import UTF8, UTF16, UTF32, Lines, apply_text_edits, shift

CODECS = {"utf-8": UTF8, "utf-16": UTF16, "utf-32": UTF32}


def units(s: str, enc: str) -> int:
    """Code units of `s`, counted independently of the module under test."""
    if enc == "utf-32":
        return len(s)
    return len(s.encode("utf-16-le" if enc == "utf-16" else "utf-8")) // (
        2 if enc == "utf-16" else 1
    )


TEXTS = [
    "",
    "x",
    "a = '😀' + 中文 + <mask>\n",
    "😀😀\n中\r\nb\rc\n\n",
    "line one\r\nline 😀 two\r\n",
    "form\x0cfeed 😀\nnext\u2028same line\n",
    "no newline at end 中",
]


@pytest.mark.parametrize("enc", CODECS)
@pytest.mark.parametrize("text", TEXTS)
def test_every_offset_round_trips(text: str, enc: str) -> None:
    lines = Lines(text, CODECS[enc])
    for offset in range(len(text) + 1):
        pos = lines.position(offset)
        line_start = lines.start(pos.line)
        assert pos.character == units(text[line_start : min(offset, lines.end(pos.line))], enc)
        back = lines.offset(pos)
        if text[offset - 1 : offset + 1] == "\r\n":
            assert back == offset - 1  # between CR and LF: the end of the line
        else:
            assert back == offset


@pytest.mark.parametrize("enc", CODECS)
def test_emoji_and_cjk_columns(enc: str) -> None:
    text = "s = '😀中' + <mask>\n"
    hole = text.index("<mask>")
    pos = Lines(text, CODECS[enc]).position(hole)
    # "s = '" + emoji + CJK + "' + "
    expected = {"utf-8": 5 + 4 + 3 + 4, "utf-16": 5 + 2 + 1 + 4, "utf-32": 5 + 1 + 1 + 4}
    assert pos == types.Position(line=0, character=expected[enc])


def test_lines_split_at_lsp_breaks_only() -> None:
    text = "a\x0cb\u2028c\r\nd\re\nf"
    lines = Lines(text)
    assert [lines.line_text(i) for i in range(len(lines))] == ["a\x0cb\u2028c", "d", "e", "f"]


def test_out_of_range_positions_are_clamped() -> None:
    text = "ab😀\ncd"
    lines = Lines(text, UTF16)
    assert lines.offset(types.Position(line=0, character=99)) == 3  # end of line 0
    assert lines.offset(types.Position(line=9, character=0)) == len(text)
    assert lines.offset(types.Position(line=1, character=99)) == len(text)
    # the middle of a surrogate pair rounds down to the emoji's start
    assert lines.offset(types.Position(line=0, character=3)) == 2
    assert Lines(text, UTF8).offset(types.Position(line=0, character=4)) == 2


@pytest.mark.parametrize("enc", CODECS)
def test_engine_edits_become_text_edits_that_apply(enc: str) -> None:
    text = "x = '😀' + <mask>  # 中文\r\ny = <mask>\n"
    a, b = text.index("<mask>"), text.rindex("<mask>")
    edits = [Edit(b, b + 6, "2"), Edit(a, a + 6, "'中'")]  # any order
    lines = Lines(text, CODECS[enc])
    text_edits = lines.text_edits(edits)
    assert [e.range.start.line for e in text_edits] == [0, 1]
    assert text_edits[0].range.start.character == units(text[:a], enc)
    assert apply_text_edits(text, text_edits, CODECS[enc]) == "x = '😀' + '中'  # 中文\r\ny = 2\n"


def test_shift_moves_excerpt_edits() -> None:
    assert shift([Edit(1, 2, "z")], 10) == [Edit(11, 12, "z")]


@pytest.mark.parametrize("enc", CODECS)
def test_document_applies_incremental_changes_with_lsp_lines(enc: str) -> None:
    text = "a\x0c = 1\nb = '😀'\n"
    doc = Document("file:///t.py", text, version=1, position_codec=CODECS[enc])
    # replace the 1 after the form feed (a splitlines() document would look at line "")
    one = text.index("1")
    rng = types.Range(
        start=types.Position(line=0, character=units(text[:one], enc)),
        end=types.Position(line=0, character=units(text[: one + 1], enc)),
    )
    doc.apply_change(types.TextDocumentContentChangePartial(range=rng, text="2"))
    # insert after the emoji on line 1
    col = units("b = '😀", enc)
    at = types.Position(line=1, character=col)
    doc.apply_change(
        types.TextDocumentContentChangePartial(range=types.Range(start=at, end=at), text="!")
    )
    assert doc.source == "a\x0c = 2\nb = '😀!'\n"
    assert doc.lines == ("a\x0c = 2\n", "b = '😀!'\n")
