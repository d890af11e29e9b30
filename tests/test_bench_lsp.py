"""benchmarks/bench_lsp.py: its completion figures, and two configurations timed in one session
against a server on the fake worker."""

from __future__ import annotations

import json

import pytest
from lsp_fake_worker import fake_worker
from lsprotocol import types

from benchmarks.bench_lsp import CASES, INLINE, VS, Bench, main
from benchmarks.busy import busy_processes


def _bench(tmp_path, *argv: str) -> dict:
    """The results bench_lsp writes with `argv` against a server on the fake worker."""
    out = tmp_path / "lsp.json"
    with fake_worker() as address:
        main(["--worker", address, *argv, "--out", str(out)])
    return json.loads(out.read_text())


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


def test_two_configurations_are_timed_interleaved_in_one_session(tmp_path, capsys) -> None:
    argv = ["--only-completion", "--requests", "2", "--keystrokes", "2"]
    got = _bench(tmp_path, *argv, "--vs", "completionSteps=2")
    assert got["vs_settings"] == {"completionSteps": 2}
    for case in INLINE:  # every line's cases ran with and without the second configuration
        assert got["cases"][case]["n"] == got["cases"][case + VS]["n"] > 0
        assert got["vs_over_base_p50"][case] > 0
    assert all(len(got["vs_exact_won_lost"][case]) == 2 for case in INLINE)
    assert "p50 with {'completionSteps': 2} / without" in capsys.readouterr().out


def test_every_case_is_timed(tmp_path) -> None:
    got = _bench(tmp_path, "--requests", "1", "--keystrokes", "1")["cases"]
    assert "rewrite selection (lines)" in CASES
    assert all(got[case]["n"] > 0 for case in CASES), {c: got.get(c) for c in CASES}


def test_a_configuration_that_is_not_key_equals_value_is_refused() -> None:
    with pytest.raises(SystemExit, match="expected KEY=VALUE"):
        main(["--vs", "completionSteps"])


class _Client:
    """Answers inline completions from a list, in order; ignores document changes."""

    def __init__(self, answers: list[str | None]) -> None:
        self.answers = answers

    async def text_document_inline_completion_async(self, params):
        text = self.answers.pop(0)
        return None if text is None else _list(text)

    def text_document_did_open(self, params) -> None: ...

    def text_document_did_change(self, params) -> None: ...

    def text_document_did_close(self, params) -> None: ...


def test_typing_counts_the_keystrokes_answered_with_the_last_offer_less_what_was_typed():
    import asyncio

    # "x = " then "abc" typed; offers: "abd" first, "bd" after "a" (kept), "c" after "b"
    # (a new offer), nothing after "c"
    b = Bench(client=_Client(["abd", "bd", "c", None]))  # type: ignore[arg-type]
    case = "inline completion (typing)"
    asyncio.run(b.typing(case, "x = \n", 4, "abc", 3))
    q = b.completion_quality(case)
    assert q["n"] == 3 and q["offers_kept"] == 1 / 3
    assert q["offered"] == ["bd", "c", None] and q["truths"] == ["bc", "c", ""]
    assert q["exact_match"] == 1 / 3  # "c" after "ab"


def test_lines_of_the_repository_set_are_completed_in_their_files(tmp_path, monkeypatch) -> None:
    import benchmarks.bench_lsp as bench_lsp
    import benchmarks.repo_set as repo_set

    package = tmp_path / "pkg"
    package.mkdir()
    body = "".join(f"    total = total + value_{i} * {i}\n" for i in range(40))
    (package / "mod.py").write_text(f"def f(total):\n{body}    return total\n")
    monkeypatch.setattr(repo_set, "PACKAGES", {"pkg": ("1.0", "MIT", "test")})
    monkeypatch.setattr(bench_lsp, "PACKAGES", repo_set.PACKAGES)
    monkeypatch.setattr(bench_lsp, "DATA", tmp_path)
    lines, folders = bench_lsp.repo_lines("test", 2, 0, tmp_path)
    assert folders == [package.resolve()] and lines
    assert all(x.uri == (package / "mod.py").resolve().as_uri() for x in lines)
    assert all(x.text[x.start : x.end] == x.truth for x in lines)
    got = _bench(
        tmp_path, "--repo-set", "test", "--only-completion", "--requests", "1", "--keystrokes", "1"
    )
    assert got["repo_set"] == "test"
    assert all(got["cases"][case]["n"] > 0 for case in INLINE)
    monkeypatch.setattr(bench_lsp, "DATA", tmp_path / "none")
    with pytest.raises(SystemExit, match="lacks the packages"):  # before any server starts
        main(["--repo-set", "test", "--only-completion"])


def test_busy_processes_run_while_the_cases_are_timed_and_are_stopped_after(tmp_path) -> None:
    with busy_processes(2) as procs:
        assert len(procs) == 2 and all(p.poll() is None for p in procs)
    assert all(p.returncode is not None for p in procs)
    got = _bench(
        tmp_path, "--only-completion", "--requests", "1", "--keystrokes", "1", "--busy", "1"
    )
    assert got["busy_processes"] == 1 and got["cases"][INLINE[0]]["n"] == 1


def test_a_negative_count_of_busy_processes_is_refused(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--busy", "-1"])
    assert "--busy must be 0 or more, not -1" in capsys.readouterr().err
