"""`infill fill`: output, files, and every bad input as a one-line error."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys

import pytest
from fakes import TargetDenoiser
from test_copy_fills import TWICE, Spellings

from diffusion_infill.infill.cli import main
from diffusion_infill.model import loading


@pytest.fixture
def fake_model(monkeypatch):
    """Replace the model loader with one that returns a fake and counts loads."""
    loads = []

    def load(model_dir=None, **kw):
        loads.append((model_dir, kw))
        return TargetDenoiser({"= ": "42", "return ": "x + 1"}, confidence=0.99)

    monkeypatch.setattr(loading, "load_denoiser", load)
    return loads


def _one_line_error(err: str, *needles: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("infill: ")
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], lines[0]


def test_fill_prints_diff_and_summary(tmp_path, capsys, fake_model):
    f = tmp_path / "m.py"
    f.write_text("x = <mask>\n")
    assert main(["fill", "--lengths", "1", str(f)]) == 0
    out, err = capsys.readouterr()
    assert f"--- a/{f}\n+++ b/{f}\n" in out
    assert "-x = <mask>\n+x = 42\n" in out
    assert re.fullmatch(
        rf"{re.escape(str(f))}: 1 spans, 2 tokens, 1 forward passes \(0\.50/token\), "
        r"1 steps, \d+ ms\n",
        err,
    )
    assert f.read_text() == "x = <mask>\n"  # not written without --in-place


def test_in_place_writes_exact_bytes(tmp_path, capsys, fake_model):
    f = tmp_path / "m.py"
    f.write_bytes("# é\r\nx = <mask>\r\n\tz = 1  \r\n".encode())
    assert main(["fill", "--in-place", str(f)]) == 0
    assert f.read_bytes() == "# é\r\nx = 42\r\n\tz = 1  \r\n".encode()
    out, err = capsys.readouterr()
    assert out == "" and "1 spans" in err


def test_json_output(tmp_path, capsys, fake_model):
    f = tmp_path / "m.py"
    f.write_text("def f(x):\n    return <mask>\n")
    assert main(["fill", "--json", "--lengths", "1", str(f)]) == 0
    out, err = capsys.readouterr()
    obj = json.loads(out)
    assert obj["path"] == str(f)
    assert obj["text"] == "def f(x):\n    return x + 1\n"
    assert obj["edits"] == [{"start": 21, "end": 27, "new_text": "x + 1"}]
    assert obj["stats"]["tokens"] == 5 and obj["stats"]["nfe"] == 1
    assert "trace" not in obj and err == ""


def test_a_failing_hole_races_shorter_lengths_by_default(tmp_path, capsys, fake_model):
    f = tmp_path / "m.py"
    f.write_text("def f(x):\n    return <mask>\n")
    assert main(["fill", "--json", str(f)]) == 0
    obj = json.loads(capsys.readouterr().out)
    # the fill passes its checks: kept, nothing raced
    assert obj["stats"]["candidates"] == 0 and obj["text"] == "def f(x):\n    return x + 1\n"
    f.write_text("def f(y):\n    return <mask>\n")  # `x` is no name of the file
    assert main(["fill", "--json", str(f)]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["stats"]["candidates"] == 3  # 4, 2, 1 slots: the fake's fill fails at all
    assert obj["fills"][0]["rejected"]
    assert main(["fill", "--json", "--lengths", "9", str(f)]) == 2
    assert "lengths must be <= 8" in capsys.readouterr().err


def test_an_in_line_hole_takes_a_copy_of_the_code_around_it_unless_told_not_to(
    tmp_path, capsys, monkeypatch
):
    made: list[Spellings] = []
    call = [0]  # the copies' pass: the call after the fill's own (0: none favoured)

    def load(model_dir=None, **kw):  # noqa: ANN001, ANN202
        made.append(Spellings("w + h", "w * h", call[0]))
        return made[-1]

    monkeypatch.setattr(loading, "load_denoiser", load)
    f = tmp_path / "m.py"
    f.write_text(TWICE)
    assert main(["fill", "--json", "--no-context-copies", str(f)]) == 0
    assert json.loads(capsys.readouterr().out)["fills"][0]["text"] == "w + h"
    call[0] = len(made[-1].calls) + 1
    assert main(["fill", "--json", str(f)]) == 0
    assert json.loads(capsys.readouterr().out)["fills"][0]["text"] == "w * h"
    assert main(["fill", "--json", "--no-context-copies", str(f)]) == 0
    assert json.loads(capsys.readouterr().out)["fills"][0]["text"] == "w + h"


def test_json_with_trace(tmp_path, capsys, fake_model):
    f = tmp_path / "m.py"
    f.write_text("y = <mask>\n")
    assert main(["fill", "--json", "--trace", str(f)]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["trace"][0]["spans"] == [[0, "42" + "∅" * 14]]


def test_trace_goes_to_stderr(tmp_path, capsys, fake_model):
    f = tmp_path / "m.py"
    f.write_text("y = <mask>\n")
    assert main(["fill", "--trace", str(f)]) == 0
    out, err = capsys.readouterr()
    assert "step 1 canvas 0: scored 16, committed 0:0" in err
    assert "span 0: '42∅" in err
    assert "step" not in out


def test_several_files_one_model_load(tmp_path, capsys, fake_model):
    files = []
    for i in range(3):
        f = tmp_path / f"f{i}.py"
        f.write_text(f"v{i} = <mask>\n")
        files.append(str(f))
    assert main(["fill", "--model", str(tmp_path), "--order", "left-to-right", *files]) == 0
    out, err = capsys.readouterr()
    assert out.count("+++ b/") == 3 and err.count(" spans, ") == 3
    assert len(fake_model) == 1 and fake_model[0][0] == str(tmp_path)


def test_sampler_flags_are_passed_through(tmp_path, capsys, fake_model):
    f = tmp_path / "m.py"
    f.write_text("x = <mask:4>\n")
    args = [
        "fill",
        "--json",
        "--exact-length",
        "--steps",
        "1",
        "--temperature",
        "0.5",
        "--seed",
        "3",
        "--no-checks",  # a sampled junk fill is written as it is
        str(f),
    ]
    assert main(args) == 0
    stats = json.loads(capsys.readouterr().out)["stats"]
    assert stats["nfe"] == 1 and stats["tokens"] == 4


def test_custom_marker_flag(tmp_path, capsys, fake_model):
    f = tmp_path / "m.py"
    f.write_text("x = ??\n")
    assert main(["fill", "--marker", "??", "--json", str(f)]) == 0
    assert json.loads(capsys.readouterr().out)["text"] == "x = 42\n"


def test_one_bad_file_does_not_stop_the_others(tmp_path, capsys, fake_model):
    good = tmp_path / "good.py"
    good.write_text("x = <mask>\n")
    assert main(["fill", str(tmp_path / "missing.py"), str(good)]) == 1
    out, err = capsys.readouterr()
    assert "+x = 42" in out
    assert f"infill: {tmp_path / 'missing.py'}: no such file" in err


@pytest.mark.parametrize(
    ("content", "needles"),
    [
        (b"x = 1\n", ["no holes"]),
        (b"x = <mask:>\n", [":1:5: malformed hole marker '<mask:>'"]),
        (b"x = <mask:0>\n", ["malformed hole marker '<mask:0>'"]),
        (b"x = <mask:x>\n", ["malformed hole marker '<mask:x>'"]),
        (b"x = <mask:12\n", ["unclosed hole marker"]),
        (b"x = <mask>\x00\x01", ["binary file (contains NUL bytes)"]),
        (b"x = '\xff\xfe' <mask>\n", ["not valid UTF-8 (byte 5)"]),
        (b"x = <mask:999>\n", ["asks for 999 tokens; max_span_tokens is 256"]),
    ],
)
def test_bad_files_get_one_line_errors(tmp_path, capsys, fake_model, content, needles):
    f = tmp_path / "bad.py"
    f.write_bytes(content)
    assert main(["fill", str(f)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    _one_line_error(err, str(f), *needles)


def test_directory_and_missing_file(tmp_path, capsys, fake_model):
    assert main(["fill", str(tmp_path)]) == 1
    _one_line_error(capsys.readouterr().err, "is a directory")
    assert main(["fill", str(tmp_path / "nope.py")]) == 1
    _one_line_error(capsys.readouterr().err, "no such file")
    assert fake_model == []  # no model loaded for files without holes


def test_missing_model_directory(tmp_path, capsys):
    f = tmp_path / "m.py"
    f.write_text("x = <mask>\n")
    assert main(["fill", "--model", str(tmp_path / "no-model"), str(f)]) == 1
    _one_line_error(capsys.readouterr().err, "cannot load the model", "no-model")


def test_a_corrupt_model_directory_is_reported_not_raised(tmp_path, capsys):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{not json")
    (model / "model.safetensors").write_bytes(b"")
    (model / "tokenizer.json").write_text("{}")
    f = tmp_path / "m.py"
    f.write_text("x = <mask>\n")
    assert main(["fill", "--model", str(model), str(f)]) == 1
    _one_line_error(capsys.readouterr().err, "cannot load the model", "corrupt")


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--threshold", "2"], "threshold for order 'confidence' must be in"),
        (["--order", "random"], "unknown order 'random'"),
        (["--order", "left-to-right", "--threshold", "0.5"], "takes no threshold"),
        (["--steps", "0"], "max_steps must be >= 1"),
        (["--temperature", "-1"], "temperature must be >= 0"),
        (["--remask-budget", "3"], "remask_budget needs remask_threshold"),
        (["--marker", "a b"], "marker"),
        (["--span-tokens", "0"], "default_span_tokens must be >= 1"),
        (["--grow-cap", "0"], "grow_cap must be >= 1"),
    ],
)
def test_bad_options_are_usage_errors(tmp_path, capsys, fake_model, flags, needle):
    f = tmp_path / "m.py"
    f.write_text("x = <mask>\n")
    assert main(["fill", *flags, str(f)]) == 2
    _one_line_error(capsys.readouterr().err, "error", needle)
    assert fake_model == []


@pytest.mark.parametrize("argv", [[], ["fill"], ["fill", "--steps", "x", "f.py"], ["frob"]])
def test_usage_errors_exit_2(capsys, argv):
    assert main(argv) == 2
    assert "usage:" in capsys.readouterr().err


def test_help_exits_0(capsys):
    assert main(["fill", "--help"]) == 0
    assert "--in-place" in capsys.readouterr().out


def test_console_entry_point_as_a_process(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "diffusion_infill.infill.cli", "fill", str(tmp_path / "missing.py")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1
    assert proc.stdout == ""
    _one_line_error(proc.stderr, "missing.py: no such file")


@pytest.mark.parametrize(
    ("source", "target", "forbidden"),
    [
        ("s = 'abc <mask> def'\n", "it's\nok", "'\n"),  # one line: no quote, no newline
        ('s = "abc <mask> def"\n', 'say "hi"', '"\n'),
        ('def f():\n    """Doc <mask> end."""\n', 'say "hi"\nthen', '"'),  # newlines fine
    ],
)
def test_a_hole_inside_a_string_literal_cannot_break_its_quoting(
    tmp_path, capsys, monkeypatch, source, target, forbidden
):
    monkeypatch.setattr(
        loading, "load_denoiser", lambda *a, **kw: TargetDenoiser([target], confidence=0.99)
    )
    f = tmp_path / "s.py"
    f.write_text(source)
    assert main(["fill", "--json", str(f)]) == 0
    obj = json.loads(capsys.readouterr().out)
    (fill,) = obj["fills"]
    assert fill["text"] and not set(fill["text"]) & set(forbidden), fill
    ast.parse(obj["text"])  # still one string literal, still Python


def test_a_hole_in_code_or_an_f_string_field_may_write_quotes(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(
        loading, "load_denoiser", lambda *a, **kw: TargetDenoiser(["'a'", "b"], confidence=0.99)
    )
    f = tmp_path / "s.py"
    f.write_text("b = 1\nx = <mask>\ny = f'{<mask>}'\n")
    assert main(["fill", "--json", str(f)]) == 0
    assert json.loads(capsys.readouterr().out)["text"] == "b = 1\nx = 'a'\ny = f'{b}'\n"
