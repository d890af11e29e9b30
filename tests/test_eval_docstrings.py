"""The held-out docstring evaluation (benchmarks/eval_docstrings.py): the examples (a
definition with its docstring taken out, as Insert docstring finds it), the word-overlap
scores, the no-model baseline, and the script end to end on a tiny model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.eval_docstrings import name_summary, rouge_l, scores, summary, word_f1, words
from benchmarks.heldout import docstring_examples
from diffusion_infill.lsp.docstring import docstring_slot

ROOT = Path(__file__).resolve().parents[1]

SOURCE = '''import os


def join_all(parts, sep="/"):
    """Join the parts with a separator.

    Empty parts are dropped.
    """
    return sep.join(p for p in parts if p)


def only_doc():
    """Nothing else in the body: taking it out leaves no function."""


def same_line(): """Code after it."""; return 1


class Box:
    \'\'\'A box of things.\'\'\'

    size = 3

    def method(self):
        return self.size


def no_doc():
    return os.sep
'''


def test_examples_take_the_docstring_out_and_insert_docstring_finds_its_slot() -> None:
    examples = docstring_examples([SOURCE], n=10, seed=0)
    assert sorted((ex.name, ex.kind) for ex in examples) == [
        ("Box", "class"),
        ("join_all", "function"),
    ]
    for ex in examples:
        assert ex.truth.strip() in SOURCE and ex.truth.strip() not in ex.text
        slot = docstring_slot(ex.text, ex.at)
        assert slot is not None and slot.name == ex.name
    join = next(ex for ex in examples if ex.name == "join_all")
    assert join.truth == "Join the parts with a separator.\n\n    Empty parts are dropped.\n    "
    assert 'def join_all(parts, sep="/"):\n    return sep.join' in join.text
    # the rest of the file is as written (the other docstrings stay)
    assert '"""Nothing else in the body' in join.text


def test_examples_are_capped_per_file_and_follow_the_seed() -> None:
    files = [SOURCE, SOURCE.replace("Box", "Crate")]
    assert len(docstring_examples(files, n=10, per_file=1)) == 2
    assert [e.name for e in docstring_examples(files, n=10, seed=3)] == [
        e.name for e in docstring_examples(files, n=10, seed=3)
    ]


def test_summary_is_the_first_sentence_of_the_first_paragraph() -> None:
    assert (
        summary("Return the config folder.  The default\n    is roaming.\n\n    More.")
        == "Return the config folder."
    )
    assert (
        summary("Yield lists of items, where each\n    list ends.\n\n    Ex.")
        == "Yield lists of items, where each list ends."
    )
    assert summary("  ") == ""


def test_word_overlaps() -> None:
    ref = words("Return the area of the box.")
    assert rouge_l(ref, ref) == 1.0 and word_f1(ref, ref) == 1.0
    assert rouge_l([], ref) == 0.0 and word_f1(words("nothing shared"), ref) == 0.0
    # order matters to ROUGE-L, not to the bag of words
    backwards = list(reversed(ref))
    assert word_f1(backwards, ref) == 1.0 and rouge_l(backwards, ref) == 0.5  # "the of the"
    got = scores("Return the area.\n\n    Long text.", "Return the area of the box.")
    assert got["summary_exact"] == 0.0 and 0.5 < got["summary_rouge_l"] < 1.0
    assert scores("Return  the AREA.", "Return the area.")["summary_exact"] == 1.0
    assert scores("", "Return the area.") == {
        "summary_rouge_l": 0.0,
        "summary_word_f1": 0.0,
        "summary_exact": 0.0,
        "body_rouge_l": 0.0,
    }


def test_name_baseline_spells_the_name() -> None:
    assert name_summary("_get_app_dir") == "Get app dir."
    assert name_summary("HTTPErrorHandler") == "Http error handler."
    assert name_summary("__init__") == "Init."
    assert name_summary("_") == ""


@pytest.fixture(scope="module")
def docs_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("docs_corpus")
    with (folder / "test.jsonl").open("w") as fh:
        fh.write(json.dumps({"text": SOURCE}) + "\n")
    return folder


@pytest.mark.slow
def test_the_script_writes_every_figure(
    run_benchmark, tiny_model_dir: Path, docs_corpus: Path, tmp_path: Path
) -> None:
    out = tmp_path / "docs.json"
    done = run_benchmark(
        "eval_docstrings",
        "--model",
        str(tiny_model_dir),
        "--corpus",
        str(docs_corpus),
        "--n",
        "5",
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(out.read_text())["docstrings"]
    assert got["n"] == 2 and got["functions"] == 1 and len(got["records"]) == 2
    assert {
        "written",
        "summary_rouge_l",
        "summary_word_f1",
        "summary_exact",
        "body_rouge_l",
        "nfe_per_token",
        "ms_p50",
    } <= set(got)
    # the baseline needs no model: "Join all." and "Box." against the authors' summaries
    assert got["name_baseline"]["summary_rouge_l"] == pytest.approx(
        (
            rouge_l(["join", "all"], words("Join the parts with a separator."))
            + rouge_l(["box"], words("A box of things."))
        )
        / 2
    )
    assert "name baseline" in done.stdout


def test_bad_arguments_are_clear_errors(run_benchmark, docs_corpus: Path, tmp_path: Path) -> None:
    done = run_benchmark("eval_docstrings", "--corpus", str(docs_corpus), "--n", "0")
    assert done.returncode == 2 and "--n must be at least 1" in done.stderr
    done = run_benchmark("eval_docstrings", "--corpus", str(tmp_path), "--n", "3")
    assert done.returncode == 2 and "test.jsonl not found" in done.stderr
