"""Inline completion's deadline, over stdio: past it the request answers no items and the
worker's job is cancelled; the default follows the device the worker reports; a bad value
gets a message and the default. And newer work ends the older job within a step: a
`$/cancelRequest`, a newer request for the document, an edit of it.

The fake worker here takes `SLOW_STEP` seconds per pass over a canvas that holds SLOW; a
one-line completion takes 4 passes (`completionSteps`), so ~1.6 s, past the CPU default
(600 ms) and within the GPU one (2,000 ms)."""

from __future__ import annotations

import asyncio
import time

import pytest
from lsp_fake_worker import (
    REQUEST_CANCELLED,
    LspFake,
    capabilities,
    lsp,
    open_doc,
    run,
    watched_worker,
)
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from diffusion_infill.lsp.budgets import Machine, completion_deadline
from diffusion_infill.lsp.settings import Settings, parse

SLOW_STEP = 0.4  # seconds per pass over a SLOW canvas
MARGIN = 1.0  # seconds an answer may come after its deadline on a busy test machine
# SLOW's line, filler that keeps it out of the canvas of a completion at `name = `, which
# the fake fills at once with 'ada'
TEXT = "SLOW = \n" + "pad = 0\n" * 40 + "name = \n"
SLOW_AT = types.Position(line=0, character=7)
FAST_AT = types.Position(line=41, character=7)


def params(uri: str, at: types.Position) -> types.InlineCompletionParams:
    return types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=at,
        context=types.InlineCompletionContext(
            trigger_kind=types.InlineCompletionTriggerKind.Automatic
        ),
    )


async def inline(client, uri: str, at: types.Position) -> tuple[list[str], float]:
    """The offered texts and the seconds the answer took."""
    started = time.monotonic()
    got = await client.text_document_inline_completion_async(params(uri, at))
    took = time.monotonic() - started
    items = [] if got is None else got.items if isinstance(got, types.InlineCompletionList) else got
    return [item.insert_text for item in items], took


def is_slow(e) -> bool:
    return "SLOW" in e.text


def test_the_deadline_follows_the_setting_else_the_device():
    unset = Settings()
    assert completion_deadline(unset, Machine(), False) == 0.6  # not connected yet: a CPU's
    assert completion_deadline(unset, Machine("cpu"), False) == 0.6
    assert completion_deadline(unset, Machine("cpu"), True) == 1.2  # on an empty line
    for gpu in ("cuda", "cuda:1", "mps"):
        assert (
            completion_deadline(unset, Machine(gpu), False)
            == completion_deadline(unset, Machine(gpu), True)
            == 2.0
        )
    assert completion_deadline(Settings(completion_deadline=250), Machine("cuda:0"), True) == 0.25
    assert completion_deadline(Settings(completion_deadline=0), Machine("cpu"), False) is None
    for bad in (-1, "soon", 1.5, True, 10**7):
        settings, (warning,) = parse({"completionDeadline": bad})
        assert settings.completion_deadline is None  # the default
        assert warning.startswith("infill.completionDeadline must be a whole number")


def test_a_completion_past_its_deadline_answers_nothing_and_its_job_stops():
    async def go(address, worker):
        async with lsp(address) as (client, _):  # unset: the worker reports a CPU
            uri = open_doc(client, "late.py", TEXT)
            offered, took = await inline(client, uri, SLOW_AT)
            assert offered == []
            assert 0.59 <= took < 0.6 + MARGIN, took
            ended = await worker.wait_ended(is_slow)
            assert ended.outcome == "cancelled"
            assert ended.slow_passes < 4  # it did not run to its end
            # the worker serves the next request; the cancelled job took no more steps
            # than the one under way when the cancel came
            assert (await inline(client, uri, FAST_AT))[0] == ["'ada'"]
            assert worker.fake.slow_passes <= ended.slow_passes + 1
            assert any("no answer by its deadline" in m.message for m in client.log_messages)

    with watched_worker(LspFake(slow_pass=SLOW_STEP)) as (address, worker):
        run(go(address, worker))


