"""The language server: LSP over stdio, the model behind a worker.

    infill-lsp              # what editors start; speaks JSON-RPC on stdin/stdout

Handlers are thin: document -> offsets (lsp.positions) -> a worker request (lsp.engine)
-> edits / items / diagnostics in the negotiated position encoding. The features live in
lsp.actions (code actions and their resolve), lsp.completion (inline completion and
completion) and lsp.diagnostics; docs/LSP.md describes them and the settings.

Every request works on a `Snapshot` of its document (uri, version, text); a result is
used only while the document still has that version, so a fill computed for older text
is never applied to newer text. Logs go to stderr and `window/logMessage`; stdout carries
nothing but the protocol.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcContentModified, JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

from infill.core.diff import Edit
from infill.core.errors import InfillError
from lsp import actions, completion
from lsp.diagnostics import Diagnostics
from lsp.documents import Document, DocumentWorkspace
from lsp.engine import Engine, EngineError
from lsp.positions import Lines
from lsp.settings import SECTION, Settings, parse, section

log = logging.getLogger("infill.lsp")

PYTHON_IDS = {"python"}  # languageIds that get scope-aware (tree-sitter) windows
PYTHON_SUFFIXES = (".py", ".pyi", ".pyw")
REQUEST_FAILED = -32803  # LSP 3.17 RequestFailed


class RequestFailed(JsonRpcException):
    CODE = REQUEST_FAILED


def version() -> str:
    try:
        return metadata.version("diffusion-infill")
    except metadata.PackageNotFoundError:
        return "0+unknown"


@dataclass(frozen=True)
class Snapshot:
    """A document as one request saw it."""

    uri: str
    version: int | None
    text: str
    language: str | None  # "python" (scope windows) or None (line windows)
    lines: Lines


class InfillProtocol(LanguageServerProtocol):
    """pygls's protocol with two changes made at `initialize`: documents split lines the
    LSP way (lsp.documents), and `completionProvider` is left out for clients that
    support inline completion (they would otherwise run the model twice per keystroke)."""

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams) -> Any:
        result = yield from super().lsp_initialize(params)
        self._workspace = DocumentWorkspace.replacing(
            self.workspace, self._server._text_document_sync_kind)
        if supports_inline_completion(params.capabilities):
            result.capabilities.completion_provider = None
        return result


def supports_inline_completion(caps: types.ClientCapabilities) -> bool:
    return caps.text_document is not None and caps.text_document.inline_completion is not None


class InfillServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("infill-lsp", version(), protocol_cls=InfillProtocol,
                         text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.settings = Settings()
        self.engine = Engine()
        self.diagnostics = Diagnostics(self)
        self.completions = completion.Completions(self)
        self._init_raw: dict[str, Any] = {}
        self._config_raw: dict[str, Any] = {}
        self._warm: asyncio.Task[None] | None = None
        self._warned: set[str] = set()  # settings warnings already shown
        self.init_options: Any = None  # initializationOptions, applied at `initialized`

    # -- documents ----------------------------------------------------------------------

    def snapshot(self, uri: str) -> Snapshot:
        doc = self.workspace.text_documents.get(uri)
        if doc is None:
            raise JsonRpcContentModified(f"the document is not open: {uri}")
        assert isinstance(doc, Document)
        return Snapshot(uri, doc.version, doc.source, language_of(doc), doc.geometry())

    def current(self, snap: Snapshot) -> bool:
        """Whether the document still has the snapshot's version (and is still open)."""
        doc = self.workspace.text_documents.get(snap.uri)
        return doc is not None and doc.version == snap.version and doc.source == snap.text

    def check_current(self, snap: Snapshot) -> None:
        if not self.current(snap):
            raise JsonRpcContentModified(
                "the document changed while the model ran; the result was dropped")

    # -- results ------------------------------------------------------------------------

    def workspace_edit(self, snap: Snapshot, edits: Sequence[Edit]) -> types.WorkspaceEdit:
        """Minimal edits as a WorkspaceEdit: versioned `documentChanges` when the client
        supports them, else `changes`."""
        text_edits: list[types.TextEdit] = list(snap.lines.text_edits(edits))
        ws = self.client_capabilities.workspace
        we = ws.workspace_edit if ws is not None else None
        if we is not None and we.document_changes:
            ident = types.OptionalVersionedTextDocumentIdentifier(uri=snap.uri,
                                                                  version=snap.version)
            return types.WorkspaceEdit(document_changes=[
                types.TextDocumentEdit(text_document=ident, edits=text_edits)])
        return types.WorkspaceEdit(changes={snap.uri: text_edits})

    def fail(self, exc: Exception, what: str, *, show: bool = True) -> JsonRpcException:
        """An engine or input error as the request's error (and a message to the user)."""
        message = f"{what}: {exc.message if isinstance(exc, EngineError) else exc}"
        user = isinstance(exc, InfillError) or (isinstance(exc, EngineError) and exc.user_input)
        if show:
            self.show(message, types.MessageType.Warning if user else types.MessageType.Error)
        log.info("%s", message)
        return RequestFailed(message)

    def show(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        self.window_show_message(types.ShowMessageParams(type=kind, message=message))

    def trace(self, message: str) -> None:
        """A line for the client's log (window/logMessage, type Log)."""
        self.window_log_message(types.LogMessageParams(type=types.MessageType.Log,
                                                       message=f"infill: {message}"))

    # -- settings -----------------------------------------------------------------------

    def use_settings(self, *, init: Any = None, config: Any = None) -> None:
        """Settings = the initializationOptions' section overlaid with the configuration's;
        bad values are reported by name and replaced by their defaults."""
        warnings: list[str] = []
        for raw, where in ((init, "initializationOptions"), (config, "configuration")):
            if raw is None:
                continue
            raw = section(raw)
            if not isinstance(raw, Mapping):
                warnings.append(f"{SECTION}: the {where} must be an object; ignored")
            elif where == "configuration":
                self._config_raw = dict(raw)
            else:
                self._init_raw = dict(raw)
        settings, bad = parse({**self._init_raw, **self._config_raw})
        warnings = [w for w in warnings + bad if w not in self._warned]  # each one once
        if warnings:
            self._warned.update(warnings)
            self.show("; ".join(warnings), types.MessageType.Warning)
            for w in warnings:
                log.warning("%s", w)
        old, self.settings = self.settings, settings
        if self.engine.configure(settings) and self._warm is not None:
            self.warm_up()
        if (old.diagnostics, old.diagnostics_threshold, old.diagnostics_severity) != (
                settings.diagnostics, settings.diagnostics_threshold,
                settings.diagnostics_severity):
            self.diagnostics.refresh_all()

    def warm_up(self) -> None:
        """Connect to (or start) the worker in the background, so that the first request
        does not wait for the model to load."""

        async def go() -> None:
            try:
                self.trace(f"connected: {await self.engine.connect()}")
            except EngineError as exc:
                self.show(f"infill: the model worker is not available: {exc.message}",
                          types.MessageType.Warning)

        self._warm = asyncio.get_running_loop().create_task(go())


def language_of(doc: Document) -> str | None:
    if doc.language_id in PYTHON_IDS:
        return "python"
    if not doc.language_id and doc.uri.endswith(PYTHON_SUFFIXES):
        return "python"
    return None


def create_server() -> InfillServer:
    ls = InfillServer()

    @ls.feature(types.INITIALIZE)
    def initialize(ls: InfillServer, params: types.InitializeParams) -> None:
        ls.init_options = params.initialization_options

    @ls.feature(types.INITIALIZED)
    def initialized(ls: InfillServer, params: types.InitializedParams) -> None:
        ls.use_settings(init=ls.init_options)
        ls.warm_up()

    @ls.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: InfillServer,
                                       params: types.DidChangeConfigurationParams) -> None:
        config = params.settings
        if not (isinstance(config, dict) and isinstance(config.get(SECTION), dict)):
            ws = ls.client_capabilities.workspace
            if ws is None or not ws.configuration:
                return
            pulled = await ls.workspace_configuration_async(types.ConfigurationParams(
                items=[types.ConfigurationItem(section=SECTION)]))
            config = pulled[0] if pulled else None
            if not isinstance(config, dict):
                return
        ls.use_settings(config=config)

    @ls.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: InfillServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.diagnostics.changed(params.text_document.uri, None)

    @ls.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: InfillServer, params: types.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.completions.drop(uri)
        line = None
        for change in params.content_changes:
            if isinstance(change, types.TextDocumentContentChangePartial):
                line = change.range.start.line
        ls.diagnostics.changed(uri, line)

    @ls.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: InfillServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.completions.drop(uri)
        ls.diagnostics.closed(uri)

    @ls.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
        code_action_kinds=actions.KINDS, resolve_provider=True))
    async def code_action(ls: InfillServer, params: types.CodeActionParams
                          ) -> list[types.CodeAction]:
        return await actions.code_actions(ls, params)

    @ls.feature(types.CODE_ACTION_RESOLVE)
    async def code_action_resolve(ls: InfillServer, action: types.CodeAction
                                  ) -> types.CodeAction:
        return await actions.resolve(ls, action)

    @ls.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def inline_completion(ls: InfillServer, params: types.InlineCompletionParams
                                ) -> types.InlineCompletionList | None:
        return await completion.inline(ls, params)

    @ls.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions())
    async def complete(ls: InfillServer, params: types.CompletionParams
                       ) -> types.CompletionList | None:
        return await completion.items(ls, params)

    @ls.command("infill.workerInfo")
    async def worker_info(ls: InfillServer, *args: Any) -> dict[str, Any]:
        try:
            info = await ls.engine.info()
        except EngineError as exc:
            raise ls.fail(exc, "infill.workerInfo", show=False) from None
        return info.to_dict()

    @ls.feature(types.SHUTDOWN)
    async def shutdown(ls: InfillServer, params: Any) -> None:
        ls.diagnostics.stop()
        await ls.engine.close()

    return ls


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="infill-lsp", description="Language server for "
                                "diffusion infilling (LSP over stdio).")
    p.add_argument("--stdio", action="store_true", help="use stdio (the default; accepted "
                   "because editors pass it)")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logs on stderr")
    p.add_argument("--version", action="version", version=f"infill-lsp {version()}")
    args = p.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, format="infill-lsp: %(levelname)s %(message)s",
                        level=logging.DEBUG if args.verbose else logging.WARNING)
    if not args.verbose:
        logging.getLogger("pygls").setLevel(logging.ERROR)  # it logs every message at INFO
    ls = create_server()
    try:
        ls.start_io()
    finally:
        ls.engine.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
