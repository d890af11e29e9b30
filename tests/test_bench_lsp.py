"""benchmarks/bench_lsp.py's completion figures (its timings need a server: not tested here)."""

from __future__ import annotations

from lsprotocol import types

from benchmarks.bench_lsp import Bench


def _list(text: str) -> types.InlineCompletionList:
    return types.InlineCompletionList(items=[types.InlineCompletionItem(insert_text=text)])


def test_an_empty_lines_offer_is_compared_on_its_first_line() -> None:
    b = Bench(client=None)  # type: ignore[arg-type]  # no request is sent
    case = "inline completion (empty line)"
    b._offered(case, _list("total = 0\n    for x in xs:"), "total = 0")  # runs on
    b._offered(case, _list("total = 1"), "total = 0")
    b._offered(case, None, "total = 0")  # nothing offered
    b._offered(case, [types.InlineCompletionItem(insert_text="  total = 0  ")], "total = 0")
    q = b.completion_quality(case)
    assert q["n"] == 4 and q["exact_match"] == 0.25
    assert q["first_line_right"] == 0.5 and q["no_completion"] == 0.25
    assert q["offered"] == ["total = 0\n    for x in xs:", "total = 1", None, "  total = 0  "]
