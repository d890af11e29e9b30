"""Copies offered at a completion (infill/core/copy_offers.py): what follows the code
before the cursor elsewhere in the file and in other files, and how sure each is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diffusion_infill.infill.core.copy_offers import (
    ITEM_WEIGHTS,
    LINE_WEIGHTS,
    WEIGHTS,
    completion_copies,
    copy_confidence,
    item_confidence,
    line_confidence,
)
from diffusion_infill.infill.core.copy_texts import NextLines, next_line_copies
from diffusion_infill.infill.core.snippets import Snippet
from diffusion_infill.lsp.offers import completion_items

TEXT = "price = compute_total(items, tax_rate=0.2)\ncost = compute_total(items, \n"
AT = TEXT.index("\n", 43)


def test_the_file_and_another_file_each_offer_what_follows_the_line_surest_first():
    other = Snippet("shop/cart.py", "def net(items):\n    return compute_total(items, rate=1)\n")
    file, repo = completion_copies(TEXT, AT, [other])
    assert (file.text, file.source) == ("tax_rate=0.2)", "file")
    assert file.confidence == copy_confidence(24, 1)
    # the other file follows a shorter tail (" compute_total(items, "): less sure
    assert (repo.text, repo.source) == ("rate=1)", "repository")
    assert repo.confidence == copy_confidence(22, 1) < file.confidence


def test_no_copies_before_code_on_its_line_or_where_the_line_occurs_nowhere_else():
    assert completion_copies(TEXT, TEXT.index("cost")) == []
    assert completion_copies("value = \n", 8) == []


CLASS = """class Cart:
    def __init__(self, items):
        self.items = items
        self.total = 0

class Shop:
    def __init__(self, items):
{indent}
        self.total = 0
""".format(indent=" " * 8)
EMPTY = CLASS.index("\n", CLASS.rindex("items):")) + 9  # the empty line's cursor, indented


def test_an_empty_line_gets_the_line_after_the_line_before_it_elsewhere():
    (file,) = completion_copies(CLASS, EMPTY)
    assert (file.text, file.source) == ("self.items = items", "file")
    # the line after the copy reads as the line after the cursor's: surer
    found, _ = next_line_copies(CLASS, EMPTY)
    assert found == NextLines(["self.items = items"], len("def __init__(self, items):"), 1)
    alone = CLASS.replace("        self.total = 0\n\nclass", "\nclass")
    (unsure,) = completion_copies(alone, alone.index("\n", alone.rindex("items):")) + 9)
    assert unsure.text == file.text and unsure.confidence < file.confidence


def test_a_next_line_comes_from_another_file_and_is_indented_as_the_cursor_is():
    other = Snippet("shop/base.py", "def __init__(self, items):\n    super().__init__()\n")
    file, repo = completion_copies(CLASS, EMPTY, [other])
    assert (repo.text, repo.source) == ("super().__init__()", "repository")
    assert file.confidence > repo.confidence  # the file's is followed by the next line
    # a cursor at the line's start is not where the line after a `def` goes
    at_start = EMPTY - 8
    text = CLASS[:at_start] + CLASS[EMPTY:]
    assert completion_copies(text, at_start, [other]) == []


def test_no_next_line_at_the_first_line_or_after_a_line_that_occurs_nowhere_else():
    assert completion_copies("\nx = 1\n", 0) == []
    assert completion_copies("def f():\n    \n", len("def f():\n    ")) == []


def test_a_next_line_without_lines_has_no_confidence():
    with pytest.raises(ValueError, match="line of 1 character or more"):
        line_confidence(NextLines([], 0, 0))


def test_a_longer_tail_is_surer_and_several_texts_after_it_are_less_sure():
    assert copy_confidence(4, 1) < copy_confidence(12, 1) < copy_confidence(30, 1) < 1
    assert copy_confidence(12, 3) < copy_confidence(12, 1)


@pytest.mark.parametrize(("tail", "found"), [(0, 1), (5, 0), (-3, 2)])
def test_a_copy_without_a_tail_or_a_text_has_no_confidence(tail, found):
    with pytest.raises(ValueError, match="tail of 1 character or more"):
        copy_confidence(tail, found)


def test_the_first_two_copies_of_a_source_are_offered_the_later_less_sure():
    text = "a = run(x, fast=True)\nb = run(x, fast=False)\nc = run(x, \n"
    first, second = completion_copies(text, len(text) - 1)
    assert (first.text, second.text) == ("fast=True)", "fast=False)")
    assert first.confidence == copy_confidence(len(" = run(x, "), 2) > second.confidence
    assert second.confidence == copy_confidence(len(" = run(x, "), 2, 1)
    with pytest.raises(ValueError):
        copy_confidence(10, 2, 2)  # there is no third of two copies
    with pytest.raises(ValueError):
        line_confidence(NextLines(["x = 1"], 5, 0), 1)


@pytest.mark.parametrize("empty_line", [False, True])
def test_a_fill_and_a_copy_that_agree_are_surer_than_either_alone(empty_line):
    both = item_confidence(0.4, 0.4, False, empty_line)
    assert both > item_confidence(0.4, None, False, empty_line)
    assert both > item_confidence(None, 0.4, False, empty_line)
    # what only a runner-up gives is less sure than what the fill gives
    assert item_confidence(0.4, None, True, empty_line) < item_confidence(
        0.4, None, False, empty_line
    )
    with pytest.raises(ValueError, match="decode's confidence or a copy's"):
        item_confidence(None, None, False, empty_line)


def test_a_completions_items_rank_each_text_once_by_what_vouches_for_it():
    fill, ups = ("total)", 0.4), [("count)", 0.9), ("", 0.3)]
    copies = [("count)", 0.5), ("size)", 0.2)]
    items = completion_items(fill, ups, copies, False, 0.0, 3)
    # the runner-up a copy agrees with ranks first; its confidence is capped at the fill's
    assert [t for t, _ in items] == ["count)", "total)", "size)"]
    assert items[0][1] == item_confidence(0.4, 0.5, True, False)
    floor = (items[0][1] + items[1][1]) / 2
    assert completion_items(fill, ups, copies, False, floor, 3) == items[:1]
    # without the decode's confidence: the fill, its runner-ups, then the copies
    bare = completion_items(("total)", None), [("count)", None)], copies, False, 0.0, 3)
    assert bare == [("total)", None), ("count)", None), ("size)", 0.2)]


def test_the_shipped_weights_are_the_fits_and_read_the_shipped_confidence_weights():
    root = Path(__file__).resolve().parents[1]
    fits = json.loads((root / "benchmarks/results/fit_copy_confidence.json").read_text())
    assert list(WEIGHTS) == fits["rest of the line"]["weights"]
    assert list(LINE_WEIGHTS) == fits["next line"]["weights"]
    items = fits["items"]
    assert list(ITEM_WEIGHTS[False]) == items["after code"]["weights"]
    assert list(ITEM_WEIGHTS[True]) == items["empty line"]["weights"]
    shipped = json.loads((root / "model/weights/confidence.json").read_text())
    assert items["network"] == shipped["network"], (
        "refit: python -m benchmarks.copy_rows --rows TRAIN VALID, then "
        "python -m diffusion_infill.model.training.fit_copy_confidence"
    )
