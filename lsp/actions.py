"""Code actions: Fill holes, Rewrite selection, Insert docstring, Fix selection, and the
quick fix of each improbable-token diagnostic.

Listing actions is cheap (no model): each action carries `data` naming the operation, the
document version and the character range it was offered for. The model runs in
`codeAction/resolve`, when the user picks one. Clients that cannot resolve an action's
`edit` get the edits computed at once, and only when they asked for actions explicitly
(an automatic request would run the model on every cursor move).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcContentModified, JsonRpcInvalidParams

from diffusion_infill.infill.core.diff import Edit
from diffusion_infill.infill.core.errors import InfillError, NoHolesError
from diffusion_infill.infill.core.options import DEFAULT_CHECKS, SamplerOptions
from diffusion_infill.infill.core.spans import Span, find_holes
from diffusion_infill.infill.core.suspicion import expectation
from diffusion_infill.infill.serve.protocol import Result, Step
from diffusion_infill.lsp import diagnostics
from diffusion_infill.lsp.docstring import DocstringSlot, docstring_slot
from diffusion_infill.lsp.excerpt import Excerpt, definition_start, excerpt
from diffusion_infill.lsp.host import (
    Feature,
    Host,
    Snapshot,
    request_failed,
    require_current,
    workspace_edit,
)
from diffusion_infill.lsp.positions import shift
from diffusion_infill.lsp.progress import WorkProgress, live_view
from diffusion_infill.lsp.settings import Settings

log = logging.getLogger("infill.lsp")

FILL_HOLES = "refactor.rewrite.infill.fillHoles"
REWRITE = "refactor.rewrite.infill.rewriteSelection"
FIX_SELECTION = "refactor.rewrite.infill.fixSelection"
DOCSTRING = "refactor.rewrite.infill.insertDocstring"
QUICK_FIX = "quickfix.infill"
KINDS = [types.CodeActionKind.QuickFix, types.CodeActionKind.RefactorRewrite,
         FILL_HOLES, REWRITE, FIX_SELECTION, DOCSTRING, QUICK_FIX]

APPLY = "infill.applyAction"  # the command of an action a non-resolving client picks
LISTING_BUDGET = 1.5  # seconds a non-resolving client's listing may spend on edits

OPS = {"fill": FILL_HOLES, "rewrite": REWRITE, "docstring": DOCSTRING,
       "fix": FIX_SELECTION, "fixToken": QUICK_FIX}


@dataclass(frozen=True)
class Op:
    """What an action does, on which document version and characters (its `data`)."""

    op: str  # a key of OPS
    uri: str
    version: int | None
    start: int  # str offsets in that version of the document
    end: int

    @classmethod
    def from_data(cls, data: Any) -> Op:
        try:
            op = cls(**data)
            ok = (op.op in OPS and isinstance(op.uri, str) and 0 <= op.start <= op.end
                  and (op.version is None or isinstance(op.version, int)))
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise JsonRpcInvalidParams(f"not an infill code action: {data!r}")
        return op


def _wanted(kind: str, only: list[str] | None) -> bool:
    return only is None or any(kind == o or kind.startswith(o + ".") for o in only)


class CodeActions(Feature):
    """`textDocument/codeAction` (cheap: no model) and `codeAction/resolve` (the model)."""

    def register(self) -> None:
        self.host.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
            code_action_kinds=KINDS, resolve_provider=True))(self.code_actions)
        self.host.feature(types.CODE_ACTION_RESOLVE)(self.resolve)
        self.host.command(APPLY)(self.apply)

    async def code_actions(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        host = self.host
        snap = host.snapshot(params.text_document.uri)
        actions = offered(host, snap, params)
        if resolve_supported(host):
            return actions
        if params.context.trigger_kind == types.CodeActionTriggerKind.Automatic:
            return []
        return await self.eager(actions, params.work_done_token)

    async def eager(self, actions: list[types.CodeAction],
                    token: types.ProgressToken | None) -> list[types.CodeAction]:
        """For a client that cannot resolve: the actions' edits, computed side by side
        within LISTING_BUDGET seconds; an action not done by then is offered as the
        command `infill.applyAction`, which computes it when picked and applies it with
        `workspace/applyEdit` (dropped when the client cannot apply edits)."""
        enabled = [a for a in actions if a.disabled is None]
        tasks = {asyncio.ensure_future(self.resolve(  # the request's progress token: one
            a, show_errors=False, progress_token=token if i == 0 else None)): a  # begin/end
            for i, a in enumerate(enabled)}
        done: set[asyncio.Future[types.CodeAction]] = set()
        try:
            if tasks:
                done, _ = await asyncio.wait(tasks, timeout=LISTING_BUDGET)
        finally:
            for task in tasks:
                task.cancel()  # the late ones (and all of them if this request is cancelled)
        out = [a for a in actions if a.disabled is not None]
        for task, action in tasks.items():
            if task not in done or task.cancelled():
                if apply_edit_supported(self.host):
                    out.append(types.CodeAction(
                        title=action.title, kind=action.kind, data=action.data,
                        diagnostics=action.diagnostics, is_preferred=action.is_preferred,
                        command=types.Command(title=action.title, command=APPLY,
                                              arguments=[action.data])))
            elif isinstance(task.exception(), JsonRpcContentModified):
                return []
            elif task.exception() is not None:  # one action failing leaves the others
                log.warning("code action %r failed: %s", action.title, task.exception())
                self.host.log(f"code action {action.title!r} failed: {task.exception()}")
            else:
                out.append(task.result())
        return out

    async def apply(self, *args: Any) -> bool:
        """`infill.applyAction` [data]: compute the action now and apply its edit."""
        data = args[0] if len(args) == 1 else None
        data = data[0] if isinstance(data, list) and len(data) == 1 else data
        op = Op.from_data(data)
        action = types.CodeAction(title=f"Infill: {op.op}", kind=OPS[op.op], data=data)
        done = await self.resolve(action)
        if done.edit is None:
            return False
        return await self.host.apply_edit(done.edit, done.title)

    async def resolve(self, action: types.CodeAction, *, show_errors: bool = True,
                      progress_token: types.ProgressToken | None = None) -> types.CodeAction:
        """Run the action's operation and attach its edit (for the version it was offered
        on)."""
        host = self.host
        op = Op.from_data(action.data)
        snap = host.snapshot(op.uri)
        if snap.version != op.version:
            raise JsonRpcContentModified("the document changed since the action was offered")
        try:
            async with WorkProgress(host, action.title, token=progress_token,
                                    delay=host.settings.progress_delay / 1000) as progress:
                edits, note = await compute_edits(host, snap, op, progress)
        except InfillError as exc:
            raise request_failed(host, exc, action.title, show=show_errors) from None
        require_current(host, snap)
        if note and show_errors:
            host.show(f"{action.title}: {note}")
        action.edit = workspace_edit(host, snap, edits)
        return action


def offered(host: Host, snap: Snapshot, params: types.CodeActionParams
            ) -> list[types.CodeAction]:
    """The actions for this range, without edits (cheap: no model)."""
    s = host.settings
    a, b = snap.lines.span(params.range)
    only = params.context.only
    out: list[types.CodeAction] = []

    def add(title: str, op: str, start: int, end: int, **kw: Any) -> None:
        kind = OPS[op]
        if _wanted(kind, only):
            data = asdict(Op(op, snap.uri, snap.version, start, end))
            out.append(types.CodeAction(title=title, kind=kind, data=data, **kw))

    for diag in params.context.diagnostics:
        found = diagnostics.fix_range(snap, diag)
        if found is not None:
            start, end, token, likely = found
            add(f"Infill: fix {token.strip() or token!r} ({expectation(likely)})",
                "fixToken", start, end, diagnostics=[diag], is_preferred=True)
    try:
        holes = find_holes(snap.text, s.hole_marker)
    except NoHolesError:
        holes = []
    except InfillError as exc:  # a malformed marker: say why there is nothing to fill
        holes = []
        if _wanted(FILL_HOLES, only):
            out.append(types.CodeAction(title="Infill: fill holes", kind=FILL_HOLES,
                                        disabled=types.CodeActionDisabled(reason=str(exc))))
    if holes:
        n = len(holes)
        add(f"Infill: fill {n} hole{'s' if n > 1 else ''}", "fill", holes[0].start,
            holes[-1].end)
    if b > a:
        add("Infill: rewrite selection", "rewrite", a, b)
        add("Infill: fix selection", "fix", a, b)
    if snap.language == "python":
        slot = find_docstring_slot(snap.text, a, s.hole_marker, s.context_chars)
        if slot is not None:
            add(f"Infill: insert docstring for {slot.kind} {slot.name}", "docstring", a, a)
    return out


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
        ex = Excerpt(top, text[top:ex.end])  # the excerpt holds `at`: ex.end >= at
        slot = docstring_slot(ex.text, at - ex.offset, marker=marker)
    return slot.moved(ex.offset) if slot is not None else None


def apply_edit_supported(host: Host) -> bool:
    ws = host.client_capabilities.workspace
    return ws is not None and bool(ws.apply_edit)


def resolve_supported(host: Host) -> bool:
    td = host.client_capabilities.text_document
    ca = td.code_action if td is not None else None
    rs = ca.resolve_support if ca is not None else None
    return rs is not None and "edit" in rs.properties


# -- the operations: each asks the worker and returns (edits, result, excerpt sent) -----

Done = tuple[list[Edit], Result, Excerpt]
OnStep = Callable[[Step], None] | None


def action_options(s: Settings, *, race: bool = True) -> SamplerOptions:
    """The settings' sampler options; with `checks`, a fill that breaks the code loses to
    the next candidate, and with none passing it is left out (docs/ARCHITECTURE.md).
    `race`: holes race `lengths` allocations (measured on code; a docstring is prose)."""
    return s.sampler_options(checks=DEFAULT_CHECKS if s.checks else "",
                             lengths=s.lengths if race else 1)


async def _fill_holes(host: Host, snap: Snapshot, op: Op, on_step: OnStep) -> Done:
    s = host.settings
    holes = find_holes(snap.text, s.hole_marker)
    ex = excerpt(snap.text, holes[0].start, holes[-1].end, context=s.context_chars)
    result = await host.worker.fill(ex.text, marker=s.hole_marker, language=snap.language,
                                    options=action_options(s), on_step=on_step)
    return shift(result.edits, ex.offset), result, ex


async def _rewrite(host: Host, snap: Snapshot, op: Op, on_step: OnStep) -> Done:
    s = host.settings
    ex = excerpt(snap.text, op.start, op.end, context=s.context_chars)
    span = Span(op.start - ex.offset, op.end - ex.offset)
    result = await host.worker.fill(ex.text, spans=[span], marker=s.hole_marker,
                                    language=snap.language, options=action_options(s),
                                    on_step=on_step)
    return within(snap.text, shift(result.edits, ex.offset), op.start, op.end), result, ex


async def _docstring(host: Host, snap: Snapshot, op: Op, on_step: OnStep) -> Done:
    s = host.settings
    slot = find_docstring_slot(snap.text, op.start, s.hole_marker, s.context_chars)
    if slot is None:
        raise InfillError("there is no function or class without a docstring here")
    ex, span = docstring_request(snap.text, slot, s.context_chars)
    result = await host.worker.fill(ex.text, spans=[span], marker=s.hole_marker,
                                    language=snap.language,
                                    options=action_options(s, race=False), on_step=on_step)
    body = result.fills[0].text if result.fills else ""
    return ([slot.edit(body)] if slot.clean_body(body) else []), result, ex


def docstring_request(text: str, slot: DocstringSlot, context: int) -> tuple[Excerpt, Span]:
    """What Insert docstring sends: the excerpt around the slot of `text` with the empty
    docstring in place, and the empty span between its quotes (excerpt offsets)."""
    template, at = slot.template(text)
    ex = excerpt(template, at, at, context=context)
    return ex, Span(at - ex.offset, at - ex.offset)


async def _fix(host: Host, snap: Snapshot, op: Op, on_step: OnStep) -> Done:
    """"fix" (the selection's worst tokens) or "fixToken" (a diagnostic's token)."""
    s = host.settings
    ex = excerpt(snap.text, op.start, op.end, context=s.context_chars)
    token = op.op == "fixToken"
    result = await host.worker.fix(ex.text, start=op.start - ex.offset, end=op.end - ex.offset,
                                   max_fixes=1 if token else s.max_fixes,
                                   min_suspicion=0.0 if token else s.fix_threshold,
                                   min_likely=0.0 if token else s.fix_likely_threshold,
                                   language=snap.language, options=action_options(s))
    return within(snap.text, shift(result.edits, ex.offset), op.start, op.end), result, ex


def within(text: str, edits: list[Edit], start: int, end: int) -> list[Edit]:
    """The edits, kept inside [start, end): the user asked about that range only. An edit
    that reaches past an edge (a token widened past the selection) is trimmed when the
    part outside leaves the text as it was, and dropped otherwise."""
    out = []
    for e in edits:
        new, a, b = e.new_text, e.start, e.end
        if a < start:
            keep = text[a:min(start, b)]
            if not new.startswith(keep):
                continue
            new, a = new[len(keep):], a + len(keep)
        if b > end:
            keep = text[max(end, a):b]
            if not new.endswith(keep) or len(keep) > len(new):
                continue
            new, b = new[:len(new) - len(keep)], b - len(keep)
        if start <= a <= b <= end and (a < b or new):
            out.append(Edit(a, b, new))
    return out


OPERATIONS: dict[str, Callable[[Host, Snapshot, Op, OnStep], Awaitable[Done]]] = {
    "fill": _fill_holes, "rewrite": _rewrite, "docstring": _docstring, "fix": _fix,
    "fixToken": _fix,
}
NOTHING = {"fix": "nothing looked suspicious", "docstring": "the model wrote no docstring"}


async def compute_edits(host: Host, snap: Snapshot, op: Op, progress: WorkProgress
                        ) -> tuple[list[Edit], str | None]:
    """The operation's edits (str offsets in the snapshot's text), and a note when it
    changed nothing."""
    started = asyncio.get_running_loop().time()
    on_step = live_view(host, snap, op.op, progress)
    edits, result, ex = await OPERATIONS[op.op](host, snap, op, on_step)
    ms = (asyncio.get_running_loop().time() - started) * 1000
    tokens, passes = (result.stats.tokens, result.stats.nfe) if result.stats else (0, 0)
    host.log(f"{op.op}: {len(edits)} edits, {tokens} tokens, {passes} passes, sent "
             f"{len(ex.text)} of {len(snap.text)} characters, {ms:.0f} ms")
    rejected = [f.rejected for f in result.fills if f.rejected is not None]
    left = (f"{len(rejected)} left as it was: every candidate failed the checks "
            f"({rejected[0]})") if rejected else None
    if left:
        host.log(f"{op.op}: {left}")
    if not edits:
        return [], left or NOTHING.get(op.op, "the model left the text as it was")
    return edits, left
