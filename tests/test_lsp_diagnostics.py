"""Diagnostics over stdio: improbable tokens published after edits settle, their quick
fixes, and turning them on with workspace/didChangeConfiguration."""

from __future__ import annotations

import asyncio

import pytest
from lsp_fake_worker import LspFake, actions, fake_worker, lsp, open_doc, pick, run, whole
from lsprotocol import types

from diffusion_infill.lsp.positions import apply_text_edits

PUBLISH = types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS


@pytest.fixture(scope="module")
def worker():
    with fake_worker() as address:
        yield address


def change(client, uri: str, version: int, text: str) -> None:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


def test_suspicious_token_is_published_with_a_quick_fix(worker):
    text = "x = 2\ny = x - 1\n"

    async def go():
        async with lsp(worker, {"diagnostics": True, "diagnosticsDelay": 0}) as (client, _):
            published = client.protocol.wait_for_notification_async(PUBLISH)
            uri = open_doc(client, "diag.py", text)
            params = await asyncio.wait_for(published, 20)
            assert params.uri == uri and params.version == 1
            (diag,) = params.diagnostics
            assert diag.range == types.Range(
                start=types.Position(line=1, character=6), end=types.Position(line=1, character=7)
            )
            assert diag.severity == types.DiagnosticSeverity.Information
            assert diag.source == "infill" and "'+'" in diag.message
            # the client sends the diagnostic back with the code action request
            found = await actions(client, uri, diag.range, diagnostics=[diag])
            fix = pick(found, "quickfix.infill")
            assert fix.is_preferred and list(fix.diagnostics) == [diag]
            resolved = await client.code_action_resolve_async(fix)
            (edit,) = resolved.edit.changes[uri]
            assert edit.range == diag.range and edit.new_text == "+"
            assert apply_text_edits(text, [edit]) == "x = 2\ny = x + 1\n"

    run(go())


@pytest.mark.slow
def test_diagnostics_wait_for_edits_to_settle_and_follow_configuration(worker):
    text = "y = x + 1\n"

    async def go():
        async with lsp(worker) as (client, _):  # diagnostics are off by default
            uri = open_doc(client, "settle.py", text)
            await actions(client, uri, whole(text))  # a round trip: the open is handled
            assert uri not in client.diagnostics
            published = client.protocol.wait_for_notification_async(PUBLISH)
            client.workspace_did_change_configuration(
                types.DidChangeConfigurationParams(
                    settings={
                        "infill": {
                            "diagnostics": True,
                            "diagnosticsDelay": 1000,
                            "diagnosticsSeverity": "hint",
                        }
                    }
                )
            )
            first = await asyncio.wait_for(published, 20)
            assert first.version == 1 and not first.diagnostics
            # three quick edits: one run, for the last version
            published = client.protocol.wait_for_notification_async(PUBLISH)
            change(client, uri, 2, "y = x - 1\n")
            change(client, uri, 3, "y = x - 2\n")
            change(client, uri, 4, "y = x - 3\n")
            settled = await asyncio.wait_for(published, 20)
            assert settled.version == 4
            (diag,) = settled.diagnostics
            assert diag.severity == types.DiagnosticSeverity.Hint
            # turning them off clears what was published
            published = client.protocol.wait_for_notification_async(PUBLISH)
            client.workspace_did_change_configuration(
                types.DidChangeConfigurationParams(settings={"infill": {"diagnostics": False}})
            )
            cleared = await asyncio.wait_for(published, 20)
            assert cleared.uri == uri and not cleared.diagnostics

    run(go())


def test_a_quick_fix_for_an_older_version_is_not_offered(worker):
    text = "y = x - 1\n"

    async def go():
        async with lsp(worker, {"diagnostics": True, "diagnosticsDelay": 0}) as (client, _):
            published = client.protocol.wait_for_notification_async(PUBLISH)
            uri = open_doc(client, "old.py", text)
            (diag,) = (await asyncio.wait_for(published, 20)).diagnostics
            change(client, uri, 2, "# moved\n" + text)
            found = await actions(client, uri, diag.range, diagnostics=[diag])
            assert [a for a in found if a.kind == "quickfix.infill"] == []

    run(go())


def test_a_token_the_model_would_delete_gets_a_quick_fix_that_deletes_it():
    text = "x = 2\ny = x! + 1\n"  # the fake reads "!" as a token that should not be there

    async def go():
        with fake_worker(LspFake(wrong={"!": ""})) as address:
            async with lsp(address, {"diagnostics": True, "diagnosticsDelay": 0}) as (client, _):
                published = client.protocol.wait_for_notification_async(PUBLISH)
                uri = open_doc(client, "gone.py", text)
                (diag,) = (await asyncio.wait_for(published, 20)).diagnostics
                assert diag.range == types.Range(
                    start=types.Position(line=1, character=5),
                    end=types.Position(line=1, character=6),
                )
                assert "would delete it" in diag.message
                found = await actions(client, uri, diag.range, diagnostics=[diag])
                fix = pick(found, "quickfix.infill")
                assert "would delete it" in fix.title
                resolved = await client.code_action_resolve_async(fix)
                (edit,) = resolved.edit.changes[uri]
                assert edit.new_text == ""
                assert apply_text_edits(text, [edit]) == "x = 2\ny = x + 1\n"

    run(go())


def test_a_token_to_delete_is_marked_with_its_leading_space():
    from diffusion_infill.infill.core.results import TokenScore
    from diffusion_infill.lsp.diagnostics import marked_range

    text = "if x not in y:"
    at = text.index(" not")
    gone = TokenScore(at, at + 4, " not", 0.99, "", 0.95)
    swap = TokenScore(at, at + 4, " not", 0.99, " is", 0.95)
    assert text[slice(*marked_range(gone))] == " not"  # the fix deletes the space too
    assert text[slice(*marked_range(swap))] == "not"
