"""Fill-in-the-middle over stdio: inline completion (single- and multi-line), completion
for clients without it, supersession, $/cancelRequest reaching the worker, stale results."""

from __future__ import annotations

import asyncio
import threading

import pytest
from lsp_fake_worker import (
    REQUEST_CANCELLED,
    LspFake,
    capabilities,
    fake_worker,
    lsp,
    open_doc,
    run,
    watched_worker,
)
from lsprotocol import types
from pygls.exceptions import JsonRpcException


@pytest.fixture(scope="module")
def worker():
    with fake_worker() as address:
        yield address


def pos(line: int, character: int) -> types.Position:
    return types.Position(line=line, character=character)


def inline_params(uri: str, position: types.Position) -> types.InlineCompletionParams:
    return types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=position,
        context=types.InlineCompletionContext(
            trigger_kind=types.InlineCompletionTriggerKind.Automatic
        ),
    )


async def inline(client, uri: str, position: types.Position) -> list[types.InlineCompletionItem]:
    got = await client.text_document_inline_completion_async(inline_params(uri, position))
    if got is None:
        return []
    return list(got.items if isinstance(got, types.InlineCompletionList) else got)


def test_inline_completion_is_one_line_at_the_cursor(worker):
    text = "def f(compute):\n    value = \n    return value\n"

    async def go():
        async with lsp(worker) as (client, init):
            assert init.capabilities.inline_completion_provider is not None
            uri = open_doc(client, "inline.py", text)
            (item,) = await inline(client, uri, pos(1, 12))
            # the fake fills "compute()\nextra = 1": only the first line is offered
            assert item.insert_text == "compute()"
            assert item.range == types.Range(start=pos(1, 12), end=pos(1, 12))

    run(go())


@pytest.mark.parametrize(
    ("text", "at", "expected"),
    [
        # the fake writes "a, b)\nnext": the `)` is the one after the cursor, not the fill's
        ("args = run()\n", pos(0, 11), "a, b"),
        # the fake writes "x, y)" and ends: that `)` closes nothing the fill opened
        ("call = go()\n", pos(0, 10), "x, y"),
        # on an empty line (the next line of a block) the completion may span lines
        ("def multi():\n    \n", pos(1, 4), "a = 1\n    return a"),
        # the fake writes "log(x)" three times: the fill ends where it loops
        ("def loop():\n    \n", pos(1, 4), "log(x)"),
        # the fake writes "a = 1", blank lines, then "b = 2": the block ends at a blank line
        ("def block():\n    \n", pos(1, 4), "a = 1"),
    ],
    ids=[
        "in-line: ends before the code it writes again",
        "in-line: ends before a closing bracket it never opened",
        "empty line: spans lines",
        "empty line: ends before a line written again",
        "empty line: ends at a blank line",
    ],
)
def test_inline_completion_offers(worker, text, at, expected):
    async def go():
        async with lsp(worker) as (client, _):
            uri = open_doc(client, "offers.py", text)
            (item,) = await inline(client, uri, at)
            assert item.insert_text == expected

    run(go())


def test_completion_for_clients_without_inline_completion(worker):
    text = "x = fo\n"

    async def go():
        async with lsp(worker, caps=capabilities(inline=False)) as (client, init):
            assert init.capabilities.completion_provider is not None
            uri = open_doc(client, "complete.py", text)
            got = await client.text_document_completion_async(
                types.CompletionParams(
                    text_document=types.TextDocumentIdentifier(uri=uri), position=pos(0, 6)
                )
            )
            assert got.is_incomplete
            (item,) = got.items
            # the word typed so far is part of the edit, so the client's filter keeps it
            assert item.label == "foo(1)" and item.filter_text == "foo(1)"
            assert item.text_edit.new_text == "foo(1)"
            assert item.text_edit.range == types.Range(start=pos(0, 4), end=pos(0, 6))
            # typing the offer's next character: the rest of it, without the model
            asked = (await counters(client))["requests"]
            type_text(client, uri, 2, pos(0, 6), "o")
            got = await client.text_document_completion_async(
                types.CompletionParams(
                    text_document=types.TextDocumentIdentifier(uri=uri), position=pos(0, 7)
                )
            )
            (item,) = got.items
            assert item.text_edit.new_text == "foo(1)"
            assert item.text_edit.range == types.Range(start=pos(0, 4), end=pos(0, 7))
            assert (await counters(client))["requests"] == asked

    run(go())


