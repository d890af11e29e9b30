"""The checks a fill must pass (infill/core/checks.py), the candidates that replace a
failing fill (infill/core/candidates.py), and what the command does when none passes."""

from __future__ import annotations

import json

import pytest
from fakes import TargetDenoiser

from diffusion_infill.infill.cli import main
from diffusion_infill.infill.core.checks import KINDS, check_fills, splice
from diffusion_infill.infill.core.engine import fill_spans, fill_text
from diffusion_infill.infill.core.errors import OptionError
from diffusion_infill.infill.core.options import DEFAULT_CHECKS, SamplerOptions
from diffusion_infill.infill.core.spans import Span
from diffusion_infill.model import loading

MARK = "<mask>"


def problems(text: str, *fills: str, language: str = "python") -> list[tuple[str, int]]:
    """(kind, range) of each problem when the holes of `text` get `fills`."""
    ranges, at = [], 0
    while (at := text.find(MARK, at)) >= 0:
        ranges.append((at, at + len(MARK)))
        at += len(MARK)
    before = text.replace(MARK, "_" * len(MARK))
    after, filled = splice(text, ranges, list(fills))
    return [
        (p.kind, p.range) for p in check_fills(before, after, ranges, filled, language=language)
    ]


# -- parse --------------------------------------------------------------------------


def test_valid_fills_have_no_problem():
    assert (
        problems("import os\n\ndef f(values):\n    return <mask>\n", "os.path.join(*values)") == []
    )
    assert problems("x = [<mask> for v in items]\nitems = []\n", "v * 2") == []


def test_a_fill_that_breaks_parsing_is_blamed():
    assert problems("def f(values):\n    return <mask>\n", "len(values") == [("parse", 0)]
    assert problems("for line in <mask>:\n    pass\n", "range(3)) (") == [("parse", 0)]


def test_an_error_the_fill_puts_on_the_next_line_is_blamed():
    # `rv =` parses as `rv = return rv`: the error node sits on the next line, inside the
    # statement the fill begins
    text = "def f(d):\n    rv = {}\n    <mask>\n    return rv\n"
    assert problems(text, "rv =") == [("parse", 0)]
    assert problems(text, "rv = 1") == []


@pytest.mark.parametrize(
    "fill",
    ["if x:", "x = 1\n   y = 2"],
    ids=["a block without a body", "a dedent to no block"],
)
def test_what_pythons_parser_rejects_and_tree_sitter_reads_past_is_blamed(fill):
    text = "def f(x):\n    <mask>\n    return x\n"
    assert problems(text, fill) == [("parse", 0)]
    (problem,) = check_fills(
        text.replace(MARK, "_"), text.replace(MARK, fill), [(14, 15)], [(14, 14 + len(fill))]
    )
    assert problem.message.startswith("Python cannot parse it: ")


def parse_messages(text: str, fill: str) -> list[str]:
    """The `parse` problems' messages when the one hole of `text` gets `fill`."""
    at = text.index(MARK)
    ranges = [(at, at + len(MARK))]
    after, filled = splice(text, ranges, [fill])
    before = text.replace(MARK, "_" * len(MARK))
    return [p.message for p in check_fills(before, after, ranges, filled, kinds=("parse",))]


