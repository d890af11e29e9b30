"""Held-out holes by shape (benchmarks/shapes.py) and their evaluation script."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.eval_shapes import same_lines
from benchmarks.heldout import EDITOR_CONTEXT, EDITOR_WINDOW, load_test_files
from benchmarks.shapes import SHAPES, shape_examples
from diffusion_infill.lsp.excerpt import excerpt


@pytest.fixture(scope="module")
def files(modules_corpus: Path) -> list[str]:
    return load_test_files(modules_corpus, "test")


def test_cursor_and_whole_line_holes_are_the_same_lines(files) -> None:
    cursor = shape_examples(files, "cursor", 8, seed=1)
    whole = shape_examples(files, "whole-line", 8, seed=1)
    assert len(cursor) == len(whole) == 8
    for c, w in zip(cursor, whole, strict=True):
        assert w.truth.endswith("\n") and w.truth.strip() == c.truth.strip()
        assert w.start == 0 or w.text[w.start - 1] == "\n"  # from column 0


@pytest.mark.parametrize("shape", SHAPES)
def test_the_editor_excerpt_holds_the_same_holes_as_the_window(files, shape) -> None:
    short = shape_examples(files, shape, 6, seed=3)
    editor = shape_examples(files, shape, 6, seed=3, window_chars=EDITOR_WINDOW)
    assert [e.truth for e in editor] == [e.truth for e in short]
    for ex in editor:  # the server's excerpt of the file the hole is in
        whole = next(f for f in files if ex.text in f)
        offset = whole.index(ex.text)
        cut = excerpt(whole, offset + ex.start, offset + ex.end, context=EDITOR_CONTEXT)
        assert cut.text == ex.text


def test_part_of_line_holes_are_strictly_inside_one_line(files) -> None:
    for ex in shape_examples(files, "part-of-line", 10, seed=2):
        line_start = ex.text.rfind("\n", 0, ex.start) + 1
        line_end = ex.text.find("\n", ex.end)
        assert "\n" not in ex.truth
        assert len(ex.truth.strip()) < len(ex.text[line_start:line_end].strip())


def test_blocks_are_two_to_eight_whole_lines(files) -> None:
    blocks = shape_examples(files, "block", 10, seed=3)
    assert blocks
    for ex in blocks:
        assert 2 <= ex.truth.count("\n") <= 8 and ex.truth.endswith("\n")
        assert ex.start == 0 or ex.text[ex.start - 1] == "\n"


@pytest.mark.parametrize("shape", SHAPES)
def test_a_wider_window_keeps_the_holes(files, shape: str) -> None:
    short = shape_examples(files, shape, 6, seed=4)
    wide = shape_examples(files, shape, 6, seed=4, window_chars=2400)
    assert [e.truth for e in short] == [e.truth for e in wide]
    assert all(len(w.text) >= len(s.text) for s, w in zip(short, wide, strict=True))


def test_unknown_shape_is_an_error(files) -> None:
    with pytest.raises(ValueError, match="unknown shape 'line'"):
        shape_examples(files, "line", 3)


def test_whole_line_match_counts_indentation_and_line_breaks() -> None:
    assert same_lines("    x = 1  \n", "    x = 1\n")
    assert not same_lines("x = 1\n", "    x = 1\n")
    assert not same_lines("    x = 1", "    x = 1\n")


def _shapes(run_benchmark, model: Path, corpus: Path, out: Path, *args: str) -> tuple:
    """`eval_shapes` on the tiny model: (the finished process, its results)."""
    done = run_benchmark(
        "eval_shapes", "--model", str(model), "--corpus", str(corpus), "--n", "2",
        "--out", str(out), *args,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done, json.loads(out.read_text())


@pytest.mark.slow
def test_end_to_end_with_and_without_line_holes(
    run_benchmark, tiny_model_dir: Path, modules_corpus: Path, tmp_path: Path
) -> None:
    for extra, name in (([], "on.json"), (["--no-line-holes"], "off.json")):
        done, result = _shapes(
            run_benchmark, tiny_model_dir, modules_corpus, tmp_path / name,
            "--shapes", "whole-line,block", "--engine-only", *extra,
        )  # fmt: skip
        assert result["line_holes"] is (not extra)
        for shape in ("whole-line", "block"):
            row = result["shapes"][shape]
            assert row["engine_length"]["n"] == row["true_length"]["n"] == 2
        assert "whole-line" in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    ("shape", "flag", "key"),
    [
        ("part-of-line", "--no-statement-ends", "statement_ends"),
        ("whole-line", "--no-indent-pass", "indent_pass"),
        ("block", "--no-selection-lines", "selection_lines"),
    ],
)
def test_end_to_end_with_an_engine_rule_off(
    run_benchmark, tiny_model_dir: Path, modules_corpus: Path, tmp_path: Path, shape, flag, key
) -> None:
    _, result = _shapes(
        run_benchmark, tiny_model_dir, modules_corpus, tmp_path / "off.json",
        "--shapes", shape, "--lengths-only", "engine", flag,
    )  # fmt: skip
    assert result[key] is False
    assert result["shapes"][shape]["engine_length"]["n"] == 2


@pytest.mark.slow
def test_end_to_end_on_the_holes_that_hold_a_text(
    run_benchmark, tiny_model_dir: Path, modules_corpus: Path, tmp_path: Path, files
) -> None:
    first, second = shape_examples(files, "whole-line", 2, seed=0, window_chars=700)
    text = first.truth.strip()[:12]
    _, result = _shapes(
        run_benchmark, tiny_model_dir, modules_corpus, tmp_path / "some.json",
        "--shapes", "whole-line", "--lengths-only", "engine", "--holes-containing", text,
    )  # fmt: skip
    row = result["shapes"]["whole-line"]["engine_length"]
    assert result["holes_containing"] == text
    assert row["n"] == 1 + (text in second.truth)
    judged = run_benchmark(
        "python_parses", str(tmp_path / "some.json"), "--corpus", str(modules_corpus),
        "--out", str(tmp_path / "parses.json"),
    )  # fmt: skip
    assert judged.returncode == 0, judged.stderr
    cell = json.loads((tmp_path / "parses.json").read_text())["runs"]["some.json"]
    assert cell["whole-line"]["engine_length"]["parsing"]["texts"] <= row["n"]
    done = run_benchmark(
        "eval_shapes", "--model", str(tiny_model_dir), "--corpus", str(modules_corpus),
        "--n", "2", "--shapes", "whole-line", "--holes-containing", "no hole holds this",
    )  # fmt: skip
    assert done.returncode == 2
    assert "no whole-line hole of the 2 drawn holds 'no hole holds this'" in done.stderr


@pytest.mark.slow
def test_end_to_end_with_a_rewrite_length(
    run_benchmark, tiny_model_dir: Path, modules_corpus: Path, tmp_path: Path
) -> None:
    _, result = _shapes(
        run_benchmark, tiny_model_dir, modules_corpus, tmp_path / "rewrite.json",
        "--shapes", "block", "--lengths-only", "engine", "--rewrite-length",
    )  # fmt: skip
    assert result["rewrite_length"] is True
    assert result["shapes"]["block"]["engine_length"]["n"] == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--shapes", "line"], "unknown shape(s): line"),
        (["--n", "0"], "--n, --window-chars and --default-span-tokens must be >= 1"),
        (["--default-span-tokens", "0"], "--default-span-tokens must be >= 1"),
        (["--remask-threshold", "0.95"], "must be below the commit threshold"),
        (["--checks", "parse,spelling"], "checks must be a comma-separated list of"),
        (
            ["--shapes", "cursor", "--corpus", "/nonexistent"],
            "python -m diffusion_infill.model.training.corpus",
        ),
        (["--corpus", "/nonexistent"], "python -m diffusion_infill.model.training.corpus"),
    ],
)
def test_refuses_bad_arguments(run_benchmark, args: list[str], message: str) -> None:
    done = run_benchmark("eval_shapes", *args)
    assert done.returncode == 2 and message in done.stderr


def test_refuses_a_missing_real_files_set(run_benchmark, modules_corpus: Path) -> None:
    done = run_benchmark(
        "eval_shapes",
        "--corpus",
        str(modules_corpus),
        "--shapes",
        "real",
        "--real-files",
        "/nonexistent.jsonl",
    )
    assert done.returncode == 2 and "python -m benchmarks.real_files" in done.stderr


def test_python_parses_counts_fills_that_break_a_text_that_parsed() -> None:
    from benchmarks.heldout import Example
    from benchmarks.python_parses import unparseable

    ok = "def f(x):\n    return x\n"
    start = ok.index("return")
    holes = [Example(ok, start, start + len("return x"), "cursor")] * 3
    holes.append(Example("def f(:\n    return x\n", 12, 20, "cursor"))  # never parsed
    header = "class A:\n    def f(self):\n        return 1\n"
    start = header.index("def")
    holes.append(Example(header, start, start + len("def f(self):"), "cursor"))
    records = [
        {"fill": "return x", "rejected": None},
        {"fill": "if x:", "rejected": None},  # a block with no body
        {"fill": None, "rejected": "1 new syntax error"},  # held back: not judged
        {"fill": "return", "rejected": None},
        {"fill": "def f(**a, b):", "rejected": None},
    ]
    got = unparseable(holes, records)
    assert (got["judged"], got["unparseable"]) == (3, 2)
    # `_` stands in for `return x` (an expression statement), not for the header before
    # its body: `if _:` does
    assert got["parsing"] == {"texts": 4, "neutralised": 3, "stand_in": 4}
    assert got["examples"][0]["fill"] == "if x:" and "indented block" in got["examples"][0]["error"]


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "not found"), ('{"n": 2}', "is not an eval_shapes results file")],
)
def test_python_parses_refuses_what_is_not_a_results_file(
    run_benchmark, tmp_path: Path, content, message
) -> None:
    path = tmp_path / "r.json"
    if content is not None:
        path.write_text(content)
    done = run_benchmark("python_parses", str(path))
    assert done.returncode == 2 and message in done.stderr
