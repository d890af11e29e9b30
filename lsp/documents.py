"""pygls's document store, with lines split the way LSP splits them.

pygls's `TextDocument` splits lines with `str.splitlines`, which also breaks at form
feeds (common in Python sources), U+2028 and a few more characters that LSP clients do
not count as line breaks; an incremental change after such a character would land on the
wrong line. `Document` applies changes through `lsp.positions` instead, so the server's
copy of a buffer stays byte-identical to the client's.
"""

from __future__ import annotations

from collections.abc import Sequence

from lsprotocol import types
from pygls.workspace import TextDocument, Workspace

from lsp.positions import LINE_BREAK, Lines


class Document(TextDocument):
    @property
    def lines(self) -> Sequence[str]:
        text = self.source
        starts = [0] + [m.end() for m in LINE_BREAK.finditer(text)]
        ends = starts[1:] + [len(text)]
        return tuple(text[a:b] for a, b in zip(starts, ends, strict=True) if b > a)

    def geometry(self) -> Lines:
        """The current text's `Lines` in the negotiated position encoding."""
        return Lines(self.source, self.position_codec)

    def _apply_incremental_change(self, change: types.TextDocumentContentChangePartial) -> None:
        text = self.source
        start, end = Lines(text, self.position_codec).span(change.range)
        self._source = text[:start] + change.text + text[end:]


class DocumentWorkspace(Workspace):
    """A pygls Workspace whose documents are `Document`s."""

    def _create_text_document(self, doc_uri: str, source: str | None = None,
                              version: int | None = None,
                              language_id: str | None = None) -> TextDocument:
        return Document(doc_uri, source=source, version=version, language_id=language_id,
                        sync_kind=self._sync_kind, position_codec=self.position_codec)

    @classmethod
    def replacing(cls, old: Workspace, sync_kind: types.TextDocumentSyncKind) -> DocumentWorkspace:
        """A new, empty workspace with the same root, folders and position encoding."""
        return cls(old.root_uri, sync_kind, list(old.folders.values()), old.position_encoding)