@pytest.mark.parametrize(
    ("text", "right", "wrong", "error"),
    [
        # a hidden line before deeper lines opened a block: a header stands in
        ("try:\n    x = 1\n<mask>\n    x = 2\n", "except OSError:", "else:", "expected 'except'"),
        ("@property\n<mask>\n    return 1\n", "def name(self):", "name = 1", "invalid syntax"),
        ("class A:\n    <mask>\n        return 1\n", "def f(self):", "def f(**a, b):", "cannot"),
        # the end of a signature: the brackets closed, and the colon
        ("def f(a,\n      <mask>\n    return a\n", "b):", "b=1, c):", "non-default"),
        # an item with its comma, a keyword argument
        ("f(a=1,\n  <mask>\n  c=3)\n", "b=2,", "b,", "positional argument"),
        # a list that goes on over the next lines: the hole opens it
        ("months = (\n    <mask>\n    'Jul', 'Aug'],\n)\n", "['Jan', 'Feb',", "x[2", "comma"),
        # a list closed, then the next item: `_],`
        ("d = dict(\n    a=[\n        1,\n        <mask>\n    b=[3],\n)\n", "2],", "2]", "comma"),
        # one bracket closed and another opened: `_)[`
        ("assert f(\n    1,\n<mask>\n    2,\n]\n", ") == [", "),", "unmatched"),
        # a comprehension's element over lines: the bracket, then a name, `{_`
        (
            "d = dict(\n    <mask>\n    for k in ks}\n)\n",
            "{k: f(k)",
            "k, k,",
            "does not match",
        ),
        # the same after an item without a comma: no name may come first, `)[`
        ("assert f(\n    [\n        1,\n    ]\n<mask>\n    2,\n]\n", ") == [", "),", "unmatched"),
        # bytes beside bytes (implicit concatenation), a string left open by a backslash
        (
            "for c in (b'ab'\n          <mask>\n          b'ef'):\n    pass\n",
            "b'cd'",
            "b'c', 'd\\",
            "unterminated",
        ),
    ],
    ids=[
        "except",
        "decorated def",
        "method",
        "signature end",
        "keyword",
        "list opened",
        "list closed",
        "closed and opened",
        "comprehension",
        "closed and opened, after an item",
        "bytes",
    ],
)
def test_where_a_name_cannot_stand_in_a_hole_a_stand_in_lets_pythons_parser_judge(
    text, right, wrong, error
):
    # `_` in the hole breaks each text, so Python's parser had nothing to compare with,
    # and tree-sitter reads past each wrong fill
    assert parse_messages(text, right) == []
    (message,) = parse_messages(text, wrong)
    assert message.startswith("Python cannot parse it: ") and error in message


def test_each_hole_gets_its_own_stand_in():
    text = "try:\n    x = 1\n<mask>\n    x = 2\nf(a=1,\n  <mask>\n  c=3)\n"
    assert problems(text, "except OSError:", "b=2,") == []
    assert problems(text, "except OSError:", "b,") == [("parse", 1), ("name", 1)]
    assert problems(text, "else:", "b=2,") == [("parse", 0)]


def test_a_line_at_a_depth_nothing_parses_at_is_judged_at_one_that_does():
    # the hidden line (whole lines, as a selection or a line hole writes it) sits at the
    # depth of the code before it, where no header parses before the deeper lines; one
    # step out, `def _(` does, and a fill is judged there
    text = (
        "class A:\n    def f(self):\n        self.x = 1\n\n        ______\n"
        "        self, y\n    ) -> None:\n        return y\n"
    )
    at = text.index("        ______")
    span = (at, text.index("\n", at) + 1)
    for fill, blamed in [("        def g(\n", True), ("    def g(\n", False)]:
        after, filled = splice(text, [span], [fill])
        assert bool(check_fills(text, after, [span], filled, kinds=("parse",))) == blamed, fill


def test_the_search_for_a_stand_in_is_bounded(monkeypatch):
    # a file broken far from its holes (the user mid-edit) costs one parse; a bracket left
    # open, which any hole might close, at most BUDGET
    from diffusion_infill.infill.core import stand_ins

    parsed: list[str] = []
    first_error = stand_ins.first_error
    monkeypatch.setattr(stand_ins, "first_error", lambda t: parsed.append(t) or first_error(t))
    body = "".join(f"x{k} = _____\n" for k in range(30))
    holes = [(at, at + 5) for at in range(len(body)) if body.startswith("_____", at)]
    far = "def broken(:\n    pass\n" + "\n" * 10
    assert (
        stand_ins.parsing_stand_in(far + body, [(a + len(far), b + len(far)) for a, b in holes])
        is None
    )
    assert len(parsed) == 1
    parsed.clear()
    assert stand_ins.parsing_stand_in(body + "y = (\n", holes) is None
    assert 1 < len(parsed) <= stand_ins.BUDGET


