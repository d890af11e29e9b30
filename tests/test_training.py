"""Training across runs: warm restarts carry the record on, token budgets end a run,
noise overrides are checked, the noise trains the engine's allocations and part-decoded
holes, and a run's end either ships or keeps its checkpoint and draws the curve."""

from __future__ import annotations

import argparse
import json
import os
import random
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from conftest import SOURCES
from tokenizers import Tokenizer

from diffusion_infill.model.training import (
    arguments,
    batches,
    hole_spans,
    noising,
    parallel,
    release,
    train,
)


def _argv(corpus: Path, tok_dir: Path, out: Path, *extra: str) -> list[str]:
    return [
        "--preset",
        "tiny",
        "--corpus",
        str(corpus),
        "--tokenizer",
        str(tok_dir / "tokenizer.json"),
        "--out",
        str(out),
        "--batch-size",
        "4",
        "--seq-len",
        "64",
        "--eval-every",
        "1000",
        "--quiet",
        "--dtype",
        "fp32",
        *extra,
    ]


@pytest.mark.slow
def test_warm_restart_continues_the_record_of_the_exported_model(
    corpus: Path, tok_dir: Path, tmp_path: Path
) -> None:
    first = tmp_path / "first"
    train.main(_argv(corpus, tok_dir, first, "--max-steps", "3"))
    record = json.loads((first / "export" / "training.json").read_text())
    assert record["tokens_total"] == record["tokens"] > 0

    second = tmp_path / "second"
    train.main(
        _argv(corpus, tok_dir, second, "--init-from", str(first / "export"), "--tokens", "600")
    )
    after = json.loads((second / "export" / "training.json").read_text())
    assert after["tokens"] >= 600, "a token budget runs until it is spent"
    assert after["tokens_total"] == record["tokens_total"] + after["tokens"]
    assert [h["tokens"] for h in after["history"]][:1] == [record["tokens_total"]], (
        "the validation history of the first run comes first"
    )
    assert after["init_from"] == str(first / "export")
    assert after["dtype"] == "fp32"


@pytest.mark.parametrize("loader_workers", [0, 1])
def test_a_corpus_that_arrives_during_the_run_joins_its_batches(
    corpus: Path,
    tok_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    loader_workers: int,
) -> None:
    """A GPU run gets the training split in parts, one per device call: each part's .jsonl
    file appears in --more-corpus while the run goes on and joins what it trains on."""
    monkeypatch.setattr(batches, "MORE_CHECK_SECONDS", 0.0)
    more = tmp_path / "more"
    more.mkdir()
    trainer = train.Trainer(
        train.parse_args(
            _argv(
                corpus,
                tok_dir,
                tmp_path / "run",
                "--more-corpus",
                str(more),
                "--loader-workers",
                str(loader_workers),
            )
        )
    )
    stream = train.batches(trainer)

    def seen(n: int) -> str:
        return " ".join(
            trainer.tok.decode(next(stream).targets[b].tolist()) for _ in range(n) for b in range(4)
        )

    def bring(name: str, word: str) -> None:  # written elsewhere, then renamed there
        text = f"def {word}():\n    return {word}_value\n\n\n" * 400  # most of the characters
        row = json.dumps({"unit": "m", "path": f"{word}.py", "text": text})
        (more / "part").write_text(row + "\n")
        (more / "part").rename(more / f"{name}.jsonl")

    assert "quokka" not in seen(3)
    bring("part_1", "quokka")
    seen(1)  # the batch made before it looked
    assert "quokka" in seen(4)
    base = len(train.load_texts(corpus, "train"))
    assert trainer.more_texts == 1 and len(trainer.sampler.texts) == 1 + base
    bring("part_2", "wombat")  # the next call's part
    seen(1)
    assert "wombat" in seen(4)
    assert trainer.more_texts == 2 and len(trainer.sampler.texts) == 2 + base
    more_corpus = trainer.meta()["more_corpus"]
    assert more_corpus["path"] == str(more) and more_corpus["files"] == 2
    assert list(more_corpus["parts"]) == ["part_1", "part_2"]
    assert [p["files"] for p in more_corpus["parts"].values()] == [1, 1]


