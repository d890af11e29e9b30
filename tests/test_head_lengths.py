"""The length head: a hole the model's length head is sure of is decoded with exactly that
many tokens (infill/core/head_lengths.py); the head file beside a model's weights
(model/length_head.py) loads with the model and answers one row per hole."""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import torch
from fakes import MASK, TargetDenoiser

from diffusion_infill.infill import OptionError, Span, fill_spans, fill_text
from diffusion_infill.infill.core.head_lengths import MIN_PROBABILITY
from diffusion_infill.model.denoiser import CacheHint
from diffusion_infill.model.length_head import CLASSES, SLOTS, LengthHead, save_length_head
from diffusion_infill.model.loading import ModelLoadError, load_denoiser

CODE = "def area(w, h):\n    return <mask>\n\nprint(area(2, 3))\n"


class HeadDenoiser(TargetDenoiser):
    """A fake whose length head gives every hole `probability` on `length` tokens."""

    length_slots = SLOTS

    def __init__(self, targets: Sequence[str], length: int, probability: float) -> None:
        super().__init__(targets)
        self.length, self.probability = length, probability
        self.asked: list[tuple[list[list[int]], list[list[list[int]]]]] = []

    def first_pass(
        self,
        canvases: Sequence[Sequence[int]],
        positions: Sequence[Sequence[int]],
        hints: Sequence[CacheHint | None] | None,
        slots: Sequence[Sequence[Sequence[int]]],
    ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        self.asked.append(([list(c) for c in canvases], [[list(p) for p in s] for s in slots]))
        row = np.full(CLASSES, (1 - self.probability) / (CLASSES - 1))
        row[self.length] = self.probability
        lengths = [np.log(np.tile(row, (len(s), 1))) for s in slots]
        return self.logits(canvases, positions, hints), lengths


def test_a_hole_the_head_is_sure_of_gets_exactly_its_length():
    den = HeadDenoiser(["w * h  # the area"], length=5, probability=MIN_PROBABILITY + 0.05)
    r = fill_text(CODE, denoiser=den)
    assert r.fills[0].text == "w * h"
    ((canvases, slots),) = den.asked  # one pass over the default allocation, all masked
    (positions,) = slots[0]
    assert len(positions) == SLOTS and {canvases[0][p] for p in positions} == {MASK}
    assert r.stats.nfe == den.nfe == 2  # the head's pass (then planned again) and one step


def test_an_unsure_head_leaves_the_length_to_the_network_at_no_pass_of_its_own():
    den = HeadDenoiser(["w * h  # the area"], length=5, probability=MIN_PROBABILITY - 0.05)
    r = fill_text(CODE, denoiser=den)
    assert r.fills[0].text == "w * h  # the area"
    assert len(den.asked) == 1
    off = fill_text(CODE, denoiser=den, length_head=False)
    assert r.stats.nfe == off.stats.nfe == den.nfe // 2  # its pass was the first step


def test_progress_reports_the_step_the_heads_pass_took():
    den = HeadDenoiser(["w * h  # the area"], length=5, probability=MIN_PROBABILITY - 0.05)
    on: list[tuple[int, int]] = []
    off: list[tuple[int, int]] = []
    fill_text(CODE, denoiser=den, progress=lambda *p: on.append(p))
    fill_text(CODE, denoiser=den, length_head=False, progress=lambda *p: off.append(p))
    assert on == off and len(on) >= 1


def test_where_the_head_is_unsure_a_failing_fill_races_its_likeliest_lengths():
    # "w * h)" does not parse; the head is unsure but likes 5 tokens best
    code = CODE.replace("return <mask>", "<mask>")
    den = HeadDenoiser(["w * h)"], length=5, probability=MIN_PROBABILITY - 0.2)
    r = fill_text(code, denoiser=den, checks="parse", lengths=4)
    assert r.fills[0].text == "w * h"
    assert [len(p) for p in den.calls[1][1]] == [5, 1, 2]  # the head's order, not 4, 2, 1
    off = HeadDenoiser(["w * h)"], length=5, probability=MIN_PROBABILITY - 0.2)
    fill_text(code, denoiser=off, checks="parse", lengths=4, length_head=False)
    assert [len(p) for p in off.calls[1][1]] == [4, 2, 1]


def test_sixteen_or_more_leaves_the_length_to_the_network():
    den = HeadDenoiser(["w * h  # the area"], length=SLOTS, probability=MIN_PROBABILITY + 0.059)
    assert fill_text(CODE, denoiser=den).fills[0].text == "w * h  # the area"


def test_the_option_off_never_asks_the_head():
    den = HeadDenoiser(["w * h  # the area"], length=5, probability=MIN_PROBABILITY + 0.05)
    r = fill_text(CODE, denoiser=den, length_head=False)
    assert r.fills[0].text == "w * h  # the area" and den.asked == []


def test_hints_rewrites_and_selections_of_lines_are_not_asked():
    den = HeadDenoiser(["w * h"], length=2, probability=MIN_PROBABILITY + 0.05)
    assert fill_text(CODE.replace("<mask>", "<mask:8>"), denoiser=den).fills[0].text == "w * h"
    text = CODE.replace("<mask>", "w + h")
    start = text.index("w + h")
    r = fill_spans(text, [Span(start, start + 5)], denoiser=den)  # a rewrite: its own length
    assert r.fills[0].text == "w * h"
    lines = "def f():\n    a = 1\n    b = 2\n    return a\n"
    den_lines = HeadDenoiser(["x = 1\n    y = 2"], length=2, probability=MIN_PROBABILITY + 0.05)
    fill_spans(lines, [Span(lines.index("    a"), lines.index("    return"))], denoiser=den_lines)
    assert den.asked == [] and den_lines.asked == []


def test_the_option_must_be_a_bool():
    with pytest.raises(OptionError, match="length_head must be true or false"):
        fill_text(CODE, denoiser=TargetDenoiser(["x"]), length_head="yes")


def test_the_head_file_loads_with_the_model_and_gives_one_row_per_hole(
    tiny_model_dir: Path, tmp_path: Path
):
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    assert load_denoiser(model).length_slots == 0  # no head file: never asked
    plain = load_denoiser(model)
    torch.manual_seed(0)
    save_length_head(LengthHead(plain.model.config.hidden_size), model, plain.network)
    den = load_denoiser(model)
    assert den.length_slots == SLOTS
    canvas = den.encode("x = ") + [den.special.mask] * SLOTS + den.encode("\ny = 2\n")
    two = [list(range(4, 4 + SLOTS))] * 2
    (rows,) = den.fill_lengths([canvas], [two])
    assert rows.shape == (2, CLASSES)
    assert all(math.isclose(np.exp(r).sum(), 1.0, rel_tol=1e-4) for r in rows)
    with pytest.raises(ValueError, match="exactly 16 slots"):
        den.fill_lengths([canvas], [[[4, 5]]])


def test_a_head_of_another_width_is_refused_with_the_file_named(
    tiny_model_dir: Path, tmp_path: Path
):
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    save_length_head(LengthHead(7), model, load_denoiser(model).network)
    with pytest.raises(ModelLoadError, match="length_head.safetensors does not fit"):
        load_denoiser(model)


def test_an_unreadable_head_file_is_refused_with_the_file_named(
    tiny_model_dir: Path, tmp_path: Path
):
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    (model / "length_head.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ModelLoadError, match="length_head.safetensors cannot be read"):
        load_denoiser(model)


def test_a_head_fit_on_other_weights_is_not_used_and_the_log_says_so(
    tiny_model_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    den = load_denoiser(model)
    save_length_head(LengthHead(den.model.config.hidden_size), model, "0123456789abcdef")
    with caplog.at_level("WARNING"):
        assert load_denoiser(model).length_slots == 0
    assert "fit on other weights" in caplog.text and "fit_length_head" in caplog.text


def test_fit_length_head_writes_a_head_the_loader_takes(
    run_benchmark, tiny_model_dir: Path, modules_corpus: Path, tmp_path: Path
):
    model, corpus = tmp_path / "model", tmp_path / "corpus"
    shutil.copytree(tiny_model_dir, model)
    corpus.mkdir()
    for split in ("train", "valid"):
        shutil.copy(modules_corpus / "test.jsonl", corpus / f"{split}.jsonl")
    out = tmp_path / "fit.json"
    args = ("--model", str(model), "--corpus", str(corpus), "--train-files", "3", "--n", "4")
    done = run_benchmark(
        "fit_length_head", *args, "--n-valid", "2", "--epochs", "2", "--out", str(out)
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert result["train_holes"] > 0 and set(result["valid"]) >= {
        "cursor, 700",
        "part-of-line, editor",
    }
    assert load_denoiser(model).length_slots == SLOTS


def test_fit_length_head_refuses_bad_arguments(benchmark_main, tmp_path: Path):
    code, err = benchmark_main("fit_length_head", "--n", "0")
    assert code == 2 and "must be >= 1" in err
    code, err = benchmark_main("fit_length_head", "--corpus", str(tmp_path))
    assert code == 2 and "train.jsonl not found" in err


def test_the_heads_pass_is_the_decodes_first_step_with_the_tiny_model(
    tiny_model_dir: Path, tmp_path: Path
):
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    plain = load_denoiser(model, dtype="fp32")
    torch.manual_seed(0)  # an untrained head: about 1/17 on each length, never sure
    save_length_head(LengthHead(plain.model.config.hidden_size), model, plain.network)
    den = load_denoiser(model, dtype="fp32")
    asked = []
    first_pass = den.first_pass
    den.first_pass = lambda *a: asked.append(a[3]) or first_pass(*a)  # type: ignore[method-assign]
    text = "def f(a, b):\n    c = <mask>\n    return c\n\nx = <mask>\n"
    for refresh in (0, 4):  # the network's forward, and the cached model's full pass
        on = fill_text(text, denoiser=den, cache_refresh=refresh)
        off = fill_text(text, denoiser=den, cache_refresh=refresh, length_head=False)
        assert on.text == off.text
        assert on.stats.nfe == off.stats.nfe and on.trace == off.trace
    assert [sum(map(len, slots)) for slots in asked] == [2, 2]  # both holes read, each time


def test_a_first_pass_reads_no_kept_entries(tiny_model_dir: Path, tmp_path: Path):
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    plain = load_denoiser(model, dtype="fp32")
    save_length_head(LengthHead(plain.model.config.hidden_size), model, plain.network)
    den = load_denoiser(model, dtype="fp32")
    canvas = den.encode("x = ") + [den.special.mask] * SLOTS + den.encode("\n")
    hole, slots = list(range(4, 4 + SLOTS)), [[list(range(4, 4 + SLOTS))]]
    full = CacheHint(key="a", active=tuple(hole), refresh=True)
    logits, lengths = den.first_pass([canvas], [hole], [full], slots)
    assert logits[0].shape == (SLOTS, den.vocab_size) and lengths[0].shape == (1, CLASSES)
    np.testing.assert_allclose(logits[0], den.logits([canvas], [hole])[0], atol=1e-4)
    again = CacheHint(key="a", active=tuple(hole), refresh=False)  # would read "a"'s entries
    with pytest.raises(ValueError, match="every hint must ask a full pass"):
        den.first_pass([canvas], [hole], [again], slots)
    with pytest.raises(ValueError, match="for every canvas or for none"):
        den.first_pass([canvas, canvas], [hole, hole], [full, None], slots * 2)
