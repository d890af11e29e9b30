"""The real one-line fix set: which hunks of two versions are kept, and the evaluation."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from worker_fake_main import WorkerFake

from benchmarks import fix_releases
from benchmarks.fix_eval import changed_range
from benchmarks.fix_releases import build_set
from diffusion_infill.infill.core.results import TokenScore
from diffusion_infill.infill.core.suspect_lines import rank_lines
from diffusion_infill.model.training.corpus.line_changes import one_line_changes
from diffusion_infill.model.training.corpus.release_diffs import (
    SKIP_PATH,
    notes_mention,
    notes_section,
)
from diffusion_infill.model.training.corpus.release_diffs import (
    record as fix_record,
)

OLD = '''"""A small module."""

__version__ = "1.0.0"


def clamp(value, low, high):
    """Keep value between low and high."""
    if value < low:
        return low
    if value > high:
        return high
    return value


def total(items):
    result = 0
    for item in items:
        result += item  # add it
    return result


def scale(values, factor):
    out = []
    for v in values:
        out.append(v * factor)
    return out


def last(items):
    return items[len(items) - 2]
'''


def _edit(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


def _kept(old: str, new: str) -> list:
    return [(c, why) for c, why in one_line_changes(old, new, seed="t")]


def test_a_one_line_fix_is_kept_with_its_windows() -> None:
    new = _edit(OLD, "items[len(items) - 2]", "items[len(items) - 1]")
    ((change, why),) = _kept(OLD, new)
    assert why is None
    assert change.old_line == "    return items[len(items) - 2]"
    assert change.new_line == "    return items[len(items) - 1]"
    assert change.line == OLD.split("\n").index(change.old_line)
    lines, fixed = change.window.split("\n"), change.fixed_window.split("\n")
    assert lines[change.window_line] == change.old_line
    assert fixed[change.window_line] == change.new_line
    assert [a for a, b in zip(lines, fixed, strict=True) if a != b] == [change.old_line]
    assert change.window in OLD and change.fixed_window in new
    assert change.words_changed == 1


def test_the_set_is_the_changes_its_manifest_pins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheels = {}
    for version, text in (("1.0", OLD), ("1.1", _edit(OLD, "len(items) - 2", "len(items) - 1"))):
        wheels["pkg", version] = tmp_path / f"pkg-{version}-py3-none-any.whl"
        with zipfile.ZipFile(wheels["pkg", version], "w") as zf:
            zf.writestr("pkg/mod.py", text)
    monkeypatch.setattr(fix_releases, "fetch", lambda cache, pins: wheels)
    corpus, manifest, pins = (
        tmp_path / "corpus",
        tmp_path / "real_fixes.json",
        {"pkg": ["1.0", "1.1"]},
    )
    corpus.mkdir()
    (corpus / "train.jsonl").write_text(json.dumps({"text": "x = 1\n"}) + "\n")
    chosen = build_set(tmp_path / "a.jsonl", tmp_path, corpus, pins, manifest)  # --select
    assert [r["fixed_line"] for r in chosen] == ["    return items[len(items) - 1]"]
    assert build_set(tmp_path / "b.jsonl", tmp_path, None, pins, manifest) == chosen
    assert (tmp_path / "b.jsonl").read_text() == (tmp_path / "a.jsonl").read_text()
    pinned = json.loads(manifest.read_text())
    pinned["changes"][0]["line"] += 1  # a change these releases do not hold
    manifest.write_text(json.dumps(pinned))
    with pytest.raises(SystemExit, match="1 pinned changes not found: pkg 1.1 pkg/mod.py:"):
        build_set(tmp_path / "c.jsonl", tmp_path, None, pins, manifest)


def test_changes_that_are_not_fixes_are_dropped() -> None:
    cases = {
        "version": ('__version__ = "1.0.0"', '__version__ = "1.0.1"'),
        "no effect": ("result += item  # add it", "result += item  # add the item"),
        "whitespace": ("out.append(v * factor)", "out.append(v*factor)"),
    }
    for reason, (a, b) in cases.items():
        got = _kept(OLD, _edit(OLD, a, b))
        assert [why for _, why in got] == [reason], reason
    docstring = _kept(OLD, _edit(OLD, "Keep value between", "Keep the value between"))
    assert [why for _, why in docstring] == ["no effect"]
    message = 'raise ValueError("bad value")'
    old = OLD + f"\n\ndef check(v):\n    if v is None:\n        {message}\n"
    got = _kept(old, _edit(old, "bad value", "value is None"))
    assert [why for _, why in got] == ["message"]


def test_a_rename_across_the_file_and_multi_line_changes_are_dropped() -> None:
    filler = "".join(f"CONSTANT_{i} = {i}\n" for i in range(60))
    old = f"def f():\n    return old_name(1)\n\n{filler}\ndef g():\n    return old_name(2)\n"
    got = _kept(old, old.replace("old_name", "new_name"))
    assert [why for _, why in got] == ["rename", "rename"]  # two far-apart lines, each alone
    fixed = _kept(old, old.replace("old_name(1)", "other_name(1)"))  # old_name stays in g
    assert [why for _, why in fixed] == [None]
    two = _edit(
        OLD,
        "    if value < low:\n        return low",
        "    if value <= low:\n        return low - 0",
    )
    assert _kept(OLD, two) == []
    near = _edit(_edit(OLD, "if value < low:", "if value <= low:"), "return high", "return 0")
    assert _kept(OLD, near) == []  # two one-line changes in one window
    indented = _edit(OLD, "        result += item  # add it", "    result += item")
    assert _kept(OLD, indented) == []


def test_tests_docs_and_version_files_are_not_read() -> None:
    for path in (
        "tests/test_a.py",
        "pkg/tests/util.py",
        "docs/conf.py",
        "setup.py",
        "pkg/_version.py",
        "test_pkg.py",
        "pkg/test_core.py",
    ):
        assert SKIP_PATH.search(path), path
    for path in ("pkg/core.py", "pkg/testing_helpers.py", "pkg/__init__.py"):
        assert not SKIP_PATH.search(path), path


def test_release_notes_name_the_fix() -> None:
    notes = (
        "Changes\n=======\n\n1.1 (2024)\n- Fix last() returning the wrong item\n- More\n"
        "\n1.0\n- Fix other things\n"
    )
    section = notes_section(notes, "1.0", "1.1")
    assert "last()" in section and "other things" not in section
    new = _edit(OLD, "items[len(items) - 2]", "items[len(items) - 1]")
    ((change, _),) = _kept(OLD, new)
    assert notes_mention(section, change, OLD) == "- Fix last() returning the wrong item"
    assert notes_section(notes, "1.1", "1.2") == ""


def test_lines_are_ranked_by_their_worst_token() -> None:
    text = "a = 1\nb = 2\nc = 3\n"
    scores = [
        TokenScore(0, 1, "a", 0.5, "x", 0.1),
        TokenScore(6, 7, "b", 0.99, "y", 0.9),
        TokenScore(12, 13, "c", 0.9, "z", 0.5),
        TokenScore(4, 5, "1", 0.999, "2", 0.99),
    ]
    # the model is sure of a swap ("1": 0.99 against 0.001): by the worst token, no pass
    den = WorkerFake()
    assert [x.line for x in rank_lines(text, scores, denoiser=den)] == [0, 1, 2]
    assert not den.calls
    ex = {"window": text, "window_line": 1, "buggy_line": "b = 2", "fixed_line": "b = 3"}
    assert changed_range(ex) == (10, 11)
    ex = {**ex, "fixed_line": "b = 2 + 1"}  # an insertion: one character each side
    assert changed_range(ex) == (10, 12)


def _tiny_set(path: Path) -> None:
    records = []
    for a, b in (
        ("items[len(items) - 2]", "items[len(items) - 1]"),
        ("if value > high:", "if value >= high:"),
    ):
        ((c, why),) = _kept(OLD, _edit(OLD, a, b))
        assert why is None
        records.append(fix_record("tiny", "1.0", "1.1", "tiny.py", c))
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.mark.slow
def test_the_evaluation_runs_end_to_end(
    run_benchmark, tiny_model_dir: Path, tmp_path: Path
) -> None:
    fixes, out = tmp_path / "fixes.jsonl", tmp_path / "out.json"
    _tiny_set(fixes)
    done = run_benchmark(
        "real_fixes", "eval", "--set", str(fixes), "--model", str(tiny_model_dir), "--out", str(out)
    )
    assert done.returncode == 0, done.stderr
    assert "top-1" in done.stdout and "random" in done.stdout
    got = json.loads(out.read_text())
    assert got["all"]["n"] == 2 and len(got["records"]) == 2
    for key in (
        "top1_line",
        "top3_line",
        "random_top1_line",
        "random_top3_line",
        "worst_token_in_change",
        "exact_repair",
    ):
        assert 0.0 <= got["all"][key] <= 1.0, key
    assert got["all"]["top1_line"] <= got["all"]["top3_line"]
    for r in got["records"]:
        assert r["random_top1"] == 1 / r["lines"] and r["rank"] is not None
    one = run_benchmark(
        "real_fixes",
        "eval",
        "--set",
        str(fixes),
        "--model",
        str(tiny_model_dir),
        "--n",
        "1",
        "--out",
        str(out),
    )
    assert one.returncode == 0, one.stderr
    assert json.loads(out.read_text())["all"]["n"] == 1


def test_bad_arguments_are_usage_errors(run_benchmark, tmp_path: Path) -> None:
    missing = run_benchmark("real_fixes", "eval", "--set", str(tmp_path / "none.jsonl"))
    assert missing.returncode == 2
    assert "python -m benchmarks.real_fixes build" in missing.stderr
    nothing = run_benchmark("real_fixes")
    assert nothing.returncode == 2 and "build" in nothing.stderr
    (tmp_path / "fixes.jsonl").write_text("")
    zero = run_benchmark("real_fixes", "eval", "--set", str(tmp_path / "fixes.jsonl"), "--n", "0")
    assert zero.returncode == 2 and "--n" in zero.stderr
    empty = run_benchmark("real_fixes", "eval", "--set", str(tmp_path / "fixes.jsonl"))
    assert empty.returncode == 2 and "no examples" in empty.stderr
    corpus = run_benchmark("real_fixes", "build", "--select", "--corpus", str(tmp_path / "nowhere"))
    assert corpus.returncode == 2
    assert "python -m diffusion_infill.model.training.corpus" in corpus.stderr


@pytest.mark.slow
def test_the_masked_line_ranking_runs_end_to_end(
    run_benchmark, tiny_model_dir: Path, tmp_path: Path
) -> None:
    fixes, out = tmp_path / "fixes.jsonl", tmp_path / "lines.json"
    _tiny_set(fixes)
    done = run_benchmark(
        "real_fix_lines", "--set", str(fixes), "--model", str(tiny_model_dir), "--out", str(out)
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(out.read_text())
    assert got["n"] == len(got["records"]) == 2
    for pool in ("every line", "code lines (no comment-only line)"):
        for name, row in got["rules"][pool].items():
            assert 0.0 <= row["top1_line"] <= row["top3_line"] <= 1.0, (pool, name)
    for record in got["records"]:
        window_lines = [line["line"] for line in record["lines"]]
        assert record["truth"] in window_lines
        for x in record["lines"]:
            assert x["tokens"] > 0 and x["masked_worst3"] >= x["masked_sum"]
            assert x["masked_regret"] >= 0  # the likeliest token is never less likely
    assert "masked, sum" in done.stdout and "masked regret, sum" in done.stdout
    assert "random" in done.stdout


@pytest.mark.slow
def test_the_masked_line_ranking_of_injected_bugs(
    run_benchmark, tiny_model_dir: Path, modules_corpus: Path, tmp_path: Path
) -> None:
    out = tmp_path / "injected.json"
    done = run_benchmark(
        "real_fix_lines", "--injected", "4", "--split", "test", "--corpus", str(modules_corpus),
        "--model", str(tiny_model_dir), "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    got = json.loads(out.read_text())
    assert got["n"] == 4
    for record in got["records"]:  # the line that holds the bug is among those ranked
        assert record["truth"] in [x["line"] for x in record["lines"]]


def test_the_masked_line_ranking_rejects_bad_arguments(run_benchmark, tmp_path: Path) -> None:
    missing = run_benchmark("real_fix_lines", "--set", str(tmp_path / "none.jsonl"))
    assert missing.returncode == 2 and "not found" in missing.stderr
    _tiny_set(tmp_path / "fixes.jsonl")
    zero = run_benchmark("real_fix_lines", "--set", str(tmp_path / "fixes.jsonl"), "--n", "0")
    assert zero.returncode == 2 and "--n must be at least 1" in zero.stderr
    none = run_benchmark("real_fix_lines", "--injected", "0")
    assert none.returncode == 2 and "--injected must be at least 1" in none.stderr
    nowhere = run_benchmark("real_fix_lines", "--injected", "3", "--corpus", str(tmp_path))
    assert nowhere.returncode == 2 and "valid.jsonl not found" in nowhere.stderr


def _line(line: int, worst: float | None, masked_sum: float) -> dict:
    return {"line": line, "comment": False, "worst": worst, "tokens": 3, "masked_sum": masked_sum}


def _gate_files(tmp_path: Path, **sets: list[tuple[dict, str]]) -> list[str]:
    """Each set's records (a results file) and windows (a set, as `--NAME-set` reads it),
    and the command's arguments for them."""
    args = []
    for name, rows in sets.items():
        records, windows = tmp_path / f"{name}.json", tmp_path / f"{name}.jsonl"
        records.write_text(json.dumps({"model": "model/weights", "records": [r for r, _ in rows]}))
        windows.write_text(
            "".join(json.dumps({"window": w, "window_line": r["truth"]}) + "\n" for r, w in rows)
        )
        flag = {"real": [], "injected": [], "valid": ["--valid-real"]}[name]
        args = [*args, *flag, str(records), f"--{name}-set", str(windows)]
    return args


