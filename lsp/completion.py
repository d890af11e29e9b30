"""Fill-in-the-middle at the cursor: `textDocument/inlineCompletion` (LSP 3.18) and
`textDocument/completion` for clients without it.

The hole is an empty span at the cursor; everything before it and after it (the rest of
the line included) is context. On a line with code the completion is one line:
`completionTokens` tokens at most, cut at the first line break, computed on a small canvas
(`completionWindowTokens` around the cursor; unset: 128 on a slow CPU, fp32 or int8 for
want of bf16 instructions, 384 on an accelerator, 256 elsewhere) in at most
`completionSteps` passes (unset: 4, but 3 on a slow CPU while the user types on a line
already completed; both in lsp/budgets.py), the
context's keys/values computed once and reused, so that it keeps up with typing. On an
empty (or whitespace-only) line, e.g. the next line of a block, it may span lines
(`multilineTokens`, growing up to `growCap`, in at most `multilineSteps` passes: unset, 6
on a slow CPU, 8 elsewhere; lsp/completion_ask.py). A new request for a document cancels
the one still running for it (its response is `RequestCancelled`), and so does an edit.

A completion has a deadline (`completionDeadline`, ms; lsp/budgets.py): past it the
request answers no items and its worker job is cancelled, since a suggestion that comes
after the user has typed on is worse than none. Unset, the worker's device decides: 600 ms
on a CPU (1,200 ms for a multi-line completion, which takes 0.2-0.5 s there when idle),
2,000 ms on a GPU; 0 means none. The worker drops a cancelled job before its next
denoising step.

Up to `completionItems` items, surest first, none below `completionMinConfidence`: the fill,
its runner-ups, and copies of what follows the code before the cursor in the workspace
(infill/core/copy_offers.py; lsp/offers.py `offered`); an empty line's sure copy asks no
model (`answers_alone`). Above a floor that an empty line's fill alone never reaches
(`one_line_enough`, where the worker's fills carry a confidence), only a fill that reads as
a copy, a line, can be shown there: the model is asked for one line, and where no copy is
found, for nothing.

While the user types the characters a completion offered, the rest of it is the answer
at once, without the model (`completionTypedThrough`; lsp/offers.py).

The model is not asked where no completion belongs (lsp/completion_ask.py
`wants_completion`): in the middle of an identifier, or before code on the same line (a
fill there would only repeat it).
"""

from __future__ import annotations

import asyncio
import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass

from lsprotocol import types

from diffusion_infill.infill.core.copy_offers import OfferedCopy, completion_copies
from diffusion_infill.infill.core.errors import InfillError
from diffusion_infill.infill.core.results import SpanFill
from diffusion_infill.infill.serve.protocol import Result
from diffusion_infill.lsp.budgets import Machine, completion_deadline
from diffusion_infill.lsp.completion_ask import CompletionAsk, completion_ask
from diffusion_infill.lsp.host import Feature, Host, Snapshot
from diffusion_infill.lsp.offers import (
    Offer,
    answers_alone,
    offered,
    one_line_enough,
    typed_through,
)
from diffusion_infill.lsp.operations import repository_context
from diffusion_infill.lsp.positions import LINE_BREAK
from diffusion_infill.lsp.progress import WorkProgress, live_view

_WORD = re.compile(r"\w*$")


class Late(enum.Enum):
    """A completion that ran past its deadline: no items (and ask again next keystroke)."""

    LATE = "late"


@dataclass(frozen=True)
class Completion:
    """What to insert at the cursor, computed for one version of the document."""

    snap: Snapshot
    offset: int  # the cursor, a str offset
    text: str  # what to insert at the cursor
    multiline: bool
    more: tuple[str, ...] = ()  # other items after `text`: its runner-ups, surest first


