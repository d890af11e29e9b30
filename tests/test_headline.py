"""The headline driver: its runs, and the README table it writes from their files only."""

from __future__ import annotations

import json

import pytest

from benchmarks import headline


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.setattr(headline, "HEADLINE", tmp_path)
    return tmp_path


def _write(where, name, shapes, commit="abc123def4567890", measured="code1"):
    rows = {
        s: {"engine_length": {"exact_match": v, "n": 400, "similarity": 0.25}}
        for s, v in shapes.items()
    }
    data = {"shapes": rows, "commit": commit, "measured": measured}
    (where / f"{name}.json").write_text(json.dumps(data))


def test_the_table_links_each_figure_to_its_file_and_names_the_fill_code(files):
    _write(files, "shapes", {"cursor": 0.1225, "block": 0.0})
    _write(files, "shapes_editor", {"cursor": 0.175}, commit="fedcba9876543210", measured="c2")
    table = headline.table()
    cursor = next(line for line in table.splitlines() if line.startswith("| cursor"))
    assert "[12.2%](benchmarks/results/headline/shapes.json)" in cursor
    assert "[17.5%](benchmarks/results/headline/shapes_editor.json)" in cursor
    assert cursor.count(" - ") == 2  # the true-length runs were not made
    block = next(line for line in table.splitlines() if line.startswith("| block"))
    assert "[0.0%; 0.25](benchmarks/results/headline/shapes.json)" in block
    assert "fill code code1 (commit abc123def456): shapes" in table
    assert "fill code c2 (commit fedcba987654): shapes_editor" in table
    assert "not run: shapes_true, shapes_editor_true" in table


def test_the_readme_block_is_written_again_and_the_rest_kept(files):
    _write(files, "shapes", {"cursor": 0.5})
    text = f"intro\n{headline.BEGIN}\nold table\n{headline.END}\nafter\n"
    new = headline.readme(text)
    assert new.startswith(f"intro\n{headline.BEGIN}\n| hole |") and new.endswith(
        f"{headline.END}\nafter\n"
    )
    assert "old table" not in new and headline.readme(new) == new


def test_a_readme_without_the_block_is_a_clear_error(files):
    with pytest.raises(ValueError, match="no <!-- headline:quality -->"):
        headline.readme("no table here\n")


def test_the_readme_says_what_the_headline_files_say():
    text = headline.README.read_text()
    if headline.BEGIN in text:  # the table is generated once its runs are made
        assert headline.readme(text) == text, "python -m benchmarks.headline --readme"


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--only", "shapes,nope"], "unknown run(s): nope"),
        (["--check"], "--check goes with --readme"),
    ],
)
def test_bad_arguments_are_usage_errors(argv, error, capsys):
    with pytest.raises(SystemExit) as exit_:
        headline.main(argv)
    assert exit_.value.code == 2 and error in capsys.readouterr().err


def test_the_runs_write_where_the_table_reads(capsys):
    headline.main(["--list"])
    out = capsys.readouterr().out
    for name, run in headline.RUNS.items():
        assert f"--out benchmarks/results/headline/{name}.json" in out
        assert run.command()[1:3] == ["-m", f"benchmarks.{run.module}"]


def test_a_run_of_the_same_fill_code_is_not_made_again(files, monkeypatch, capsys):
    # the set is completed over several sittings: a later commit that changes none of
    # the files that decide the figures keeps the runs made
    monkeypatch.setattr(headline, "fill_code", lambda also=(): "same")
    monkeypatch.setattr(headline, "commit", lambda: "0123abcd")
    for name in headline.RUNS:
        _write(files, name, {"cursor": 0.1}, measured="same")
    ran = []
    monkeypatch.setattr(headline.subprocess, "run", lambda *a, **kw: ran.append(a))
    headline.main([])
    assert ran == [] and capsys.readouterr().err.count("done, fill code same") == 4
    monkeypatch.setattr(headline, "commit", lambda: "0123abcd-dirty")
    _write(files, "shapes", {"cursor": 0.1}, measured="older")
    with pytest.raises(SystemExit, match="commit them first"):
        headline.main(["--only", "shapes"])