def test_each_run_trains_on_windows_of_its_own(corpus: Path, tok_dir: Path, tmp_path: Path) -> None:
    """A warm restart counts steps from 0 again; it must not replay the last run's
    windows and masks (three runs of the long run did)."""
    first = tmp_path / "first"
    train.main(_argv(corpus, tok_dir, first, "--max-steps", "2"))

    def stream(out: str, *extra: str) -> list[str]:
        trainer = train.Trainer(train.parse_args(_argv(corpus, tok_dir, tmp_path / out, *extra)))
        return (
            [trainer.sampler.window() for _ in range(8)]
            + [str(trainer.rng.random())]
            + [str(torch.rand(4).tolist())]
        )

    scratch = stream("scratch")
    warm = stream("warm", "--init-from", str(first / "export"))
    assert warm[:8] != scratch[:8] and warm[8] != scratch[8], (
        "the next run draws other windows and masks"
    )
    assert warm[9] != scratch[9], "and other substitutions"
    assert warm == stream("warm-again", "--init-from", str(first / "export")), (
        "and the same run, run again, the same ones"
    )


@pytest.mark.slow
def test_workers_train_one_model_on_batches_of_their_own(
    corpus: Path, tok_dir: Path, tmp_path: Path
) -> None:
    """`--workers 2`: two processes, one model (checked at every checkpoint), twice the
    tokens per step, and a resumed run goes on from the checkpoint."""
    one = tmp_path / "one"
    train.main(_argv(corpus, tok_dir, one, "--max-steps", "3"))
    two = tmp_path / "two"
    train.main(
        _argv(corpus, tok_dir, two, "--max-steps", "3", "--workers", "2", "--save-every", "1")
    )
    single = json.loads((one / "export" / "training.json").read_text())
    double = json.loads((two / "export" / "training.json").read_text())
    assert double["workers"] == 2
    assert double["threads"] == max(1, (os.cpu_count() or 1) // 2), "the cores, shared out"
    assert double["step"] == single["step"] == 3
    assert double["tokens"] > 1.5 * single["tokens"], "each step counts both workers' batches"

    train.main(_argv(corpus, tok_dir, two, "--max-steps", "5", "--workers", "2"))
    resumed = json.loads((two / "export" / "training.json").read_text())
    assert resumed["step"] == 5 and resumed["tokens"] > double["tokens"]


def test_each_worker_draws_windows_and_masks_of_its_own(
    corpus: Path, tok_dir: Path, tmp_path: Path
) -> None:
    """Worker 0 draws what a single-process run draws; worker 1 something else."""
    args = train.parse_args(_argv(corpus, tok_dir, tmp_path / "run"))

    def stream(group: parallel.Group) -> list[str]:
        trainer = train.Trainer(args, group)
        return (
            [trainer.sampler.window() for _ in range(8)]
            + [str(trainer.rng.random())]
            + [str(torch.rand(4).tolist())]
        )  # torch draws make_batch's substitutions

    alone = stream(parallel.Group())
    assert stream(parallel.Group(0, 2)) == alone
    other = stream(parallel.Group(1, 2))
    assert other[:8] != alone[:8] and other[8] != alone[8], "windows and masks"
    assert other[9] != alone[9], "and substitutions"


def test_loader_workers_make_batches_of_their_own_beside_the_loop(
    corpus: Path, tok_dir: Path, tmp_path: Path
) -> None:
    """`--loader-workers 2` (what keeps a GPU fed): the run trains and records it, and the
    two processes draw different batches."""
    out = tmp_path / "loaded"
    train.main(_argv(corpus, tok_dir, out, "--max-steps", "3", "--loader-workers", "2"))
    record = json.loads((out / "export" / "training.json").read_text())
    assert record["step"] == 3 and record["tokens"] > 0 and record["loader_workers"] == 2

    trainer = train.Trainer(
        train.parse_args(_argv(corpus, tok_dir, tmp_path / "s", "--loader-workers", "2"))
    )
    loader = train.batches(trainer)
    first, second = next(loader), next(loader)  # the DataLoader alternates its workers
    assert first.input_ids.shape[0] == second.input_ids.shape[0] == 4
    assert not torch.equal(first.input_ids, second.input_ids), "each worker its own stream"


def test_padded_batches_keep_their_tokens_and_add_no_loss() -> None:
    batch = noising.Batch(
        torch.ones(2, 5, dtype=torch.long),
        torch.ones(2, 5, dtype=torch.long),
        torch.ones(2, 5),
        torch.zeros(2, 5, dtype=torch.bool),
    )
    wide = train.padded(batch, 8, pad=0)
    assert wide.input_ids.shape == (2, 8) and wide.weights[:, 5:].sum() == 0
    assert torch.equal(wide.input_ids[:, :5], batch.input_ids)
    assert (wide.input_ids[:, 5:] == 0).all() and not wide.masked[:, 5:].any()
    assert train.padded(batch, 4, pad=0) is batch


def _drift_on_worker_1(group: parallel.Group) -> None:
    model = torch.nn.Linear(2, 2)
    torch.nn.init.zeros_(model.weight)
    if group.rank == 1:
        model.weight.data[0, 0] = 1.0
    group.check_in_sync(model)


@pytest.mark.slow
def test_workers_whose_weights_drift_apart_stop_the_run() -> None:
    with pytest.raises(Exception, match="worker 1's weights drifted from worker 0's"):
        parallel.launch(_drift_on_worker_1, 2)


def test_workers_must_be_at_least_one(corpus: Path, tok_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="--workers 0: expected 1 or more"):
        train.main(_argv(corpus, tok_dir, tmp_path / "run", "--workers", "0"))


def test_export_writes_bf16_and_leaves_the_training_weights_alone(
    tiny_model_dir: Path, tok_dir: Path, tmp_path: Path
) -> None:
    """Exports used to cast the live model to bf16 and back: every evaluation rounded the
    weights being trained."""
    from transformers import ModernBertForMaskedLM

    from diffusion_infill.model.training.checkpoint import export

    model = ModernBertForMaskedLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 1e-3)  # values bf16 cannot hold
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    export(model, Tokenizer.from_file(str(tok_dir / "tokenizer.json")), tmp_path / "x", {})
    assert all(torch.equal(before[n], p) for n, p in model.named_parameters())
    assert all(p.dtype == torch.float32 for p in model.parameters())
    saved = ModernBertForMaskedLM.from_pretrained(tmp_path / "x")
    assert next(saved.parameters()).dtype == torch.bfloat16


