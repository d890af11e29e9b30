"""Training rows shaped like real fixes (model/training/fix_rows.py), through make_batch
and the training command."""

from __future__ import annotations

import json
import random
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from diffusion_infill.model.training import noising
from diffusion_infill.model.training.fix_rows import (
    FixPair,
    fix_example,
    line_targets,
    load_fix_pairs,
    pair_of,
)

SHIPPED = Path(__file__).resolve().parents[1] / "model/weights/tokenizer.json"
RECORD = {
    "window": "def last(items):\n    if len(items) > 0:\n        return items[-1]\n",
    "window_line": 1,
    "buggy_line": "    if len(items) > 0:",
    "fixed_line": "    if len(items) >= 0:",
}


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer.from_file(str(SHIPPED))


def test_a_record_splits_around_its_line_and_a_wrong_line_number_is_refused() -> None:
    pair = pair_of(RECORD)
    assert pair.before + pair.old + pair.after == RECORD["window"]
    assert pair.before == "def last(items):\n" and pair.after.startswith("\n        return")
    with pytest.raises(ValueError, match="window line 0 is not the record's buggy line"):
        pair_of({**RECORD, "window_line": 0})


def test_changed_tokens_target_the_new_ones_and_tokens_past_them_null() -> None:
    null = 0
    # replaced one for one, and one longer than the new: the rest is `<null>`
    assert line_targets([1, 2, 3], [1, 9, 3], null) == {1: 9}
    assert line_targets([1, 2, 5, 3], [1, 9, 3], null) == {1: 9, 2: null}
    # deleted: `<null>`; inserted: the token they go before reads as the first of them
    assert line_targets([1, 2, 3], [1, 3], null) == {1: null}
    assert line_targets([1, 3], [1, 7, 8, 3], null) == {1: 7}
    assert line_targets([1, 2], [1, 2], null) == {}


def test_a_fix_row_shows_the_old_line_clean_and_targets_only_its_changed_tokens(
    tok: Tokenizer,
) -> None:
    null = tok.token_to_id("<null>")
    ids, targets, weights = fix_example(pair_of(RECORD), tok, 256, null, random.Random(0))
    assert tok.decode(ids) == RECORD["window"]
    changed = [i for i, w in enumerate(weights) if w > 0]
    assert [tok.decode([ids[i]]) for i in changed] == [" >"]
    assert [tok.decode([targets[i]]) for i in changed] == [" >="]
    assert [t for i, t in enumerate(targets) if i not in changed] == [
        t for i, t in enumerate(ids) if i not in changed
    ]
    # alike lines make no row
    same = FixPair("a = 1\n", "b = 2", "b = 2", "\nc = 3\n")
    assert fix_example(same, tok, 256, null, random.Random(0)) is None


def test_a_long_window_is_cut_around_its_changed_line(tok: Tokenizer) -> None:
    null = tok.token_to_id("<null>")
    filler = "".join(f"value_{k} = compute({k}, {k + 1})\n" for k in range(60))
    pair = FixPair(filler, "total = a - b", "total = a + b", "\n" + filler)
    for seed in range(20):
        ids, targets, weights = fix_example(pair, tok, 64, null, random.Random(seed))
        assert len(ids) == len(targets) == len(weights) == 64
        changed = [i for i, w in enumerate(weights) if w > 0]
        assert [tok.decode([targets[i]]) for i in changed] == [" +"]
        assert " - b" in tok.decode(ids) and "total" in tok.decode(ids)


def test_make_batch_mixes_fix_rows_by_their_share_and_none_without_pairs(tok: Tokenizer) -> None:
    vocab = noising.Vocab.of(tok)
    cfg = noising.NoiseConfig(p_substitute=0.0, p_identity=0.0, t_dist="uniform")
    sampler = noising.TextSampler(["x = 1\ny = 2\n" * 20], window_chars=200, seed=0)
    pairs = [pair_of(RECORD)]
    gte, gt = tok.encode(" >=").ids[0], tok.encode(" >").ids[0]

    def fix_rows(share: float, fixes: list[FixPair]) -> int:
        batch = noising.make_batch(
            sampler, tok, vocab, 32, 64, replace(cfg, p_fix=share), random.Random(1), fixes
        )
        hit = (batch.input_ids == gt) & (batch.targets == gte) & (batch.weights == 1.0)
        return int(hit.any(dim=1).sum())

    assert fix_rows(0.0, pairs) == 0
    assert fix_rows(1.0, []) == 0
    assert fix_rows(1.0, pairs) == 32
    assert 4 <= fix_rows(0.5, pairs) <= 28


