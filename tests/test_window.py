"""Window choice: tree-sitter scopes for Python, symmetric lines otherwise, the budget.

The fake tokenizer is one token per character, so token budgets are character counts.
"""

from __future__ import annotations

import pytest
from fakes import TargetDenoiser

from diffusion_infill.infill import Span, WindowError, fill_text
from diffusion_infill.infill.core.window import plan_windows, spans_per_window

SOURCE = """import os


class A:
    def one(self):
        return 1

    def two(self, x):
        y = x + 1
        return <mask:4>

    def three(self):
        return 3


def tail():
    pass
"""

METHOD = "    def two(self, x):\n        y = x + 1\n        return <mask:4>\n"


def _fill(text, budget, **kw):
    d = TargetDenoiser(["y"], max_length=budget)
    r = fill_text(text, denoiser=d, grow=0, **kw)
    assert all(len(c) <= budget for cs, _ in d.calls for c in cs)
    return r


def test_window_is_the_enclosing_function_when_only_it_fits():
    budget = len(METHOD) - len("<mask:4>") + 4
    r = _fill(SOURCE, budget)
    w = r.windows[0]
    assert SOURCE[w.start : w.end] == METHOD
    assert w.scope == "function_definition"
    assert r.text == SOURCE.replace("<mask:4>", "y")


def test_window_ascends_to_the_class_when_it_fits():
    cls = SOURCE[SOURCE.index("class A") : SOURCE.index("\n\n\ndef tail")] + "\n"
    budget = len(cls) - len("<mask:4>") + 4
    w = _fill(SOURCE, budget).windows[0]
    assert SOURCE[w.start : w.end] == cls
    assert w.scope == "class_definition"


def test_window_adds_lines_around_the_scope_while_budget_remains():
    budget = len(METHOD) - len("<mask:4>") + 4 + 1 + len("\n")  # room for two short lines
    w = _fill(SOURCE, budget).windows[0]
    assert SOURCE[w.start : w.end] == "\n" + METHOD + "\n"
    assert w.scope == "function_definition"


def test_whole_module_when_it_fits():
    w = _fill(SOURCE, 1000).windows[0]
    assert (w.start, w.end, w.scope) == (0, len(SOURCE), "module")


def test_decorated_function_keeps_its_decorator():
    text = "x = 1\n\n@cache\ndef f(a):\n    return <mask:2>\n\ny = 2\n"
    deco = "@cache\ndef f(a):\n    return <mask:2>\n"
    w = _fill(text, len(deco) - len("<mask:2>") + 2).windows[0]
    assert text[w.start : w.end] == deco
    assert w.scope == "decorated_definition"


def test_unparsable_python_falls_back_to_lines():
    text = "def f(:\n  x = ((\n  return <mask:2>\n)))\n"
    w = _fill(text, 1000).windows[0]
    assert w.scope == "lines" and (w.start, w.end) == (0, len(text))


def test_line_window_is_symmetric_for_other_languages():
    lines = [f"v{i:02d} = {i:02d};\n" for i in range(21)]  # 10 characters each
    lines[10] = "v10 = <mask:2>;\n"
    text = "".join(lines)
    hole_line = len("v10 = ;\n")
    r = _fill(text, hole_line + 2 + 4 * 10 + 5, language=None)
    w = r.windows[0]
    assert text[w.start : w.end] == "".join(lines[8:13])
    assert w.scope == "lines"


def test_window_tokens_option_caps_the_canvas():
    d = TargetDenoiser(["y"], max_length=1000)
    r = fill_text(SOURCE, denoiser=d, grow=0, window_tokens=len(METHOD) - 4)
    assert SOURCE[r.windows[0].start : r.windows[0].end] == METHOD
    assert max(len(c) for cs, _ in d.calls for c in cs) <= len(METHOD) - 4


def test_long_core_line_is_cut_to_the_span():
    text = "a" * 50 + "<mask:2>" + "b" * 50 + "\n"
    r = _fill(text, 20, language=None, word_starts=False)
    w = r.windows[0]
    assert w.end - w.start <= 18 + len("<mask:2>")
    assert r.text == text.replace("<mask:2>", "y")


def test_growth_beyond_the_reserve_trims_outer_context():
    lines = "".join(f"c{i:02d} = {i}\n" for i in range(30))
    text = lines + "x = <mask:4>\n" + lines
    target = "abcdefghijklmnopqrstuvwxyz0123"
    d = TargetDenoiser([target], max_length=60, confidence=0.99)
    r = fill_text(text, denoiser=d, language=None)
    assert r.text == text.replace("<mask:4>", target)
    assert r.stats.trimmed > 0
    assert all(len(c) <= 60 for cs, _ in d.calls for c in cs)


def test_growth_stops_when_the_canvas_is_full_of_slots():
    d = TargetDenoiser(["abcdefghijklmnopqrstuvwxyz"], max_length=12, confidence=0.99)
    r = fill_text("<mask:4>", line_holes=False, denoiser=d)
    assert r.text == "abcdefghijkl"  # 12 slots: all the canvas holds
    assert all(len(c) <= 12 for cs, _ in d.calls for c in cs)


def test_grouping_joins_near_spans_and_splits_far_ones():
    text = "a = X\nb = X\n" + "#" * 100 + "\nc = X\n"
    spans = [Span(i, i + 1) for i, ch in enumerate(text) if ch == "X"]
    groups = spans_per_window(text, spans, [4, 4, 4], [0, 0, 0], 40, len)
    assert groups == [[0, 1], [2]]
    windows = plan_windows(text, spans, allocs=[4] * 3, room=[0] * 3, budget=40, count=len)
    assert [w.spans for w in windows] == [(0, 1), (2,)]
    assert windows[0].end <= spans[2].start and windows[1].start >= spans[1].end


def test_growth_room_counts_against_joining():
    text = "a = X\n" + "#" * 20 + "\nb = X\n"
    spans = [Span(i, i + 1) for i, ch in enumerate(text) if ch == "X"]
    gap = text.index("b = X") + 4 - text.index("X") - 1
    assert spans_per_window(text, spans, [4, 4], [0, 0], 8 + gap, len) == [[0, 1]]
    assert spans_per_window(text, spans, [4, 4], [16, 16], 8 + gap, len) == [[0], [1]]


def test_a_span_larger_than_the_budget_is_a_window_error():
    with pytest.raises(WindowError, match="1:5: the span needs 50 tokens"):
        spans_per_window("x = X", [Span(4, 5)], [50], [0], 40, len)