def test_warm_restart_refuses_a_model_of_another_vocabulary(
    corpus: Path, tok_dir: Path, tmp_path: Path
) -> None:
    from transformers import BertConfig, BertForMaskedLM, ModernBertForMaskedLM

    from diffusion_infill.model.training.config import PRESETS, modernbert_config

    bert = tmp_path / "bert"
    BertForMaskedLM(
        BertConfig(
            vocab_size=123,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=16,
        )
    ).save_pretrained(bert)
    with pytest.raises(SystemExit, match="a bert model"):
        train.main(_argv(corpus, tok_dir, tmp_path / "run", "--init-from", str(bert)))
    other = tmp_path / "other"
    ModernBertForMaskedLM(modernbert_config(PRESETS["tiny"], 123, 0, 1, 3)).save_pretrained(other)
    with pytest.raises(SystemExit, match="123-token vocabulary"):
        train.main(_argv(corpus, tok_dir, tmp_path / "run", "--init-from", str(other)))


def test_noise_overrides_are_typed_and_checked() -> None:
    cfg = arguments.noise_config("t_dist=bell,p_tokens=0.1")
    assert cfg.t_dist == "bell" and cfg.p_tokens == pytest.approx(0.1)
    with pytest.raises(argparse.ArgumentTypeError, match="FIELD=VALUE"):
        arguments.noise_config("nonsense=1")
    with pytest.raises(ValueError, match="unknown t_dist"):
        noising.draw_rates(4, noising.NoiseConfig(t_dist="zipf"), random.Random(0))


