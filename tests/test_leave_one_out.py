"""The leave-one-out table's arithmetic and its usage errors (benchmarks/leave_one_out.py);
the runs themselves are eval_shapes runs (tests/test_eval_shapes.py)."""

from __future__ import annotations

import json

import pytest

from benchmarks import leave_one_out as loo
from benchmarks.results_file import write_results


def _row(hits: list[bool]) -> dict:
    return {
        "records": [{"truth": str(i), "exact": h} for i, h in enumerate(hits)],
        "exact_match": sum(hits) / len(hits),
        "nfe_per_token": 1.0,
        "ms_p50": 10.0,
    }


def test_the_sign_test_is_exact_and_two_sided():
    assert loo.sign_test(0, 0) == 1.0
    assert loo.sign_test(5, 5) == 1.0
    assert loo.sign_test(10, 0) == pytest.approx(2 / 2**10)
    assert loo.sign_test(0, 10) == loo.sign_test(10, 0)
    assert loo.sign_test(14, 11) > 0.5  # a split like this one says nothing


def test_a_stage_row_counts_holes_won_and_lost_on_the_same_holes():
    base = _row([True, True, False, False] * 5)
    off = _row([True, False, True, False] * 5)
    row = loo.paired(base, off)
    assert (row["won"], row["lost"], row["n"]) == (5, 5, 20)
    assert not row["significant"]
    many = loo.paired(_row([True] * 12 + [False] * 8), _row([False] * 20))
    assert (many["won"], many["lost"]) == (12, 0) and many["significant"]
    assert many["verdict"] == "pays" and row["verdict"] == "neither"
    costly = loo.paired(_row([False] * 20), _row([True] * 12 + [False] * 8))
    assert costly["significant"] and costly["verdict"] == "loses"


def test_a_completion_stage_is_judged_on_the_same_completions():
    def case(offers: list[str]) -> dict:
        truths = ["pend(a)", "perty", "inue", "load"]
        records = [{"truth": t, "offer": o} for t, o in zip(truths, offers, strict=True)]
        right = sum(o.strip() == t for o, t in zip(offers, truths, strict=True))
        return {
            "records": records, "exact_match": right / 4, "nfe_per_request": 4.0, "ms_p50": 9.0,
        }  # fmt: skip

    on, off = case(["pend(a) ", "perty", "", "load"]), case(["x", "vide", "", "load"])
    row = loo.completion_paired(on, off)
    assert (row["won"], row["lost"], row["n"]) == (2, 0, 4)
    assert row["exact_with"] == 0.75 and row["exact_without"] == 0.25
    assert row["verdict"] == "neither"  # two requests say nothing yet
    with pytest.raises(ValueError, match="different requests"):
        loo.completion_paired(on, {**off, "records": off["records"][::-1]})


def test_multi_line_holes_are_judged_by_how_near_the_fills_came():
    truths = ["a = 1\nb = 2\n", "c = 3\nd = 4\n", "e = 5\nf = 6\n"]

    def row(fills: list[str], rejected: tuple[int, ...] = ()) -> dict:
        records = [
            {"truth": t, "fill": f, "exact": f == t, "rejected": "x" if i in rejected else None}
            for i, (t, f) in enumerate(zip(truths, fills, strict=True))
        ]
        return {**_row([r["exact"] for r in records]), "records": records}

    near = row(["a = 1\nb = 9\n", "c = 3\nd = 9\n", "e = 5\nf = 9\n"])
    far = row(["zzz", "c = 3\nd = 9\n", "e = 5\nf = 9\n"], rejected=(2,))
    r = loo.paired(near, far, multi_line=True)
    assert (r["won"], r["lost"]) == (0, 0)  # no exact match either way
    assert (r["closer"], r["further"]) == (2, 0)  # the other fill far off, then refused
    assert r["similarity_with"] > r["similarity_without"]
    assert r["p_similarity"] == loo.sign_test(2, 0) and not r["significant"]
    assert "closer" not in loo.paired(near, far)  # one-line shapes: exact match alone


def test_runs_of_other_holes_cannot_be_paired():
    other = _row([True, False])
    other["records"][0]["truth"] = "something else"
    with pytest.raises(ValueError, match="different holes"):
        loo.paired(_row([True, False]), other)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--stages", "no_such_stage"], "unknown stage(s): no_such_stage"),
        (["--shapes", "cursor,spiral"], "shapes are of"),
        (["--n", "0"], "--n must be >= 1"),
        (["--corpus", "/nonexistent"], "valid.jsonl not found"),
    ],
)
def test_bad_arguments_are_usage_errors(args, message, capsys):
    with pytest.raises(SystemExit) as done:
        loo.main(args)
    assert done.value.code == 2
    assert message in capsys.readouterr().err


def test_the_fill_code_hash_is_stable():
    assert loo.fill_code() == loo.fill_code() and len(loo.fill_code()) == 16


def test_every_results_file_records_its_commit_and_machine(tmp_path):
    path = write_results("probe", None, {"figure": 1}, tmp_path / "probe.json")
    written = json.loads(path.read_text())
    assert written["figure"] == 1
    assert len(written["commit"].removesuffix("-dirty")) == 40
    assert "cores" in written["machine"] and "INFILL_DTYPE" in written["machine"]
    assert "ONEDNN_MAX_CPU_ISA" not in written["machine"]


