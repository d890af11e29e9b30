"""The language server's pure parts: settings parsing, excerpts of long buffers, and the
shaping of completions. (The server itself is driven over stdio in test_lsp_*.py.)"""

from __future__ import annotations

import pytest

from diffusion_infill.infill.core.options import SamplerOptions
from diffusion_infill.lsp.actions import find_docstring_slot
from diffusion_infill.lsp.excerpt import definition_start, excerpt
from diffusion_infill.lsp.offers import shape
from diffusion_infill.lsp.operations import action_options
from diffusion_infill.lsp.settings import Settings, parse


def test_settings_defaults_and_section():
    assert parse(None) == (Settings(), [])
    s, warnings = parse(
        {
            "infill": {
                "steps": 12,
                "threshold": 0.8,
                "maxTokens": 64.0,
                "diagnostics": True,
                "liveView": True,
            }
        }
    )
    assert warnings == []
    assert (s.steps, s.threshold, s.max_tokens, s.diagnostics, s.live_view) == (
        12,
        0.8,
        64,
        True,
        True,
    )
    assert s.diagnostics_delay == 500 and s.hole_marker == "<mask>"
    assert not Settings().diagnostics  # off by default


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("threshold", "high"),
        ("threshold", 0),
        ("threshold", 1.5),
        ("steps", 0),
        ("steps", True),
        ("maxTokens", 5000),
        ("growCap", 0),
        ("holeMarker", "a b"),
        ("holeMarker", ""),
        ("diagnostics", "yes"),
        ("diagnosticsSeverity", "error"),
        ("workerAddress", "tcp:x"),
        ("modelDir", "/no/such/model/dir"),
        ("diagnosticsThreshold", None),
        ("precision", "int4"),
        ("precision", 8),
    ],
)
def test_a_bad_value_is_named_and_replaced_by_the_default(key, value):
    s, warnings = parse({key: value, "steps": 7} if key != "steps" else {key: value})
    (warning,) = warnings
    assert warning.startswith(f"infill.{key} ") and "using the default" in warning
    assert s == (Settings(steps=7) if key != "steps" else Settings())


def test_the_precision_setting_reaches_the_spawned_worker():
    from diffusion_infill.lsp.connection import WorkerConnection

    chosen = WorkerConnection._make(parse({"precision": "int8"})[0]).spawn
    assert chosen is not None and chosen[chosen.index("--dtype") + 1] == "int8"
    unset = WorkerConnection._make(Settings()).spawn  # the worker's own pick ($INFILL_DTYPE)
    assert unset is not None and "--dtype" not in unset


def test_unknown_settings_and_non_objects_warn():
    assert parse({"bogus": 1})[1] == ["infill.bogus: unknown setting (ignored)"]
    s, warnings = parse(["not", "a", "map"])
    assert s == Settings() and "must be an object" in warnings[0]


def test_sampler_options_from_settings_are_valid():
    s = parse({"steps": 3, "threshold": 0.7, "maxTokens": 8})[0]
    options = s.sampler_options(default_span_tokens=16)
    assert options == SamplerOptions(
        max_span_tokens=8, max_steps=3, threshold=0.7, default_span_tokens=8, cache_refresh=4
    )
    assert parse({"growCap": 32})[0].sampler_options().grow_cap == 32
    exact = parse({"cacheRefresh": 0})[0].sampler_options()
    assert exact.cache_refresh == 0
    bad, warnings = parse({"cacheRefresh": -1})
    assert bad.cache_refresh == 4 and "infill.cacheRefresh" in warnings[0]


def test_context_copies_are_a_setting_of_code_actions():
    assert action_options(Settings()).context_copies is True
    off = parse({"contextCopies": False})[0]
    assert action_options(off).context_copies is False
    bad, warnings = parse({"contextCopies": 1})
    assert bad.context_copies is True and "infill.contextCopies" in warnings[0]


def test_excerpt_of_a_short_text_is_the_text():
    text = "a = 1\nb = 2\n"
    assert excerpt(text, 3, 4, context=1000).text == text


def test_excerpt_of_a_long_text_cuts_at_definitions():
    body = "".join(
        f"def f{i}(x):\n    '''Doc\nclass in prose\n'''\n    return x\n\n" for i in range(2000)
    )
    at = body.index("def f1000(")
    ex = excerpt(body, at, at + 5, context=2000)
    assert 0 < ex.offset < at < ex.end < len(body)
    assert body[ex.offset : ex.end] == ex.text
    assert ex.text.startswith("def f") and body[ex.end :].startswith("def f")
    assert len(ex.text) <= 2 * 2000 + 200


