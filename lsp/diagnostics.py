"""Diagnostics: tokens the denoiser finds improbable, published once edits settle.

Off unless the `diagnostics` setting is on. Each open document has at most one pending
run: a change restarts its timer (`diagnosticsDelay`, 500 ms), then the worker scores the
document's text (for a long document, `SCORE_LINES` lines around the last change) in one
forward pass per window, and the tokens the fixer's rule flags are published (the worst
`maxDiagnostics`), with the document version: suspicion >= `diagnosticsThreshold` and
p(the likeliest replacement) >= `diagnosticsLikelyThreshold` (infill/core/suspicion.py;
the defaults are the fixer's, calibrated to leave correct code alone). A result for a
version that is no longer current is dropped: the change that made it stale has already
scheduled the next run.

Each diagnostic's `data` holds the version and the token's character range, so its quick
fix (lsp.actions, "fixToken") repairs exactly that token (infill.core.repair:
the model's likeliest other token, or its word re-denoised, or, where the model reads the
token as one that should not be there, the token deleted with its leading whitespace, which
the diagnostic's range then covers).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcContentModified

from diffusion_infill.infill.core.errors import InfillError
from diffusion_infill.infill.core.results import TokenScore
from diffusion_infill.infill.core.suspicion import expectation, is_suspicious, worst_first
from diffusion_infill.lsp.excerpt import excerpt
from diffusion_infill.lsp.host import Feature, Host, Snapshot
from diffusion_infill.lsp.settings import Settings

log = logging.getLogger("infill.lsp")

SOURCE = "infill"
CODE = "improbable-token"
SCORE_LINES = 300  # a longer document is scored only this many lines around the change
SEVERITY = {
    "information": types.DiagnosticSeverity.Information,
    "hint": types.DiagnosticSeverity.Hint,
}


class Diagnostics(Feature):
    """Publishes diagnostics (it registers no handler: the document events drive it)."""

    def __init__(self, host: Host) -> None:
        super().__init__(host)
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.focus: dict[str, int] = {}  # the line of the last change, per document
        self.published: set[str] = set()

    def register(self) -> None:
        pass

    @property
    def enabled(self) -> bool:
        return self.host.settings.diagnostics

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
        task.add_done_callback(
            lambda t: self.tasks.pop(uri, None) if self.tasks.get(uri) is t else None
        )

    def closed(self, uri: str) -> None:
        task = self.tasks.pop(uri, None)
        if task is not None:
            task.cancel()
        self.focus.pop(uri, None)
        if uri in self.published:
            self._publish(uri, None, [])

    def settings_changed(self, old: Settings, new: Settings) -> None:
        keys = (
            "diagnostics",
            "diagnostics_threshold",
            "diagnostics_likely_threshold",
            "diagnostics_severity",
            "max_diagnostics",
        )
        if any(getattr(old, k) != getattr(new, k) for k in keys):
            self.refresh_all()

    def refresh_all(self) -> None:
        """Rescore every open document, or clear everything when diagnostics are off."""
        if self.enabled:
            for uri in self.host.open_documents():
                self.changed(uri, None)
        else:
            self.shutdown()
            for uri in list(self.published):
                self._publish(uri, None, [])

    def shutdown(self) -> None:
        for task in self.tasks.values():
            task.cancel()
        self.tasks.clear()

    def _publish(self, uri: str, version: int | None, diags: list[types.Diagnostic]) -> None:
        if diags:
            self.published.add(uri)
        else:
            self.published.discard(uri)
        self.host.notify(
            types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS,
            types.PublishDiagnosticsParams(uri=uri, diagnostics=diags, version=version),
        )

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
        host = self.host
        await asyncio.sleep(host.settings.diagnostics_delay / 1000)
        try:
            snap = host.snapshot(uri)
        except JsonRpcContentModified:  # closed meanwhile: nothing to diagnose
            return
        start, end = self.region(snap)
        ex = excerpt(snap.text, start, end, context=host.settings.context_chars)
        try:
            scores = await host.worker.score(
                ex.text, start=start - ex.offset, end=end - ex.offset, language=snap.language
            )
        except InfillError as exc:
            host.log(f"diagnostics for {uri} failed: {exc.message}")
            return
        if not host.is_current(snap) or not self.enabled:
            return  # stale: the change that made it so scheduled the next run
        self._publish(uri, snap.version, self._diagnostics(snap, ex.offset, scores))

    def _diagnostics(
        self, snap: Snapshot, offset: int, scores: list[TokenScore]
    ) -> list[types.Diagnostic]:
        """The worst tokens over the threshold, in text order (`offset`: of the excerpt
        the scores are relative to)."""
        s = self.host.settings
        severity = SEVERITY[s.diagnostics_severity]
        diags = []
        for sc in sorted(flagged(scores, s), key=lambda sc: sc.start):
            a, b = (offset + k for k in marked_range(sc))
            token = snap.text[a:b]
            diags.append(
                types.Diagnostic(
                    range=snap.lines.range(a, b),
                    severity=severity,
                    source=SOURCE,
                    code=CODE,
                    message=f"unlikely token {token.strip() or token!r} (suspicion "
                    f"{sc.suspicion:.2f}); {expectation(sc.likely)}",
                    data={
                        "version": snap.version,
                        "start": a,
                        "end": b,
                        "token": token,
                        "likely": sc.likely,
                    },
                )
            )
        return diags


def marked_range(sc: TokenScore) -> tuple[int, int]:
    """The characters a diagnostic marks for a flagged token: the token without its
    surrounding whitespace, except that a token the model would delete keeps its leading
    whitespace, which its quick fix deletes too (a fix may not edit outside the range)."""
    lead = len(sc.text) - len(sc.text.lstrip()) if sc.likely else 0
    return sc.start + lead, sc.end - (len(sc.text) - len(sc.text.rstrip()))


def flagged(scores: list[TokenScore], s: Settings) -> list[TokenScore]:
    """The tokens the fixer's rule (infill/core/suspicion.py) flags at the diagnostics'
    thresholds, worst first (`preference`), at most `maxDiagnostics`."""
    return [
        sc
        for sc in worst_first(scores)
        if is_suspicious(sc, s.diagnostics_threshold, s.diagnostics_likely_threshold)
    ][: s.max_diagnostics]


def fix_range(snap: Snapshot, diag: types.Diagnostic) -> tuple[int, int, str, str] | None:
    """(start, end, token, likely) of one of our diagnostics that is current for `snap`;
    None for another source's diagnostic or one made for another version."""
    data: Any = diag.data
    if diag.source != SOURCE or not isinstance(data, dict):
        return None
    a, b, version = data.get("start"), data.get("end"), data.get("version")
    if (
        version != snap.version
        or not isinstance(a, int)
        or not isinstance(b, int)
        or not 0 <= a <= b <= len(snap.text)
    ):
        return None
    return a, b, str(data.get("token", "")), str(data.get("likely", ""))