def test_a_selection_python_cannot_parse_as_written_is_judged_against_a_stand_in():
    # the selection lacks its colon; a rewrite that keeps the error is blamed by Python's
    # parser (tree-sitter finds as many errors there as before), one that fixes it passes
    text = "def f(x):\n    if x\n        return 1\n"
    span = (text.index("if"), text.index("\n        "))
    for fill, blamed in [("while x", True), ("if x:", False)]:
        after, filled = splice(text, [span], [fill])
        found = check_fills(text, after, [span], filled, kinds=("parse",))
        assert bool(found) == blamed
        assert all(p.message.startswith("Python cannot parse it") for p in found)


def test_a_header_python_cannot_parse_loses_to_the_next_candidate():
    text = "def f():\n    try:\n        x = 1\n    <mask>\n        x = 2\n"
    d = ByLength({16: "else:", 8: "except:"})
    r = fill_text(text, denoiser=d, checks=DEFAULT_CHECKS)
    assert r.text == text.replace(MARK, "except:") and r.fills[0].rejected is None


@pytest.mark.parametrize(
    ("text", "fill"),
    [
        # an unrelated error elsewhere (the user is mid-edit): Python's parser is not
        # asked, only tree-sitter's rules apply
        ("def f(x):\n    <mask>\n    return x\n\ndef g(:\n    pass\n", "if x:"),
        # an error in the next statement, there before the fill
        ("def f(d):\n    <mask>\n    return (rv\n", "rv = 1"),
        # a text cut inside a statement (a window): the parser's recovery there differs
        # with whatever stands in the span; only errors touching the fill are its own
        ("    x = f(1,\n<mask>\n    y = 2\n", "z = 3"),
    ],
    ids=["text broken elsewhere", "next statement", "statement cut before"],
)
def test_errors_that_were_there_before_are_not_the_fills(text, fill):
    assert problems(text, fill) == []


def test_an_error_elsewhere_in_the_file_is_not_the_fills_fault():
    text = "def f(values):\n    return <mask>\n\n\nx = (1 +\n"
    assert problems(text, "len(values)") == []
    assert problems(text, "len(values") == [("parse", 0)]


def test_an_error_that_was_there_at_the_hole_is_not_blamed():
    # `x <hole> y` does not parse with a neutral identifier either; an operator fixes it
    assert problems("values = 1\nz = values <mask> values\n", "+") == []


def test_each_fill_is_blamed_for_its_own_errors():
    text = "values = 1\na = <mask>\nb = <mask>\n"
    assert problems(text, "values", "(values") == [("parse", 1)]


# -- comment ------------------------------------------------------------------------


def test_a_comment_that_hides_the_code_after_the_fill_is_blamed():
    found = problems("for line in <mask>:\n    pass\n", "  #  #]")
    assert ("comment", 0) in found and ("parse", 0) in found
    assert problems("values = 1\nx = f(<mask>)\n", "values  # x") == [("parse", 0), ("comment", 0)]


def test_a_comment_at_the_end_of_a_line_is_fine():
    assert problems("x = 1  <mask>\n", "# one") == []


# -- line ---------------------------------------------------------------------------


def test_a_fill_that_breaks_the_line_of_its_hole_is_blamed():
    assert problems("values = 1\nx = f(<mask>)\n", "values,\n    values") == [("line", 0)]
    assert problems("values = 1\nx = f(<mask>)\n", "values, values") == []


def test_a_hole_with_nothing_after_it_on_its_line_may_take_lines():
    # a hole at the end of a line (or alone on it) is where new lines go
    assert problems("def f(v):\n    <mask>\n", "x = v\n    return x") == []
    assert problems("def f(v):\n    return <mask>\n", "(v +\n            v)") == []


def test_a_line_break_inside_a_triple_quoted_string_is_text():
    # Insert docstring fills an empty docstring, code on both sides of it on its line
    text = 'def f():\n    """<mask>"""\n    return 1\n'
    assert problems(text, "Return one.\n\n    Always one.") == []
    assert problems("s = '''a <mask> b'''\n", "x\ny") == []
    # in a one-line string a line break is still a broken line (and a syntax error)
    assert ("line", 0) in problems("s = 'a <mask> b'\n", "x\ny")
    assert problems("s = f(<mask>) + '''doc'''\n", "1,\n    2") == [("line", 0)]


