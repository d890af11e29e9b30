"""Code actions over stdio: Fill holes, Rewrite selection, Insert docstring, Fix selection;
lazy resolve and eager edits; changes vs documentChanges; stale versions; progress."""

from __future__ import annotations

import asyncio

import pytest
from lsp_fake_worker import (
    CONTENT_MODIFIED,
    REQUEST_CANCELLED,
    actions,
    at,
    capabilities,
    fake_worker,
    lsp,
    open_doc,
    open_in_workspace,
    pick,
    run,
    whole,
)
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from diffusion_infill.lsp.positions import UTF16, apply_text_edits


@pytest.fixture(scope="module")
def worker():
    with fake_worker() as address:
        yield address


def applied(text: str, edit: types.WorkspaceEdit, uri: str) -> str:
    assert edit.changes is not None and edit.document_changes is None
    return apply_text_edits(text, edit.changes[uri], UTF16)


def test_fill_holes_is_offered_lazily_and_resolved(worker):
    text = "def add(a, b):\n    total = <mask>\n    return total\n"

    async def go():
        async with lsp(worker) as (client, init):
            caps = init.capabilities
            assert caps.code_action_provider.resolve_provider is True
            assert caps.completion_provider is None  # the client has inline completion
            uri = open_doc(client, "add.py", text)
            found = await actions(client, uri, at(text, "total"))
            action = pick(found, "refactor.rewrite.infill.fillHoles")
            assert action.edit is None and action.title == "Infill: fill 1 hole"
            resolved = await client.code_action_resolve_async(action)
            assert applied(text, resolved.edit, uri) == text.replace("<mask>", "a + b")
            (edit,) = resolved.edit.changes[uri]
            assert edit.range == at(text, "<mask>")  # minimal: the marker only

    run(go())


def test_two_holes_filled_jointly_with_document_changes(worker):
    text = "first = <mask>\nsecond = <mask:3>\n"

    async def go():
        async with lsp(worker, caps=capabilities(document_changes=True)) as (client, _):
            uri = open_doc(client, "two.py", text, version=7)
            action = pick(
                await actions(client, uri, at(text, "first")), "refactor.rewrite.infill.fillHoles"
            )
            assert action.title == "Infill: fill 2 holes"
            edit = (await client.code_action_resolve_async(action)).edit
            assert edit.changes is None
            (doc_edit,) = edit.document_changes
            assert doc_edit.text_document.uri == uri and doc_edit.text_document.version == 7
            assert apply_text_edits(text, doc_edit.edits) == "first = 1\nsecond = 2\n"

    run(go())


def test_a_line_start_hole_is_filled_as_a_whole_line(worker):
    text = "def f(x):\n<mask>\n"  # the fake writes `pass` where it has no target

    async def go():
        async with lsp(worker) as (client, _):
            uri = open_doc(client, "line.py", text)
            found = await actions(client, uri, at(text, "<mask>"))
            action = pick(found, "refactor.rewrite.infill.fillHoles")
            resolved = await client.code_action_resolve_async(action)
            assert applied(text, resolved.edit, uri) == "def f(x):\n    pass\n"

    run(go())


@pytest.mark.slow
def test_a_fill_that_fails_the_checks_is_left_out_by_default_and_says_why(worker):
    text = "def f():\n    return <mask>\n"  # the fake fills `x + 1`: x is defined nowhere

    async def go():
        async with lsp(worker) as (client, _):  # default settings: checks on
            uri = open_doc(client, "unknown.py", text)
            action = pick(
                await actions(client, uri, at(text, "<mask>")), "refactor.rewrite.infill.fillHoles"
            )
            edit = (await client.code_action_resolve_async(action)).edit
            assert not (edit and edit.changes and edit.changes.get(uri))
            message = client.messages[-1].message
            assert "left as it was: every candidate failed the checks" in message
            assert "x" in message
        async with lsp(worker, {"checks": False}) as (client, _):
            uri = open_doc(client, "unknown.py", text)
            action = pick(
                await actions(client, uri, at(text, "<mask>")), "refactor.rewrite.infill.fillHoles"
            )
            edit = (await client.code_action_resolve_async(action)).edit
            assert applied(text, edit, uri) == text.replace("<mask>", "x + 1")

    run(go())


