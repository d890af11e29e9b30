"""benchmarks/inline_ends.py: one pass per hole says whether the model ends it where the
code after it does."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.heldout import Example
from benchmarks.inline_ends import hole_ends, main
from diffusion_infill import infill
from tests.fakes import TargetDenoiser

ROOT = Path(__file__).resolve().parents[1]
TEXT = "def g(a, c):\n    x = f(ab, c) + 1\n    return x\n"
HOLE = Example(TEXT, TEXT.index("ab"), TEXT.index(") + 1"), "arguments")


def test_a_model_that_ends_the_hole_puts_null_right_after_the_truth() -> None:
    r = hole_ends(TargetDenoiser([HOLE.truth]), [HOLE], infill.SamplerOptions(), "t")
    assert r["n"] == r["n_shorter_than_allocation"] == 1
    assert r["ends_at_truth"] == 1.0 and r["p_null_at_end_mean"] > 0.9
    assert r["last_slot_null"] == 1.0


def test_a_model_that_writes_on_past_the_hole_scores_zero() -> None:
    den = TargetDenoiser([HOLE.truth + ") + 1\n    return x" * 3])
    r = hole_ends(den, [HOLE], infill.SamplerOptions(), "t")
    assert r["ends_at_truth"] == 0.0 and r["p_null_at_end_mean"] < 0.01
    assert r["last_slot_null"] == 0.0


def test_the_command_writes_both_kinds_of_hole(tiny_model_dir: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    with (corpus / "test.jsonl").open("w") as fh:
        for name in ("ends.py", "diff.py", "spans.py", "limits.py", "scoring.py"):
            fh.write(json.dumps({"text": (ROOT / "infill" / "core" / name).read_text()}) + "\n")
    out = tmp_path / "ends.json"
    main(["--model", str(tiny_model_dir), "--corpus", str(corpus), "--n", "3", "--out", str(out)])
    r = json.loads(out.read_text())
    for kind in ("arguments", "single_line"):
        assert r[kind]["n"] == 3
        assert 0.0 <= r[kind]["p_null_last_slot_mean"] <= 1.0