def test_a_text_cut_inside_a_docstring_reads_as_its_file_does():
    # a window that starts inside one docstring: its closing quotes open no string
    cut_at_start = (
        "        :raises KeyError: if key is not found\n\n"
        '        """\n'
        "        return self.pop(key)\n\n"
        "    def has_key(self, key):\n"
        '        """Whether the key is in the cache.\n\n'
        "        <mask>\n"
        "        :return: True if it is\n\n"
        '        """\n'
        "        return key in self\n"
    )
    assert problems(cut_at_start, ":param key: key for item") == []
    # a hole in the docstring it starts inside is in a string too
    in_cut = cut_at_start.replace(":raises KeyError:", "<mask>", 1)
    assert problems(in_cut, ":raises KeyError: if it is not there", ":x") == []
    # a module's docstring after its licence comments opens a string, it closes none
    module = (
        '# SPDX: MIT\n\n"""\n   Doc of the module.\n"""\nimport click\n\n\ndef f():\n    <mask>\n'
    )
    assert problems(module, "click.echo()") == []
    assert problems(module, "clack.echo()") == [("name", 0)]
    # a window that ends inside one: what follows the hole is its text, not code
    cut_at_end = (
        "def has_key(self, key):\n"
        '    """Whether the key is in the cache.\n\n'
        "    <mask>\n"
        "    :return: True if it is, else False\n"
    )
    assert problems(cut_at_end, ":param key: key for item") == []
    # a fill that closes the docstring turns the prose after it into code
    assert ("parse", 0) in problems(cut_at_end, 'Done."""')
    # the code around the docstrings is still checked
    assert problems(cut_at_start.replace("key in self", "<mask>"), ":x", "key in selff") == [
        ("name", 1)
    ]


def test_the_line_check_needs_no_grammar():
    assert problems("a = f(<mask>) + 1\n", "1\n2", language="nolang") == [("line", 0)]
    assert problems("a = f(<mask>) + 1\n", "1, 2", language="nolang") == []


# -- keyword ------------------------------------------------------------------------


def test_a_repeated_keyword_argument_is_blamed():
    text = "items = []\nm = min(items, key=None, <mask>)\n"
    assert problems(text, "default=None, default=None") == [("keyword", 0)]
    assert problems(text, "key=len") == [("keyword", 0)]
    assert problems(text, "default=None") == []


def test_a_repeated_keyword_in_a_call_the_fill_does_not_touch_is_not_blamed():
    text = "f(a=1, a=2)\nitems = []\nx = <mask>\n"
    assert problems(text, "len(items)") == []


# -- names --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fill",
    [
        "len(values)",  # a builtin, a parameter
        "values.lower()",  # an attribute is no name
        "sorted(values, key=str.lower)",  # nor a keyword argument's name
        "helper(values)",  # defined further down
        "os.sep.join(values)",  # imported
        "[v for v in values if v]",  # bound by the fill itself
        "(lambda q: q)(values)",
        "__file__",
        "count",  # used in code elsewhere, even if not defined in the text
    ],
)
def test_known_names_pass(fill):
    text = (
        "import os\n\n# the total\ndef f(values):\n    return <mask>\n\n\n"
        "def helper(x):\n    return x + count\n"
    )
    assert problems(text, fill) == []


@pytest.mark.parametrize(
    "fill",
    [
        "lines",  # a word of the docstring
        "total",  # a word of a comment
        "width",  # a word of a string
    ],
)
def test_words_of_comments_and_strings_are_no_names(fill):
    text = (
        'def read(path):\n    """Return the lines of a file."""\n    # the total\n'
        '    label = "width"\n    return <mask>\n'
    )
    assert problems(text, fill) == [("name", 0)]


def test_an_f_string_interpolation_spells_its_names():
    text = 'def f(values):\n    print(f"{total:>4}")\n    return <mask>\n'
    assert problems(text, "total") == []