def test_cancel_request_stops_the_worker_job(worker):
    text = "SLOW = \nname = \n"

    async def go():
        async with lsp(worker, {"liveView": True}) as (client, _):
            uri = open_doc(client, "cancel.py", text)
            step = client.protocol.wait_for_notification_async("infill/denoiseStep")
            future = client.protocol.send_request(
                types.TEXT_DOCUMENT_INLINE_COMPLETION, inline_params(uri, pos(0, 7)), msg_id=4242
            )
            await asyncio.wait_for(step, 20)  # the fill is running in the worker
            client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=4242))
            with pytest.raises(JsonRpcException) as cancelled:
                await asyncio.wait_for(asyncio.wrap_future(future), 20)
            assert cancelled.value.code == REQUEST_CANCELLED
            # The server still answers, and the worker has dropped the slow job: the
            # cancel went out before the fill below, which takes more than one step.
            (item,) = await inline(client, uri, pos(1, 7))
            assert item.insert_text == "'ada'"
            info = await client.workspace_execute_command_async(
                types.ExecuteCommandParams(command="infill.workerInfo")
            )
            assert info["counters"]["active"] == 0

    run(go())


def test_a_new_request_supersedes_the_running_one(worker):
    text = "SLOW = \nname = \n"

    async def go():
        async with lsp(worker, {"liveView": True}) as (client, _):
            uri = open_doc(client, "supersede.py", text)
            step = client.protocol.wait_for_notification_async("infill/denoiseStep")
            first = client.protocol.send_request(
                types.TEXT_DOCUMENT_INLINE_COMPLETION, inline_params(uri, pos(0, 7))
            )
            await asyncio.wait_for(step, 20)
            (item,) = await inline(client, uri, pos(1, 7))
            assert item.insert_text == "'ada'"
            with pytest.raises(JsonRpcException) as superseded:
                await asyncio.wait_for(asyncio.wrap_future(first), 20)
            assert superseded.value.code == REQUEST_CANCELLED

    run(go())


def test_an_edit_drops_the_completion_in_flight(worker):
    text = "SLOW = \n"

    async def go():
        async with lsp(worker, {"liveView": True}) as (client, _):
            uri = open_doc(client, "edit.py", text)
            step = client.protocol.wait_for_notification_async("infill/denoiseStep")
            pending = client.protocol.send_request(
                types.TEXT_DOCUMENT_INLINE_COMPLETION, inline_params(uri, pos(0, 7))
            )
            await asyncio.wait_for(step, 20)
            client.text_document_did_change(
                types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
                    content_changes=[
                        types.TextDocumentContentChangePartial(
                            range=types.Range(start=pos(0, 7), end=pos(0, 7)), text="1"
                        )
                    ],
                )
            )
            with pytest.raises(JsonRpcException) as dropped:
                await asyncio.wait_for(asyncio.wrap_future(pending), 20)
            assert dropped.value.code == REQUEST_CANCELLED

    run(go())


async def counters(client) -> dict:
    info = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="infill.workerInfo")
    )
    return info["counters"]


def test_no_model_call_where_no_completion_belongs(worker):
    # "value = " has a target; but the cursor is in the middle of an identifier, or before
    # code that a fill would only repeat: nothing is offered and the worker is not asked
    text = "def f(compute):\n    value = compute\n    value = x + 1\n    value = \n"

    async def go():
        async with lsp(worker) as (client, _):
            uri = open_doc(client, "skip.py", text)
            before = await counters(client)
            assert await inline(client, uri, pos(1, 14)) == []  # comp|ute
            assert await inline(client, uri, pos(1, 12)) == []  # |compute
            assert await inline(client, uri, pos(2, 12)) == []  # |x + 1
            assert (await counters(client))["requests"] == before["requests"]
            # at the end of the line, or before closing brackets, the model is asked
            (item,) = await inline(client, uri, pos(3, 12))
            assert item.insert_text == "compute()"
            assert (await counters(client))["requests"] == before["requests"] + 1

    run(go())


def test_one_line_completion_keeps_to_its_pass_budget(worker):
    # the fake is never confident (p = 0.5): one token per pass, unless the budget's last
    # pass commits the rest at once
    text = "name = \n"

    async def go():
        for steps, most in ((64, None), (2, 2)):
            async with lsp(worker, {"completionSteps": steps}) as (client, _):
                uri = open_doc(client, "budget.py", text)
                before = await counters(client)
                (item,) = await inline(client, uri, pos(0, 7))
                assert item.insert_text == "'ada'"
                passes = (await counters(client))["passes"] - before["passes"]
                assert passes > 2 if most is None else passes <= most

    run(go())


