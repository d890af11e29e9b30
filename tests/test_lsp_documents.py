"""Documents and settings over stdio: negotiated position encodings with emoji and CJK
next to a hole, a non-Python document, an empty one, a 20,000-line one, bad settings."""

from __future__ import annotations

import asyncio
import re

import pytest
from lsp_fake_worker import actions, at, capabilities, fake_worker, lsp, open_doc, pick, run
from lsprotocol import types

FILL = "refactor.rewrite.infill.fillHoles"
DOCSTRING = "refactor.rewrite.infill.insertDocstring"


@pytest.fixture(scope="module")
def worker():
    with fake_worker() as address:
        yield address


def units(s: str, encoding: str) -> int:
    if encoding == "utf-32":
        return len(s)
    if encoding == "utf-16":
        return len(s.encode("utf-16-le")) // 2
    return len(s.encode("utf-8"))


def pos(line: int, character: int) -> types.Position:
    return types.Position(line=line, character=character)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8", "utf-32"])
def test_emoji_and_cjk_on_the_line_of_a_hole(worker, encoding):
    head = 'label = "😀中文" + '
    text = f"{head}<mask>  # 🙂 尾\npre = '😀中'; name = \n"

    async def go():
        caps = capabilities(encodings=[encoding])
        async with lsp(worker, caps=caps) as (client, init):
            assert init.capabilities.position_encoding == encoding
            uri = open_doc(client, "enc.py", text)
            whole = types.Range(start=pos(0, 0), end=pos(0, 0))
            action = pick(await actions(client, uri, whole), FILL)
            edit = (await client.code_action_resolve_async(action)).edit
            (e,) = edit.changes[uri]
            start = units(head, encoding)
            assert e.range == types.Range(start=pos(0, start), end=pos(0, start + 6))
            assert e.new_text == "'ok'"
            # the cursor after "name = " on a line with emoji and CJK before it: the fake
            # fills "'ada'" only if the server found the right character
            column = units("pre = '😀中'; name = ", encoding)
            got = await client.text_document_inline_completion_async(
                types.InlineCompletionParams(
                    text_document=types.TextDocumentIdentifier(uri=uri),
                    position=pos(1, column),
                    context=types.InlineCompletionContext(
                        trigger_kind=types.InlineCompletionTriggerKind.Invoked
                    ),
                )
            )
            (item,) = got.items
            assert item.insert_text == "'ada'"
            assert item.range == types.Range(start=pos(1, column), end=pos(1, column))

    run(go())


def test_a_document_that_is_not_python(worker):
    text = "plain <mask>\ndef f():\n    pass\n"

    async def go():
        async with lsp(worker) as (client, _):
            uri = open_doc(client, "notes.txt", text, language="plaintext")
            found = await actions(client, uri, at(text, "pass"))
            assert [a for a in found if a.kind == DOCSTRING] == []  # Python only
            edit = (await client.code_action_resolve_async(pick(found, FILL))).edit
            (e,) = edit.changes[uri]
            assert e.new_text == "words"

    run(go())


def test_an_empty_document(worker):
    async def go():
        async with lsp(worker, {"diagnostics": True, "diagnosticsDelay": 0}) as (client, _):
            published = client.protocol.wait_for_notification_async(
                types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS
            )
            uri = open_doc(client, "empty.py", "")
            assert not (await asyncio.wait_for(published, 20)).diagnostics
            assert await actions(client, uri, types.Range(start=pos(0, 0), end=pos(0, 0))) == []
            got = await client.text_document_inline_completion_async(
                types.InlineCompletionParams(
                    text_document=types.TextDocumentIdentifier(uri=uri),
                    position=pos(0, 0),
                    context=types.InlineCompletionContext(
                        trigger_kind=types.InlineCompletionTriggerKind.Invoked
                    ),
                )
            )
            (item,) = got.items
            assert item.insert_text == "pass"  # the fake's answer to no context at all

    run(go())


def test_a_20000_line_file_sends_only_a_window(worker):
    lines = [f"v{i} = {i}" for i in range(20_000)]
    lines[10_000] = "deep_value = <mask>"
    text = "\n".join(lines) + "\n"

    async def go():
        async with lsp(worker) as (client, _):
            uri = open_doc(client, "big.py", text)
            found = await actions(
                client, uri, types.Range(start=pos(10_000, 0), end=pos(10_000, 0))
            )
            edit = (await client.code_action_resolve_async(pick(found, FILL))).edit
            (e,) = edit.changes[uri]
            assert e.range == types.Range(start=pos(10_000, 13), end=pos(10_000, 19))
            assert e.new_text == "42"
            sent = [m.message for m in client.log_messages if " sent " in m.message]
            n, total = map(int, re.search(r"sent (\d+) of (\d+)", sent[-1]).groups())
            assert total == len(text) and n < 50_000

    run(go())


def test_bad_settings_are_named_and_replaced_by_defaults(worker):
    text = "first = <mask>\n"
    bad = {
        "threshold": "high",
        "steps": 0,
        "diagnosticsSeverity": "loud",
        "bogus": 1,
        "holeMarker": "has space",
    }

    async def go():
        async with lsp(worker, bad) as (client, _):
            uri = open_doc(client, "settings.py", text)
            found = await actions(client, uri, at(text, "first"))  # defaults: <mask>
            (warning,) = [m for m in client.messages if m.type == types.MessageType.Warning]
            for name in (
                "infill.threshold",
                "infill.steps",
                "infill.diagnosticsSeverity",
                "infill.bogus",
                "infill.holeMarker",
            ):
                assert name in warning.message
            edit = (await client.code_action_resolve_async(pick(found, FILL))).edit
            assert edit.changes[uri][0].new_text == "1"
            client.workspace_did_change_configuration(
                types.DidChangeConfigurationParams(settings={"infill": {"maxTokens": -5}})
            )
            await actions(client, uri, at(text, "first"))  # a round trip
            assert "infill.maxTokens" in client.messages[-1].message

    run(go())