def test_an_unknown_name_is_blamed():
    text = "def f(values):\n    return <mask>\n"
    assert problems(text, "len(items)") == [("name", 0)]
    assert problems(text, "np.mean(values)") == [("name", 0)]


def test_names_bound_in_the_fill_pass():
    text = "def f(values):\n    <mask>\n"
    assert problems(text, "for i, v in enumerate(values):\n        print(i, v)") == []
    assert (
        problems(text, "try:\n        pass\n    except ValueError as err:\n        print(err)")
        == []
    )
    assert problems(text, "n: int = len(values)") == []
    assert problems(text, "n: Foo = 1") == [("name", 0)]  # an annotation is a load


SCOPED = (
    "import os\n\ndef read(p):\n    with open(p) as fh:\n        return fh.read()\n\n"
    "class C:\n    limit = 3\n\n    def grow(self, n):\n        global seen\n"
    "        seen = [k for k in range(n)]\n        return lambda z: z\n\n"
    "def mean(values):\n    def inner(q):\n        return q\n    return <mask>\n"
)


@pytest.mark.parametrize(
    ("fill", "blamed"),
    [
        ("fh.read()", True),  # `with ... as fh` in read(): a local of another function
        ("p", True),  # read()'s parameter
        ("self", True),
        ("k", True),
        ("z", True),  # a method's, a comprehension's, a lambda's
        ("seen", False),  # declared global where it is bound
        ("inner(values)", False),  # nested in mean(): visible there
        ("os.sep, C, read, limit", False),  # module names; a class body is lenient
    ],
)
def test_a_local_of_another_scope_is_blamed(fill, blamed):
    assert problems(SCOPED, fill) == ([("name", 0)] if blamed else [])


def test_a_window_cut_inside_a_function_stays_lenient():
    text = "        fh = open(p)\n        return fh\n\ndef mean(v):\n    return <mask>\n"
    assert problems(text, "fh") == []  # the parse cannot place `fh` in a scope


def test_a_star_import_lets_every_name_pass():
    assert problems("from os.path import *\nx = <mask>\n", "join('a', 'b')") == []


# -- languages ----------------------------------------------------------------------


def test_no_grammar_no_checks():
    assert problems("let x = <mask>;\n", "((( junk", language="rust") == []
    assert problems("x = <mask>\n", "(((", language=None) == []


def test_only_the_kinds_asked_for_run():
    before, after = "x = ______\n", "x = f(a=1, a=2\n"
    ranges, filled = [(4, 10)], [(4, 14)]
    assert {p.kind for p in check_fills(before, after, ranges, filled)} == {"parse", "name"}
    assert check_fills(before, after, ranges, filled, kinds=("keyword",)) == []
    assert check_fills(before, after, ranges, filled, kinds=()) == []


# -- options ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kw", [{"checks": "parse,bogus"}, {"checks": True}, {"candidates": 0}, {"candidates": 9}]
)
def test_bad_check_options_are_rejected(kw):
    with pytest.raises(OptionError):
        SamplerOptions(**kw)


def test_default_checks_are_known_kinds():
    assert set(SamplerOptions(checks=DEFAULT_CHECKS).check_kinds) <= set(KINDS)
    assert SamplerOptions().check_kinds == ()  # the engine's own default: the model's decode


# -- the engine: candidates ---------------------------------------------------------


class ByLength(TargetDenoiser):
    """Predicts `targets[n]` for a span of n slots (the primary gets 16, alternative k
    16 >> k), `other` for any other length."""

    def __init__(self, targets: dict[int, str], other: str = "(((", **kw):
        super().__init__([], confidence=0.99, **kw)
        self.by_length, self.other = targets, other

    def _target(self, canvas, k, start):
        (end,) = [e for s, e in self.spans_of(canvas) if s == start]
        return k, self.by_length.get(end - start, self.other)


TEXT = "def f(values):\n    return <mask>\n"