def test_the_line_gate_is_chosen_on_one_half_and_the_injected_bugs(
    run_benchmark, tmp_path: Path
) -> None:
    # real changes: no sure swap, the changed line (1) surprising only out of view; the
    # injected bug: a sure swap on line 0 that reading lines would lose
    two = "x = f(a)\nx = f(a)"  # two lines alike to the line prior
    real = [
        ({"truth": 1, "package": p, "lines": [_line(0, 1.0, -5.0), _line(1, 0.5, -40.0)]}, two)
        for p in ("a", "d")  # one package in each half (crc32: odd, even)
    ]
    lines = [_line(0, None, -9.0), _line(1, 0.4, -1.0)]
    real.append(({"truth": 0, "package": "d", "lines": lines}, two))
    lines = [_line(0, 6.0, -1.0), _line(1, 0.1, -50.0)]
    injected = [({"truth": 0, "package": None, "lines": lines}, two)]
    out = tmp_path / "gate.json"
    args = _gate_files(tmp_path, real=real, injected=injected)
    done = run_benchmark("line_gate", *args, "--out", str(out))
    assert done.returncode == 0, done.stderr
    got = json.loads(out.read_text())
    assert got["n"] == {"real": 3, "even": 2, "odd": 1, "injected": 1}
    assert got["fixer"]["real"]["top1_line"] == pytest.approx(0.0)  # line 0's token first
    assert got["choice"]["real_odd"] == 1.0 and got["choice"]["injected"]["top1_line"] == 1.0
    assert got["choice"]["prior_weight"] == 0.0  # the prior cannot tell the lines apart
    assert "chosen" in done.stdout
    # a validation real set chooses instead: there the line the model finds surprising is
    # not the change, and only a large weight on the worst token keeps line 0 first
    lines = [_line(0, 0.3, -1.0), _line(1, 0.2, -50.0)]
    valid = [({"truth": 0, "package": "v", "lines": lines}, two)]
    args = _gate_files(tmp_path, real=real, injected=injected, valid=valid)
    done = run_benchmark("line_gate", *args, "--out", str(out))
    assert done.returncode == 0, done.stderr
    got = json.loads(out.read_text())
    assert got["n"]["real_valid"] == 1
    assert got["choice"]["weight"] >= 1.0 and got["choice"]["real_valid"]["top1_line"] == 1.0
    assert "valid " in done.stdout


