"""The compute dtype is chosen per machine: int8 linear layers where bf16 is emulated or no
faster, bf16 where timed faster; a request or $INFILL_DTYPE overrides; the loaded
denoiser says what it chose; int8 leaves the linear layers it is told to (by default
`KEEP_FP32`) in fp32."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from diffusion_infill.model import precision
from diffusion_infill.model.denoiser import CacheHint, ModelLoadError
from diffusion_infill.model.loading import load_denoiser


def test_cpu_without_bf16_instructions_runs_int8_linear_layers(monkeypatch) -> None:
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"fpu", "avx2", "fma"}))
    precision._fastest_on_cpu.cache_clear()
    monkeypatch.delenv("INFILL_DTYPE", raising=False)
    chosen = precision.pick_precision("cpu")
    assert chosen.int8 and chosen.name == "int8" and chosen.dtype == torch.float32
    assert "no bf16 instructions" in chosen.reason
    precision._fastest_on_cpu.cache_clear()


def test_cpu_flags_are_read_from_cpuinfo(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu amx_bf16 avx512_bf16\n")
    assert {"amx_bf16", "avx512_bf16"} <= precision.cpu_flags(info)
    assert precision.cpu_flags(tmp_path / "missing") == frozenset()


def test_cpu_with_bf16_instructions_times_both(monkeypatch) -> None:
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"amx_bf16"}))
    monkeypatch.setattr(
        precision, "_time_matmul", lambda layer, x, dtype: 1.0 if dtype == torch.float32 else 0.4
    )
    precision._fastest_on_cpu.cache_clear()
    monkeypatch.delenv("INFILL_DTYPE", raising=False)
    assert precision.pick_precision("cpu").dtype == torch.bfloat16
    precision._fastest_on_cpu.cache_clear()
    # bf16 instructions that are no faster (a Xeon without AMX timed them slower): int8
    monkeypatch.setattr(
        precision, "_time_matmul", lambda layer, x, dtype: 1.0 if dtype == torch.float32 else 1.2
    )
    chosen = precision.pick_precision("cpu")
    assert chosen.name == "int8" and "no faster" in chosen.reason
    precision._fastest_on_cpu.cache_clear()


def test_int8_that_times_faster_than_bf16_is_chosen(monkeypatch) -> None:
    """A CPU with bf16 instructions but no AMX (VNNI int8 kernels): int8 times faster than
    bf16, which times faster than fp32; int8 is chosen, and says why."""
    times = {torch.float32: 1.0, torch.bfloat16: 0.3, torch.qint8: 0.18}
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"avx512_bf16"}))
    monkeypatch.setattr(precision, "_time_matmul", lambda layer, x, dtype: times[dtype])
    precision._fastest_on_cpu.cache_clear()
    monkeypatch.delenv("INFILL_DTYPE", raising=False)
    try:
        chosen = precision.pick_precision("cpu")
        assert chosen.name == "int8" and "int8 timed faster" in chosen.reason
        times[torch.qint8] = 0.28  # within 10% of bf16: bf16 keeps it
        precision._fastest_on_cpu.cache_clear()
        assert precision.pick_precision("cpu").name == "bf16"
    finally:
        precision._fastest_on_cpu.cache_clear()


def test_the_probe_times_a_quantised_layer_for_int8(monkeypatch) -> None:
    seen: list[tuple[type, torch.dtype]] = []

    def timed(layer, x, dtype: torch.dtype) -> float:
        seen.append((type(layer), dtype))
        return 1.0

    monkeypatch.setattr(precision, "_time_matmul", timed)
    assert len(precision._best_times(rounds=1)) == 3
    kinds = dict((d, t) for t, d in seen)
    assert kinds[torch.float32] is torch.nn.Linear and kinds[torch.bfloat16] is torch.nn.Linear
    assert kinds[torch.qint8] is torch.nn.Sequential  # the int8 twin of the same layer


def test_a_load_rising_while_timing_does_not_decide_the_dtype(monkeypatch) -> None:
    """bf16 is 0.6x fp32's time on this fake CPU, while every call is 10% slower than the
    one before (a test suite starting beside the worker): timed one dtype after the other,
    bf16's best (from the second block) would lose; timed in turn, it wins. The timing
    runs on one thread."""
    calls: list[torch.dtype] = []
    threads_while_timing: set[int] = set()
    threads = torch.get_num_threads()

    def timed(layer, x, dtype: torch.dtype) -> float:
        load = 1.1 ** len(calls)
        calls.append(dtype)
        threads_while_timing.add(torch.get_num_threads())
        return load * (1.0 if dtype == torch.float32 else 0.6)

    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"avx512_bf16"}))
    monkeypatch.setattr(precision, "_time_matmul", timed)
    precision._fastest_on_cpu.cache_clear()
    monkeypatch.delenv("INFILL_DTYPE", raising=False)
    try:
        chosen = precision.pick_precision("cpu")
    finally:
        precision._fastest_on_cpu.cache_clear()
    assert chosen.dtype == torch.bfloat16, chosen.reason
    assert calls[:6] == [torch.float32, torch.bfloat16, torch.qint8] * 2
    # one thread: two would wait on a core that is busy elsewhere; the setting comes back
    assert threads_while_timing == {1} and torch.get_num_threads() == threads


def test_request_and_environment_override(monkeypatch) -> None:
    monkeypatch.setenv("INFILL_DTYPE", "bf16")
    assert precision.pick_precision("cpu").dtype == torch.bfloat16
    assert precision.pick_precision("cpu", "fp32").dtype == torch.float32
    with pytest.raises(ValueError, match="unknown dtype"):
        precision.pick_precision("cpu", "fp8")


def test_loaded_denoiser_reports_its_precision(tiny_model_dir: Path, monkeypatch) -> None:
    monkeypatch.delenv("INFILL_DTYPE", raising=False)
    den = load_denoiser(tiny_model_dir, dtype="fp32")
    assert den.precision.name == "fp32"
    with pytest.raises(ModelLoadError, match="unknown dtype"):
        load_denoiser(tiny_model_dir, dtype="half-ish")


@pytest.fixture
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_infill_threads_sets_the_cpu_threads(
    tiny_model_dir: Path, monkeypatch, restore_threads
) -> None:
    monkeypatch.setenv("INFILL_THREADS", "1")
    load_denoiser(tiny_model_dir, dtype="fp32")
    assert torch.get_num_threads() == 1
    for bad in ("0", "two", "-3"):
        monkeypatch.setenv("INFILL_THREADS", bad)
        with pytest.raises(ModelLoadError, match="INFILL_THREADS must be a positive"):
            load_denoiser(tiny_model_dir, dtype="fp32")


def test_int8_is_a_cpu_inference_choice(monkeypatch) -> None:
    monkeypatch.delenv("INFILL_DTYPE", raising=False)
    chosen = precision.pick_precision("cpu", "int8")
    assert chosen.int8 and chosen.name == "int8" and chosen.dtype == torch.float32
    monkeypatch.setenv("INFILL_DTYPE", "int8")
    assert precision.pick_precision("cpu").name == "int8"
    with pytest.raises(ValueError, match="int8 weights are for the CPU"):
        precision.pick_precision("cuda", "int8")


def test_an_int8_denoiser_quantises_its_linear_layers_and_answers_like_fp32(
    tiny_model_dir: Path, monkeypatch
) -> None:
    monkeypatch.delenv("INFILL_DTYPE", raising=False)
    exact = load_denoiser(tiny_model_dir, dtype="fp32")
    den = load_denoiser(tiny_model_dir, dtype="int8")
    assert den.precision.name == "int8"
    # every linear layer quantised but those KEEP_FP32 names
    everything = set(_linear_names(exact.model))
    kept = everything - set(precision.int8_layers(exact.model, precision.KEEP_FP32))
    assert set(_linear_names(den.model)) == kept and kept < everything
    assert any(isinstance(m, torch.ao.nn.quantized.dynamic.Linear) for m in den.model.modules())
    canvas = den.encode("def add(a, b):\n    return a + b\n")
    canvas[5:8] = [den.special.mask] * 3
    pos = list(range(len(canvas)))
    (want,) = exact.logits([canvas], [pos])
    (got,) = den.logits([canvas], [pos])
    assert got.shape == want.shape and np.isfinite(got).all()
    assert np.abs(got - want).max() < 0.1 * np.abs(want).max()
    # the cached forward (context keys/values reused) runs on the quantised layers too (its
    # activations are quantised over fewer rows, hence a looser match than in fp32)
    hint = CacheHint(key="k", active=tuple(range(5, 8)), refresh=True)
    (full,) = den.logits([canvas], [pos], [hint])
    (part,) = den.logits([canvas], [[5, 6, 7]], [replace(hint, refresh=False)])
    np.testing.assert_allclose(part, full[5:8], atol=0.02)


def test_int8_keeps_weights_per_channel_in_7_bits_and_inputs_in_8() -> None:
    """Per-channel 7-bit weights (no int16 overflow in AVX2 kernels) and 8-bit inputs
    answer closer to fp32 than PyTorch's default dynamic int8 (per-tensor weights, 7-bit
    inputs), which cost held-out exact match."""
    from torch.ao.quantization import quantize_dynamic

    torch.manual_seed(0)
    layer = torch.nn.Linear(256, 256, bias=False)
    with torch.no_grad():  # channels of very different scales, as in a trained model
        layer.weight.mul_(torch.logspace(-2, 0, 256)[:, None])
    x = torch.randn(64, 256)
    want = layer(x)
    ours = precision.quantise_int8(torch.nn.Sequential(layer))[0]
    stock = quantize_dynamic(torch.nn.Sequential(layer), {torch.nn.Linear}, dtype=torch.qint8)[0]
    codes = ours.weight().int_repr()
    assert codes.min() >= -64 and codes.max() <= 63
    assert ours.weight().qscheme() in (torch.per_channel_affine, torch.per_channel_symmetric)
    err = ((ours(x) - want).abs() / want.abs().amax(1, keepdim=True)).max()
    stock_err = ((stock(x) - want).abs() / want.abs().amax(1, keepdim=True)).max()
    assert err < 0.6 * stock_err  # 7-bit inputs alone: 0.85x stock_err here


def _linear_names(model: torch.nn.Module) -> list[str]:
    """Names of the linear layers of `model` still in fp32."""
    return [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]


def _modernbert_shaped() -> torch.nn.Module:
    """Linear layers named as in a ModernBERT: two layers, the head and the decoder."""

    def layer() -> torch.nn.Module:
        return torch.nn.ModuleDict(
            {
                "attn": torch.nn.ModuleDict(
                    {"Wqkv": torch.nn.Linear(8, 24), "Wo": torch.nn.Linear(8, 8)}
                ),
                "mlp": torch.nn.ModuleDict(
                    {"Wi": torch.nn.Linear(8, 32), "Wo": torch.nn.Linear(16, 8)}
                ),
            }
        )

    return torch.nn.ModuleDict(
        {
            "model": torch.nn.ModuleDict({"layers": torch.nn.ModuleList([layer(), layer()])}),
            "head": torch.nn.ModuleDict({"dense": torch.nn.Linear(8, 8)}),
            "decoder": torch.nn.Linear(8, 40),
        }
    )


def test_int8_keeps_the_linear_layers_it_is_told_to_in_fp32() -> None:
    """`keep_fp32` name patterns leave those linear layers in fp32 and quantise the rest;
    the model quantised from is left as it was."""
    model = _modernbert_shaped()
    every = _linear_names(model)
    q = precision.quantise_int8(model, keep_fp32=("*.mlp.Wo", "model.layers.0.attn.Wqkv"))
    assert _linear_names(q) == [
        "model.layers.0.attn.Wqkv",
        "model.layers.0.mlp.Wo",
        "model.layers.1.mlp.Wo",
    ]
    full_range = precision._full_range_linear()
    quantised = {n for n, m in q.named_modules() if isinstance(m, full_range)}
    assert quantised == set(every) - set(_linear_names(q))
    assert _linear_names(model) == every  # not quantised in place
    assert _linear_names(precision.quantise_int8(model, keep_fp32=())) == []


def test_int8_by_default_keeps_the_layers_whose_inputs_quantise_worst() -> None:
    """The default recipe: the first layer's Wqkv (fed by the embeddings' norm) and the
    head's dense layer stay fp32; every other linear layer is int8, the MLPs' output layers
    with a scale per input row."""
    assert precision.KEEP_FP32 == ("model.layers.0.attn.Wqkv", "head.dense")
    assert precision.PER_ROW == ("*.mlp.Wo",)
    q = precision.quantise_int8(_modernbert_shaped())
    assert _linear_names(q) == ["model.layers.0.attn.Wqkv", "head.dense"]
    assert sum(isinstance(m, precision._full_range_linear()) for m in q.modules()) == 8
    rows = [n for n, m in q.named_modules() if isinstance(m, precision.RowScaled)]
    assert rows == ["model.layers.0.mlp.Wo", "model.layers.1.mlp.Wo"]


def test_a_scale_per_row_keeps_rows_of_very_different_sizes() -> None:
    """Rows (tokens) whose sizes differ by orders of magnitude: with one scale per call the
    small rows are lost to rounding; with a scale per row each keeps its precision. The
    wrapped layer computes the same function in fp32, its bias included."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(64, 32)
    x = torch.randn(16, 64) * torch.logspace(-3, 1, 16)[:, None]
    want = layer(x)
    np.testing.assert_allclose(
        precision.RowScaled(layer)(x).detach(), want.detach(), rtol=1e-5, atol=1e-6
    )
    per_call = precision.quantise_int8(torch.nn.Sequential(layer), keep_fp32=(), per_row=())
    per_row = precision.quantise_int8(torch.nn.Sequential(layer), keep_fp32=(), per_row=("0",))
    bias_free = want - layer.bias

    def worst(q: torch.nn.Module) -> float:
        got = q(x) - layer.bias
        return ((got - bias_free).abs() / bias_free.abs().amax(1, keepdim=True)).max().item()

    assert worst(per_row) < 0.1 * worst(per_call)
    assert isinstance(per_row[0], precision.RowScaled) and type(layer) is torch.nn.Linear


