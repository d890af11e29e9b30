"""Code actions: Fill holes, Rewrite selection, Insert docstring, Fix selection, and the
quick fix of each improbable-token diagnostic.

Listing actions is cheap (no model): each action carries `data` naming the operation, the
document version and the character range it was offered for. The model runs in
`codeAction/resolve`, when the user picks one. Clients that cannot resolve an action's
`edit` get the edits computed at once, and only when they asked for actions explicitly
(an automatic request would run the model on every cursor move). What a picked action
does is lsp/operations.py's.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import asdict
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcContentModified

from diffusion_infill.infill.core.errors import InfillError, NoHolesError
from diffusion_infill.infill.core.spans import find_holes
from diffusion_infill.infill.core.suspicion import expectation
from diffusion_infill.infill.serve.protocol import Result
from diffusion_infill.lsp import diagnostics
from diffusion_infill.lsp.excerpt import Excerpt
from diffusion_infill.lsp.host import (
    Feature,
    Host,
    Snapshot,
    request_failed,
    require_current,
    workspace_edit,
)
from diffusion_infill.lsp.operations import (
    Op,
    action_options,
    compute_edits,
    docstring_request,
    find_docstring_slot,
    within,
)
from diffusion_infill.lsp.progress import WorkProgress
from diffusion_infill.lsp.runner_ups import (
    RUNNER_UP,
    Filled,
    alternative_edits,
    filled,
    runner_up_edit,
    runner_up_titles,
    sure,
    sure_title,
)

__all__ = [  # with what lsp/operations.py defines that tests and benchmarks import from here
    "APPLY",
    "DOCSTRING",
    "FILL_HOLES",
    "FIX_SELECTION",
    "KINDS",
    "LISTING_BUDGET",
    "OPS",
    "QUICK_FIX",
    "REWRITE",
    "CodeActions",
    "Op",
    "action_options",
    "apply_edit_supported",
    "docstring_request",
    "find_docstring_slot",
    "offered",
    "resolve_supported",
    "within",
]

log = logging.getLogger("infill.lsp")

FILL_HOLES = "refactor.rewrite.infill.fillHoles"
REWRITE = "refactor.rewrite.infill.rewriteSelection"
FIX_SELECTION = "refactor.rewrite.infill.fixSelection"
DOCSTRING = "refactor.rewrite.infill.insertDocstring"
RUNNER_UP_KIND = "refactor.rewrite.infill.runnerUp"
QUICK_FIX = "quickfix.infill"
KINDS = [
    types.CodeActionKind.QuickFix,
    types.CodeActionKind.RefactorRewrite,
    FILL_HOLES,
    REWRITE,
    FIX_SELECTION,
    DOCSTRING,
    RUNNER_UP_KIND,
    QUICK_FIX,
]

APPLY = "infill.applyAction"  # the command of an action a non-resolving client picks
LISTING_BUDGET = 1.5  # seconds a non-resolving client's listing may spend on edits

OPS = {
    "fill": FILL_HOLES,
    "rewrite": REWRITE,
    "docstring": DOCSTRING,
    "fix": FIX_SELECTION,
    "fixToken": QUICK_FIX,
    RUNNER_UP: RUNNER_UP_KIND,
}


def _wanted(kind: str, only: list[str] | None) -> bool:
    return only is None or any(kind == o or kind.startswith(o + ".") for o in only)


class CodeActions(Feature):
    """`textDocument/codeAction` (cheap: no model) and `codeAction/resolve` (the model)."""

    def __init__(self, host: Host) -> None:
        super().__init__(host)
        self.filled: dict[str, Filled] = {}  # per document: what Fill holes last made of it
        # per document: the version Fill holes last ran on and the action that fills it
        # with the runner-ups, which `eager` offers beside it
        self.seconds: dict[str, tuple[int | None, types.CodeAction]] = {}

    def closed(self, uri: str) -> None:
        self.filled.pop(uri, None)
        self.seconds.pop(uri, None)

    def register(self) -> None:
        self.host.feature(
            types.TEXT_DOCUMENT_CODE_ACTION,
            types.CodeActionOptions(code_action_kinds=KINDS, resolve_provider=True),
        )(self.code_actions)
        self.host.feature(types.CODE_ACTION_RESOLVE)(self.resolve)
        self.host.command(APPLY)(self.apply)

    async def code_actions(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        host = self.host
        snap = host.snapshot(params.text_document.uri)
        actions = offered(host, snap, params, self.filled.get(snap.uri))
        if resolve_supported(host):
            return actions
        if params.context.trigger_kind == types.CodeActionTriggerKind.Automatic:
            return []
        return await self.eager(actions, params.work_done_token)

    async def eager(
        self, actions: list[types.CodeAction], token: types.ProgressToken | None
    ) -> list[types.CodeAction]:
        """For a client that cannot resolve: the actions' edits, computed side by side
        within LISTING_BUDGET seconds; an action not done by then is offered as the
        command `infill.applyAction`, which computes it when picked and applies it with
        `workspace/applyEdit` (dropped when the client cannot apply edits)."""
        enabled = [a for a in actions if a.disabled is None]
        tasks = {
            asyncio.ensure_future(
                self.resolve(  # the request's progress token: one
                    a, show_errors=False, progress_token=token if i == 0 else None
                )
            ): a  # begin/end
            for i, a in enumerate(enabled)
        }
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
                    out.append(
                        types.CodeAction(
                            title=action.title,
                            kind=action.kind,
                            data=action.data,
                            diagnostics=action.diagnostics,
                            is_preferred=action.is_preferred,
                            command=types.Command(
                                title=action.title, command=APPLY, arguments=[action.data]
                            ),
                        )
                    )
            elif isinstance(task.exception(), JsonRpcContentModified):
                return []
            elif task.exception() is not None:  # one action failing leaves the others
                log.warning("code action %r failed: %s", action.title, task.exception())
                self.host.log(f"code action {action.title!r} failed: {task.exception()}")
            else:
                out.append(task.result())
                out += self._second(action)
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

    async def resolve(
        self,
        action: types.CodeAction,
        *,
        show_errors: bool = True,
        progress_token: types.ProgressToken | None = None,
    ) -> types.CodeAction:
        """Run the action's operation and attach its edit (for the version it was offered
        on)."""
        host = self.host
        op = Op.from_data(action.data)
        snap = host.snapshot(op.uri)
        if snap.version != op.version:
            raise JsonRpcContentModified("the document changed since the action was offered")
        if op.op == RUNNER_UP:
            return self._runner_up(action, snap, op)
        try:
            async with WorkProgress(
                host, action.title, token=progress_token, delay=host.settings.progress_delay / 1000
            ) as progress:
                edits, note, result, ex = await compute_edits(host, snap, op, progress)
        except InfillError as exc:
            raise request_failed(host, exc, action.title, show=show_errors) from None
        require_current(host, snap)
        if note and show_errors:
            host.show(f"{action.title}: {note}")
        action.edit = workspace_edit(host, snap, edits)
        if op.op == "fill":
            self._filled(action, snap, result, ex)
        return action

    def _second(self, action: types.CodeAction) -> list[types.CodeAction]:
        """The action that fills with the runner-ups, beside a Fill holes `action` just
        computed (none for another action, or without runner-ups)."""
        data = action.data if isinstance(action.data, dict) else {}
        if data.get("op") != "fill":
            return []
        version, second = self.seconds.pop(data.get("uri", ""), (None, None))
        return [second] if second is not None and version == data.get("version") else []

    def _filled(
        self, action: types.CodeAction, snap: Snapshot, result: Result, ex: Excerpt
    ) -> None:
        """After Fill holes: its title with the fills' confidence, what it makes of the
        document (for "use the runner-up"), and the action with the runner-ups."""
        action.title = sure_title(action.title, result.fills)
        done = filled(snap.text, result, ex)
        if done is None:
            self.filled.pop(snap.uri, None)
            self.seconds.pop(snap.uri, None)
            return
        self.filled[snap.uri] = done
        edits, used = alternative_edits(result, ex)
        self.seconds[snap.uri] = (
            snap.version,
            types.CodeAction(
                title=f"Infill: fill with the runner-up ({', '.join(sure(c) for c in used)} sure)",
                kind=FILL_HOLES,
                edit=workspace_edit(self.host, snap, edits),
                data=action.data,  # the document and version it answers, as Fill holes's
            ),
        )

    def _runner_up(self, action: types.CodeAction, snap: Snapshot, op: Op) -> types.CodeAction:
        """A "use the runner-up" action: its edit, without the model."""
        found = runner_up_edit(self.filled.get(snap.uri), snap.text, op.start, op.end)
        if found is None:
            raise JsonRpcContentModified("the fill this runner-up was offered for has changed")
        action.edit = workspace_edit(self.host, snap, [found])
        return action


def offered(
    host: Host, snap: Snapshot, params: types.CodeActionParams, done: Filled | None = None
) -> list[types.CodeAction]:
    """The actions for this range, without edits (cheap: no model); with `done` (what
    Fill holes last made of the document), its runner-ups where the range touches them."""
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
            add(
                f"Infill: fix {token.strip() or token!r} ({expectation(likely)})",
                "fixToken",
                start,
                end,
                diagnostics=[diag],
                is_preferred=True,
            )
    try:
        holes = find_holes(snap.text, s.hole_marker)
    except NoHolesError:
        holes = []
    except InfillError as exc:  # a malformed marker: say why there is nothing to fill
        holes = []
        if _wanted(FILL_HOLES, only):
            out.append(
                types.CodeAction(
                    title="Infill: fill holes",
                    kind=FILL_HOLES,
                    disabled=types.CodeActionDisabled(reason=str(exc)),
                )
            )
    if holes:
        n = len(holes)
        add(f"Infill: fill {n} hole{'s' if n > 1 else ''}", "fill", holes[0].start, holes[-1].end)
    for title, start, end in runner_up_titles(done, snap.text, a, b) if done else []:
        add(title, RUNNER_UP, start, end)
    if b > a:
        add("Infill: rewrite selection", "rewrite", a, b)
        add("Infill: fix selection", "fix", a, b)
    if snap.language == "python":
        slot = find_docstring_slot(snap.text, a, s.hole_marker, s.context_chars)
        if slot is not None:
            add(f"Infill: insert docstring for {slot.kind} {slot.name}", "docstring", a, a)
    return out


def apply_edit_supported(host: Host) -> bool:
    ws = host.client_capabilities.workspace
    return ws is not None and bool(ws.apply_edit)


def resolve_supported(host: Host) -> bool:
    td = host.client_capabilities.text_document
    ca = td.code_action if td is not None else None
    rs = ca.resolve_support if ca is not None else None
    return rs is not None and "edit" in rs.properties