def test_a_call_into_a_sibling_module_that_lacks_it_is_left_out(worker, tmp_path):
    # the server sends the document's path and workspace folder: the worker's jedi finds hp
    # (whose lines give the hole no copy: nothing in it follows `return `)
    (tmp_path / "hp.py").write_text("def ok():\n    pass\n")
    text = "import hp\n\n\ndef run_hp():\n    return <mask>\n"
    doc = tmp_path / "main.py"
    doc.write_text(text)

    async def go():
        async with lsp(worker) as (client, _):
            uri = open_in_workspace(client, doc, text)
            action = pick(
                await actions(client, uri, at(text, "<mask>")), "refactor.rewrite.infill.fillHoles"
            )
            edit = (await client.code_action_resolve_async(action)).edit
            # `hp.nope()` loses to the race's next length (the fake's `hp`); from the
            # server's working directory alone jedi could not find hp and would pass it
            assert applied(text, edit, uri) == text.replace("<mask>", "hp")

    run(go())


def test_rewrite_selection_returns_minimal_edits(worker):
    # new_value is defined: the checks (on by default) reject a fill with an unknown name
    text = "result = old_value\nprint(result)\nnew_value = 2\n"

    async def go():
        async with lsp(worker) as (client, _):
            uri = open_doc(client, "rw.py", text)
            found = await actions(client, uri, at(text, "old_value"))
            action = pick(found, "refactor.rewrite.infill.rewriteSelection")
            edit = (await client.code_action_resolve_async(action)).edit
            assert applied(text, edit, uri) == text.replace("result = old", "result = new")
            assert all(e.new_text != "new_value" for e in edit.changes[uri])  # only "new"

    run(go())


def test_rewrite_of_a_selected_line_keeps_its_indentation_and_line_break(worker):
    # the selection runs from column 0 through the line break, as an editor selects a
    # line: the model is asked for the code, the engine writes the indentation and break
    text = "def scale(x):\n    return x + x\n\n\nprint(scale(2))\n"

    async def go():
        async with lsp(worker) as (client, _):
            uri = open_doc(client, "line.py", text)
            line = types.Range(
                start=types.Position(line=1, character=0), end=types.Position(line=2, character=0)
            )
            action = pick(
                await actions(client, uri, line), "refactor.rewrite.infill.rewriteSelection"
            )
            edit = (await client.code_action_resolve_async(action)).edit
            assert applied(text, edit, uri) == text.replace("x + x", "2 * x")

    run(go())


async def with_docstring(client, uri: str, text: str, where: str) -> str:
    """`text` after its Insert docstring action at `where` is resolved and applied."""
    action = pick(
        await actions(client, uri, at(text, where)), "refactor.rewrite.infill.insertDocstring"
    )
    return applied(text, (await client.code_action_resolve_async(action)).edit, uri)


def test_insert_docstring_for_function_and_class(worker):
    text = "class Point:\n    x: int\n\n\ndef greet(name):\n    return 'hi ' + name\n"

    async def go():
        async with lsp(worker) as (client, _):
            uri = open_doc(client, "doc.py", text)
            found = await actions(client, uri, at(text, "return"))
            action = pick(found, "refactor.rewrite.infill.insertDocstring")
            assert action.title == "Infill: insert docstring for function greet"
            edit = (await client.code_action_resolve_async(action)).edit
            assert applied(text, edit, uri) == text.replace(
                "    return", '    """Say hello to name."""\n    return'
            )
            assert (await with_docstring(client, uri, text, "x: int")).startswith(
                'class Point:\n    """A point in the plane."""\n    x: int\n'
            )

    run(go())