class _Precision:
    """What a loaded model says it computes in (model/precision.py `Precision.name`)."""

    def __init__(self, name: str) -> None:
        self.name = name


# (device, what the worker says it computes in, which budgets it gets)
MACHINES = [
    ("cpu", "int8", "slow"),  # no bf16 instructions
    ("cpu", "fp32", "slow"),
    ("cpu", "bf16", "cpu"),
    ("cpu", "int8+bf16", "cpu"),  # int8 timed faster than the CPU's bf16
    ("cuda:0", "bf16", "accelerator"),
]


def _budgets(expected: dict[str, int], setting: int) -> list[tuple[str, str, int | None, int]]:
    """(device, precision, setting, expected budget) per machine with the setting unset,
    and a slow CPU with it set (the setting, when set, decides)."""
    return [(d, p, None, expected[k]) for d, p, k in MACHINES] + [("cpu", "int8", setting, setting)]


def _on_machine(device: str, precision: str) -> LspFake:
    """A fake worker that says it computes on `device` in `precision` ("int8+bf16": int8
    on a CPU with bf16 instructions)."""
    fake = LspFake(device=device)
    name, _, bf16 = precision.partition("+")
    fake.precision = _Precision(name)
    fake.cpu_bf16 = bool(bf16)
    return fake


@pytest.mark.parametrize(
    ("device", "precision", "setting", "most"),
    # while typing on a line already completed: 3 on a slow CPU
    _budgets({"slow": 3, "cpu": 4, "accelerator": 4}, setting=4),
)
def test_one_line_completion_passes_follow_the_workers_machine(device, precision, setting, most):
    fake = _on_machine(device, precision)
    settings = {"completionTypedThrough": False} | (
        {} if setting is None else {"completionSteps": setting}
    )

    async def passes(client, uri: str, position: types.Position) -> int:
        before = await counters(client)
        (item,) = await inline(client, uri, position)  # one token a pass, unless the
        assert item.insert_text  # budget's last pass commits the rest
        return (await counters(client))["passes"] - before["passes"]

    async def go():
        async with lsp(address, settings) as (client, _):
            info = await client.workspace_execute_command_async(
                types.ExecuteCommandParams(command="infill.workerInfo")
            )
            assert (info["device"], info["precision"]) == (device, precision.partition("+")[0])
            uri = open_doc(client, "machine.py", "name = \nvalue = \n")
            # a line's first completion: as many passes on every machine
            assert await passes(client, uri, pos(0, 7)) == (setting or 4)
            # the user types on that line: the machine's budget while typing
            type_text(client, uri, 2, pos(0, 7), "x")
            assert await passes(client, uri, pos(0, 8)) == most
            # another line: its first completion again
            assert await passes(client, uri, pos(1, 8)) == (setting or 4)

    with fake_worker(fake) as address:
        run(go())


@pytest.mark.parametrize(
    ("device", "precision", "setting", "window"),
    # more context where the machine can pay for it
    _budgets({"slow": 128, "cpu": 256, "accelerator": 384}, setting=200),
)
def test_one_line_completion_window_follows_the_workers_machine(device, precision, setting, window):
    fake = _on_machine(device, precision)
    settings = {} if setting is None else {"completionWindowTokens": setting}
    # far more code around the cursor than any window holds (one token per character)
    above = "".join(f"value_{i} = {i}\n" for i in range(60))
    below = "".join(f"other_{i} = {i}\n" for i in range(60))

    async def go():
        async with lsp(address, settings) as (client, _):
            uri = open_doc(client, "window.py", above + "name = \n" + below)
            first = len(fake.calls)
            (item,) = await inline(client, uri, pos(60, 7))
            assert item.insert_text == "'ada'"
            canvases = [c for canvases, _ in fake.calls[first:] for c in canvases]
            assert canvases and window - 8 <= max(map(len, canvases)) <= window

    with fake_worker(fake) as address:
        run(go())