def test_a_completion_past_its_deadline_is_an_empty_incomplete_list():
    # a client without inline completion: the client asks again at the next keystroke
    async def go(address, worker):
        async with lsp(address, caps=capabilities(inline=False)) as (client, _):
            uri = open_doc(client, "late.py", TEXT)
            started = time.monotonic()
            got = await client.text_document_completion_async(
                types.CompletionParams(
                    text_document=types.TextDocumentIdentifier(uri=uri), position=SLOW_AT
                )
            )
            took = time.monotonic() - started
            assert got.is_incomplete and not got.items
            assert took < 0.6 + MARGIN, took
            assert (await worker.wait_ended(is_slow)).outcome == "cancelled"

    with watched_worker(LspFake(slow_pass=SLOW_STEP)) as (address, worker):
        run(go(address, worker))


@pytest.mark.slow
def test_on_a_gpu_the_default_deadline_is_longer():
    # 4 passes of half SLOW_STEP: past the CPU default (600 ms) whatever the machine, and
    # 1.2 s within the GPU one (2,000 ms), room for a busy machine
    async def go(address):
        async with lsp(address) as (client, _):
            uri = open_doc(client, "gpu.py", TEXT)
            offered, took = await inline(client, uri, SLOW_AT)
            assert offered and offered[0].startswith("xxx"), (offered, took)
            assert took >= 4 * SLOW_STEP / 2, took  # it did outlast the CPU default

    with watched_worker(LspFake(slow_pass=SLOW_STEP / 2, device="cuda:0")) as (address, _):
        run(go(address))


@pytest.mark.slow
def test_a_bad_deadline_gets_a_message_and_the_default_and_zero_means_none():
    async def go(address, worker):
        async with lsp(address, {"completionDeadline": "soon"}) as (client, _):
            uri = open_doc(client, "bad.py", TEXT)
            offered, took = await inline(client, uri, SLOW_AT)  # the default: 600 ms
            assert offered == [] and took < 0.6 + MARGIN, took
            # the message went out at `initialized`, before this answer
            (warning,) = [m for m in client.messages if m.type == types.MessageType.Warning]
            assert "infill.completionDeadline" in warning.message
            assert (await worker.wait_ended(is_slow)).outcome == "cancelled"
            client.workspace_did_change_configuration(
                types.DidChangeConfigurationParams(settings={"infill": {"completionDeadline": 0}})
            )
            offered, took = await inline(client, uri, SLOW_AT)  # no deadline: the model's
            assert offered and offered[0].startswith("xxx"), (offered, took)
            assert (await worker.wait_ended(is_slow)).outcome == "answered"

    with watched_worker(LspFake(slow_pass=SLOW_STEP)) as (address, worker):
        run(go(address, worker))


@pytest.mark.parametrize("newer", ["$/cancelRequest", "a newer request", "an edit"])
def test_newer_work_ends_the_older_job_within_a_step(newer):
    async def go(address, worker):
        # no deadline: what ends the job is the newer work
        async with lsp(address, {"liveView": True, "completionDeadline": 0}) as (client, _):
            uri = open_doc(client, "newer.py", TEXT)
            step = client.protocol.wait_for_notification_async("infill/denoiseStep")
            older = client.protocol.send_request(
                types.TEXT_DOCUMENT_INLINE_COMPLETION, params(uri, SLOW_AT), msg_id=777
            )
            await asyncio.wait_for(step, 20)  # the job runs in the worker
            if newer == "$/cancelRequest":
                client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=777))
            elif newer == "an edit":
                client.text_document_did_change(
                    types.DidChangeTextDocumentParams(
                        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
                        content_changes=[
                            types.TextDocumentContentChangePartial(
                                range=types.Range(start=SLOW_AT, end=SLOW_AT), text="1"
                            )
                        ],
                    )
                )
            fast = asyncio.ensure_future(inline(client, uri, FAST_AT))  # a newer request
            ended = await worker.wait_ended(is_slow)
            assert ended.outcome == "cancelled"
            with pytest.raises(JsonRpcException) as cancelled:
                await asyncio.wait_for(asyncio.wrap_future(older), 20)
            assert cancelled.value.code == REQUEST_CANCELLED
            assert (await asyncio.wait_for(fast, 20))[0] == ["'ada'"]
            assert worker.fake.slow_passes <= ended.slow_passes + 1

    with watched_worker(LspFake(slow_pass=SLOW_STEP)) as (address, worker):
        run(go(address, worker))