def test_a_results_file_records_the_code_that_ran_not_the_code_at_its_end(tmp_path, monkeypatch):
    """A long run during which a commit is made keeps the commit it started from; where
    the fill code's files changed while it ran, the file says so instead of hashing them."""
    from diffusion_infill.model.training import provenance

    monkeypatch.setattr(provenance, "commit", lambda: "f" * 40)  # HEAD moved meanwhile
    written = json.loads(write_results("probe", None, {}, tmp_path / "a.json").read_text())
    assert written["commit"] == provenance.STARTED_AT != "f" * 40
    assert written["fill_code"] == provenance.fill_code()
    monkeypatch.setattr(provenance, "fill_code_state", lambda: (("model/hf.py", 1, 2),))
    written = json.loads(write_results("probe", None, {}, tmp_path / "b.json").read_text())
    assert written["fill_code"] == provenance.CHANGED_WHILE_RUNNING


def test_kernels_held_to_avx2_are_recorded(tmp_path, monkeypatch):
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    path = write_results("probe", None, {}, tmp_path / "probe.json")
    machine = json.loads(path.read_text())["machine"]
    assert machine.endswith("ATEN_CPU_CAPABILITY=avx2, ONEDNN_MAX_CPU_ISA=AVX2")


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        ({"sse4_2", "avx", "avx2", "fma"}, "AVX2"),  # a Zen 3: neither bf16 nor VNNI
        ({"avx2", "avx512f", "avx512_vnni", "avx512_bf16"}, "AVX-512 BF16 VNNI"),
        (
            {"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "amx_int8"},
            "AVX-512 BF16 AMX VNNI",
        ),
        ({"avx2", "avx_vnni"}, "AVX2 VNNI"),
        ({"sse4_2"}, "SSE"),
        (set(), ""),  # no /proc/cpuinfo: nothing said rather than something wrong
    ],
)
def test_a_results_file_names_the_instructions_its_cpu_computes_with(flags, named):
    # two CPUs called "AMD EPYC" (a Zen 3 with AVX2 alone, a Zen 4 with AVX-512 BF16)
    # time int8 and bf16 nothing alike: the machine line tells them apart
    from diffusion_infill.model.training.provenance import instructions

    assert instructions(frozenset(flags)) == named


def test_the_machine_line_holds_this_cpus_instructions(tmp_path):
    from diffusion_infill.model.training.provenance import instructions

    machine = json.loads(write_results("probe", None, {}, tmp_path / "p.json").read_text())
    assert (
        machine["machine"].split(",")[0].endswith(f"({instructions()})" if instructions() else "")
    )


def test_the_table_turns_off_every_switchable_stage_of_the_pipeline():
    # a stage added to the fill's pipeline with a switch gets its row in the table
    from diffusion_infill.infill.core.pipeline import STAGES

    assert {s.switch for s in STAGES if s.switch} == {*loo.STAGES, *loo.COMPLETION_STAGES}


def test_a_results_file_written_before_leaves_the_commit_clean(tmp_path):
    # a run of several benchmarks writes tracked results files as it goes: not code
    import subprocess

    from benchmarks.results_file import RESULTS, commit

    tracked = subprocess.run(
        ["git", "-C", str(RESULTS), "ls-files", "."], capture_output=True, text=True
    ).stdout.split()
    if not tracked or commit().endswith("-dirty"):
        pytest.skip("needs a clean git checkout with results files")
    target = RESULTS / tracked[0]
    before = target.read_bytes()
    try:
        target.write_bytes(before + b"\n")
        assert not commit().endswith("-dirty")
    finally:
        target.write_bytes(before)


def test_a_benchmark_run_as_a_module_records_its_command(tmp_path, monkeypatch):
    import sys
    from types import SimpleNamespace

    main = SimpleNamespace(__spec__=SimpleNamespace(name="benchmarks.eval_docstrings"))
    monkeypatch.setitem(sys.modules, "__main__", main)
    monkeypatch.setattr(sys, "argv", ["eval_docstrings.py", "--n", "3", "--out", "a b.json"])
    path = write_results("probe", None, {"figure": 1}, tmp_path / "probe.json")
    written = json.loads(path.read_text())
    assert written["command"] == "python -m benchmarks.eval_docstrings --n 3 --out 'a b.json'"
    given = write_results("probe", None, {"command": "mine"}, tmp_path / "given.json")
    assert json.loads(given.read_text())["command"] == "mine"  # a script's own stays


def test_a_test_calling_a_benchmark_s_main_records_no_command(tmp_path):
    path = write_results("probe", None, {"figure": 1}, tmp_path / "probe.json")
    assert "command" not in json.loads(path.read_text())  # pytest is no benchmark


def test_a_stage_acting_on_holes_and_where_a_user_types_keeps_both_rows(tmp_path, monkeypatch):
    """`statement_ends` acts on holes and on completions at a line's end: its row holds
    the shapes' verdicts and the completion cases' side by side."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "valid.jsonl").write_text("")
    shapes = {"shapes": {"cursor": {"engine_length": _row([True, False, True])}}}
    records = [{"truth": "a", "offer": "a"}, {"truth": "b", "offer": "c"}]
    case = {"records": records, "exact_match": 0.5, "nfe_per_request": 3.0, "ms_p50": 9.0}
    monkeypatch.setattr(loo, "ensure_run", lambda runs, args, stage: shapes)
    monkeypatch.setattr(
        loo,
        "ensure_completion_run",
        lambda runs, args, stage: {"cases": dict.fromkeys(loo.COMPLETION_CASES, case)},
    )
    out = tmp_path / "table.json"
    loo.main(["--stages", "statement_ends", "--shapes", "cursor", "--corpus", str(corpus),
              "--runs", str(tmp_path / "runs"), "--out", str(out)])  # fmt: skip
    row = json.loads(out.read_text())["stages"]["statement_ends"]
    assert set(row) == {"cursor", *loo.COMPLETION_CASES}
    assert "statement_ends" in loo.STAGES and "statement_ends" in loo.COMPLETION_STAGES