def test_a_failing_fill_loses_to_the_next_candidate():
    d = ByLength({16: "len(values", 8: "values"})
    r = fill_text(TEXT, denoiser=d, checks=DEFAULT_CHECKS)
    assert r.text == TEXT.replace(MARK, "values")
    (f,) = r.fills
    assert f.rejected is None and f.text == "values"
    assert r.stats.candidates == 1 and r.stats.rejected == 0
    assert r.stats.nfe == d.nfe  # every pass counted, the alternatives' too


def test_a_passing_fill_costs_no_candidate():
    d = ByLength({16: "len(values)"})
    r = fill_text(TEXT, denoiser=d, checks=DEFAULT_CHECKS)
    assert r.text == TEXT.replace(MARK, "len(values)") and r.stats.candidates == 0
    nfe_checked = r.stats.nfe
    assert fill_text(TEXT, denoiser=ByLength({16: "len(values)"})).stats.nfe == nfe_checked


def test_when_every_candidate_fails_the_span_is_left_and_the_result_says_why():
    d = ByLength({16: "len(values", 8: "len(items)"})
    r = fill_text(TEXT, denoiser=d, checks=DEFAULT_CHECKS)
    assert r.text == TEXT and r.edits == []
    (f,) = r.fills
    assert f.text == MARK and f.rejected == "1 new syntax error"
    assert r.stats.rejected == 1
    assert r.to_dict()["fills"][0]["rejected"] == "1 new syntax error"


def test_checks_off_write_the_first_decode():
    d = ByLength({16: "len(values", 8: "values"})
    r = fill_text(TEXT, denoiser=d)
    assert r.text == TEXT.replace(MARK, "len(values") and r.fills[0].rejected is None


def test_one_candidate_only_rejects():
    d = ByLength({16: "len(values", 8: "values"})
    r = fill_text(TEXT, denoiser=d, checks=DEFAULT_CHECKS, candidates=1)
    assert r.text == TEXT and r.stats.candidates == 0 and r.fills[0].rejected


def test_the_best_scoring_passing_alternative_wins():
    d = ByLength(
        {16: "len(values", 8: "values", 4: "1"},
    )
    d.confidence = lambda span, slot, call: 0.6 if call >= 3 else 0.99
    r = fill_text(TEXT, denoiser=d, checks=DEFAULT_CHECKS, candidates=3)
    assert r.stats.candidates == 2
    assert r.fills[0].text in ("values", "1") and r.fills[0].rejected is None


def test_only_the_failing_span_of_a_window_is_redone():
    text = "def f(values):\n    a = <mask>\n    return <mask>\n"
    d = ByLength({16: "len(values)", 8: "len(values)"})
    d.by_length = {16: "len(values)", 8: "values"}
    r = fill_text(text, denoiser=d, checks=DEFAULT_CHECKS)
    assert r.fills[0].rejected is None and r.fills[1].rejected is None
    assert r.stats.candidates == 0


def test_a_fill_that_breaks_the_file_does_not_fail_the_holes_of_other_windows():
    """Fills of different windows never saw each other, so each window is checked with
    the others' holes as they were: two unclosed calls in one window (which the parser's
    recovery lets run to the end of the file) leaves the other window's fill alone."""
    filler = "".join(f"    x{i} = {i}\n" for i in range(40))
    text = (
        f"def f(values):\n    a = <mask>\n{filler}    return a\n\n\n"
        f"def g(values):\n{filler}    return <mask>\n"
    )
    d = TargetDenoiser({"a = ": "len(len(values", "return ": "values"}, confidence=0.99)
    r = fill_text(text, denoiser=d, checks=DEFAULT_CHECKS, window_tokens=160)
    assert r.stats.windows == 2
    assert r.fills[0].rejected == "1 new syntax error"
    assert r.fills[1].rejected is None and r.fills[1].text == "values"


def test_a_rewrite_is_checked_against_the_selection_as_written():
    text = "def f(values):\n    return len(values)\n"
    start = text.index("len")
    d = ByLength({10: "len(values"}, other="len(values")
    r = fill_spans(
        text, [Span(start, start + len("len(values)"), 10)], denoiser=d, checks=DEFAULT_CHECKS
    )
    assert r.text == text and r.fills[0].rejected and r.edits == []


