"""Diagnostics: tokens the denoiser finds improbable, published once edits settle.

Off unless the `diagnostics` setting is on. Each open document has at most one pending
run: a change restarts its timer (`diagnosticsDelay`, 500 ms), then the worker scores the
document's text (for a long document, `SCORE_LINES` lines around the last change) in one
forward pass per window, and the tokens whose suspicion reaches `diagnosticsThreshold`
are published (the worst `maxDiagnostics`), with the document version. A result for a
version that is no longer current is dropped: the change that made it stale has already
scheduled the next run.

Each diagnostic's `data` holds the version and the token's character range, so its quick
fix (lsp.actions, "fixToken") re-denoises exactly that token.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from lsp.engine import EngineError
from lsp.excerpt import excerpt

if TYPE_CHECKING:
    from lsp.server import InfillServer, Snapshot

log = logging.getLogger("infill.lsp")

SOURCE = "infill"
CODE = "improbable-token"
SCORE_LINES = 300  # a longer document is scored only this many lines around the change
SEVERITY = {"information": types.DiagnosticSeverity.Information,
            "hint": types.DiagnosticSeverity.Hint}


class Diagnostics:
    def __init__(self, ls: InfillServer) -> None:
        self.ls = ls
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.focus: dict[str, int] = {}  # the line of the last change, per document
        self.published: set[str] = set()

    @property
    def enabled(self) -> bool:
        return self.ls.settings.diagnostics

    def changed(self, uri: str, line: int | None) -> None:
        """The document was opened or edited: (re)start its timer."""
        if line is not None:
            self.focus[uri] = line
        if not self.enabled:
            return
        old = self.tasks.pop(uri, None)
        if old is not None:
            old.cancel()
        task = asyncio.get_running_loop().create_task(self._run(uri))
        self.tasks[uri] = task
        task.add_done_callback(lambda t: self.tasks.pop(uri, None)
                               if self.tasks.get(uri) is t else None)

    def closed(self, uri: str) -> None:
        task = self.tasks.pop(uri, None)
        if task is not None:
            task.cancel()
        self.focus.pop(uri, None)
        if uri in self.published:
            self._publish(uri, None, [])

    def refresh_all(self) -> None:
        """The settings changed: rescore every open document, or clear everything."""
        if self.enabled:
            for uri in list(self.ls.workspace.text_documents):
                self.changed(uri, None)
        else:
            self.stop()
            for uri in list(self.published):
                self._publish(uri, None, [])

    def stop(self) -> None:
        for task in self.tasks.values():
            task.cancel()
        self.tasks.clear()

    def _publish(self, uri: str, version: int | None, diags: list[types.Diagnostic]) -> None:
        if diags:
            self.published.add(uri)
        else:
            self.published.discard(uri)
        self.ls.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=diags, version=version))

    def region(self, snap: Snapshot) -> tuple[int, int]:
        lines = snap.lines
        if len(lines) <= SCORE_LINES:
            return 0, len(snap.text)
        center = min(self.focus.get(snap.uri, 0), len(lines) - 1)
        first = max(0, min(center - SCORE_LINES // 2, len(lines) - SCORE_LINES))
        last = min(len(lines), first + SCORE_LINES)
        end = lines.start(last) if last < len(lines) else len(snap.text)
        return lines.start(first), end

    async def _run(self, uri: str) -> None:
        ls = self.ls
        s = ls.settings
        await asyncio.sleep(s.diagnostics_delay / 1000)
        try:
            snap = ls.snapshot(uri)
        except Exception:  # closed meanwhile
            return
        start, end = self.region(snap)
        ex = excerpt(snap.text, start, end, context=s.context_chars)
        try:
            scores = await ls.engine.score(ex.text, start=start - ex.offset,
                                           end=end - ex.offset, language=snap.language)
        except EngineError as exc:
            ls.trace(f"diagnostics for {uri} failed: {exc.message}")
            return
        if not ls.current(snap) or not self.enabled:
            return  # stale: the change that made it so scheduled the next run
        picked = [sc for sc in scores
                  if sc.suspicion >= s.diagnostics_threshold and sc.text.strip()]
        picked = sorted(picked, key=lambda sc: -sc.suspicion)[: s.max_diagnostics]
        severity = SEVERITY[s.diagnostics_severity]
        diags = []
        for sc in sorted(picked, key=lambda sc: sc.start):
            a = ex.offset + sc.start + (len(sc.text) - len(sc.text.lstrip()))
            b = ex.offset + sc.end - (len(sc.text) - len(sc.text.rstrip()))
            token = snap.text[a:b]
            diags.append(types.Diagnostic(
                range=snap.lines.range(a, b), severity=severity, source=SOURCE, code=CODE,
                message=f"unlikely token {token!r} (suspicion {sc.suspicion:.2f}); the model "
                        f"expects {sc.likely.strip() or sc.likely!r}",
                data={"version": snap.version, "start": a, "end": b, "token": token,
                      "likely": sc.likely}))
        self._publish(uri, snap.version, diags)


def fix_range(snap: Snapshot, diag: types.Diagnostic) -> tuple[int, int, str, str] | None:
    """(start, end, token, likely) of one of our diagnostics that is current for `snap`;
    None for another source's diagnostic or one made for another version."""
    data: Any = diag.data
    if diag.source != SOURCE or not isinstance(data, dict):
        return None
    a, b, version = data.get("start"), data.get("end"), data.get("version")
    if version != snap.version or not isinstance(a, int) or not isinstance(b, int) \
            or not 0 <= a <= b <= len(snap.text):
        return None
    return a, b, str(data.get("token", "")), str(data.get("likely", ""))
