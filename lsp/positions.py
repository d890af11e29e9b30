"""LSP positions <-> Python string offsets, and engine edits -> LSP TextEdits.

The one module that knows about position encodings. An LSP position is a line and a
character counted in the code units of the negotiated encoding (UTF-16 unless the client
offered another; Neovim 0.12 negotiates UTF-8 with pygls); the engine works on Python str
offsets (code points). Code units are counted with pygls's `PositionCodec` (never
`len(str)`), lines are split the way LSP splits them: at `\\n`, `\\r\\n` and `\\r` only
(`str.splitlines` also splits at form feeds, `\\x1c`-`\\x1e`, U+0085, U+2028 and U+2029,
which LSP clients do not).

Out-of-range positions are clamped as the specification says: a character past the end
of its line means the end of the line, a line past the last means the end of the text. A
character that falls inside one code point (half a surrogate pair, a byte inside a UTF-8
sequence) is rounded down to the start of that code point.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Sequence

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from diffusion_infill.infill.core.diff import Edit

LINE_BREAK = re.compile(r"\r\n|\r|\n")


def line_start(text: str, i: int) -> int:
    """Offset of the start of the line that holds offset `i` (LSP line breaks)."""
    return max(text.rfind("\n", 0, i), text.rfind("\r", 0, i)) + 1


UTF8 = PositionCodec(types.PositionEncodingKind.Utf8)
UTF16 = PositionCodec(types.PositionEncodingKind.Utf16)
UTF32 = PositionCodec(types.PositionEncodingKind.Utf32)


class Lines:
    """The line geometry of one text, as LSP counts lines, in one position encoding.

    Build one per text version and request; it is cheap (one regex pass)."""

    def __init__(self, text: str, codec: PositionCodec = UTF16) -> None:
        self.text = text
        self.codec = codec
        self.starts = [0] + [m.end() for m in LINE_BREAK.finditer(text)]
        self._utf32 = codec.client_num_units("\U0001f600") == 1  # one unit per code point

    def __len__(self) -> int:
        return len(self.starts)

    def start(self, line: int) -> int:
        """Offset of the first character of `line`."""
        return self.starts[line]

    def end(self, line: int) -> int:
        """Offset just past the line's content (before its line break)."""
        if line + 1 < len(self.starts):
            end = self.starts[line + 1]
            return end - (2 if self.text.startswith("\r\n", end - 2) else 1)
        return len(self.text)

    def line_of(self, offset: int) -> int:
        """The line holding character `offset` (a line break belongs to its line)."""
        return bisect_right(self.starts, offset) - 1

    def line_text(self, line: int) -> str:
        """The line's content, without its line break."""
        return self.text[self.start(line) : self.end(line)]

    def units(self, piece: str) -> int:
        return len(piece) if self._utf32 else self.codec.client_num_units(piece)

    # -- conversions --------------------------------------------------------------------

    def offset(self, position: types.Position) -> int:
        """The str offset of an LSP position (clamped; see the module docstring)."""
        if position.line < 0:
            return 0
        if position.line >= len(self.starts):
            return len(self.text)
        start, end = self.start(position.line), self.end(position.line)
        want = max(position.character, 0)
        if self._utf32:
            return min(start + want, end)
        used = 0
        for i in range(start, end):
            used += self.codec.client_num_units(self.text[i])
            if used > want:
                return i
        return end

    def position(self, offset: int) -> types.Position:
        """The LSP position of str offset `offset` (0 <= offset <= len(text)).

        An offset between the `\\r` and `\\n` of a CRLF maps to the end of that line."""
        offset = min(max(offset, 0), len(self.text))
        line = self.line_of(offset)
        start = self.start(line)
        column = min(offset, self.end(line))
        return types.Position(line=line, character=self.units(self.text[start:column]))

    def range(self, start: int, end: int) -> types.Range:
        return types.Range(start=self.position(start), end=self.position(end))

    def span(self, rng: types.Range) -> tuple[int, int]:
        """The (start, end) str offsets of an LSP range, ordered."""
        a, b = self.offset(rng.start), self.offset(rng.end)
        return (a, b) if a <= b else (b, a)

    def text_edits(self, edits: Iterable[Edit]) -> list[types.TextEdit]:
        """Engine edits (str offsets into this text) as LSP TextEdits, in text order."""
        return [
            types.TextEdit(range=self.range(e.start, e.end), new_text=e.new_text)
            for e in sorted(edits, key=lambda e: (e.start, e.end))
        ]


def shift(edits: Sequence[Edit], offset: int) -> list[Edit]:
    """Edits made against an excerpt starting at `offset`, in whole-text offsets."""
    return [Edit(e.start + offset, e.end + offset, e.new_text) for e in edits]


def apply_text_edits(
    text: str, edits: Sequence[types.TextEdit], codec: PositionCodec = UTF16
) -> str:
    """`text` with LSP TextEdits applied, as a client would (for tests and checks)."""
    lines = Lines(text, codec)
    spans = sorted(((lines.span(e.range), e.new_text) for e in edits), key=lambda x: x[0])
    out, pos = [], 0
    for (a, b), new in spans:
        out += [text[pos:a], new]
        pos = b
    out.append(text[pos:])
    return "".join(out)