@pytest.mark.parametrize("t_dist", ["uniform", "bell", "stratified"])
def test_mask_rates_stay_in_the_unit_interval(t_dist: str) -> None:
    draws = noising.draw_rates(64, noising.NoiseConfig(t_dist=t_dist), random.Random(1))
    assert len(draws) == 64 and all(0.0 <= d < 1.0 for d in draws)
    if t_dist == "stratified":  # one draw in each of 64 strata
        assert sorted(int(d * 64) for d in draws) == list(range(64))


def _holes(tok_dir: Path, **cfg) -> list[tuple[list[int], list[int], list[float]]]:
    tok = Tokenizer.from_file(str(tok_dir / "tokenizer.json"))
    vocab = noising.Vocab.of(tok)
    noise = noising.NoiseConfig(
        p_tokens=0.0, p_block=0.0, max_background=0.0, p_substitute=0.0, p_identity=0.0, **cfg
    )
    sampler = noising.TextSampler(SOURCES, window_chars=400, seed=0)
    batch = noising.make_batch(sampler, tok, vocab, 32, 128, noise, random.Random(0))
    return [
        (ids.tolist(), tgt.tolist(), w.tolist())
        for ids, tgt, w in zip(batch.input_ids, batch.targets, batch.weights, strict=True)
    ], vocab


def test_engine_sized_allocations_end_in_null_tails(tok_dir: Path) -> None:
    rows, vocab = _holes(tok_dir, p_short=0.0, p_engine_alloc=1.0, p_reveal=0.0)
    for ids, tgt, _ in rows:
        runs, run = [], 0
        for i in ids + [-1]:
            if i == vocab.mask:
                run += 1
            elif run:
                runs.append(run)
                run = 0
        # one to three holes, each exactly 16, 32, ... slots unless two touch
        assert runs and all(r % 16 == 0 for r in runs), runs
        assert vocab.null in tgt


def test_part_decoded_holes_show_some_slots_and_learn_the_rest(tok_dir: Path) -> None:
    rows, vocab = _holes(tok_dir, p_short=0.0, p_engine_alloc=1.0, p_reveal=1.0)
    shown_null = learnt = 0
    for ids, tgt, w in rows:
        for i, t, weight in zip(ids, tgt, w, strict=True):
            if weight > 0:
                assert i == vocab.mask, "only masked slots carry a loss"
                learnt += 1
            elif t == vocab.null:
                assert i == vocab.null, "a revealed null tail shows the null"
                shown_null += 1
    assert learnt > 0 and shown_null > 0


def test_end_weight_weighs_the_slot_where_a_fill_ends_and_nothing_else(tok_dir: Path) -> None:
    plain, vocab = _holes(tok_dir, p_short=0.0, p_engine_alloc=1.0, p_reveal=0.5)
    ends, _ = _holes(tok_dir, p_short=0.0, p_engine_alloc=1.0, p_reveal=0.5, end_weight=4.0)
    changed = 0
    for (ids, tgt, w), (ids4, tgt4, w4) in zip(plain, ends, strict=True):
        assert ids == ids4 and tgt == tgt4, "the weight draws nothing: same rows"
        for i, (a, b) in enumerate(zip(w, w4, strict=True)):
            if a == b:
                continue
            # only a learnt slot whose target is the first null after content
            assert (a, b) == (1.0, 4.0)
            assert tgt[i] == vocab.null and tgt[i - 1] != vocab.null and ids[i] == vocab.mask
            changed += 1
    assert changed > 0


def _eval(single: float, true: float, multi: float, bug: float) -> dict:
    def em(x: float) -> dict:
        return {"exact_match": x, "n": 10, "nfe_per_token": 1.0, "ms_p50": 1.0}

    return {
        "single_line": em(single),
        "single_line_true_length": em(true),
        "multi_line": em(multi),
        "multi_line_true_length": em(0.0),
        "masked_token_accuracy": {"0.50": 0.3},
        "bugs": {"top1_localisation": bug, "exact_repair": 0.0, "n": 10, "by_kind": {}},
        "seconds": 1.0,
    }


