"""The language-server client of benchmarks.bench_lsp: it opens documents, lists and
resolves code actions, asks inline completions (typing a line key by key, too), and keeps
each case's times, errors and offered completions; `capabilities` are those of an editor
that resolves code actions and shows inline completions; `summary`, a case's times as
the results file keeps them."""

from __future__ import annotations

import math
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from benchmarks.heldout import first_line
from diffusion_infill.lsp.positions import Lines


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in [0, 100]) of a non-empty list."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def summary(ms: list[float], errors: int) -> dict[str, Any]:
    if not ms:
        return {"n": 0, "errors": errors}
    return {
        "n": len(ms),
        "errors": errors,
        "p50_ms": round(percentile(ms, 50), 1),
        "p95_ms": round(percentile(ms, 95), 1),
        "mean_ms": round(statistics.fmean(ms), 1),
        "ms": [round(m, 1) for m in ms],
    }


def capabilities() -> types.ClientCapabilities:
    return types.ClientCapabilities(
        general=types.GeneralClientCapabilities(
            position_encodings=[types.PositionEncodingKind.Utf16]
        ),
        text_document=types.TextDocumentClientCapabilities(
            code_action=types.CodeActionClientCapabilities(
                code_action_literal_support=types.ClientCodeActionLiteralOptions(
                    code_action_kind=types.ClientCodeActionKindOptions(
                        value_set=[
                            types.CodeActionKind.QuickFix,
                            types.CodeActionKind.RefactorRewrite,
                        ]
                    )
                ),
                resolve_support=types.ClientCodeActionResolveOptions(properties=["edit"]),
            ),
            inline_completion=types.InlineCompletionClientCapabilities(),
        ),
    )


class Bench:
    def __init__(self, client: LanguageClient) -> None:
        self.client = client
        self.docs = 0
        self.times: dict[str, list[float]] = {}
        self.errors: dict[str, int] = {}
        # per case: offered text (None: nothing offered), what was deleted
        self.completions: dict[str, list[str | None]] = {}
        self.truths: dict[str, list[str]] = {}
        # per typing case: keystrokes answered with the last offer less the typed character
        self.kept: dict[str, int] = {}

    def open(self, text: str, uri: str | None = None) -> tuple[str, Lines]:
        """Open `text` as the document `uri` (default: a new file of its own)."""
        self.docs += 1
        uri = uri or f"file:///bench/doc{self.docs}.py"
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=uri, language_id="python", version=1, text=text
                )
            )
        )
        return uri, Lines(text)

    def close(self, uri: str) -> None:
        self.client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )

    async def timed(self, case: str, call: Callable[[], Awaitable[Any]]) -> Any:
        started = time.perf_counter()
        try:
            result = await call()
        except Exception as exc:  # counted, shown, and the run goes on
            self.errors[case] = self.errors.get(case, 0) + 1
            print(f"  {case}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return None
        self.times.setdefault(case, []).append((time.perf_counter() - started) * 1000)
        return result

    async def action(self, case: str, text: str, start: int, end: int, kind: str) -> None:
        """List the actions at [start, end) (timed as "code action list"), then resolve
        the one of `kind` (timed as `case`)."""
        uri, lines = self.open(text)
        try:
            params = types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                range=lines.range(start, end),
                context=types.CodeActionContext(
                    diagnostics=[], trigger_kind=types.CodeActionTriggerKind.Invoked
                ),
            )
            found = await self.timed(
                "code action list", lambda: self.client.text_document_code_action_async(params)
            )
            picked = [a for a in found or [] if isinstance(a, types.CodeAction) and a.kind == kind]
            if not picked:
                self.errors[case] = self.errors.get(case, 0) + 1
                titles = [a.title for a in found or []]
                print(f"  {case}: not offered (offered: {titles})", file=sys.stderr)
                return
            await self.timed(case, lambda: self.client.code_action_resolve_async(picked[0]))
        finally:
            self.close(uri)

    async def inline(
        self, case: str, text: str, at: int, truth: str, uri: str | None = None
    ) -> None:
        uri, lines = self.open(text, uri)
        try:
            params = self._inline_params(uri, lines.position(at))
            got = await self.timed(
                case, lambda: self.client.text_document_inline_completion_async(params)
            )
            self._offered(case, got, truth)
        finally:
            self.close(uri)

    async def typing(
        self, case: str, text: str, at: int, truth: str, keys: int, uri: str | None = None
    ) -> None:
        """Type the first `keys` characters of `truth` at `at`, one per change, and time a
        completion after each (the one before the first keystroke is not timed)."""
        uri, _ = self.open(text, uri)
        try:
            first = await self.client.text_document_inline_completion_async(
                self._inline_params(uri, Lines(text).position(at))
            )
            before = _text(first)
            self.kept.setdefault(case, 0)
            for i, ch in enumerate(truth[:keys]):
                here = Lines(text).position(at)
                text, at = text[:at] + ch + text[at:], at + 1
                self.client.text_document_did_change(
                    types.DidChangeTextDocumentParams(
                        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=i + 2),
                        content_changes=[
                            types.TextDocumentContentChangePartial(
                                range=types.Range(start=here, end=here), text=ch
                            )
                        ],
                    )
                )
                params = self._inline_params(uri, Lines(text).position(at))
                got = await self.timed(
                    case, lambda p=params: self.client.text_document_inline_completion_async(p)
                )
                self._offered(case, got, truth[i + 1 :])
                now = _text(got)
                if before and now and before[0] == ch and now == before[1:]:
                    self.kept[case] += 1
                before = now
        finally:
            self.close(uri)

    @staticmethod
    def _inline_params(uri: str, position: types.Position) -> types.InlineCompletionParams:
        return types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=position,
            context=types.InlineCompletionContext(
                trigger_kind=types.InlineCompletionTriggerKind.Automatic
            ),
        )

    def _offered(self, case: str, got: Any, truth: str) -> None:
        self.completions.setdefault(case, []).append(_text(got))
        self.truths.setdefault(case, []).append(truth)

    def completion_quality(self, case: str) -> dict[str, Any]:
        got, truths = self.completions.get(case, []), self.truths.get(case, [])
        n = len(truths)
        exact = sum(exact_offers(got, truths))
        # an empty line's offer may run on past the deleted line (lsp/completion.py
        # shapes it to its first blank line): its first line is what can be compared
        first = sum(
            c is not None and first_line(c) == first_line(t)
            for c, t in zip(got, truths, strict=True)
        )
        empty = sum(c is None for c in got)
        return {
            "n": n,
            "exact_match": exact / n if n else None,
            "first_line_right": first / n if n else None,
            "no_completion": empty / n if n else None,
            "offers_kept": self.kept[case] / n if case in self.kept and n else None,
            "offered": got,
            "truths": truths,
        }


def exact_offers(got: list[str | None], truths: list[str]) -> list[bool]:
    """Whether each offer is its truth (both stripped), in order."""
    return [c is not None and c.strip() == t.strip() for c, t in zip(got, truths, strict=True)]


def _text(got: Any) -> str | None:
    """The first offered text of an inline completion answer (None: nothing offered)."""
    items = got.items if isinstance(got, types.InlineCompletionList) else got or []
    offered = items[0].insert_text if items else None
    return offered if isinstance(offered, str) or offered is None else offered.value
