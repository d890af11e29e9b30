"""pygls's document store, with lines split the way LSP splits them.

pygls's `TextDocument` splits lines with `str.splitlines`, which also breaks at form
feeds (common in Python sources), U+2028 and a few more characters that LSP clients do
not count as line breaks; an incremental change after such a character would land on the
wrong line. `Document` applies changes through `lsp.positions` instead, so the server's
copy of a buffer stays byte-identical to the client's.

Three more departures from pygls 2.1.1's store:
- documents are kept under the URI exactly as the client sent it: pygls keys them by the
  percent-decoded URI and then fails to find a document whose URI is percent-escaped (a
  path with é, CJK or emoji, as VS Code sends it);
- a lone surrogate (a legal `\\udbff` escape in JSON text) is stored as U+FFFD: it cannot be
  encoded to send to the worker, and both count one code unit in UTF-16 and UTF-32, so
  positions stay the client's;
- a change to a document that is not open is ignored (pygls raises KeyError).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from lsprotocol import types
from pygls.workspace import TextDocument, Workspace

from diffusion_infill.lsp.positions import LINE_BREAK, Lines

log = logging.getLogger("infill.lsp")
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def clean(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD (a str from JSON holds a
    surrogate only when it was unpaired)."""
    return LONE_SURROGATE.sub("\ufffd", text)


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
        self._source = text[:start] + clean(change.text) + text[end:]

    def _apply_full_change(self, change: types.TextDocumentContentChangeWholeDocument) -> None:
        self._source = clean(change.text)


class DocumentWorkspace(Workspace):
    """A pygls Workspace whose documents are `Document`s."""

    def _create_text_document(
        self,
        doc_uri: str,
        source: str | None = None,
        version: int | None = None,
        language_id: str | None = None,
    ) -> TextDocument:
        return Document(
            doc_uri,
            source=source,
            version=version,
            language_id=language_id,
            sync_kind=self._sync_kind,
            position_codec=self.position_codec,
        )

    def put_text_document(
        self, text_document: types.TextDocumentItem, notebook_uri: str | None = None
    ) -> None:
        self._text_documents[text_document.uri] = self._create_text_document(
            text_document.uri,
            source=clean(text_document.text),
            version=text_document.version,
            language_id=text_document.language_id,
        )

    def get_text_document(self, doc_uri: str) -> TextDocument:
        return self._text_documents.get(doc_uri) or super().get_text_document(doc_uri)

    def remove_text_document(self, doc_uri: str) -> None:
        self._text_documents.pop(doc_uri, None)

    def update_text_document(
        self,
        text_doc: types.VersionedTextDocumentIdentifier,
        change: types.TextDocumentContentChangeEvent,
    ) -> None:
        doc = self._text_documents.get(text_doc.uri)
        if doc is None:
            log.warning("a change to a document that is not open: %s", text_doc.uri)
            return
        doc.apply_change(change)
        doc.version = text_doc.version

    @classmethod
    def replacing(cls, old: Workspace, sync_kind: types.TextDocumentSyncKind) -> DocumentWorkspace:
        """A new, empty workspace with the same root, folders and position encoding."""
        return cls(old.root_uri, sync_kind, list(old.folders.values()), old.position_encoding)