def _ship_into(root: Path, monkeypatch) -> Path:
    """model.training.release writing into a scratch repository `root` instead of this one."""
    paths = {
        "WEIGHTS": root / "model/weights",
        "RESUME": root / "model/resume",
        "CURVE": root / "results/learning_curve.json",
        "CURVE_PNG": root / "img/c.png",
        "ROOT": root,
    }
    for name, value in paths.items():
        monkeypatch.setattr(release, name, value)
    (root / "benchmarks/results").mkdir(parents=True)
    (root / "results").mkdir()
    return root


def test_a_run_ships_a_better_checkpoint_and_keeps_a_worse_one(
    corpus: Path, tok_dir: Path, tmp_path: Path, monkeypatch
) -> None:
    run = tmp_path / "run"
    train.main(_argv(corpus, tok_dir, run, "--max-steps", "2"))
    root = _ship_into(tmp_path / "repo", monkeypatch)
    shipped = root / "benchmarks/results/eval_shipped.json"
    shipped.write_text(json.dumps(_eval(0.0, 0.025, 0.0, 0.05)))

    worse = tmp_path / "worse.json"
    worse.write_text(json.dumps(_eval(0.0, 0.02, 0.0, 0.05)))
    release.main(["--export", str(run / "export"), "--eval", str(worse)])
    assert (root / "model/resume/model.safetensors").exists()
    assert not (root / "model/weights").exists()

    better = tmp_path / "better.json"
    better.write_text(json.dumps(_eval(0.05, 0.1, 0.0, 0.1)))
    release.main(["--export", str(run / "export"), "--eval", str(better)])
    assert (root / "model/weights/model.safetensors").exists()
    card = root / "model/weights/MODEL_CARD.md"
    assert "Learning curve" in card.read_text() and release.NOTES in card.read_text()
    assert json.loads(shipped.read_text())["single_line"]["exact_match"] == 0.05

    # the next model that ships regenerates the card and keeps its hand-written history
    card.write_text(card.read_text() + "## Notes: how this model was made\n")
    best = tmp_path / "best.json"
    best.write_text(json.dumps(_eval(0.1, 0.2, 0.0, 0.2)))
    release.main(["--export", str(run / "export"), "--eval", str(best)])
    text = card.read_text()
    assert "| single-line, length left to the model | 10.0% |" in text
    assert text.count(release.NOTES) == 1 and text.endswith("## Notes: how this model was made\n")
    points = json.loads((root / "results/learning_curve.json").read_text())
    assert [p["where"] for p in points] == ["resume", "weights", "weights"]
    assert (root / "img/c.png").stat().st_size > 0
    torch.manual_seed(0)  # nothing else to check: the export loads (test_model covers it)


@pytest.mark.slow
def test_bench_parallel_times_each_layout_and_writes_the_figures(
    corpus: Path, tiny_model_dir: Path, tmp_path: Path, capsys
) -> None:
    from benchmarks import bench_parallel

    out = tmp_path / "parallel.json"
    bench_parallel.main(
        [
            "--steps",
            "2",
            "--layouts",
            "1x1,2x1",
            "--init-from",
            str(tiny_model_dir),
            "--corpus",
            str(corpus),
            "--out",
            str(out),
        ]
    )
    rows = json.loads(out.read_text())["rows"]
    assert [(r["workers"], r["threads"], r["steps"]) for r in rows] == [(1, 1, 2), (2, 1, 2)]
    assert all(r["tokens_per_s"] > 0 for r in rows)
    assert "tokens/s" in capsys.readouterr().out


@pytest.mark.parametrize("bad", ["2", "0x1", "2x", "axb"])
def test_bench_parallel_refuses_a_malformed_layout(bad: str) -> None:
    from benchmarks import bench_parallel

    with pytest.raises(argparse.ArgumentTypeError, match="expected WORKERSxTHREADS"):
        bench_parallel.parse_layout(bad)