def _long_class(methods: int) -> str:
    """A module whose one class is longer than a small context: its methods have
    docstrings of several lines, a nested function at the end has none."""
    body = "".join(
        f'    def m{i}(self):\n        """Method {i}.\n\n        It returns {i}, '
        'and says so\n        in a few lines of prose.\n        """\n'
        f"        return {i}\n\n"
        for i in range(methods)
    )
    return (
        "import os\n\n\nclass Big:\n" + body + "    def last(self, items):\n"
        "        def keep(item):\n            return item\n"
        "        return list(filter(keep, items))\n"
    )


def test_docstring_slot_when_the_excerpt_would_start_inside_a_docstring():
    # the excerpt around the cursor starts on a line of the class body, often inside a
    # docstring, which parses as one syntax error; the slot is found by parsing from a
    # line that starts a definition (the class line when in reach, else a method's)
    text = _long_class(40)
    at = text.index("return item")
    for context in range(300, 1500, 25):
        slot = find_docstring_slot(text, at, "<mask>", context)
        assert slot is not None and slot.name == "keep", context
        assert text.index("def keep") < slot.start <= at
        slot = find_docstring_slot(text, text.index("return list"), "<mask>", context)
        assert slot is not None and slot.name == "last", context
    assert find_docstring_slot(text, text.index("return 20"), "<mask>", 600) is None


def test_excerpt_of_a_long_class_cuts_at_methods_never_inside_a_docstring():
    # no top-level line near the cuts: they go to lines that start methods; a cut inside
    # a docstring made the prose parse as code and the code after it as a string, and the
    # checks then refused fills they had no reason to (a docstring of several lines too)
    text = _long_class(200)
    for where in ("return 100", "def m57", "return 199", "It returns 120"):
        at = text.index(where)
        for context in range(300, 2000, 50):
            ex = excerpt(text, at, at + 3, context=context)
            assert ex.offset <= at and ex.end >= at + 3
            for cut in (ex.offset, ex.end):
                assert text[:cut].count('"""') % 2 == 0, (where, context, cut)
            assert ex.text.startswith("    def m") or ex.offset == 0, (where, context)


def test_excerpt_moves_out_of_a_docstring_longer_than_half_the_context():
    # no definition line within half a context of either cut: each moves out to the
    # nearest one (the excerpt grows) rather than cut inside the docstring
    doc = "".join(f"    Line {i} of a long docstring, in prose.\n" for i in range(60))
    text = (
        'import os\n\n\ndef define(x):\n    """Define.\n\n' + doc + '    """\n'
        "    def wrap(cls):\n        return cls\n    return wrap\n\n\n"
        'def later():\n    """Later.\n\n' + doc + '    """\n    return 1\n\n\n'
        "def last():\n    return 2\n"
    )
    at = text.index("return cls")
    ex = excerpt(text, at, at, context=1000)
    assert ex.offset == text.index("def define") and ex.end == text.index("def last")
    for cut in (ex.offset, ex.end):
        assert text[:cut].count('"""') % 2 == 0


def test_definition_start_prefers_the_top_level_then_the_least_indented():
    text = "x = 1\n\n\n@dec\ndef f():\n    return 1\n\nclass C:\n    y = 2\n"
    assert definition_start(text, text.index("return"), 1000) == text.index("def f")
    assert definition_start(text, text.index("@dec") + 2, 1000) == text.index("@dec")
    assert definition_start(text, text.index("class C"), 1000) == text.index("class C")
    assert definition_start(text, text.index("y = 2"), 10) is None  # out of reach
    assert definition_start(text, 2, 1000) is None
    methods = "    def a(self):\n        def b():\n            pass\n        return b\n"
    assert definition_start(methods, methods.index("return b"), 1000) == 0


def test_excerpt_keeps_the_region_and_whole_lines_with_crlf():
    text = "x = 1\r\n" * 5000
    ex = excerpt(text, 10_000, 10_020, context=500)
    assert ex.offset <= 10_000 and ex.end >= 10_020
    assert ex.text.endswith("\r\n") and text[ex.offset - 2 : ex.offset] == "\r\n"


@pytest.mark.parametrize(
    ("fill", "multiline", "at_end", "expected"),
    [
        ("compute()\nextra", False, True, "compute()"),
        ("x  ", False, True, "x"),
        ("x  ", False, False, "x  "),
        ("\nmore", False, True, ""),
        ("   ", False, True, ""),
        ("a = 1\n    return a\n\n", True, True, "a = 1\n    return a"),
        # a multi-line completion ends at its first blank line
        ("a = 1\n    b = 2\n    \n\n\n    c = 3", True, True, "a = 1\n    b = 2"),
        ("a = 1\r\n\t\r\nb = 2", True, True, "a = 1"),
        ("a = 1\r\n    b = 2\r\n", True, True, "a = 1\r\n    b = 2"),  # one CRLF is no blank line
        ("\n\nx = 1", True, True, ""),
    ],
)
def test_completion_shape(fill, multiline, at_end, expected):
    assert shape(fill, multiline=multiline, at_line_end=at_end) == expected
