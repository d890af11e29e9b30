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
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.exceptions import JsonRpcContentModified, JsonRpcInvalidParams

from infill.core.diff import Edit
from infill.core.errors import InfillError, NoHolesError
from infill.core.spans import Span, find_holes
from infill.serve.protocol import Result
from lsp import diagnostics
from lsp.docstring import DocstringSlot, docstring_slot
from lsp.engine import EngineError
from lsp.excerpt import excerpt
from lsp.positions import shift
from lsp.progress import WorkProgress, live_view

if TYPE_CHECKING:
    from lsp.server import InfillServer, Snapshot

log = logging.getLogger("infill.lsp")

FILL_HOLES = "refactor.rewrite.infill.fillHoles"
REWRITE = "refactor.rewrite.infill.rewriteSelection"
FIX_SELECTION = "refactor.rewrite.infill.fixSelection"
DOCSTRING = "refactor.rewrite.infill.insertDocstring"
QUICK_FIX = "quickfix.infill"
KINDS = [types.CodeActionKind.QuickFix, types.CodeActionKind.RefactorRewrite,
         FILL_HOLES, REWRITE, FIX_SELECTION, DOCSTRING, QUICK_FIX]

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


def offered(ls: InfillServer, snap: Snapshot, params: types.CodeActionParams
            ) -> list[types.CodeAction]:
    """The actions for this range, without edits (cheap: no model)."""
    s = ls.settings
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
            add(f"Infill: fix {token!r} (the model expects {likely.strip() or likely!r})",
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
    every cursor move, and parsing a 20,000-line file would hold the event loop."""
    ex = excerpt(text, at, at, context=context)
    slot = docstring_slot(ex.text, at - ex.offset, marker=marker)
    return slot.moved(ex.offset) if slot is not None else None


def resolve_supported(ls: InfillServer) -> bool:
    td = ls.client_capabilities.text_document
    ca = td.code_action if td is not None else None
    rs = ca.resolve_support if ca is not None else None
    return rs is not None and "edit" in rs.properties


async def code_actions(ls: InfillServer, params: types.CodeActionParams
                       ) -> list[types.CodeAction]:
    snap = ls.snapshot(params.text_document.uri)
    actions = offered(ls, snap, params)
    if resolve_supported(ls):
        return actions
    if params.context.trigger_kind == types.CodeActionTriggerKind.Automatic:
        return []
    out = []
    for action in actions:
        if action.disabled is not None:
            out.append(action)
            continue
        try:
            out.append(await resolve(ls, action, show_errors=False,
                                     progress_token=params.work_done_token))
        except JsonRpcContentModified:
            return []
        except Exception as exc:  # one action failing leaves the others
            log.info("code action %r failed: %s", action.title, exc)
    return out


async def resolve(ls: InfillServer, action: types.CodeAction, *, show_errors: bool = True,
                  progress_token: types.ProgressToken | None = None) -> types.CodeAction:
    """Run the action's operation and attach its edit (for the version it was offered on)."""
    op = Op.from_data(action.data)
    snap = ls.snapshot(op.uri)
    if snap.version != op.version:
        raise JsonRpcContentModified("the document changed since the action was offered")
    try:
        async with WorkProgress(ls, action.title, token=progress_token,
                                delay=ls.settings.progress_delay / 1000) as progress:
            edits, note = await run(ls, snap, op, progress)
    except (InfillError, EngineError) as exc:
        raise ls.fail(exc, action.title, show=show_errors) from None
    ls.check_current(snap)
    if note and show_errors:
        ls.show(f"{action.title}: {note}")
    action.edit = ls.workspace_edit(snap, edits)
    return action


async def run(ls: InfillServer, snap: Snapshot, op: Op, progress: WorkProgress
              ) -> tuple[list[Edit], str | None]:
    """The operation's edits (str offsets in the snapshot's text), and a note when it
    changed nothing."""
    s = ls.settings
    text = snap.text
    on_step = live_view(ls, snap, op.op, progress)
    options = s.sampler_options()
    started = asyncio.get_running_loop().time()
    result: Result
    if op.op == "fill":
        holes = find_holes(text, s.hole_marker)
        ex = excerpt(text, holes[0].start, holes[-1].end, context=s.context_chars)
        result = await ls.engine.fill(ex.text, marker=s.hole_marker, language=snap.language,
                                      options=options, on_step=on_step)
        edits = shift(result.edits, ex.offset)
    elif op.op == "rewrite":
        ex = excerpt(text, op.start, op.end, context=s.context_chars)
        span = Span(op.start - ex.offset, op.end - ex.offset)
        result = await ls.engine.fill(ex.text, spans=[span], marker=s.hole_marker,
                                      language=snap.language, options=options,
                                      on_step=on_step)
        edits = shift(result.edits, ex.offset)
    elif op.op == "docstring":
        slot = find_docstring_slot(text, op.start, s.hole_marker, s.context_chars)
        if slot is None:
            raise InfillError("there is no function or class without a docstring here")
        template, at = slot.template(text)
        ex = excerpt(template, at, at, context=s.context_chars)
        result = await ls.engine.fill(ex.text, spans=[Span(at - ex.offset, at - ex.offset)],
                                      marker=s.hole_marker, language=snap.language,
                                      options=options, on_step=on_step)
        body = result.fills[0].text if result.fills else ""
        if not slot.clean_body(body):
            return [], "the model wrote no docstring"
        edits = [slot.edit(body)]
    else:  # "fix" (the selection's worst tokens) or "fixToken" (a diagnostic's token)
        ex = excerpt(text, op.start, op.end, context=s.context_chars)
        token = op.op == "fixToken"
        result = await ls.engine.fix(ex.text, start=op.start - ex.offset,
                                     end=op.end - ex.offset,
                                     max_fixes=1 if token else s.max_fixes,
                                     min_suspicion=0.0 if token else s.fix_threshold,
                                     language=snap.language, options=options)
        edits = shift(result.edits, ex.offset)
    ms = (asyncio.get_running_loop().time() - started) * 1000
    tokens, passes = (result.stats.tokens, result.stats.nfe) if result.stats else (0, 0)
    ls.trace(f"{op.op}: {len(edits)} edits, {tokens} tokens, {passes} passes, sent "
             f"{len(ex.text)} of {len(text)} characters, {ms:.0f} ms")
    if not edits:
        return [], ("nothing looked suspicious" if op.op == "fix"
                    else "the model left the text as it was")
    return edits, None