def test_insert_docstring_of_several_lines(worker):
    # the empty docstring has code on both sides of its body: a docstring that takes lines
    # is text inside the string, not a broken line (the `line` check once refused it)
    text = "def area(w, h):\n    return w * h\n"

    async def go():
        async with lsp(worker) as (client, _):
            uri = open_doc(client, "area.py", text)
            assert await with_docstring(client, uri, text, "return") == (
                'def area(w, h):\n    """Return the area.\n\n    w times h, both in metres."""\n'
                "    return w * h\n"
            )

    run(go())


def test_insert_docstring_in_a_long_class(worker):
    # with a small context the excerpt's upper cut falls inside a method's docstring (the
    # assertion below makes sure); cut there, the class's prose parsed as code and the
    # docstring's lines as a broken line, and nothing was inserted
    methods = "".join(
        f'    def m{i}(self):\n        """Method {i}.\n\n        It returns {i}, '
        f'and says so\n        in a few lines of prose{"." * 9}\n        """\n'
        f"        return {i}\n\n"
        for i in range(30)
    )
    text = "class Big:\n" + methods + "    def surface(self):\n        return self.w * self.h\n"
    at_return = text.index("return self.w")
    raw_cut = text.rfind("\n", 0, at_return - 1000) + 1
    assert text[:raw_cut].count('"""') % 2 == 1  # the cut the excerpt used to make

    async def go():
        async with lsp(worker, {"contextChars": 1000}) as (client, _):
            uri = open_doc(client, "big.py", text)
            assert (await with_docstring(client, uri, text, "return self.w")).endswith(
                '    def surface(self):\n        """Return the surface.\n\n'
                '        In square metres."""\n        return self.w * self.h\n'
            )

    run(go())


def test_docstring_quote_style_and_same_line_body(worker):
    text = "def a():\n    '''A.'''\n\n\ndef shout(text):\n    return text.upper()\n"
    one = "def one(): return 1\n"

    async def go():
        async with lsp(worker) as (client, _):
            uri = open_doc(client, "q.py", text)
            assert "    '''Shout the text.'''\n    return text.upper()" in await with_docstring(
                client, uri, text, "return"
            )
            uri = open_doc(client, "one.py", one)
            assert (
                await with_docstring(client, uri, one, "return")
                == 'def one():\n    """Return one."""\n    return 1\n'
            )

    run(go())


def test_fix_selection_changes_only_the_suspicious_token(worker):
    text = "x = 2\ny = x - 1\n"

    async def go():
        async with lsp(worker) as (client, _):
            uri = open_doc(client, "fix.py", text)
            action = pick(
                await actions(client, uri, whole(text)), "refactor.rewrite.infill.fixSelection"
            )
            edit = (await client.code_action_resolve_async(action)).edit
            (e,) = edit.changes[uri]
            assert e.range == at(text, "-") and e.new_text == "+"
            clean = "x = 2\ny = x + 1\n"
            uri = open_doc(client, "clean.py", clean)
            action = pick(
                await actions(client, uri, whole(clean)), "refactor.rewrite.infill.fixSelection"
            )
            edit = (await client.code_action_resolve_async(action)).edit
            assert not edit.changes[uri]
            # the message was sent before the response: it is already here
            assert "nothing looked suspicious" in client.messages[-1].message

    run(go())


def test_clients_without_resolve_get_edits_at_once_when_they_ask(worker):
    text = "first = <mask>\n"

    async def go():
        async with lsp(worker, caps=capabilities(resolve=False)) as (client, _):
            uri = open_doc(client, "eager.py", text)
            found = await actions(
                client, uri, at(text, "first"), trigger_kind=types.CodeActionTriggerKind.Invoked
            )
            action = pick(found, "refactor.rewrite.infill.fillHoles")
            assert applied(text, action.edit, uri) == "first = 1\n"
            auto = await actions(
                client, uri, at(text, "first"), trigger_kind=types.CodeActionTriggerKind.Automatic
            )
            assert auto == []  # no model run on every cursor move

    run(go())


