"""Confidence and runner-ups in the language server, over stdio with the fake worker: the
completion gate (completionMinConfidence), several items surest first (completionItems),
their bad values, and Fill holes' confidence in titles and its runner-up actions."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
from fakes import NULL, is_slot
from lsp_fake_worker import (
    LspFake,
    actions,
    at,
    capabilities,
    fake_worker,
    lsp,
    open_doc,
    open_in_workspace,
    pick,
    run,
)
from lsprotocol import types
from test_confidence import CALIBRATED
from test_lsp_completion import inline, pos, type_text

from diffusion_infill.lsp.positions import UTF16, apply_text_edits

FILL_HOLES = "refactor.rewrite.infill.fillHoles"
RUNNER_UP = "refactor.rewrite.infill.runnerUp"


class Calibrated(LspFake):
    """LspFake with confidence weights: each fill token at probability `sure`, and at the
    slots of `seconds` a second token (None: a null) with its probability."""

    def __init__(self, sure: float, seconds: dict[int, tuple[str | None, float]] | None = None):
        super().__init__()
        self.confidence = sure
        self.calibration = CALIBRATED
        self.seconds = seconds or {}

    def adjust(self, canvas: Sequence[int], p: int, row) -> None:
        if not is_slot(canvas[p]):
            return
        start = p
        while start > 0 and is_slot(canvas[start - 1]):
            start -= 1
        if p - start in self.seconds:
            ch, prob = self.seconds[p - start]
            row[NULL if ch is None else self.tok.fill_id(ch)] = math.log(prob)


@pytest.mark.parametrize(("floor", "shown"), [(0.6, False), (0.2, True), (0.0, True)])
def test_no_ghost_text_below_completion_min_confidence(floor, shown):
    # each token at 0.5: a confidence of about 0.3
    async def go():
        async with lsp(address, {"completionMinConfidence": floor}) as (client, _):
            uri = open_doc(client, "gate.py", "name = \n")
            got = await inline(client, uri, pos(0, 7))
            assert [i.insert_text for i in got] == (["'ada'"] if shown else [])

    with fake_worker(Calibrated(0.5)) as address:
        run(go())


def test_a_completion_offers_its_runner_ups_surest_first():
    # 'ada' with "b" second at slot 1: 'bda' is the runner-up
    fake = Calibrated(0.95, {1: ("b", 0.3)})

    async def go():
        async with lsp(address, {"completionMinConfidence": 0}) as (client, _):
            uri = open_doc(client, "items.py", "name = \n")
            got = await inline(client, uri, pos(0, 7))
            assert [i.insert_text for i in got] == ["'ada'", "'bda'"]
            assert all(i.range == types.Range(start=pos(0, 7), end=pos(0, 7)) for i in got)
        async with lsp(address, {"completionItems": 1}) as (client, _):
            uri = open_doc(client, "one.py", "name = \n")
            assert [i.insert_text for i in await inline(client, uri, pos(0, 7))] == ["'ada'"]

    with fake_worker(fake) as address:
        run(go())


def test_completion_items_for_clients_without_inline_completion():
    fake = Calibrated(0.95, {1: ("b", 0.3)})

    async def go():
        settings = {"completionMinConfidence": 0}
        async with lsp(address, settings, caps=capabilities(inline=False)) as (client, _):
            uri = open_doc(client, "list.py", "name = \n")
            got = await client.text_document_completion_async(
                types.CompletionParams(
                    text_document=types.TextDocumentIdentifier(uri=uri), position=pos(0, 7)
                )
            )
            assert [(i.label, i.sort_text) for i in got.items] == [("'ada'", "0"), ("'bda'", "1")]

    with fake_worker(fake) as address:
        run(go())


@pytest.mark.parametrize(
    "bad",
    [
        {"completionMinConfidence": 1.5},
        {"completionMinConfidence": -0.1},
        {"completionMinConfidence": "high"},
        {"completionMinConfidence": True},
        {"completionMinConfidence": None},
        {"completionItems": 0},
        {"completionItems": 2.5},
    ],
)
def test_a_bad_confidence_setting_is_shown_and_the_default_used(bad):
    async def go():
        async with lsp(address, bad) as (client, _):
            uri = open_doc(client, "bad.py", "name = \n")
            got = await inline(client, uri, pos(0, 7))
            assert got and got[0].insert_text == "'ada'"  # sure enough for the default
            (warning,) = [m for m in client.messages if m.type == types.MessageType.Warning]
            (name,) = bad
            assert f"infill.{name}" in warning.message and "using the default" in warning.message

    with fake_worker(Calibrated(0.99)) as address:
        run(go())


TEXT = "def add(a, b):\n    total = <mask>\n    return total\n"


def test_fill_holes_says_how_sure_it_is_and_offers_the_runner_up():
    # the fake fills `a + b`, with "-" second at slot 2: the runner-up is `a - b`
    fake = Calibrated(0.95, {2: ("-", 0.3)})

    async def go():
        async with lsp(address) as (client, _):
            uri = open_doc(client, "add.py", TEXT)
            action = pick(await actions(client, uri, at(TEXT, "<mask>")), FILL_HOLES)
            resolved = await client.code_action_resolve_async(action)
            title = resolved.title
            assert title.startswith("Infill: fill 1 hole (") and title.endswith("% sure)")
            (edit,) = resolved.edit.changes[uri]
            filled = apply_text_edits(TEXT, [edit], UTF16)
            assert "total = a + b" in filled
            type_text(client, uri, 2, edit.range.start, edit.new_text, edit.range.end)
            offered = await actions(client, uri, at(filled, "a + b"))
            runner = pick(offered, RUNNER_UP)
            assert runner.title.startswith("Infill: use the runner-up 'a - b' (")
            assert "instead of 'a + b'" in runner.title and runner.edit is None
            (swap,) = (await client.code_action_resolve_async(runner)).edit.changes[uri]
            assert apply_text_edits(filled, [swap], UTF16) == TEXT.replace("<mask>", "a - b")
            # elsewhere, or once the text is no longer what Fill holes made: not offered
            elsewhere = await actions(client, uri, at(filled, "def"))
            assert RUNNER_UP not in [a.kind for a in elsewhere]
            type_text(client, uri, 3, pos(2, 4), "# ")
            changed = await actions(client, uri, at(filled, "a + b"))
            assert RUNNER_UP not in [a.kind for a in changed]

    with fake_worker(fake) as address:
        run(go())


def test_a_client_that_cannot_resolve_gets_the_runner_up_beside_fill_holes():
    fake = Calibrated(0.95, {2: ("-", 0.3)})

    async def go():
        async with lsp(address, caps=capabilities(resolve=False)) as (client, _):
            uri = open_doc(client, "eager.py", TEXT)
            found = await actions(
                client,
                uri,
                at(TEXT, "<mask>"),
                trigger_kind=types.CodeActionTriggerKind.Invoked,
                only=[FILL_HOLES],  # the one action computed in the listing
            )
            fills = [a for a in found if a.kind == FILL_HOLES]
            assert [a.title.split(" (")[0] for a in fills] == [
                "Infill: fill 1 hole",
                "Infill: fill with the runner-up",
            ]
            assert all("% sure)" in a.title for a in fills)
            texts = [apply_text_edits(TEXT, a.edit.changes[uri], UTF16) for a in fills]
            assert texts == [TEXT.replace("<mask>", "a + b"), TEXT.replace("<mask>", "a - b")]
            # each edit says which document version it answers, the runner-up's too
            assert [(a.data["uri"], a.data["version"]) for a in fills] == [(uri, 1)] * 2

    with fake_worker(fake) as address:
        run(go())


# A line typed after code written before: the file's copy follows 24 characters of it
COPIED = "price = compute_total(items, tax_rate=0.2)\ncost = compute_total(items, \n"


@pytest.mark.parametrize(("floor", "items"), [(0.0, ["tax_rate=0.2)", "pass"]), (0.6, [])])
def test_a_completion_offers_the_code_that_follows_its_line_elsewhere_surest_first(floor, items):
    # the fake's fill ("pass", each token at 0.5: about 0.3) is less sure than the copy
    # (about 0.58, infill/core/copy_offers.py); above both, no ghost text
    async def go():
        async with lsp(address, {"completionMinConfidence": floor}) as (client, _):
            uri = open_doc(client, "copied.py", COPIED)
            got = await inline(client, uri, pos(1, 28))
            assert [i.insert_text for i in got] == items

    with fake_worker(Calibrated(0.5)) as address:
        run(go())


@pytest.mark.parametrize("context", [True, False])
def test_a_completion_offers_what_follows_its_line_in_another_file_of_the_workspace(
    tmp_path, context
):
    (tmp_path / "prices.py").write_text(
        "def net(items):\n    return compute_total(items, rate=1)\n"
    )
    text = "def gross(items):\n    total = compute_total(items, \n"
    doc = tmp_path / "gross.py"
    doc.write_text(text)

    async def go():
        settings = {"completionMinConfidence": 0, "repositoryContext": context}
        async with lsp(address, settings) as (client, _):
            uri = open_in_workspace(client, doc, text)
            got = await inline(client, uri, pos(1, 33))
            offers = [i.insert_text for i in got]
            assert offers == (["rate=1)", "pass"] if context else ["pass"])

    with fake_worker(Calibrated(0.5)) as address:
        run(go())


def test_a_completion_on_an_empty_line_offers_the_line_after_its_line_before_elsewhere():
    # the line before the cursor's is followed by `self.items = items` in the class above,
    # and there the line after that reads as the line after the cursor's: sure enough on
    # its own that the model is not asked
    text = (
        "class Cart:\n    def __init__(self, items):\n        self.items = items\n"
        "        self.total = 0\n\nclass Shop:\n    def __init__(self, items):\n"
        "        \n        self.total = 0\n"
    )
    fake = Calibrated(0.5)

    async def go():
        async with lsp(address, {"completionMinConfidence": 0.5}) as (client, _):
            uri = open_doc(client, "shop.py", text)
            got = await inline(client, uri, pos(7, 8))
            assert [i.insert_text for i in got] == ["self.items = items"]
            assert fake.calls == []
            # where the line after differs, the copy is less sure: the model is asked
            unsure = text.replace("        self.total = 0\n", "        self.n = 1\n", 1)
            uri = open_doc(client, "unsure.py", unsure)
            await inline(client, uri, pos(7, 8))
            assert fake.calls

    with fake_worker(fake) as address:
        run(go())


@pytest.mark.parametrize(
    ("calibrated", "floor", "asked"),
    [(True, None, False), (True, 0.1, True), (False, None, True)],
)
def test_an_empty_line_with_no_copy_asks_no_model_where_its_fill_alone_would_be_hidden(
    calibrated, floor, asked
):
    # nothing else in the file reads as the line before the cursor: no copy. At the
    # default floor a fill alone is never shown there, so the model is not asked; at a low
    # floor it is, and so it is by a worker whose fills carry no confidence
    text = "def area(r):\n    \n    return r\n"
    fake = Calibrated(0.99) if calibrated else LspFake()

    async def go():
        settings = {} if floor is None else {"completionMinConfidence": floor}
        async with lsp(address, settings) as (client, _):
            uri = open_doc(client, "alone.py", text)
            got = await inline(client, uri, pos(1, 4))
            assert bool(fake.calls) is asked
            assert bool(got) is asked
            if not asked:
                assert any("an empty line with no copy" in m.message for m in client.log_messages)

    with fake_worker(fake) as address:
        run(go())


@pytest.mark.parametrize(("floor", "slots"), [(None, 16), (0.1, 48)])
def test_an_empty_line_with_a_copy_asks_for_one_line_where_only_a_copy_can_be_shown(floor, slots):
    # the line after `def __init__(self, items):` elsewhere is a copy, too unsure to be
    # offered alone: above a floor of 0.2 only a fill that reads as it, a line, can be
    # shown, so the model is asked for one line (completionTokens, 16 slots); at a low
    # floor, for lines (multilineTokens, 48)
    text = (
        "class Cart:\n    def __init__(self, items):\n        self.items = items\n"
        "        self.total = 0\n\nclass Shop:\n    def __init__(self, items):\n"
        "        \n        self.n = 1\n"
    )
    fake = Calibrated(0.5)

    async def go():
        settings = {} if floor is None else {"completionMinConfidence": floor}
        async with lsp(address, settings) as (client, _):
            uri = open_doc(client, "shop.py", text)
            await inline(client, uri, pos(7, 8))
            canvases, _ = fake.calls[0]
            assert sum(map(is_slot, canvases[0])) == slots

    with fake_worker(fake) as address:
        run(go())
