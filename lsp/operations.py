"""What a code action does once picked (`codeAction/resolve`, or `infill.applyAction` for
a client that cannot resolve): the operation its `data` names (`Op`), run on the document
version it was offered for. Each operation sends the worker an excerpt of the document
around the range and returns the edits in the document's offsets, the worker's result and
the excerpt it sent: fill the holes, rewrite the selection, insert a docstring, fix the
selection or one diagnostic's token.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pygls.exceptions import JsonRpcInvalidParams

from diffusion_infill.infill.core.diff import Edit
from diffusion_infill.infill.core.errors import InfillError
from diffusion_infill.infill.core.options import DEFAULT_CHECKS, SamplerOptions
from diffusion_infill.infill.core.snippets import Snippet
from diffusion_infill.infill.core.spans import Span, find_holes
from diffusion_infill.infill.serve.protocol import Result, Step
from diffusion_infill.lsp.docstring import DocstringSlot, docstring_slot
from diffusion_infill.lsp.excerpt import Excerpt, definition_start, excerpt
from diffusion_infill.lsp.host import Host, Snapshot
from diffusion_infill.lsp.positions import shift
from diffusion_infill.lsp.progress import WorkProgress, live_view
from diffusion_infill.lsp.runner_ups import RUNNER_UP
from diffusion_infill.lsp.settings import Settings


@dataclass(frozen=True)
class Op:
    """What an action does, on which document version and characters (its `data`)."""

    op: str  # a key of OPERATIONS
    uri: str
    version: int | None
    start: int  # str offsets in that version of the document
    end: int

    @classmethod
    def from_data(cls, data: Any) -> Op:
        try:
            op = cls(**data)
            ok = (
                (op.op in OPERATIONS or op.op == RUNNER_UP)
                and isinstance(op.uri, str)
                and 0 <= op.start <= op.end
                and (op.version is None or isinstance(op.version, int))
            )
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise JsonRpcInvalidParams(f"not an infill code action: {data!r}")
        return op


def find_docstring_slot(text: str, at: int, marker: str, context: int) -> DocstringSlot | None:
    """The docstring slot around `at`, parsed in an excerpt: listing actions parses on
    every cursor move, and parsing a 20,000-line file would hold the event loop. An
    excerpt cut inside a docstring of a long class parses as one syntax error, and the
    function around `at` is not found: then it is parsed again from a line that starts a
    definition (`definition_start`, up to four contexts back). The first excerpt goes
    first because it holds more of the file's docstrings, whose quotes the slot follows."""
    ex = excerpt(text, at, at, context=context)
    slot = docstring_slot(ex.text, at - ex.offset, marker=marker)
    top = definition_start(text, at, 4 * context) if slot is None and ex.offset else None
    if top is not None and top != ex.offset:
        ex = Excerpt(top, text[top : ex.end])  # the excerpt holds `at`: ex.end >= at
        slot = docstring_slot(ex.text, at - ex.offset, marker=marker)
    return slot.moved(ex.offset) if slot is not None else None


Done = tuple[list[Edit], Result, Excerpt]
OnStep = Callable[[Step], None] | None


def action_options(s: Settings, *, race: bool = True, runner_ups: int = 0) -> SamplerOptions:
    """The settings' sampler options; with `checks`, a fill that breaks the code loses to
    the next candidate, and with none passing it is left out (docs/ARCHITECTURE.md).
    `race`: holes race `lengths` allocations (measured on code; a docstring is prose);
    `runner_ups`: the other fills each hole lists (lsp/runner_ups.py)."""
    return s.sampler_options(
        checks=DEFAULT_CHECKS if s.checks else "",
        lengths=s.lengths if race else 1,
        context_copies=s.context_copies,
        runner_ups=runner_ups,
    )


async def _fill_holes(host: Host, snap: Snapshot, op: Op, on_step: OnStep) -> Done:
    s = host.settings
    holes = find_holes(snap.text, s.hole_marker)
    ex = excerpt(snap.text, holes[0].start, holes[-1].end, context=s.context_chars)
    spans = [(h.start - ex.offset, h.end - ex.offset) for h in holes]
    result = await host.worker.fill(
        ex.text,
        marker=s.hole_marker,
        language=snap.language,
        options=action_options(s, runner_ups=1),
        on_step=on_step,
        context=await repository_context(host, snap, ex.text, spans),
        source=host.repositories.source(snap.uri, s.python_environment),
    )
    return shift(result.edits, ex.offset), result, ex


async def _rewrite(host: Host, snap: Snapshot, op: Op, on_step: OnStep) -> Done:
    s = host.settings
    ex = excerpt(snap.text, op.start, op.end, context=s.context_chars)
    span = Span(op.start - ex.offset, op.end - ex.offset)
    result = await host.worker.fill(
        ex.text,
        spans=[span],
        marker=s.hole_marker,
        language=snap.language,
        options=action_options(s),
        on_step=on_step,
        context=await repository_context(host, snap, ex.text, [(span.start, span.end)]),
        source=host.repositories.source(snap.uri, s.python_environment),
    )
    return within(snap.text, shift(result.edits, ex.offset), op.start, op.end), result, ex