@pytest.mark.parametrize(
    ("flags", "isa", "bf16"),
    [
        (frozenset({"avx2", "avx512_bf16"}), None, True),
        (frozenset({"avx2"}), None, False),
        # oneDNN capped below its bf16 instructions: torch cannot use them
        (frozenset({"avx2", "avx512_bf16"}), "AVX2", False),
        (frozenset({"avx2", "avx512_bf16"}), "avx512_core_bf16", True),
        (frozenset({"avx2", "amx_bf16"}), "ALL", True),
    ],
)
def test_a_cpu_denoiser_says_whether_its_cpu_has_bf16(
    tiny_model_dir: Path, monkeypatch, flags: frozenset[str], isa: str | None, bf16: bool
) -> None:
    """What the worker tells clients, who choose their budgets by it: int8 on a CPU with
    bf16 instructions was timed the faster there, not the only fast choice."""
    monkeypatch.setattr(precision, "cpu_flags", lambda: flags)
    if isa is None:
        monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    else:
        monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", isa)
    den = load_denoiser(tiny_model_dir, dtype="int8")
    assert den.cpu_bf16 is bf16


def test_training_never_runs_int8(monkeypatch) -> None:
    """int8 layers are for inference: where int8 times fastest, training takes bf16 if it
    times faster than fp32, else fp32; a CPU without bf16 instructions trains in fp32."""
    times = {torch.float32: 1.0, torch.bfloat16: 0.3, torch.qint8: 0.18}
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"avx512_bf16"}))
    monkeypatch.setattr(precision, "_time_matmul", lambda layer, x, dtype: times[dtype])
    monkeypatch.delenv("INFILL_DTYPE", raising=False)
    precision._fastest_on_cpu.cache_clear()
    try:
        assert precision.pick_precision("cpu").name == "int8"
        assert precision.pick_training_precision("cpu").name == "bf16"
        times[torch.bfloat16] = 1.2  # bf16 no faster than fp32
        precision._fastest_on_cpu.cache_clear()
        assert precision.pick_training_precision("cpu").name == "fp32"
        monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"avx2"}))
        precision._fastest_on_cpu.cache_clear()
        chosen = precision.pick_training_precision("cpu")
        assert chosen.name == "fp32" and "no bf16 instructions" in chosen.reason
        assert precision.pick_training_precision("cpu", "bf16").name == "bf16"  # asked for
    finally:
        precision._fastest_on_cpu.cache_clear()
