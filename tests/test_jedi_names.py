"""Names at a position from jedi (infill/core/jedi_names.py) and the `member` check that
uses them (infill/core/checks.py): a fill naming an attribute, module member or keyword
argument that does not exist loses like a syntax error; where jedi cannot judge, or is
absent, slow or failing, the fill goes on and a log line says why."""

from __future__ import annotations

import logging
import sys

import pytest
from test_checks import ByLength, problems

from diffusion_infill.infill.cli import main
from diffusion_infill.infill.core import jedi_names
from diffusion_infill.infill.core.checks import check_fills, splice
from diffusion_infill.infill.core.engine import fill_text
from diffusion_infill.infill.core.errors import InputError
from diffusion_infill.infill.core.jedi_names import JediBudget, Use, missing_members, names_at
from diffusion_infill.infill.core.options import DEFAULT_CHECKS
from diffusion_infill.infill.core.snippets import Source
from diffusion_infill.infill.serve.protocol import (
    FillRequest,
    FixRequest,
    ProtocolError,
    decode_request,
    pack,
)
from diffusion_infill.model import loading

pytest.importorskip("jedi")

MARK = "<mask>"
CLASS = (
    "import os\n\n\n"
    "class Reader:\n"
    "    def __init__(self, raw):\n"
    "        self.raw = raw\n\n"
    "    def value(self):\n"
    "        return self.raw\n\n"
    "    def read(self, path):\n"
    "        return <mask>\n\n\n"
    "def open_it(path, *, mode='r'):\n"
    "    return path\n"
)


@pytest.fixture(autouse=True)
def _fresh():
    jedi_names.clear_caches()
    yield
    jedi_names.clear_caches()


def member(fill: str, text: str = CLASS) -> list[tuple[str, int]]:
    return [p for p in problems(text, fill) if p[0] == "member"]


# -- names at a position ---------------------------------------------------------------


def test_after_a_dot_the_members_of_a_module_jedi_knows_whole():
    text = "import os\nos.path.\n"
    at = names_at(text, len(text) - 1)
    assert at is not None and at.position == "member" and at.known
    assert at.has("join") and not at.has("joinn") and at.base == "os.path"


def test_in_a_call_the_keyword_arguments_of_the_callee():
    text = "def f(a, *, mode=1):\n    pass\n\nf(1, )\n"
    at = names_at(text, text.index("f(1, ") + 5)
    assert at is not None and at.position == "argument" and at.known
    assert at.has("mode") and at.has("a")


def test_elsewhere_the_visible_names():
    text = "import json\nlimit = 3\n\ndef f(items):\n    n = 1\n    \n    return n\n"
    at = names_at(text, text.index("    \n") + 4)
    assert at is not None and at.position == "visible" and not at.known
    assert {"json", "limit", "items", "len"} <= {n.name for n in at.names}


def test_a_class_with_getattr_is_not_known_whole():
    text = (
        "class D:\n    def __getattr__(self, name):\n        return 1\n\n"
        "    def f(self):\n        return self.\n\n\nx = 1\n"
    )
    at = names_at(text, text.index("self.\n") + 5)
    assert at is not None and not at.known and "__getattr__" in at.why


def test_answers_are_cached_per_text():
    text = "import os\nos.path.\n"
    assert names_at(text, len(text) - 1) is names_at(text, len(text) - 1)


# -- the member check --------------------------------------------------------------------


@pytest.mark.parametrize(
    "fill",
    ["os.path.joinn(path)", "self.signature()", "Reader.signature", "open_it(path, modee='w')"],
)
def test_a_fill_naming_what_does_not_exist_is_blamed(fill):
    assert member(fill) == [("member", 0)]


@pytest.mark.parametrize(
    "fill",
    [
        "os.path.join(path)",
        "self.value()",
        "self.raw.bit_length()",
        "path.anything",  # a parameter: jedi infers nothing
        "Reader(path).raw.anything",  # an expression's type: jedi's guess, not judged
        "open_it(path, mode='w')",
        "dict(path, anything=1)",  # **kwargs
    ],
)
def test_a_fill_naming_what_exists_or_what_jedi_cannot_judge_passes(fill):
    assert member(fill) == []


def test_a_variable_is_not_judged_by_jedi_s_guess_of_its_type():
    # jedi reads `b` as bytes from its last assignment; the code is right
    text = (
        "class Buffer:\n    def extract(self):\n        return 1\n\n\n"
        "def f():\n    b = Buffer()\n    b = b'x'\n    return <mask>\n"
    )
    assert member("b.extract()", text) == []


def test_a_callee_bound_to_a_variable_is_not_judged():
    text = "def g(a):\n    return a\n\n\nh = g\nh(<mask>)\n"
    assert member("1, other=2", text) == []
    text = "def g(a):\n    return a\n\n\ng(<mask>)\n"
    assert member("1, other=2", text) == [("member", 0)]