def test_the_line_gate_weighs_the_line_prior_where_it_finds_the_change(
    run_benchmark, tmp_path: Path
) -> None:
    # alike to the model, the change is the `return` line, which releases change far more
    # often than a `def` line (the shipped prior)
    window = "def area(w, h):\n    return w + h"
    lines = [_line(0, 0.5, -30.0), _line(1, 0.5, -20.0)]
    real = [({"truth": 1, "package": p, "lines": lines}, window) for p in ("a", "d")]
    injected = [({"truth": 1, "package": None, "lines": lines}, window)]
    out = tmp_path / "gate.json"
    done = run_benchmark(
        "line_gate", *_gate_files(tmp_path, real=real, injected=injected), "--out", str(out)
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(out.read_text())
    assert got["fixer"]["real"]["top1_line"] == 0.0  # the first line by the surprise alone
    assert got["choice"]["prior_weight"] > 0 and got["choice"]["real"]["top1_line"] == 1.0


def test_the_line_gate_refuses_records_that_are_not_of_the_windows(
    run_benchmark, tmp_path: Path
) -> None:
    rows = [
        ({"truth": 1, "package": "a", "lines": [_line(0, 0.5, -3.0), _line(1, 0.5, -2.0)]}, "x")
    ]
    args = _gate_files(tmp_path, real=rows, injected=rows)  # a window of one line, not two
    done = run_benchmark("line_gate", *args, "--out", str(tmp_path / "gate.json"))
    assert done.returncode == 1 and "not of these windows" in done.stderr
    prior = tmp_path / "prior.json"
    prior.write_text("{}")
    bad = run_benchmark("line_gate", *args, "--prior", str(prior))
    assert bad.returncode == 2 and "is not a line prior" in bad.stderr


def test_the_line_gate_rejects_files_without_the_fixers_scores(
    run_benchmark, tmp_path: Path
) -> None:
    missing = run_benchmark("line_gate", str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    assert missing.returncode == 2 and "not found" in missing.stderr
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"records": [{"truth": 0, "lines": [{"line": 0}]}]}))
    stale = run_benchmark("line_gate", str(old), str(old))
    assert stale.returncode == 2 and "worst preference" in stale.stderr


