"""Copies offered at a completion (infill/core/copy_offers.py): what follows the code
before the cursor elsewhere in the file and in other files, and how sure each is."""

from __future__ import annotations

import pytest

from diffusion_infill.infill.core.copy_offers import completion_copies, copy_confidence
from diffusion_infill.infill.core.snippets import Snippet

TEXT = "price = compute_total(items, tax_rate=0.2)\ncost = compute_total(items, \n"
AT = TEXT.index("\n", 43)


def test_the_file_and_another_file_each_offer_what_follows_the_line_surest_first():
    other = Snippet("shop/cart.py", "def net(items):\n    return compute_total(items, rate=1)\n")
    file, repo = completion_copies(TEXT, AT, [other])
    assert (file.text, file.tail, file.found, file.source) == ("tax_rate=0.2)", 24, 1, "file")
    # the other file follows a shorter tail (" compute_total(items, "): less sure
    assert (repo.text, repo.tail, repo.source) == ("rate=1)", 22, "repository")
    assert file.confidence > repo.confidence


def test_no_copies_at_a_line_start_or_where_the_line_occurs_nowhere_else():
    assert completion_copies(TEXT, TEXT.index("cost")) == []
    assert completion_copies("value = \n", 8) == []


def test_a_longer_tail_is_surer_and_several_texts_after_it_are_less_sure():
    assert copy_confidence(4, 1) < copy_confidence(12, 1) < copy_confidence(30, 1) < 1
    assert copy_confidence(12, 3) < copy_confidence(12, 1)


@pytest.mark.parametrize(("tail", "found"), [(0, 1), (5, 0), (-3, 2)])
def test_a_copy_without_a_tail_or_a_text_has_no_confidence(tail, found):
    with pytest.raises(ValueError, match="tail of 1 character or more"):
        copy_confidence(tail, found)
