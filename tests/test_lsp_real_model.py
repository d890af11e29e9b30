"""The language server with a real model in a worker it spawns itself (no workerAddress):
the shipped checkpoint when it is there, and a tiny random ModernBERT (conftest) passed
as `modelDir`, which exercises the same spawn and load path in seconds. Slow: torch."""

from __future__ import annotations

import asyncio

import pytest
from lsp_fake_worker import actions, at, lsp, open_doc, pick, run
from lsprotocol import types

from diffusion_infill.lsp.positions import apply_text_edits
from diffusion_infill.model.loading import default_model_dir

pytestmark = pytest.mark.slow
FILL = "refactor.rewrite.infill.fillHoles"


async def exercise(client, text: str) -> str:
    """Fill holes, then an inline completion; the filled text."""
    uri = open_doc(client, "real.py", text)
    found = await actions(client, uri, at(text, "<mask"))
    resolved = await asyncio.wait_for(client.code_action_resolve_async(pick(found, FILL)), 240)
    filled = apply_text_edits(text, resolved.edit.changes[uri])
    assert "<mask>" not in filled
    got = await client.text_document_inline_completion_async(
        types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=1, character=4),
            context=types.InlineCompletionContext(
                trigger_kind=types.InlineCompletionTriggerKind.Invoked
            ),
        )
    )
    assert got is None or all("\n" not in item.insert_text for item in got.items)
    return filled


def test_shipped_model():
    if not (default_model_dir() / "config.json").exists():
        pytest.skip(f"no shipped model at {default_model_dir()}")
    text = "def add(a, b):\n    return <mask>\n"

    async def go():
        # no workerAddress: the server spawns its own worker
        # (`python -m diffusion_infill.infill.serve.worker`)
        async with lsp(None, {"workerAddress": None}) as (client, _):
            filled = await exercise(client, text)
            assert filled.startswith("def add(a, b):\n    return ")

    run(go(), timeout=600)


def test_tiny_random_model_through_model_dir(tiny_model_dir):
    text = "def add(a, b):\n    return <mask:4>\n"

    async def go():
        async with lsp(
            None, {"workerAddress": None, "modelDir": str(tiny_model_dir), "device": "cpu"}
        ) as (client, _):
            await exercise(client, text)
            assert not [m for m in client.messages if m.type == types.MessageType.Warning]

    run(go(), timeout=600)