def test_a_selected_line_rewritten_so_that_python_cannot_parse_the_file_is_rejected():
    # a selection is checked against the lines as written, which Python parses: a
    # rewrite whose block has no body fails, though tree-sitter reads past it
    text = "def f(x):\n    y = x\n    return y\n"
    line = Span(text.index("    y"), text.index("    return"))  # the whole line
    d = TargetDenoiser(["if y:"], confidence=0.99)
    r = fill_spans(text, [line], denoiser=d, checks="parse", candidates=1)
    assert r.text == text and r.fills[0].rejected.startswith("Python cannot parse it")


def test_an_exact_span_has_no_alternative():
    d = ByLength({4: "len("})
    r = fill_text(
        TEXT.replace(MARK, "<mask:4>"), denoiser=d, checks=DEFAULT_CHECKS, exact_length=True
    )
    assert r.fills[0].rejected and r.stats.candidates == 0


# -- the engine: raced lengths -----------------------------------------------------


class ScoredByLength(ByLength):
    """ByLength whose confidence (at decode and when scored) depends on the span's length:
    `scores[n]` for a span of n slots, 0.6 otherwise."""

    def __init__(self, targets: dict[int, str], scores: dict[int, float], **kw):
        super().__init__(targets, **kw)
        self.scores, self._len = scores, 0
        self.confidence = lambda span, slot, call: self.scores.get(self._len, 0.6)

    def _target(self, canvas, k, start):
        (end,) = [e for s, e in self.spans_of(canvas) if s == start]
        self._len = end - start
        return super()._target(canvas, k, start)


RACE = {16: "len(values)", 8: "values+1", 4: "v[0]", 2: "xy", 1: "y"}  # exact lengths


def test_a_failing_hole_races_exact_shorter_lengths_and_the_best_scored_wins():
    d = ScoredByLength({**RACE, 16: "len(values"}, {8: 0.99})
    r = fill_text(TEXT, denoiser=d, lengths=5, checks=DEFAULT_CHECKS)
    assert r.text == TEXT.replace(MARK, "values+1") and r.fills[0].rejected is None
    assert r.stats.candidates == 4 and r.stats.nfe == d.nfe
    # the primary alone, then one batched round: 8, 4, 2, 1 slots side by side (only
    # `values+1` passes the name check: no scoring pass)
    sizes = [len(canvases) for canvases, _ in d.calls]
    assert 4 in sizes and set(sizes[: sizes.index(4)]) == {1}
    d = ScoredByLength({**RACE, 16: "len(values", 1: "f", 8: "w+1"}, {1: 0.99})  # exactly
    r = fill_text(TEXT, denoiser=d, lengths=5, checks=DEFAULT_CHECKS)  # one token: no growth
    assert r.text == TEXT.replace(MARK, "f")


def test_one_token_wins_only_when_no_longer_alternative_passes():
    d = ScoredByLength({**RACE, 16: "len(values", 1: "f"}, {1: 0.99})
    r = fill_text(TEXT, denoiser=d, lengths=5, checks=DEFAULT_CHECKS)
    assert r.text == TEXT.replace(MARK, "values+1")  # scored below `f`, yet longer


def test_lengths_race_the_last_halvings_before_one_token():
    d = ScoredByLength({**RACE, 16: "len(values", 4: "f(1)"}, {8: 0.99})
    r = fill_text(TEXT, denoiser=d, lengths=4, checks=DEFAULT_CHECKS)
    # 4, 2, 1 slots: no 8 (`values+1`, which would have won)
    assert r.text == TEXT.replace(MARK, "f(1)") and r.stats.candidates == 3
    r = fill_text(
        TEXT.replace(MARK, "<mask:32>"),
        denoiser=ScoredByLength({32: "len(values", 4: "f(1)", 1: "f"}, {}),
        lengths=3,
        checks=DEFAULT_CHECKS,
    )
    assert r.fills[0].text == "f"  # 2 and 1 slots (32 >> 4, >> 5): 16, 8 or 4 not raced


