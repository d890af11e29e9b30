"""The language server: LSP over stdio, the model behind a worker.

    infill-lsp              # what editors start; speaks JSON-RPC on stdin/stdout

Handlers are thin: document -> offsets (lsp.positions) -> a worker request
(lsp.connection) -> edits / items / diagnostics in the negotiated position encoding. The
server owns the documents, the settings and the worker connection, and implements the
`Host` interface (lsp/host.py) through which the features see it: code actions
(lsp.actions), inline completion and completion (lsp.completion), diagnostics
(lsp.diagnostics) and the worker-info command (lsp.commands) each register their own
handlers. docs/LSP.md describes them and the settings.

It never imports the engine's numpy, torch or transformers: the model lives in the worker
process. Logs go to stderr and `window/logMessage`; stdout carries nothing but the
protocol.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import inspect
import logging
import sys
from collections.abc import Callable, Mapping
from importlib import metadata
from typing import Any, TypeVar

from lsprotocol import types
from pygls.exceptions import JsonRpcContentModified
from pygls.lsp.server import LanguageServer

from diffusion_infill.infill.core.errors import InfillError
from diffusion_infill.lsp.actions import CodeActions
from diffusion_infill.lsp.commands import WorkerInfoCommand
from diffusion_infill.lsp.completion import Completions
from diffusion_infill.lsp.connection import WorkerConnection
from diffusion_infill.lsp.diagnostics import Diagnostics
from diffusion_infill.lsp.documents import Document
from diffusion_infill.lsp.host import Feature, Snapshot
from diffusion_infill.lsp.protocol import InfillProtocol
from diffusion_infill.lsp.repository import Repositories
from diffusion_infill.lsp.settings import SECTION, Settings, parse, section

log = logging.getLogger("infill.lsp")

PYTHON_IDS = {"python"}  # languageIds that get scope-aware (tree-sitter) windows
PYTHON_SUFFIXES = (".py", ".pyi", ".pyw")
F = TypeVar("F", bound=Callable[..., Any])
FEATURES: tuple[type[Feature], ...] = (CodeActions, Completions, Diagnostics, WorkerInfoCommand)


def version() -> str:
    try:
        return metadata.version("diffusion-infill")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def language_of(doc: Document) -> str | None:
    if doc.language_id in PYTHON_IDS:
        return "python"
    if not doc.language_id and doc.uri.endswith(PYTHON_SUFFIXES):
        return "python"
    return None


def _plain(f: F) -> F:
    """`f` as a plain function: pygls marks its handlers with attributes, which the bound
    methods of features cannot take. Signature and annotations stay `f`'s (pygls reads
    them: a handler whose first parameter is not the server does not get the server)."""
    if not inspect.ismethod(f):
        return f
    if inspect.iscoroutinefunction(f):

        async def call_async(*args: Any, **kwargs: Any) -> Any:
            return await f(*args, **kwargs)

        return functools.wraps(f)(call_async)  # type: ignore[return-value]

    def call(*args: Any, **kwargs: Any) -> Any:
        return f(*args, **kwargs)

    return functools.wraps(f)(call)  # type: ignore[return-value]


class InfillServer(LanguageServer):
    """The pygls server; implements `lsp.host.Host` for the features."""

    def __init__(self) -> None:
        super().__init__(
            "infill-lsp",
            version(),
            protocol_cls=InfillProtocol,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
        )
        self.settings = Settings()
        self.worker = WorkerConnection()
        self.repositories = Repositories(
            self.log,
            lambda: [f.uri for f in self.workspace.folders.values()],
            lambda: {u: d.source for u, d in self.workspace.text_documents.items()},
        )
        self.features = [feature(self) for feature in FEATURES]
        self._init_raw: dict[str, Any] = {}
        self._config_raw: dict[str, Any] = {}
        self._warm: asyncio.Task[None] | None = None
        self._warned: set[str] = set()  # settings warnings already shown
        self.init_options: Any = None  # initializationOptions, applied at `initialized`

    # -- Host: registration -------------------------------------------------------------

    def feature(self, method: str, options: Any = None) -> Callable[[F], F]:
        register = super().feature(method, options)
        return lambda f: register(_plain(f))

    def command(self, name: str) -> Callable[[F], F]:
        register = super().command(name)
        return lambda f: register(_plain(f))

    # -- Host: documents ----------------------------------------------------------------

    def snapshot(self, uri: str) -> Snapshot:
        doc = self.workspace.text_documents.get(uri)
        if doc is None:
            raise JsonRpcContentModified(f"the document is not open: {uri}")
        assert isinstance(doc, Document)
        return Snapshot(uri, doc.version, doc.source, language_of(doc), doc.geometry())

    def is_current(self, snap: Snapshot) -> bool:
        doc = self.workspace.text_documents.get(snap.uri)
        return doc is not None and doc.version == snap.version and doc.source == snap.text

    def open_documents(self) -> list[str]:
        return list(self.workspace.text_documents)

    # -- Host: messages -----------------------------------------------------------------

    def show(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        self.window_show_message(types.ShowMessageParams(type=kind, message=message))

    def log(self, message: str) -> None:
        self.window_log_message(
            types.LogMessageParams(type=types.MessageType.Log, message=f"infill: {message}")
        )

    def notify(self, method: str, params: Any) -> None:
        self.protocol.notify(method, params)

    async def apply_edit(self, edit: types.WorkspaceEdit, label: str) -> bool:
        result = await self.workspace_apply_edit_async(
            types.ApplyWorkspaceEditParams(edit=edit, label=label)
        )
        return bool(result and result.applied)

    def request_id(self) -> Any:
        return self.protocol.msg_id

    # -- settings and the worker --------------------------------------------------------

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
        if self.worker.configure(settings) and self._warm is not None:
            self.warm_up()
        for feature in self.features:
            feature.settings_changed(old, settings)

    def warm_up(self) -> None:
        """Connect to (or start) the worker in the background, so that the first request
        does not wait for the model to load."""

        async def go() -> None:
            try:
                self.log(f"connected: {await self.worker.connect()}")
            except InfillError as exc:  # shown; the next request tries again
                log.warning("the model worker is not available: %s", exc.message)
                self.show(
                    f"infill: the model worker is not available: {exc.message}",
                    types.MessageType.Warning,
                )

        self._warm = asyncio.get_running_loop().create_task(go())

    # -- the handlers the server keeps: life cycle, settings, documents -----------------

    def register(self) -> None:
        self.feature(types.INITIALIZE)(self._initialize)
        self.feature(types.INITIALIZED)(self._initialized)
        self.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)(self._did_change_configuration)
        self.feature(types.TEXT_DOCUMENT_DID_OPEN)(self._did_open)
        self.feature(types.TEXT_DOCUMENT_DID_CHANGE)(self._did_change)
        self.feature(types.TEXT_DOCUMENT_DID_CLOSE)(self._did_close)
        self.feature(types.SHUTDOWN)(self._shutdown)
        for feature in self.features:
            feature.register()

    def _initialize(self, params: types.InitializeParams) -> None:
        self.init_options = params.initialization_options

    def _initialized(self, params: types.InitializedParams) -> None:
        self.use_settings(init=self.init_options)
        self.warm_up()

    async def _did_change_configuration(self, params: types.DidChangeConfigurationParams) -> None:
        config = params.settings
        if not (isinstance(config, dict) and isinstance(config.get(SECTION), dict)):
            ws = self.client_capabilities.workspace
            if ws is None or not ws.configuration:
                return
            pulled = await self.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
            )
            config = pulled[0] if pulled else None
            if not isinstance(config, dict):
                return
        self.use_settings(config=config)

    def _did_open(self, params: types.DidOpenTextDocumentParams) -> None:
        for feature in self.features:
            feature.changed(params.text_document.uri, None)

    def _did_change(self, params: types.DidChangeTextDocumentParams) -> None:
        line = None
        for change in params.content_changes:
            if isinstance(change, types.TextDocumentContentChangePartial):
                line = change.range.start.line
        for feature in self.features:
            feature.changed(params.text_document.uri, line)

    def _did_close(self, params: types.DidCloseTextDocumentParams) -> None:
        for feature in self.features:
            feature.closed(params.text_document.uri)

    async def _shutdown(self, params: Any) -> None:
        for feature in self.features:
            feature.shutdown()
        await self.worker.close()


def create_server() -> InfillServer:
    server = InfillServer()
    server.register()
    return server


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="infill-lsp", description="Language server for diffusion infilling (LSP over stdio)."
    )
    p.add_argument(
        "--stdio",
        action="store_true",
        help="use stdio (the default; accepted because editors pass it)",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="debug logs on stderr")
    p.add_argument("--version", action="version", version=f"infill-lsp {version()}")
    args = p.parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        format="infill-lsp: %(levelname)s %(message)s",
        level=logging.DEBUG if args.verbose else logging.WARNING,
    )
    if not args.verbose:
        logging.getLogger("pygls").setLevel(logging.ERROR)  # it logs every message at INFO
    ls = create_server()
    try:
        ls.start_io()
    finally:
        ls.worker.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
