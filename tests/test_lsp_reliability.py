"""The server answers every request and edits only what was asked, over stdio:
percent-escaped URIs, lone surrogates, malformed params, changes to unopened documents,
clients without resolve, edits clamped to the selection."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest
from lsp_fake_worker import (
    actions,
    at,
    capabilities,
    fake_worker,
    lsp,
    open_doc,
    pick,
    raw_request,
    run,
    whole,
)
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from benchmarks import fuzz_lsp
from diffusion_infill.infill.core.diff import Edit
from diffusion_infill.lsp.actions import within
from diffusion_infill.lsp.positions import UTF16, apply_text_edits

INVALID_PARAMS = -32602


@pytest.fixture(scope="module")
def worker():
    with fake_worker() as address:
        yield address


def test_percent_escaped_uris_are_open_documents(worker):
    text = "first = <mask>\n"

    async def go():
        async with lsp(worker) as (client, _):
            uri = open_doc(client, "caf%C3%A9%20%E4%B8%AD%F0%9F%8E%89.py", text)
            action = pick(
                await actions(client, uri, at(text, "first")), "refactor.rewrite.infill.fillHoles"
            )
            edit = (await client.code_action_resolve_async(action)).edit
            assert apply_text_edits(text, edit.changes[uri], UTF16) == "first = 1\n"

    run(go())


def test_lone_surrogates_in_text_are_no_internal_error(worker):
    text = "s = '\udbff'\nfirst = <mask>\n"

    async def go():
        async with lsp(worker) as (client, _):
            uri = open_doc(client, "surrogate.py", text)
            client.text_document_did_change(
                types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
                    content_changes=[
                        types.TextDocumentContentChangePartial(range=at(text, "s"), text="\udc00t")
                    ],
                )
            )
            text2 = "\udc00t = '\udbff'\nfirst = <mask>\n"
            action = pick(
                await actions(client, uri, at(text2, "first")), "refactor.rewrite.infill.fillHoles"
            )
            edit = (await client.code_action_resolve_async(action)).edit
            out = apply_text_edits(text2, edit.changes[uri], UTF16)
            assert out == "\udc00t = '\udbff'\nfirst = 1\n"

    run(go())


def test_malformed_requests_get_invalid_params(worker):
    async def go():
        async with lsp(worker) as (client, _):
            for method, params in [
                ("textDocument/codeAction", [1, 2]),
                ("textDocument/codeAction", {"textDocument": {"uri": 5}}),
                ("textDocument/completion", {}),
                ("codeAction/resolve", {"title": 3}),
            ]:
                with pytest.raises(JsonRpcException) as err:
                    await raw_request(client, method, params)
                assert err.value.code == INVALID_PARAMS, (method, params)
            # still serving
            uri = open_doc(client, "after.py", "first = <mask>\n")
            assert await actions(client, uri, at("first = <mask>\n", "first"))

    run(go())


def test_a_change_to_an_unopened_document_is_ignored_quietly(worker):
    async def go():
        async with lsp(worker) as (client, _):
            client.text_document_did_change(
                types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(
                        uri="file:///infill-test-documents/never.py", version=2
                    ),
                    content_changes=[types.TextDocumentContentChangeWholeDocument(text="x")],
                )
            )
            text = "first = <mask>\n"
            uri = open_doc(client, "opened.py", text)
            assert await actions(client, uri, at(text, "first"))
            assert not [m for m in client.messages if "Error" in m.message]

    run(go())


@pytest.mark.slow
def test_a_client_without_resolve_gets_a_listing_quickly(worker):
    text = "SLOW = <mask>\n"

    async def go():
        caps = capabilities(resolve=False)
        # checks off: the fake's fill (xxx...) is a name defined nowhere
        async with lsp(worker, {"checks": False}, caps=caps) as (client, _):
            applied: list[types.ApplyWorkspaceEditParams] = []

            @client.feature(types.WORKSPACE_APPLY_EDIT)
            def apply(params: types.ApplyWorkspaceEditParams):
                applied.append(params)
                return types.ApplyWorkspaceEditResult(applied=True)

            uri = open_doc(client, "slow.py", text)
            started = time.monotonic()
            rng = whole(text)
            found = await raw_request(
                client,
                "textDocument/codeAction",
                {  # typed: the
                    "textDocument": {"uri": uri},  # client would read a Command, not an action
                    "range": {
                        "start": {"line": 0, "character": 0},
                        "end": {"line": rng.end.line, "character": rng.end.character},
                    },
                    "context": {"diagnostics": [], "triggerKind": 1},
                },
            )
            took = time.monotonic() - started
            (action,) = [a for a in found if a["kind"] == "refactor.rewrite.infill.fillHoles"]
            assert "edit" not in action and action["command"]["command"] == "infill.applyAction"
            await client.workspace_execute_command_async(
                types.ExecuteCommandParams(
                    command=action["command"]["command"], arguments=action["command"]["arguments"]
                )
            )
            return took, applied

    took, applied = run(go())
    assert took < 5
    (params,) = applied
    (edits,) = params.edit.changes.values()
    assert apply_text_edits(text, edits, UTF16) == "SLOW = " + "x" * 40 + "\n"


def test_fix_edits_stay_inside_the_selection():
    text = "value = count + 1\n"
    a, b = text.index("count"), text.index("count") + 3  # "cou": a token cut by the edge
    widened = [Edit(a, a + 5, "total")]
    assert within(text, widened, a, b) == []  # would rewrite "nt", outside: declined
    same_tail = [Edit(a, a + 5, "amount")]  # ends like the text past the edge: trimmed
    assert within(text, same_tail, a, b + 2) == same_tail
    assert within(text, [Edit(a - 1, a + 3, " abc")], a, b) == [Edit(a, a + 3, "abc")]


def test_work_on_a_large_file_is_bounded_by_what_was_asked(worker):
    body = "".join(f"v{i} = {i}\n" for i in range(30_000))
    text = body + "result = old_value\n" + body  # 700,000 characters

    async def go():
        async with lsp(worker, {"checks": False}) as (client, _):  # the fake's names
            uri = open_doc(client, "large.py", text)
            started = time.monotonic()
            found = await actions(client, uri, at(text, "old_value"))
            listed = time.monotonic() - started
            action = pick(found, "refactor.rewrite.infill.rewriteSelection")
            edit = (await client.code_action_resolve_async(action)).edit
            sent = [m.message for m in client.log_messages if "sent" in m.message]
            return listed, edit.changes[uri], sent

    listed, edits, sent = run(go())
    assert listed < 5
    line = text[: text.index("old_value")].count("\n")
    assert edits and all(e.range.start.line == e.range.end.line == line for e in edits)
    (log,) = sent
    chars = int(log.split("sent ")[1].split(" of ")[0])
    assert chars < 30_000, log  # a window around the selection, not the file


def _children(pid: int) -> list[int]:
    """The ids of the processes whose parent is `pid` (read from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # a process that ended while the folder was read
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


@pytest.mark.slow
def test_shutdown_right_after_initialized_is_clean():
    """The server spawns its own worker at `initialized`; a shutdown while it is still
    starting (waiting for its socket) leaves no traceback."""

    async def go():
        figures = fuzz_lsp.Figures()
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "diffusion_infill.lsp.server",
            cwd=str(fuzz_lsp.ROOT),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        server = fuzz_lsp.Server(proc, figures)
        _, init = server.request(
            "initialize", {"processId": None, "rootUri": None, "capabilities": {}}
        )
        await asyncio.wait_for(init, 30)
        server.notify("initialized", {})
        deadline = time.monotonic() + 30
        while not _children(proc.pid):  # until the server has spawned its worker
            assert time.monotonic() < deadline, "no worker spawned in 30 s"
            await asyncio.sleep(0.01)  # a polling interval, not a wait for the event
        _, down = server.request("shutdown", None)
        await asyncio.wait_for(down, 30)
        server.notify("exit", None)
        await asyncio.wait_for(proc.wait(), 30)
        await asyncio.wait_for(server.err_reader, 10)
        return proc.returncode, server.stderr.decode(errors="replace")

    code, err = run(go())
    assert code == 0 and "Traceback" not in err and "Error" not in err, err
