"""What a language-server feature sees of the server: a small `Host` interface.

Each feature (code actions, completion, diagnostics, the worker-info command) is a
`Feature`: it registers its own LSP handlers with `host.feature(...)` and hears document
and settings events; it reads documents as `Snapshot`s, reaches the model through
`host.worker` (a WorkerConnection), and talks to the user through the host. The server
(lsp/server.py) implements Host and forwards the events; no feature imports it.

Every request works on a `Snapshot` of its document (uri, version, text); a result is
used only while the document still has that version, so a fill computed for older text
is never applied to newer text.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from lsprotocol import types
from pygls.exceptions import JsonRpcContentModified, JsonRpcException
from pygls.progress import Progress

from diffusion_infill.infill.core.diff import Edit
from diffusion_infill.infill.core.errors import INPUT, InfillError
from diffusion_infill.lsp.connection import WorkerConnection
from diffusion_infill.lsp.positions import Lines
from diffusion_infill.lsp.repository import Repositories
from diffusion_infill.lsp.settings import Settings

log = logging.getLogger("infill.lsp")
F = TypeVar("F", bound=Callable[..., Any])
REQUEST_FAILED = -32803  # LSP 3.17 RequestFailed


class RequestFailed(JsonRpcException):
    CODE = REQUEST_FAILED


@dataclass(frozen=True)
class Snapshot:
    """A document as one request saw it."""

    uri: str
    version: int | None
    text: str
    language: str | None  # "python" (scope windows) or None (line windows)
    lines: Lines


class Host(Protocol):
    """The language server, as its features see it."""

    @property
    def settings(self) -> Settings: ...

    @property
    def worker(self) -> WorkerConnection: ...

    @property
    def repositories(self) -> Repositories: ...

    @property
    def client_capabilities(self) -> types.ClientCapabilities: ...

    @property
    def work_done_progress(self) -> Progress:
        """pygls's `$/progress` sender (lsp/progress.py drives it)."""
        ...

    def feature(self, method: str, options: Any = None) -> Callable[[F], F]:
        """Register the decorated function as the handler of an LSP method."""
        ...

    def command(self, name: str) -> Callable[[F], F]:
        """Register the decorated function as the `workspace/executeCommand` `name`."""
        ...

    def snapshot(self, uri: str) -> Snapshot:
        """The open document now (JsonRpcContentModified when it is not open)."""
        ...

    def is_current(self, snap: Snapshot) -> bool:
        """Whether the document still has the snapshot's version (and is still open)."""
        ...

    def open_documents(self) -> list[str]: ...

    def show(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        """A `window/showMessage` for the user."""
        ...

    def log(self, message: str) -> None:
        """A line for the client's log (`window/logMessage`, type Log)."""
        ...

    def notify(self, method: str, params: Any) -> None: ...

    async def apply_edit(self, edit: types.WorkspaceEdit, label: str) -> bool:
        """`workspace/applyEdit`: whether the client applied it."""
        ...

    def request_id(self) -> Any:
        """The id of the LSP request being handled."""
        ...


class Feature:
    """One feature of the server: `register()` adds its handlers; the document and
    settings events are no-ops unless a feature needs them."""

    def __init__(self, host: Host) -> None:
        self.host = host

    def register(self) -> None:
        raise NotImplementedError

    def changed(self, uri: str, line: int | None) -> None:
        """The document was opened (line None) or edited (`line`: of the last change)."""

    def closed(self, uri: str) -> None:
        """The document was closed."""

    def settings_changed(self, old: Settings, new: Settings) -> None:
        """The settings changed (the worker connection already follows them)."""

    def shutdown(self) -> None:
        """The client asked the server to shut down."""


def require_current(host: Host, snap: Snapshot) -> None:
    if not host.is_current(snap):
        raise JsonRpcContentModified(
            "the document changed while the model ran; the result was dropped"
        )


def request_failed(
    host: Host, exc: InfillError, what: str, *, show: bool = True
) -> JsonRpcException:
    """An engine, worker or input error as the request's LSP error, shown to the user
    (a warning when it is about the user's input, an error otherwise) and logged."""
    message = f"{what}: {exc.message}"
    if show:
        kind = types.MessageType.Warning if exc.code == INPUT else types.MessageType.Error
        host.show(message, kind)
    log.info("%s", message)
    return RequestFailed(message)


def workspace_edit(host: Host, snap: Snapshot, edits: Sequence[Edit]) -> types.WorkspaceEdit:
    """Minimal edits as a WorkspaceEdit: versioned `documentChanges` when the client
    supports them, else `changes`."""
    text_edits: list[types.TextEdit] = list(snap.lines.text_edits(edits))
    ws = host.client_capabilities.workspace
    we = ws.workspace_edit if ws is not None else None
    if we is not None and we.document_changes:
        ident = types.OptionalVersionedTextDocumentIdentifier(uri=snap.uri, version=snap.version)
        return types.WorkspaceEdit(
            document_changes=[types.TextDocumentEdit(text_document=ident, edits=text_edits)]
        )
    return types.WorkspaceEdit(changes={snap.uri: text_edits})