def test_a_release_is_read_from_its_pure_wheel_else_any_wheel_else_its_sdist() -> None:
    from diffusion_infill.model.training.corpus.releases import release_file

    def named(*names: str, yanked: str = "") -> list[dict]:
        return [{"filename": n, "url": f"u/{n}", "yanked": n == yanked} for n in names]

    files = named(
        "Pkg_Name-1.1.1-py3-none-any.whl",
        "pkg_name-1.1-cp311-cp311-manylinux_2_17_x86_64.whl",
        "pkg-name-1.1.tar.gz",
        "pkg_name-1.1-py3-none-any.whl",
        "pkg_name-1.2.tar.gz",
        "pkg_name-1.3-py2.py3-none-any.whl",
    )
    assert release_file(files, "1.1")["filename"] == "pkg_name-1.1-py3-none-any.whl"
    assert release_file(files[1:3], "1.1")["filename"].endswith("manylinux_2_17_x86_64.whl")
    assert release_file(files, "1.2")["filename"] == "pkg_name-1.2.tar.gz"
    assert release_file(files, "1.3")["filename"] == "pkg_name-1.3-py2.py3-none-any.whl"
    assert release_file(files, "1.1.1")["filename"] == "Pkg_Name-1.1.1-py3-none-any.whl"
    assert release_file(files, "2.0") is None
    yanked = named("pkg-1.0.tar.gz", yanked="pkg-1.0.tar.gz")
    assert release_file(yanked, "1.0") is None