def test_a_completion_asked_before_the_worker_greets_gets_the_workers_budgets():
    """The first completion after a start may be asked while the worker still loads its
    model: its window is the one for the machine the worker then says it has (a slow CPU:
    128 tokens), not the one for a machine not known yet (256)."""
    fake = _on_machine("cpu", "int8")
    greet = threading.Event()
    above = "".join(f"value_{i} = {i}\n" for i in range(60))
    below = "".join(f"other_{i} = {i}\n" for i in range(60))

    async def go():
        async with lsp(address) as (client, _):
            uri = open_doc(client, "window.py", above + "name = \n" + below)
            other = open_doc(client, "other.py", "def f(compute):\n    value = compute\n")
            asked = asyncio.ensure_future(inline(client, uri, pos(60, 7)))
            # answered without the worker, after the first request has made its ask
            assert await inline(client, other, pos(1, 14)) == []
            greet.set()
            (item,) = await asked
            assert item.insert_text == "'ada'"
            canvases = [c for canvases, _ in fake.calls for c in canvases]
            assert canvases and 120 <= max(map(len, canvases)) <= 128

    with watched_worker(fake) as (address, worker):
        welcome = worker.welcome

        def late_welcome():  # the worker's greeting waits until the request was made
            assert greet.wait(30)
            return welcome()

        worker.welcome = late_welcome
        run(go())


@pytest.mark.parametrize(
    ("device", "precision", "setting", "passes"),
    _budgets({"slow": 6, "cpu": 8, "accelerator": 8}, setting=8),  # an empty line's passes
)
def test_an_empty_lines_passes_follow_the_workers_machine(device, precision, setting, passes):
    fake = _on_machine(device, precision)  # never confident: the passes run to the budget
    settings = {"completionReuse": False} | ({} if setting is None else {"multilineSteps": setting})

    async def go():
        async with lsp(address, settings) as (client, _):
            uri = open_doc(client, "machine.py", "def multi():\n    \n")
            before = await counters(client)
            assert (await inline(client, uri, pos(1, 4)))[0].insert_text == "a = 1\n    return a"
            assert (await counters(client))["passes"] - before["passes"] == passes

    with fake_worker(fake) as address:
        run(go())


def test_completion_budget_settings_are_validated(worker):
    bad = {
        "completionSteps": 0,
        "completionWindowTokens": "big",
        "multilineSteps": -1,
        "multilineWindowTokens": 8,
    }

    async def go():
        async with lsp(worker, bad) as (client, _):
            uri = open_doc(client, "bad.py", "name = \n")
            (item,) = await inline(client, uri, pos(0, 7))  # the defaults are used
            assert item.insert_text == "'ada'"
            (warning,) = [m for m in client.messages if m.type == types.MessageType.Warning]
            for name in bad:
                assert f"infill.{name}" in warning.message

    run(go())


def test_keystrokes_carry_the_context_cache_over_per_document():
    # Each completion's first pass may reuse the entries its document's last completion
    # left under one key (the worker keeps them); another document has its own key; with
    # completionReuse off, no request carries anything over.
    fake = LspFake()

    def first_passes() -> list:
        hints = [h for call in fake.hints for h in call or () if h is not None and h.refresh]
        fake.hints.clear()
        return hints

    async def go(settings: dict) -> tuple[list, list]:
        async with lsp(address, settings) as (client, _):
            a = open_doc(client, "a.py", "name = \n")
            b = open_doc(client, "b.py", "name = \n")
            assert (await inline(client, a, pos(0, 7)))[0].insert_text == "'ada'"
            client.text_document_did_change(
                types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(uri=a, version=2),
                    content_changes=[
                        types.TextDocumentContentChangePartial(
                            range=types.Range(start=pos(0, 0), end=pos(0, 0)), text="#\n"
                        )
                    ],
                )
            )
            await inline(client, a, pos(1, 7))
            first_a = first_passes()
            await inline(client, b, pos(0, 7))
            return first_a, first_passes()

    with fake_worker(fake) as address:
        on_a, on_b = run(go({}))
        assert len(on_a) == 2 and on_a[0].carry is not None
        assert on_a[0].carry == on_a[1].carry and on_a[0].key != on_a[1].key
        assert len(on_b) == 1 and on_b[0].carry not in (None, on_a[0].carry)
        assert not set(fake.forgotten) & {on_a[0].carry, on_b[0].carry}
        off_a, off_b = run(go({"completionReuse": False}))
        assert off_a and all(h.carry is None for h in off_a + off_b)