class Completions(Feature):
    """Inline completion and completion; the completion running for each document (at
    most one)."""

    def __init__(self, host: Host) -> None:
        super().__init__(host)
        self.tasks: dict[str, asyncio.Task[object]] = {}
        self.offers: dict[str, Offer] = {}  # each document's last completion from the model
        self.lines: dict[str, int] = {}  # the line of each document's last completion asked

    def register(self) -> None:
        self.host.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())(
            self.inline
        )
        self.host.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions())(self.items)

    def changed(self, uri: str, line: int | None) -> None:
        self.drop(uri)

    def closed(self, uri: str) -> None:
        self.drop(uri)
        self.offers.pop(uri, None)
        self.lines.pop(uri, None)

    def drop(self, uri: str) -> None:
        """Cancel the completion running for `uri` (the document changed or closed)."""
        task = self.tasks.pop(uri, None)
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    async def inline(
        self, params: types.InlineCompletionParams
    ) -> types.InlineCompletionList | None:
        done = await self.complete(
            params.text_document.uri, params.position, params.work_done_token
        )
        if done is None:
            return None
        if isinstance(done, Late):
            return types.InlineCompletionList(items=[])
        here = done.snap.lines.range(done.offset, done.offset)
        return types.InlineCompletionList(
            items=[
                types.InlineCompletionItem(insert_text=text, range=here)
                for text in (done.text, *done.more)
            ]
        )

    async def items(self, params: types.CompletionParams) -> types.CompletionList | None:
        done = await self.complete(
            params.text_document.uri, params.position, params.work_done_token
        )
        if isinstance(done, Late):  # incomplete: the client asks again as the user types
            return types.CompletionList(is_incomplete=True, items=[])
        return completion_list(done) if done is not None else None

    async def complete(
        self, uri: str, position: types.Position, token: types.ProgressToken | None
    ) -> Completion | Late | None:
        """The completion at `position`, cancelling the one still running for `uri`."""
        started = asyncio.get_running_loop().time()  # the deadline counts from here
        self.drop(uri)
        task = asyncio.current_task()
        assert task is not None
        self.tasks[uri] = task
        try:
            return await self._complete(uri, position, token, started)
        finally:
            if self.tasks.get(uri) is task:
                del self.tasks[uri]

    def _typed_through(self, uri: str, snap: Snapshot, at: int) -> Completion | None:
        """The rest of the document's last offer where the user has typed its start since."""
        offer = self.offers.pop(uri, None)
        if offer is None or not self.host.settings.completion_typed_through:
            return None
        rest = typed_through(offer, snap.text, at)
        if rest is None:
            return None
        self.offers[uri] = offer  # the user may type on through it
        return Completion(snap, at, rest, offer.multiline)

    async def _complete(
        self, uri: str, position: types.Position, token: types.ProgressToken | None, started: float
    ) -> Completion | Late | None:
        host = self.host
        s = host.settings
        snap = host.snapshot(uri)
        at = snap.lines.offset(position)
        line = snap.lines.line_of(at)
        typing = self.lines.get(uri) == line  # this line's completion was asked before
        self.lines[uri] = line
        if (typed := self._typed_through(uri, snap, at)) is not None:
            return typed  # no model: the user is typing what it offered
        bounds = (snap.lines.start(line), snap.lines.end(line))
        machine = host.worker.machine

        def ask_on(m: Machine, one_line: bool = False) -> CompletionAsk | None:
            return completion_ask(
                snap.text, at, bounds, s, uri, machine=m, typing=typing, one_line=one_line
            )

        if (ask := ask_on(machine)) is None:
            return None
        copies = await self._copies(snap, ask)
        if answers_alone(copies, ask.multiline):  # no model: a copy is sure enough
            return self._offered(uri, snap, at, ask, None, copies)

        def deadline() -> float | None:  # the loop's time; the device is known once connected
            limit = completion_deadline(s, host.worker.machine, ask.lines)
            return None if limit is None else started + limit

        try:
            async with asyncio.timeout_at(deadline()) as timer:
                await host.worker.connect()
                m = host.worker.machine
                one_line = m.confidence and one_line_enough(ask.multiline, s)
                if one_line and not copies:  # alone, a fill there is never sure enough
                    host.log("completion: none (an empty line with no copy, a fill alone unsure)")
                    return None
                if m != machine or one_line:  # its budgets once it greeted; one line
                    ask = ask_on(m, one_line) or ask
                timer.reschedule(deadline())
                result = await self._fill(snap, ask, token)
        except TimeoutError:  # the worker's job was cancelled on the way out
            ms = round((asyncio.get_running_loop().time() - started) * 1000)
            host.log(f"completion: no answer by its deadline, dropped after {ms} ms")
            return Late.LATE
        except InfillError as exc:
            host.log(f"completion failed: {exc.message}")
            return None
        if not host.is_current(snap):
            return None  # stale: never offer text computed for an older version
        fill = result.fills[0] if result.fills else None
        return self._offered(uri, snap, at, ask, fill, copies)

    async def _fill(
        self, snap: Snapshot, ask: CompletionAsk, token: types.ProgressToken | None
    ) -> Result:
        """The worker's fill of `ask`, its progress shown only with the request's own
        `token` (a server-created progress bar per keystroke would be noise)."""
        host = self.host
        async with WorkProgress(host, "Infill: completing", token=token, delay=None) as progress:
            return await host.worker.fill(
                ask.excerpt.text,
                spans=[ask.span],
                marker=host.settings.hole_marker,
                language=snap.language,
                options=ask.options,
                on_step=live_view(host, snap, "completion", progress),
            )

    async def _copies(self, snap: Snapshot, ask: CompletionAsk) -> list[OfferedCopy]:
        """The copies at a completion's cursor (`completion_copies`)."""
        text, at = ask.excerpt.text, ask.span.start
        context = await repository_context(self.host, snap, text, [(at, at)])
        return completion_copies(text, at, context)

    def _offered(
        self,
        uri: str,
        snap: Snapshot,
        at: int,
        ask: CompletionAsk,
        fill: SpanFill | None,
        copies: Sequence[OfferedCopy],
    ) -> Completion | None:
        """The completion of `fill` and `copies` (`offered`), kept as the document's
        last offer."""
        items = [t for t, _ in offered(ask.offer, fill, self.host.settings, copies, ask.multiline)]
        if not items:
            if fill is not None and fill.confidence is not None:
                self.host.log(f"completion: none offered (confidence {fill.confidence:.2f})")
            return None
        self.offers[uri] = Offer(snap.text, at, items[0], ask.multiline)
        return Completion(snap, at, items[0], ask.multiline, tuple(items[1:]))


def completion_list(done: Completion) -> types.CompletionList:
    """One item per offer, in order, each edit starting at the word being typed (so
    the client's filter keeps it), incomplete (the fill depends on every character typed:
    ask again on each)."""
    lines = done.snap.lines
    line_start = lines.start(lines.line_of(done.offset))
    word = _WORD.search(done.snap.text, line_start, done.offset)
    start = word.start() if word is not None else done.offset
    items = []
    for k, text in enumerate((done.text, *done.more)):
        new_text = done.snap.text[start : done.offset] + text
        first = LINE_BREAK.split(new_text.strip(), maxsplit=1)
        label = first[0][:80] + ("…" if len(first) > 1 or len(first[0]) > 80 else "")
        items.append(
            types.CompletionItem(
                label=label or new_text,
                kind=types.CompletionItemKind.Text,
                detail="infill",
                filter_text=new_text,
                sort_text=str(k),
                insert_text_format=types.InsertTextFormat.PlainText,
                text_edit=types.TextEdit(range=lines.range(start, done.offset), new_text=new_text),
            )
        )
    return types.CompletionList(is_incomplete=True, items=items)
