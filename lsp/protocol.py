"""pygls's protocol, made to answer every request and to stay quiet about expected errors.

pygls 2.1.1 (a) drops a request whose params do not deserialize without any reply (the
client waits forever; JSON-RPC requires an error reply, -32602 InvalidParams), and (b)
logs a full traceback for every error a handler raises on purpose (ContentModified,
RequestCancelled, RequestFailed). `InfillProtocol` answers (a) and logs (b) in one line.

At `initialize` it also installs the server's own document store (lsp.documents) and
leaves `completionProvider` out for clients that support inline completion (they would
otherwise run the model twice per keystroke).
"""

from __future__ import annotations

import logging
from typing import Any

from cattrs.errors import ClassValidationError
from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.json_rpc import JsonRPCRequestMessage
from pygls.protocol.language_server import lsp_method

from diffusion_infill.lsp.documents import DocumentWorkspace

log = logging.getLogger("infill.lsp")


class _Unusable:
    """A message that could not be read (already answered when it was a request)."""

    jsonrpc = None


UNUSABLE = _Unusable()


def supports_inline_completion(caps: types.ClientCapabilities) -> bool:
    return caps.text_document is not None and caps.text_document.inline_completion is not None


class InfillProtocol(LanguageServerProtocol):
    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams) -> Any:
        result = yield from super().lsp_initialize(params)
        self._workspace = DocumentWorkspace.replacing(
            self.workspace, self._server._text_document_sync_kind
        )
        if supports_inline_completion(params.capabilities):
            result.capabilities.completion_provider = None
        return result

    def structure_message(self, data: dict[str, Any]) -> Any:
        """pygls's, but a request (or notification) whose params do not fit its method's
        type is answered with InvalidParams (a notification is dropped), not lost."""
        if "jsonrpc" not in data or "method" not in data or "id" not in data:
            try:
                return super().structure_message(data)
            except JsonRpcException:  # a notification or a reply that does not fit
                log.warning("dropped a malformed message: %.200r", data)
                return UNUSABLE
        method = data["method"]
        request_type = self.get_message_type(method) if isinstance(method, str) else None
        try:
            return self._converter.structure(data, request_type or JsonRPCRequestMessage)
        except (ClassValidationError, TypeError, ValueError, KeyError, AttributeError):
            msg_id = data["id"] if isinstance(data["id"], int | str) else None
            log.warning("invalid params for %.100r (request %r)", method, msg_id)
            self._send_response(
                msg_id,
                None,
                JsonRpcInvalidParams(f"invalid params for {method}").to_response_error(),
            )
            return UNUSABLE

    def handle_message(self, message: Any) -> None:
        if message is not UNUSABLE:
            super().handle_message(message)

    def _send_handler_result(self, future: Any, *, msg_id: Any) -> None:
        """pygls's, without a traceback for an LSP error a handler raised on purpose."""
        if future.cancelled() or not isinstance(future.exception(), JsonRpcException):
            super()._send_handler_result(future, msg_id=msg_id)
            return
        self._request_futures.pop(msg_id, None)
        exc = future.exception()
        log.info("request %r: %s", msg_id, exc)
        self._send_response(msg_id, error=exc.to_response_error())