def test_a_class_the_text_cuts_off_is_not_known_whole():
    cut = "class Reader:\n    def read(self, path):\n        return <mask>\n"
    assert member("self.signature()", cut) == []


def test_a_class_with_an_unknown_base_is_not_known_whole():
    text = CLASS.replace("class Reader:", "class Reader(Missing):")
    assert member("self.signature()", text) == []


def test_an_attribute_assigned_is_not_a_use():
    text = "class A:\n    def f(self):\n        <mask>\n\n\nx = 1\n"
    assert member("self.fresh = 1", text) == []


def test_the_check_only_runs_when_asked():
    text = CLASS
    ranges = [(text.index(MARK), text.index(MARK) + len(MARK))]
    after, filled = splice(text, ranges, ["os.path.joinn(path)"])
    found = check_fills(text, after, ranges, filled, kinds=("parse", "name"))
    assert found == []


def test_a_fill_naming_a_missing_method_loses_to_the_next_candidate():
    d = ByLength({16: "self.signature()", 8: "self.raw"})
    r = fill_text(CLASS, denoiser=d, checks=DEFAULT_CHECKS, context_copies=False)
    assert r.text == CLASS.replace(MARK, "self.raw")
    assert r.fills[0].rejected is None and r.stats.candidates == 1


def test_without_the_member_check_the_missing_method_is_written():
    d = ByLength({16: "self.signature()", 8: "self.raw"})
    r = fill_text(
        CLASS, denoiser=d, checks=DEFAULT_CHECKS.replace("member,", ""), context_copies=False
    )
    assert r.text == CLASS.replace(MARK, "self.signature()")