def test_an_empty_lines_canvas_keeps_to_its_window_setting():
    # 60 lines above the block: the default canvas takes as many as the model reads,
    # multilineWindowTokens fewer (a faster pass on a slow CPU)
    text = "x = 1\n" * 60 + "def multi():\n    \n"
    fake = LspFake()

    async def widest(settings: dict) -> int:
        fake.calls.clear()
        async with lsp(address, settings) as (client, _):
            uri = open_doc(client, "window.py", text)
            (item,) = await inline(client, uri, pos(61, 4))
            assert item.insert_text == "a = 1\n    return a"
        return max(len(c) for canvases, _ in fake.calls for c in canvases)

    with fake_worker(fake) as address:
        assert run(widest({})) > 200
        assert run(widest({"multilineWindowTokens": 128})) <= 128


def test_an_empty_lines_completion_computes_its_context_once():
    # confidence 0.5 leaves the threshold unmet: the passes run to multilineSteps (8),
    # and only the first computes the context's keys/values (the rest reuse them)
    fake = LspFake()

    async def go() -> None:
        async with lsp(address, {"completionReuse": False}) as (client, _):
            uri = open_doc(client, "once.py", "def multi():\n    \n")
            (item,) = await inline(client, uri, pos(1, 4))
            assert item.insert_text == "a = 1\n    return a"

    with fake_worker(fake) as address:
        run(go())
    hints = [h for call in fake.hints for h in call or () if h is not None]
    assert len(hints) == 8  # one request, a pass each
    assert [h.refresh for h in hints] == [True] + [False] * 7


def type_text(client, uri: str, version: int, at: types.Position, text: str, end=None) -> None:
    """Replace [at, end) (empty: insert at `at`) with `text`, as an editor's keystroke."""
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(start=at, end=end or at), text=text
                )
            ],
        )
    )


@pytest.mark.parametrize("typed_through", [True, False])
def test_typing_what_was_offered_answers_with_its_rest_without_the_model(typed_through):
    # the fake completes `name = ` with 'ada'; typing its first characters answers with
    # the rest at once (the worker is not asked) unless the setting is off; a character
    # the offer did not have, a deletion, or an edit on another line asks the model again
    fake = LspFake()

    async def go():
        settings = {"completionTypedThrough": typed_through}
        async with lsp(address, settings) as (client, _):
            uri = open_doc(client, "typing.py", "name = \nother = 1\n")
            assert (await inline(client, uri, pos(0, 7)))[0].insert_text == "'ada'"
            asked = (await counters(client))["requests"]
            type_text(client, uri, 2, pos(0, 7), "'")
            type_text(client, uri, 3, pos(0, 8), "a")
            (item,) = await inline(client, uri, pos(0, 9))
            assert item.range == types.Range(start=pos(0, 9), end=pos(0, 9))
            if typed_through:
                assert item.insert_text == "da'"
                assert (await counters(client))["requests"] == asked
            else:  # the model again: the fake's fill, whatever comes before the cursor
                assert (await counters(client))["requests"] == asked + 1
                return
            type_text(client, uri, 4, pos(0, 9), "d")  # still the offer: 'ad|a'
            assert (await inline(client, uri, pos(0, 10)))[0].insert_text == "a'"
            assert (await counters(client))["requests"] == asked
            type_text(client, uri, 5, pos(0, 10), "x")  # 'adx: not what was offered
            await inline(client, uri, pos(0, 11))
            assert (await counters(client))["requests"] == asked + 1

    with fake_worker(fake) as address:
        run(go())


@pytest.mark.parametrize(
    ("edit", "cursor"),
    [
        ((pos(0, 6), "", pos(0, 7)), pos(0, 6)),  # a deletion before the cursor
        ((pos(1, 0), "#", None), pos(0, 8)),  # the offer's first character, and an edit below
        ((pos(0, 7), "'ada'", None), pos(0, 12)),  # all of the offer typed (pasted)
    ],
    ids=["deletion", "edit elsewhere", "all of it typed"],
)
def test_an_edit_that_is_not_typing_the_offer_asks_the_model(edit, cursor):
    fake = LspFake()

    async def go():
        async with lsp(address) as (client, _):
            uri = open_doc(client, "typing.py", "name = \nother = 1\n")
            assert (await inline(client, uri, pos(0, 7)))[0].insert_text == "'ada'"
            asked = (await counters(client))["requests"]
            start, text, end = edit
            type_text(client, uri, 2, start, text, end)
            if cursor == pos(0, 8):
                type_text(client, uri, 3, pos(0, 7), "'")
            await inline(client, uri, cursor)
            assert (await counters(client))["requests"] == asked + 1

    with fake_worker(fake) as address:
        run(go())