async def repository_context(
    host: Host, snap: Snapshot, text: str, holes: list[tuple[int, int]]
) -> list[Snippet]:
    """The snippets of the workspace's repository for `holes` of `text` (an excerpt of
    the document), with the `repositoryContext` setting on (lsp/repository.py)."""
    if not host.settings.repository_context or snap.language != "python":
        return []
    return await host.repositories.snippets(snap.uri, text, holes)


async def _docstring(host: Host, snap: Snapshot, op: Op, on_step: OnStep) -> Done:
    s = host.settings
    slot = find_docstring_slot(snap.text, op.start, s.hole_marker, s.context_chars)
    if slot is None:
        raise InfillError("there is no function or class without a docstring here")
    ex, span = docstring_request(snap.text, slot, s.context_chars)
    result = await host.worker.fill(
        ex.text,
        spans=[span],
        marker=s.hole_marker,
        language=snap.language,
        options=action_options(s, race=False),
        on_step=on_step,
    )
    body = result.fills[0].text if result.fills else ""
    return ([slot.edit(body)] if slot.clean_body(body) else []), result, ex


def docstring_request(text: str, slot: DocstringSlot, context: int) -> tuple[Excerpt, Span]:
    """What Insert docstring sends: the excerpt around the slot of `text` with the empty
    docstring in place, and the empty span between its quotes (excerpt offsets)."""
    template, at = slot.template(text)
    ex = excerpt(template, at, at, context=context)
    return ex, Span(at - ex.offset, at - ex.offset)


async def _fix(host: Host, snap: Snapshot, op: Op, on_step: OnStep) -> Done:
    """ "fix" (the selection's worst tokens) or "fixToken" (a diagnostic's token)."""
    s = host.settings
    ex = excerpt(snap.text, op.start, op.end, context=s.context_chars)
    token = op.op == "fixToken"
    result = await host.worker.fix(
        ex.text,
        start=op.start - ex.offset,
        end=op.end - ex.offset,
        max_fixes=1 if token else s.max_fixes,
        min_suspicion=0.0 if token else s.fix_threshold,
        min_likely=0.0 if token else s.fix_likely_threshold,
        language=snap.language,
        options=action_options(s),
        source=host.repositories.source(snap.uri, s.python_environment),
    )
    return within(snap.text, shift(result.edits, ex.offset), op.start, op.end), result, ex


def within(text: str, edits: list[Edit], start: int, end: int) -> list[Edit]:
    """The edits, kept inside [start, end): the user asked about that range only. An edit
    that reaches past an edge (a token widened past the selection) is trimmed when the
    part outside leaves the text as it was, and dropped otherwise."""
    out = []
    for e in edits:
        new, a, b = e.new_text, e.start, e.end
        if a < start:
            keep = text[a : min(start, b)]
            if not new.startswith(keep):
                continue
            new, a = new[len(keep) :], a + len(keep)
        if b > end:
            keep = text[max(end, a) : b]
            if not new.endswith(keep) or len(keep) > len(new):
                continue
            new, b = new[: len(new) - len(keep)], b - len(keep)
        if start <= a <= b <= end and (a < b or new):
            out.append(Edit(a, b, new))
    return out


OPERATIONS: dict[str, Callable[[Host, Snapshot, Op, OnStep], Awaitable[Done]]] = {
    "fill": _fill_holes,
    "rewrite": _rewrite,
    "docstring": _docstring,
    "fix": _fix,
    "fixToken": _fix,
}
NOTHING = {"fix": "nothing looked suspicious", "docstring": "the model wrote no docstring"}


async def compute_edits(
    host: Host, snap: Snapshot, op: Op, progress: WorkProgress
) -> tuple[list[Edit], str | None, Result, Excerpt]:
    """The operation's edits (str offsets in the snapshot's text), a note when it changed
    nothing or left a span as it was, the worker's result and the excerpt it was sent."""
    started = asyncio.get_running_loop().time()
    on_step = live_view(host, snap, op.op, progress)
    edits, result, ex = await OPERATIONS[op.op](host, snap, op, on_step)
    ms = (asyncio.get_running_loop().time() - started) * 1000
    tokens, passes = (result.stats.tokens, result.stats.nfe) if result.stats else (0, 0)
    host.log(
        f"{op.op}: {len(edits)} edits, {tokens} tokens, {passes} passes, sent "
        f"{len(ex.text)} of {len(snap.text)} characters, {ms:.0f} ms"
    )
    sure = [f"{f.confidence:.2f}" for f in result.fills if f.confidence is not None]
    if sure:
        host.log(f"{op.op}: confidence {', '.join(sure)}")
    rejected = [f.rejected for f in result.fills if f.rejected is not None]
    left = (
        (f"{len(rejected)} left as it was: every candidate failed the checks ({rejected[0]})")
        if rejected
        else None
    )
    if left:
        host.log(f"{op.op}: {left}")
    if not edits:
        return [], left or NOTHING.get(op.op, "the model left the text as it was"), result, ex
    return edits, left, result, ex