def test_load_fix_pairs_reads_a_jsonl_of_records(tmp_path: Path) -> None:
    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps(RECORD) + "\n\n" + json.dumps(RECORD) + "\n")
    assert load_fix_pairs(path) == [pair_of(RECORD)] * 2


@pytest.mark.parametrize(
    ("flags", "error"),
    [
        (["--noise", "p_fix=0.25"], "noise p_fix needs --fix-pairs"),
        (["--fix-pairs", "no/such/pairs.jsonl"], "--fix-pairs no/such/pairs.jsonl not found"),
    ],
)
def test_training_refuses_a_fix_share_without_pairs_and_pairs_not_there(
    tmp_path: Path, capsys, flags: list[str], error: str
) -> None:
    from diffusion_infill.model.training import train

    with pytest.raises(SystemExit) as run:  # the command's arguments, before any work
        train.main(["--out", str(tmp_path / "run"), *flags])
    assert run.value.code == 2
    assert error in capsys.readouterr().err


MODULE = '''"""A module."""


def last(items):
    """The last item."""
    if not items:
        return None
    return items[len(items) - 2]


def total(items):
    result = 1
    for item in items:
        result += item
    return result
'''


def test_fix_pairs_read_the_training_packages_whose_pinned_archive_is_small(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A package is found by its pinned archive's exact name and version, whatever the
    spelling of the file (zope.interface as zope_interface, a dot kept in an sdist)."""
    from diffusion_infill.model.training import fix_pairs

    pinned = {"zope.interface": "6.0", "jaraco.classes": "3.2", "big": "1.0", "later": "1.1"}
    monkeypatch.setattr(fix_pairs, "PACKAGES", pinned)
    split = tmp_path / "split.json"
    split.write_text(json.dumps({"train": [*pinned, "test-only"], "test": []}))
    sources = tmp_path / "sources"
    sources.mkdir()
    for name, size in [
        ("zope_interface-6.0-cp311-cp311-manylinux_2_17_x86_64.whl", 10),
        ("jaraco.classes-3.2-py3-none-any.whl", 10),
        ("big-1.0-py3-none-any.whl", 5000),
        ("later-1.1.1-py3-none-any.whl", 10),  # not the pinned 1.1
    ]:
        (sources / name).write_bytes(b"x" * size)
    found = fix_pairs.small_training_packages(split, sources, max_bytes=1000)
    assert found == {"zope.interface": "6.0", "jaraco.classes": "3.2"}


def test_fix_pairs_are_one_line_fixes_of_consecutive_releases_less_held_out_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from collections import Counter

    from diffusion_infill.model.training import fix_pairs

    texts = {
        "1.0": MODULE,
        "1.1": MODULE.replace("len(items) - 2", "len(items) - 1"),
        "1.2": MODULE.replace("len(items) - 2", "len(items) - 1").replace(
            "result = 1", "result = 0"
        ),
    }
    wheels = {}
    for version, text in texts.items():
        wheels["pkg", version] = tmp_path / f"pkg-{version}-py3-none-any.whl"
        with zipfile.ZipFile(wheels["pkg", version], "w") as zf:
            zf.writestr("pkg/mod.py", text)
    monkeypatch.setattr(fix_pairs, "fetch_releases", lambda cache, pins: wheels)
    records, _ = fix_pairs.harvest({"pkg": list(texts)}, tmp_path)
    assert [(r["old_version"], r["fixed_line"]) for r in records] == [
        ("1.0", "    return items[len(items) - 1]"),
        ("1.1", "    result = 0"),
    ]
    assert pair_of(records[0]).new == "    return items[len(items) - 1]"
    reasons: Counter = Counter()
    held = {("result = 1", "result = 0")}
    kept = fix_pairs.drop_held_out(records + records[:1], held, reasons)
    assert kept == records[:1]
    assert reasons == Counter({"held out": 1, "duplicate": 1})


def test_fix_pairs_refuse_to_run_without_the_corpus_or_the_held_out_sets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from diffusion_infill.model.training import fix_pairs

    monkeypatch.chdir(tmp_path)

    def refused() -> str:
        with pytest.raises(SystemExit) as stop:
            fix_pairs.main([])
        assert stop.value.code == 2
        return capsys.readouterr().err

    assert "build the corpus first" in refused()
    (tmp_path / "data/corpus_v2").mkdir(parents=True)
    (tmp_path / "data/corpus_v2/split.json").write_text('{"train": []}')
    (tmp_path / "data/sources").mkdir()
    (tmp_path / "data/real_fixes.jsonl").write_text("")
    assert "data/real_fixes_valid.jsonl not found: build the real-fix sets first" in refused()
    with pytest.raises(SystemExit):
        fix_pairs.main(["--releases", "1"])
    assert "--releases must be at least 2" in capsys.readouterr().err