def test_only_filters_kinds_and_bad_markers_are_explained(worker):
    text = "a = <mask:0>\n"

    async def go():
        async with lsp(worker) as (client, _):
            uri = open_doc(client, "bad.py", text)
            found = await actions(client, uri, whole(text))
            fill = pick(found, "refactor.rewrite.infill.fillHoles")
            assert fill.disabled is not None and "1:5" in fill.disabled.reason
            only = await actions(client, uri, whole(text), only=["quickfix"])
            assert only == []

    run(go())


@pytest.mark.slow
def test_stale_result_is_dropped_and_live_view_streams(worker):
    text = "def SLOW_DOC():\n    return 1\n"

    async def go():
        async with lsp(worker, {"liveView": True}) as (client, _):
            uri = open_doc(client, "stale.py", text)
            action = pick(
                await actions(client, uri, at(text, "return")),
                "refactor.rewrite.infill.insertDocstring",
            )
            steps = client.protocol.wait_for_notification_async("infill/denoiseStep")
            pending = asyncio.ensure_future(client.code_action_resolve_async(action))
            step = await asyncio.wait_for(steps, 20)  # the fill is running
            assert (step.uri, step.version, step.operation) == (uri, 1, "docstring")
            assert "░" in step.spans[0].text
            client.text_document_did_change(
                types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
                    content_changes=[
                        types.TextDocumentContentChangeWholeDocument(text=text + "# edited\n")
                    ],
                )
            )
            with pytest.raises(JsonRpcException) as dropped:
                await asyncio.wait_for(pending, 30)
            assert dropped.value.code == CONTENT_MODIFIED
            # an action offered for version 1 is refused once the document is at 2
            with pytest.raises(JsonRpcException) as refused:
                await client.code_action_resolve_async(action)
            assert refused.value.code == CONTENT_MODIFIED

    run(go())


@pytest.mark.slow
def test_slow_resolve_reports_progress(worker):
    text = "def SLOW_DOC():\n    return 1\n"

    async def go():
        async with lsp(worker) as (client, _):
            uri = open_doc(client, "progress.py", text)
            action = pick(
                await actions(client, uri, at(text, "return")),
                "refactor.rewrite.infill.insertDocstring",
            )
            edit = (await client.code_action_resolve_async(action)).edit
            assert '"""' + "y" * 40 + '"""' in applied(text, edit, uri)
            (reports,) = client.progress_reports.values()
            assert isinstance(reports[0], types.WorkDoneProgressBegin)
            assert reports[0].title == action.title and reports[0].cancellable
            assert any(isinstance(r, types.WorkDoneProgressReport) for r in reports)
            assert isinstance(reports[-1], types.WorkDoneProgressEnd)

    run(go())


def test_cancelling_the_progress_cancels_the_request(worker):
    text = "def SLOW_DOC():\n    return 1\n"

    async def go():
        async with lsp(worker) as (client, _):
            uri = open_doc(client, "cancel_progress.py", text)
            action = pick(
                await actions(client, uri, at(text, "return")),
                "refactor.rewrite.infill.insertDocstring",
            )
            begun = client.protocol.wait_for_notification_async(types.PROGRESS)
            pending = asyncio.ensure_future(client.code_action_resolve_async(action))
            progress = await asyncio.wait_for(begun, 20)
            client.window_work_done_progress_cancel(
                types.WorkDoneProgressCancelParams(token=progress.token)
            )
            with pytest.raises(JsonRpcException) as cancelled:
                await asyncio.wait_for(pending, 20)
            assert cancelled.value.code == REQUEST_CANCELLED

    run(go())