def test_the_command_rejects_a_missing_module_member(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(
        loading, "load_denoiser", lambda *a, **kw: ByLength({16: "os.path.joinn"}, other="(((")
    )
    f = tmp_path / "m.py"
    f.write_text(CLASS)
    assert main(["fill", "--in-place", str(f)]) == 0
    assert f.read_text() == CLASS
    assert "os.path has no attribute 'joinn'" in capsys.readouterr().err


# -- where the text lives: its file, its repository, the user's Python ----------------------

USES_HP = "import hp\n\n\ndef run():\n    return <mask>\n"


def _package(tmp_path):  # noqa: ANN001, ANN202
    """A folder with hp.py (which defines `ok`) and main.py (a hole that calls into
    it), and another folder to run from, where jedi cannot find hp by itself."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "hp.py").write_text("def ok():\n    return 1\n")
    (tmp_path / "pkg" / "main.py").write_text(USES_HP)
    (tmp_path / "elsewhere").mkdir()
    return tmp_path / "pkg" / "main.py", tmp_path / "elsewhere"


def test_a_sibling_module_is_judged_from_the_text_s_source(tmp_path, monkeypatch):
    main_py, elsewhere = _package(tmp_path)
    monkeypatch.chdir(elsewhere)
    d = ByLength({16: "hp.nope()", 8: "hp.ok()"})

    def fill(source):  # noqa: ANN001, ANN202
        jedi_names.clear_caches()
        return fill_text(
            USES_HP, denoiser=d, checks=DEFAULT_CHECKS, context_copies=False, source=source
        ).text

    assert fill(None) == USES_HP.replace(MARK, "hp.nope()")  # jedi cannot find hp
    assert fill(Source(str(main_py))) == USES_HP.replace(MARK, "hp.ok()")
    root = Source("main.py", root=str(main_py.parent))  # a relative path: the root resolves
    assert fill(root) == USES_HP.replace(MARK, "hp.ok()")


def test_the_command_reads_the_file_s_own_package(tmp_path, capsys, monkeypatch):
    main_py, elsewhere = _package(tmp_path)
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("INFILL_WORKER", "off")
    monkeypatch.setattr(
        loading, "load_denoiser", lambda *a, **kw: ByLength({16: "hp.nope()"}, other="(((")
    )
    assert main(["fill", "--in-place", "--repo", "off", str(main_py)]) == 0
    assert main_py.read_text() == USES_HP
    assert "has no attribute 'nope'" in capsys.readouterr().err


def test_the_command_s_python_that_does_not_exist_leaves_the_fill_to_the_other_checks(
    tmp_path, caplog, monkeypatch
):
    main_py, elsewhere = _package(tmp_path)
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("INFILL_WORKER", "off")
    monkeypatch.setattr(
        loading, "load_denoiser", lambda *a, **kw: ByLength({16: "hp.nope()"}, other="(((")
    )
    argv = ["fill", "--in-place", "--repo", "off", "--python", "/no/such/python", str(main_py)]
    with caplog.at_level(logging.WARNING, logger="diffusion_infill.names"):
        assert main(argv) == 0
    assert main_py.read_text() == USES_HP.replace(MARK, "hp.nope()")
    assert "jedi raised InvalidPythonEnvironment: /no/such/python" in caplog.text


@pytest.mark.parametrize(
    "source, match",
    [
        ("m.py", "must be a Source"),
        (Source(path=3), "path must be a string"),
        (Source(root="a\x00b"), "NUL"),
        (Source(python="p" * 5000), "over 1000 characters"),
    ],
)
def test_a_bad_source_is_a_clear_error(source, match):
    with pytest.raises(InputError, match=match):
        fill_text(USES_HP, denoiser=ByLength({16: "1"}), source=source)


def test_the_protocol_carries_the_source_and_omits_none():
    req = FillRequest(1, USES_HP, source=Source("/r/main.py", "/r", None))
    assert decode_request(pack(req)[4:]) == req
    assert "source" not in FillRequest(2, "x\n").to_wire()
    with pytest.raises(ProtocolError, match="source.path must be a string"):
        FillRequest.from_wire({"id": 3, "text": "x", "source": {"path": 1}})
    with pytest.raises(ProtocolError, match="unknown field 'home'"):
        FillRequest.from_wire({"id": 4, "text": "x", "source": {"home": "/"}})
    fix = FixRequest(5, USES_HP, source=Source("/r/main.py", None, "/venvs/app"))
    assert decode_request(pack(fix)[4:]) == fix
    assert "source" not in FixRequest(6, "x\n").to_wire()


# -- bad input: the fill goes on without jedi, and a log line says why ----------------------------


def _uses(text: str, word: str) -> list[tuple[int, Use]]:
    dot = text.index("." + word)
    return [(0, Use(word, dot + 1, dot))]


def test_text_jedi_cannot_parse_gets_a_bounded_answer():
    text = "import os\nos.path.joinn(\ndef ((:\n  ]]] class\n"
    found = missing_members(text, _uses(text, "joinn"))
    assert found is not None and [m.word for m in found] == ["joinn"]


def test_an_environment_that_does_not_exist_is_logged(caplog):
    text = "import os\nos.path.\n"
    with caplog.at_level(logging.WARNING, logger="diffusion_infill.names"):
        at = names_at(text, len(text) - 1, environment="/no/such/python", budget=JediBudget())
    assert at is None
    assert "jedi raised InvalidPythonEnvironment" in caplog.text


def test_a_path_and_root_that_do_not_exist_still_get_answers():
    text = "import os\nos.path.\n"
    at = names_at(text, len(text) - 1, path="/no/such/dir/m.py", root="/no/such/root")
    assert at is not None and at.known and at.has("join")


def _unjudged(text: str, caplog) -> str:  # noqa: ANN001
    """What is logged when `text`'s hole, filled with `os.path.joinn` under the command's
    checks, is returned as filled: jedi could not judge it, today's checks pass it."""
    d = ByLength({16: "os.path.joinn"})
    with caplog.at_level(logging.WARNING, logger="diffusion_infill.names"):
        r = fill_text(text, denoiser=d, checks=DEFAULT_CHECKS, context_copies=False)
    assert r.text == text.replace(MARK, "os.path.joinn")  # today's checks pass it
    return caplog.text


def test_jedi_raising_leaves_the_fill_to_the_other_checks(monkeypatch, caplog):
    import jedi

    def broken(*a, **kw):
        raise RuntimeError("inference blew up")

    monkeypatch.setattr(jedi, "Script", broken)
    assert "jedi raised RuntimeError: inference blew up" in _unjudged(CLASS, caplog)


def test_jedi_absent_leaves_the_fill_to_the_other_checks(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "jedi", None)  # import jedi raises ImportError
    monkeypatch.setattr(jedi_names, "_failed", set())
    assert "jedi is not installed" in _unjudged(CLASS, caplog)


def test_a_deeply_nested_file_is_not_handed_to_jedi(caplog):
    deep = "x = " + "(" * 5000 + "1" + ")" * 5000 + "\n"
    text = "import os\n" + deep + "def f(path):\n    return <mask>\n"
    assert "nests deeper than" in _unjudged(text, caplog)


def test_a_spent_budget_skips_jedi_and_says_so(caplog):
    text = "import os\nos.path.joinn\n"
    budget = JediBudget(seconds=0.0)
    with caplog.at_level(logging.WARNING, logger="diffusion_infill.names"):
        assert missing_members(text, _uses(text, "joinn"), budget=budget) is None
        assert missing_members(text, _uses(text, "joinn"), budget=budget) is None
    assert budget.skipped == 2
    assert caplog.text.count("jedi are spent") == 1  # once per request


def test_an_offset_outside_the_text_is_an_error():
    with pytest.raises(ValueError, match="outside the text"):
        names_at("x = 1\n", 99)


def test_a_fill_that_breaks_the_parse_costs_no_jedi(monkeypatch):
    asked = []
    monkeypatch.setattr(jedi_names, "_judge", lambda *a: asked.append(a) or "")
    assert [k for k, _ in problems(CLASS, "os.path.joinn(path")] == ["parse"]
    assert asked == []
    problems(CLASS, "os.path.joinn(path)")
    assert len(asked) == 2  # os.path, then .joinn