def test_bench_loader_times_batches_with_the_shipped_noise(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks import bench_loader

    shipped = Path(__file__).resolve().parents[1] / "model/weights/tokenizer.json"
    out = tmp_path / "loader.json"
    bench_loader.main(
        [
            "--corpus",
            str(corpus),
            "--tokenizer",
            str(shipped),
            "--batch-size",
            "4",
            "--seq-len",
            "64",
            "--batches",
            "2",
            "--device-rate",
            "1e9",
            "--noise",
            "p_plausible=1.0,t_dist=bell",
            "--out",
            str(out),
        ]
    )
    result = json.loads(out.read_text())
    assert result["tokens"] > 0 and result["tokens_per_s"] > 0
    assert 0 <= result["swap_share"] <= 1
    assert result["noise"]["p_plausible"] == 1.0 and result["noise"]["t_dist"] == "bell"
    assert result["processes_needed"] >= 1
    assert "tokens/s per process" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="--noise: 'p_nothing=1': expected FIELD=VALUE"):
        bench_loader.main(["--corpus", str(corpus), "--noise", "p_nothing=1"])
    with pytest.raises(SystemExit, match="no .*train.jsonl"):
        bench_loader.main(["--corpus", str(tmp_path / "none")])


def test_bug_shaped_swaps_are_the_subtle_kinds_the_fixer_must_find() -> None:
    from diffusion_infill.model.training.swaps import PlausibleSwaps

    # the shipped tokenizer: the test corpus's own is too small to have whole-word names
    shipped = Path(__file__).resolve().parents[1] / "model/weights/tokenizer.json"
    tok = Tokenizer.from_file(str(shipped))
    swaps = PlausibleSwaps(tok)
    src = (
        "def total(items, limit):\n    count = 0\n    for item in items:\n"
        "        if item.price >= 10 and count < limit:\n"
        "            count = count + item.price * 2\n    return count == limit\n"
    )
    ids = tok.encode(src).ids
    found = swaps.candidates(ids, [True] * len(ids))
    seen = {
        kind: {(swaps.text[ids[p]].strip(), swaps.text[new].strip()) for p, new in hits}
        for kind, hits in found.items()
    }
    assert ("count", "limit") in seen["name"] and ("count", "price") not in seen["name"]
    assert all(old != new for pairs in seen.values() for old, new in pairs)
    assert seen["operator"] <= {("+", "-"), ("*", "/"), ("and", "or")}
    assert seen["comparison"] <= {(">=", "<"), ("<", ">="), ("==", "!=")}
    assert all(abs(int(a) - int(b)) == 1 for a, b in seen["number"])
    # a position that is not allowed (masked) is never swapped; positions are distinct
    allowed = [i % 2 == 0 for i in range(len(ids))]
    picked = swaps.pick(ids, allowed, 50, random.Random(0))
    assert picked and all(allowed[p] for p, _ in picked)
    assert len({p for p, _ in picked}) == len(picked)


def test_picked_swaps_are_the_draws_of_choosing_from_every_candidate() -> None:
    """`pick` spells out no name swap it does not choose; the swaps it makes must be those
    of drawing the kind, then the swap, from the full `candidates` lists."""
    from diffusion_infill.model.training.swaps import KINDS, PlausibleSwaps

    shipped = Path(__file__).resolve().parents[1] / "model/weights/tokenizer.json"
    tok = Tokenizer.from_file(str(shipped))
    swaps = PlausibleSwaps(tok)

    def reference(ids: list[int], allowed: list[bool], n: int, rng: random.Random):
        found, chosen = swaps.candidates(ids, allowed), {}
        for _ in range(n):
            kinds = [k for k in KINDS if any(p not in chosen for p, _ in found[k])]
            if not kinds:
                break
            options = [(p, new) for p, new in found[rng.choice(kinds)] if p not in chosen]
            pos, new = rng.choice(options)
            chosen[pos] = new
        return sorted(chosen.items())

    src = (
        "def total(items, limit, cache):\n    count = 0\n    for item in items:\n"
        "        if item.price >= 10 and count < limit or item.size == 3:\n"
        "            count = count + item.price * 2 - cache.get(item, 1)\n"
        "    return count == limit\n"
    )
    ids = tok.encode(src).ids
    draws = 0
    for seed in range(60):
        rng = random.Random(seed)
        allowed = [rng.random() < 0.7 for _ in ids]
        n = rng.randint(1, 8)
        got = swaps.pick(ids, allowed, n, random.Random(seed))
        assert got == reference(ids, allowed, n, random.Random(seed))
        draws += len(got)
    assert draws > 60  # the rows had swaps to draw
    assert swaps.pick(ids, [False] * len(ids), 3, random.Random(0)) == []