def test_a_cached_release_is_found_by_its_exact_version(tmp_path: Path) -> None:
    """1.1 is neither 1.1.1 nor 1.1.post1: a release missing from the cache is fetched, not
    read from a later release whose version starts the same."""
    from diffusion_infill.model.training.corpus.sources import archive_in

    for name in (
        "pkg_name-1.1.1-py3-none-any.whl",
        "pkg_name-1.2.post1-py3-none-any.whl",
        "pkg-name-1.3.1.tar.gz",
        "pkg-name-2.0.tar.gz",
        "pkg_name-2.0-py3-none-any.whl",
        "pkg_name_extra-2.0-py3-none-any.whl",
    ):
        (tmp_path / name).write_bytes(b"")
    wheel, sdist = frozenset(), frozenset({"pkg-name"})
    assert archive_in(tmp_path, "pkg-name", "1.1", wheel) is None
    assert archive_in(tmp_path, "pkg-name", "1.1.1", wheel).name.startswith("pkg_name-1.1.1-")
    assert archive_in(tmp_path, "Pkg.Name", "1.2", wheel) is None
    assert archive_in(tmp_path, "pkg-name", "1.3", sdist) is None
    assert archive_in(tmp_path, "pkg-name", "1.3.1", sdist).name == "pkg-name-1.3.1.tar.gz"
    assert archive_in(tmp_path, "pkg-name", "2.0", sdist).name == "pkg-name-2.0.tar.gz"
    assert archive_in(tmp_path, "pkg-name", "2.0", wheel).name == "pkg_name-2.0-py3-none-any.whl"
    assert archive_in(tmp_path, "pkg", "2.0", wheel) is None


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["build", "--split", "train"], "invalid choice: 'train'"),
        (["eval", "--set", "no/such.jsonl"], "no/such.jsonl not found"),
    ],
)
def test_the_command_refuses_an_unknown_split_and_a_missing_set(
    argv: list[str], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks import real_fixes

    with pytest.raises(SystemExit) as stop:
        real_fixes.main(argv)
    assert stop.value.code == 2
    assert error in capsys.readouterr().err


def test_validation_packages_are_neither_the_test_sets_nor_the_corpus() -> None:
    from benchmarks.fix_releases import PINS
    from benchmarks.fix_releases_valid import VALID_PINS
    from diffusion_infill.model.training.corpus.debian_packages import DEBIAN_PACKAGES
    from diffusion_infill.model.training.corpus.packages import PACKAGES, canonical

    valid = {canonical(n) for n in VALID_PINS}
    assert len(valid) >= 50
    assert not valid & {canonical(n) for n in PINS}
    assert not valid & {canonical(n) for n in PACKAGES}
    assert not valid & {canonical(n.removeprefix("python3-")) for n in DEBIAN_PACKAGES}
    assert all(len(v) >= 3 for v in VALID_PINS.values())
