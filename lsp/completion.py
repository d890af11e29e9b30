"""Fill-in-the-middle at the cursor: `textDocument/inlineCompletion` (LSP 3.18) and
`textDocument/completion` for clients without it.

The hole is an empty span at the cursor; everything before it and after it (the rest of
the line included) is context. On a line with code the completion is one line:
`completionTokens` tokens at most, cut at the first line break. On an empty (or
whitespace-only) line, e.g. the next line of a block, it may span lines
(`multilineTokens`, growing up to `maxTokens`). A new request for a document cancels the
one still running for it (its response is `RequestCancelled`), and so does an edit.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lsprotocol import types

from infill.core.spans import Span
from lsp.engine import EngineError
from lsp.excerpt import excerpt
from lsp.progress import WorkProgress, live_view

if TYPE_CHECKING:
    from lsp.server import InfillServer, Snapshot

_WORD = re.compile(r"\w*$")
_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class Fill:
    snap: Snapshot
    offset: int  # the cursor, a str offset
    text: str  # what to insert at the cursor
    multiline: bool


class Completions:
    """The completion running for each document (at most one)."""

    def __init__(self, ls: InfillServer) -> None:
        self.ls = ls
        self.tasks: dict[str, asyncio.Task[object]] = {}

    def drop(self, uri: str) -> None:
        """Cancel the completion running for `uri` (the document changed or closed)."""
        task = self.tasks.pop(uri, None)
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    async def fill(self, uri: str, position: types.Position,
                   token: types.ProgressToken | None) -> Fill | None:
        self.drop(uri)
        task = asyncio.current_task()
        assert task is not None
        self.tasks[uri] = task
        try:
            return await self._fill(uri, position, token)
        finally:
            if self.tasks.get(uri) is task:
                del self.tasks[uri]

    async def _fill(self, uri: str, position: types.Position,
                    token: types.ProgressToken | None) -> Fill | None:
        ls = self.ls
        s = ls.settings
        snap = ls.snapshot(uri)
        at = snap.lines.offset(position)
        line = snap.lines.line_of(at)
        multiline = not snap.lines.line_text(line).strip()
        tokens = s.multiline_tokens if multiline else s.completion_tokens
        options = s.sampler_options(
            default_span_tokens=tokens,
            max_span_tokens=max(s.max_tokens, tokens) if multiline else tokens)
        ex = excerpt(snap.text, at, at, context=s.context_chars)
        try:
            # Progress only with the request's own token: a server-created progress bar
            # per keystroke would be noise.
            async with WorkProgress(ls, "Infill: completing", token=token,
                                    delay=None) as progress:
                result = await ls.engine.fill(
                    ex.text, spans=[Span(at - ex.offset, at - ex.offset)],
                    marker=s.hole_marker, language=snap.language, options=options,
                    on_step=live_view(ls, snap, "completion", progress))
        except EngineError as exc:
            ls.trace(f"completion failed: {exc.message}")
            return None
        if not ls.current(snap):
            return None  # stale: never offer text computed for an older version
        text = result.fills[0].text if result.fills else ""
        text = shape(text, multiline=multiline, at_line_end=at == snap.lines.end(line))
        return Fill(snap, at, text, multiline) if text else None


def shape(text: str, *, multiline: bool, at_line_end: bool) -> str:
    """The fill as offered: one line (cut at the first line break) unless multi-line;
    trailing whitespace dropped when nothing follows on the line; "" when only
    whitespace is left."""
    if not multiline:
        m = _BREAK.search(text)
        if m is not None:
            text = text[: m.start()]
    else:
        text = text.rstrip(" \t\r\n")
    if at_line_end:
        text = text.rstrip(" \t")
    return text if text.strip() else ""


async def inline(ls: InfillServer, params: types.InlineCompletionParams
                 ) -> types.InlineCompletionList | None:
    fill = await ls.completions.fill(params.text_document.uri, params.position,
                                     params.work_done_token)
    if fill is None:
        return None
    here = fill.snap.lines.range(fill.offset, fill.offset)
    return types.InlineCompletionList(items=[
        types.InlineCompletionItem(insert_text=fill.text, range=here)])


async def items(ls: InfillServer, params: types.CompletionParams
                ) -> types.CompletionList | None:
    fill = await ls.completions.fill(params.text_document.uri, params.position,
                                     params.work_done_token)
    if fill is None:
        return None
    lines = fill.snap.lines
    line_start = lines.start(lines.line_of(fill.offset))
    word = _WORD.search(fill.snap.text, line_start, fill.offset)
    start = word.start() if word is not None else fill.offset
    new_text = fill.snap.text[start : fill.offset] + fill.text
    first = _BREAK.split(new_text.strip(), maxsplit=1)
    label = first[0][:80] + ("…" if len(first) > 1 or len(first[0]) > 80 else "")
    item = types.CompletionItem(
        label=label or new_text, kind=types.CompletionItemKind.Text, detail="infill",
        filter_text=new_text, sort_text="0", insert_text_format=types.InsertTextFormat.PlainText,
        text_edit=types.TextEdit(range=lines.range(start, fill.offset), new_text=new_text))
    # Incomplete: the fill depends on every character typed, so ask again on each one.
    return types.CompletionList(is_incomplete=True, items=[item])