def test_a_negation_is_a_not_inserted_where_it_does_not_belong_with_null_as_target() -> None:
    from diffusion_infill.model.training.swaps import PlausibleSwaps

    shipped = Path(__file__).resolve().parents[1] / "model/weights/tokenizer.json"
    tok = Tokenizer.from_file(str(shipped))
    swaps = PlausibleSwaps(tok)
    ids = tok.encode("if a in b and c is d or e not in f or g is not h:\n    pass\n").ids
    spots = swaps.negations(ids, [True] * len(ids))
    made = [tok.decode(ids[:p] + [swaps.not_id] + ids[p:]) for p in spots]
    assert made == [
        "if a not in b and c is d or e not in f or g is not h:\n    pass\n",
        "if a in b and c is not d or e not in f or g is not h:\n    pass\n",
    ]
    assert swaps.negations(ids, [False] * len(ids)) == []

    vocab = noising.Vocab.of(tok)
    cfg = noising.NoiseConfig(p_tokens=1.0, p_substitute=0.0, p_identity=0.0, t_dist="uniform")
    texts = ["for item in items:\n    if item is None:\n        continue\n" * 3]
    for share in (0.0, 1.0):
        sampler = noising.TextSampler(texts, window_chars=200, seed=0)
        batch = noising.make_batch(
            sampler, tok, vocab, 8, 64, replace(cfg, p_negation=share), random.Random(0)
        )
        inserted = (batch.input_ids == swaps.not_id) & (batch.targets == vocab.null)
        # none by default; with share 1, one in each row whose place is not masked
        assert int(inserted.sum(dim=1).max()) == share
        assert share == 0.0 or int(inserted.sum()) >= 3
        for b, p in inserted.nonzero().tolist():
            assert batch.weights[b, p] == 1.0 and not batch.masked[b, p]
            # the row goes on after the `not` with the tokens that followed its place
            clean = [t for t in batch.targets[b].tolist() if t != vocab.null]
            row = batch.input_ids[b].tolist()
            assert row[:p] == clean[:p] or batch.masked[b, :p].any()
            assert batch.targets[b, p + 1].item() in (swaps._in_id, *tok.encode(" None").ids)


def test_editor_shaped_inline_holes_keep_code_after_them_on_their_line() -> None:
    text = "def f(path):\n    return os.path.join(path, 'a') + suffix\n"

    def cuts_a_word(a: int, b: int) -> bool:
        inside = lambda i: text[i - 1 : i + 1].isalnum()  # noqa: E731
        return inside(a) or inside(b)

    def inline_holes(inline: float) -> list[tuple[int, int]]:
        return [
            (a, b)
            for seed in range(300)
            for a, b in hole_spans.line_spans(text, len(text), random.Random(seed), inline)
            if text[b : text.index("\n", a)].strip()
        ]  # code after it on its line

    shaped = inline_holes(1.0)
    assert {"path, 'a'", "path"} <= {text[a:b] for a, b in shaped}
    assert not any(cuts_a_word(a, b) for a, b in shaped)
    # off (the default), part-of-line holes are cut at random characters
    assert any(cuts_a_word(a, b) for a, b in inline_holes(0.0))


def test_inline_span_makes_editor_shaped_in_line_holes_of_any_kind_and_draws_nothing_off() -> None:
    text = "def f(path):\n    return os.path.join(path, 'a') + suffix\n"
    body = text.index("return")
    forced = [
        sp
        for seed in range(200)
        for sp in hole_spans.line_spans(text, len(text), random.Random(seed), 0.0, 1.0)
    ]
    # every hole on the body line ends before code on its line, at whole words
    on_body = [(a, b) for a, b in forced if a >= body]
    assert on_body and all(text[b : text.index("\n", a)].strip() for a, b in on_body)
    assert "path, 'a'" in {text[a:b] for a, b in on_body}  # a call's arguments
    # off (the default), the spans and the generator's stream are as before
    for seed in range(50):
        r1, r2 = random.Random(seed), random.Random(seed)
        assert hole_spans.line_spans(text, len(text), r1, 0.5) == hole_spans.line_spans(
            text, len(text), r2, 0.5, 0.0
        )
        assert r1.random() == r2.random()