def test_a_passing_fill_is_kept_and_races_nothing():
    d = ScoredByLength(RACE, {8: 0.99})  # a shorter length would score higher
    r = fill_text(TEXT, denoiser=d, lengths=5, checks=DEFAULT_CHECKS)
    assert r.text == TEXT.replace(MARK, "len(values)") and r.stats.candidates == 0
    assert all(len(canvases) == 1 for canvases, _ in d.calls)


def test_one_length_is_the_primary_decode():
    d = ScoredByLength(RACE, {8: 0.99})
    r = fill_text(TEXT, denoiser=d)
    assert r.text == TEXT.replace(MARK, "len(values)") and r.stats.candidates == 0
    assert all(len(canvases) == 1 for canvases, _ in d.calls)


def test_a_raced_candidate_that_fails_the_checks_cannot_win():
    d = ScoredByLength({**RACE, 16: "len((", 8: "values((", 4: "f(1)"}, {8: 0.99, 4: 0.9})
    r = fill_text(TEXT, denoiser=d, lengths=5, checks=DEFAULT_CHECKS)
    assert r.text == TEXT.replace(MARK, "f(1)") and r.fills[0].rejected is None


def test_a_rewrite_keeps_its_length_and_an_exact_span_is_not_raced():
    text = "def f(values):\n    return len(values)\n"
    start = text.index("len")
    d = ScoredByLength({11: "len(values)", 5: "value"}, {5: 0.99})
    r = fill_spans(text, [Span(start, start + len("len(values)"))], denoiser=d, lengths=5)
    assert r.stats.candidates == 0 and r.text == text
    d = ScoredByLength({4: "vals", 2: "xx"}, {2: 0.99})
    r = fill_text(TEXT.replace(MARK, "<mask:4>"), denoiser=d, lengths=5, exact_length=True)
    assert r.stats.candidates == 0 and r.fills[0].text == "vals"


@pytest.mark.parametrize("n", [0, 9, True, 2.5])
def test_bad_lengths_are_rejected(n):
    with pytest.raises(OptionError, match="lengths"):
        SamplerOptions(lengths=n)


# -- the command --------------------------------------------------------------------


def test_the_command_leaves_a_rejected_hole_as_it_was_and_says_why(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(
        loading, "load_denoiser", lambda *a, **kw: ByLength({16: "len(values", 8: "(values"})
    )
    f = tmp_path / "m.py"
    f.write_text(TEXT)
    assert main(["fill", "--in-place", str(f)]) == 0  # reported, not an error
    assert f.read_text() == TEXT
    err = capsys.readouterr().err
    assert "2:12: left as it was: every candidate failed the checks (1 new syntax error)" in err
    assert "1 left as they were" in err


def test_the_command_writes_the_candidate_that_passes(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(
        loading, "load_denoiser", lambda *a, **kw: ByLength({16: "len(values", 8: "values"})
    )
    f = tmp_path / "m.py"
    f.write_text(TEXT)
    assert main(["fill", "--json", "--lengths", "1", str(f)]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["text"] == TEXT.replace(MARK, "values")
    assert obj["stats"]["candidates"] == 1 and obj["fills"][0]["rejected"] is None
    assert main(["fill", "--json", "--no-checks", str(f)]) == 0
    assert json.loads(capsys.readouterr().out)["text"] == TEXT.replace(MARK, "len(values")


# -- a hole on a line that opens a block: its `:` is checked ------------------------------

HEADER = "def f(lines):\n    <mask>\n        feed(lines[0])\n    return lines\n"


@pytest.mark.parametrize(
    ("fill", "rejected"),
    [("if lines[0]", "1 new syntax error"), ("if lines:", None)],
    ids=["colon dropped", "a header"],
)
def test_a_header_holes_colon_is_checked(fill, rejected):
    r = fill_text(
        HEADER, denoiser=TargetDenoiser([fill], confidence=0.99), checks="parse", candidates=1
    )
    assert r.fills[0].rejected == rejected
    assert r.text == (HEADER if rejected else HEADER.replace("<mask>", fill))