def test_plausible_swaps_put_the_original_token_as_target(tok_dir: Path) -> None:
    tok = Tokenizer.from_file(str(tok_dir / "tokenizer.json"))
    vocab = noising.Vocab.of(tok)
    clean = noising.NoiseConfig(p_tokens=1.0, p_substitute=0.0, p_identity=0.0, t_dist="uniform")
    swapped = 0
    for cfg in (clean, replace(clean, p_plausible=1.0, max_plausible=3)):
        sampler = noising.TextSampler(SOURCES, window_chars=400, seed=0)
        batch = noising.make_batch(sampler, tok, vocab, 16, 128, cfg, random.Random(0))
        changed = (batch.input_ids != batch.targets) & ~batch.masked
        changed &= batch.input_ids != vocab.pad
        assert bool((batch.weights[changed] == 1.0).all())
        assert int(changed.sum(dim=1).max()) <= 3
        swapped += int(changed.sum())
        if cfg is clean:
            assert swapped == 0  # the default recipe makes none
    assert swapped >= 8


def test_weights_too_large_for_bf16_ship_packed_load_and_train_on(
    corpus: Path, tok_dir: Path, tmp_path: Path, monkeypatch
) -> None:
    from diffusion_infill.model.loading import load_denoiser
    from diffusion_infill.model.training import packing

    run = tmp_path / "run"
    train.main(_argv(corpus, tok_dir, run, "--max-steps", "2"))
    export = run / "export"
    root = _ship_into(tmp_path / "repo", monkeypatch)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_eval(0.05, 0.1, 0.0, 0.1)))
    release.main(["--export", str(export), "--eval", str(good)])
    weights = root / "model/weights"
    assert (weights / packing.WEIGHTS).exists() and not (weights / packing.PACKED).exists()

    # bf16 no longer fits the limit (as a grown model's would not): the weights go as int8
    bf16 = (export / packing.WEIGHTS).stat().st_size
    monkeypatch.setattr(release, "SIZE_LIMIT", bf16)
    release.main(["--export", str(export), "--eval", str(good), "--force"])
    assert (weights / packing.PACKED).exists()
    assert not (weights / packing.WEIGHTS).exists(), "the bf16 weights it replaces are gone"
    assert "int8" in (weights / "MODEL_CARD.md").read_text()

    # the engine's loader reads them, and gives what the bf16 export gives, to int8 error
    canvas, at = [[5, 6, 7, 1, 1, 8]], [[3, 4]]
    [packed] = load_denoiser(weights, device="cpu", dtype="fp32").logits(canvas, at)
    [exact] = load_denoiser(export, device="cpu", dtype="fp32").logits(canvas, at)
    assert (
        packed.shape
        == exact.shape
        == (2, len(json.loads((export / "tokenizer.json").read_text())["model"]["vocab"]))
    )
    assert abs(packed - exact).max() < 0.05 * abs(exact).max()

    # and a warm restart from the shipped folder continues its record
    again = tmp_path / "again"
    train.main(_argv(corpus, tok_dir, again, "--max-steps", "1", "--init-from", str(weights)))
    before = json.loads((export / "training.json").read_text())
    after = json.loads((again / "export" / "training.json").read_text())
    assert after["tokens_total"] == before["tokens_total"] + after["tokens"]

    # an export that came back packed (a GPU run's grown model) ships packed as it is
    packing.pack(export, tmp_path / "packed_export")
    release.main(["--export", str(tmp_path / "packed_export"), "--eval", str(good), "--force"])
    assert (weights / packing.PACKED).read_bytes() == (
        tmp_path / "packed_export" / packing.PACKED
    ).read_bytes()

    # over the limit even packed: nothing is copied, the shipped weights stay
    monkeypatch.setattr(release, "SIZE_LIMIT", 1000)
    with pytest.raises(SystemExit, match="over the 64 MiB limit"):
        release.main(["--export", str(export), "--eval", str(good), "--force"])
    assert (weights / packing.PACKED).exists()
