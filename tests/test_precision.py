"""The compute dtype is chosen per machine: int8 linear layers where bf16 is emulated or no
faster, bf16 where timed faster; a request or $INFILL_DTYPE overrides; the loaded
denoiser says what it chose; int8 (model/int8.py) quantises weights per channel in 7 bits
and inputs per row in 8, on a kernel that stays exact where 8-bit weights would not, and
leaves the linear layers it is told to (by default `KEEP_FP32`) in fp32."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from diffusion_infill.model import int8, precision
from diffusion_infill.model.denoiser import CacheHint, ModelLoadError
from diffusion_infill.model.hf import HFDenoiser
from diffusion_infill.model.loading import load_denoiser

ROOT = Path(__file__).resolve().parent.parent


def test_cpu_without_bf16_instructions_runs_int8_where_it_times_faster(monkeypatch) -> None:
    """No bf16 instructions: bf16 is not timed (emulated, it is slow); int8 linear layers
    where they time faster than fp32, else fp32 (a slow int8 kernel never becomes the
    default: torch._int_mm ran 40x slower than fp32 on a Zen 3)."""
    times = {torch.float32: 1.0, torch.int8: 0.8}
    timed: list[torch.dtype] = []

    def fake(layer, x, dtype: torch.dtype) -> float:
        timed.append(dtype)
        return times[dtype]

    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"fpu", "avx2", "fma"}))
    monkeypatch.setattr(precision, "_time_matmul", fake)
    monkeypatch.delenv("INFILL_DTYPE", raising=False)
    precision._fastest_on_cpu.cache_clear()
    try:
        chosen = precision.pick_precision("cpu")
        assert chosen.int8 and chosen.name == "int8" and chosen.dtype == torch.float32
        assert "no bf16 instructions" in chosen.reason and "int8 timed faster" in chosen.reason
        assert timed and torch.bfloat16 not in timed
        times[torch.int8] = 30.0  # an int8 kernel that falls back to slow code
        precision._fastest_on_cpu.cache_clear()
        chosen = precision.pick_precision("cpu")
        assert chosen.name == "fp32" and "int8 timed slower" in chosen.reason
    finally:
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
    # where it times faster than fp32, else fp32
    times = {torch.float32: 1.0, torch.bfloat16: 1.2, torch.int8: 0.95}
    monkeypatch.setattr(precision, "_time_matmul", lambda layer, x, dtype: times[dtype])
    chosen = precision.pick_precision("cpu")
    assert chosen.name == "int8" and "no faster" in chosen.reason
    precision._fastest_on_cpu.cache_clear()
    times[torch.int8] = 1.2
    chosen = precision.pick_precision("cpu")
    assert chosen.name == "fp32" and "no faster" in chosen.reason
    precision._fastest_on_cpu.cache_clear()


def test_int8_that_times_faster_than_bf16_is_chosen(monkeypatch) -> None:
    """A CPU with bf16 instructions but no AMX (VNNI int8 kernels): int8 times faster than
    bf16, which times faster than fp32; int8 is chosen, and says why."""
    times = {torch.float32: 1.0, torch.bfloat16: 0.3, torch.int8: 0.18}
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"avx512_bf16"}))
    monkeypatch.setattr(precision, "_time_matmul", lambda layer, x, dtype: times[dtype])
    precision._fastest_on_cpu.cache_clear()
    monkeypatch.delenv("INFILL_DTYPE", raising=False)
    try:
        chosen = precision.pick_precision("cpu")
        assert chosen.name == "int8" and "int8 timed faster" in chosen.reason
        times[torch.int8] = 0.28  # within 10% of bf16: bf16 keeps it
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
    assert kinds[torch.int8] is torch.nn.Sequential  # the int8 twin of the same layer


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
    assert calls[:6] == [torch.float32, torch.bfloat16, torch.int8] * 2
    # one thread: two would wait on a core that is busy elsewhere; the setting comes back
    assert threads_while_timing == {1} and torch.get_num_threads() == threads


@pytest.fixture
def no_int8_kernels(monkeypatch):
    """A torch whose int8 kernels are missing (a build without oneDNN, another architecture):
    building a quantised layer raises, as prepacking does there."""

    def missing(*args, **kwargs):
        raise RuntimeError("Didn't find engine for operation onednn::qlinear_prepack\nmore")

    monkeypatch.setattr(precision, "quantise_int8", missing)
    monkeypatch.delenv("INFILL_DTYPE", raising=False)
    precision.int8_unavailable.cache_clear()
    precision._fastest_on_cpu.cache_clear()
    yield
    precision.int8_unavailable.cache_clear()
    precision._fastest_on_cpu.cache_clear()


@pytest.mark.parametrize(
    ("flags", "times", "name"),
    [
        ({"avx2"}, {torch.float32: 1.0}, "fp32"),  # no bf16 instructions: fp32, not a crash
        ({"avx512_bf16"}, {torch.float32: 1.0, torch.bfloat16: 0.5}, "bf16"),
        ({"avx512_bf16"}, {torch.float32: 1.0, torch.bfloat16: 1.0}, "fp32"),
        (set(), {torch.float32: 1.0, torch.bfloat16: 2.0}, "fp32"),  # flags unknown (macOS)
    ],
)
def test_a_torch_without_int8_kernels_computes_in_what_it_has(
    no_int8_kernels, monkeypatch, flags, times, name
) -> None:
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset(flags))
    monkeypatch.setattr(precision, "_time_matmul", lambda layer, x, dtype: times[dtype])
    chosen = precision.pick_precision("cpu")
    assert chosen.name == name and not chosen.int8
    if name == "fp32":
        assert "no int8 kernels in this torch (RuntimeError: Didn't find engine" in chosen.reason


def test_int8_asked_of_a_torch_without_int8_kernels_is_a_clear_error(
    no_int8_kernels, tiny_model_dir: Path, monkeypatch
) -> None:
    with pytest.raises(ValueError, match="this torch has no int8 kernels on this machine"):
        precision.pick_precision("cpu", "int8")
    monkeypatch.setenv("INFILL_DTYPE", "int8")
    with pytest.raises(ModelLoadError, match="INFILL_DTYPE=int8: this torch has no int8"):
        load_denoiser(tiny_model_dir)
    assert load_denoiser(tiny_model_dir, dtype="fp32").precision.name == "fp32"


def test_this_torch_has_int8_kernels() -> None:
    # the build the README installs (torch 2.13 for the CPU, x86) computes int8 layers
    precision.int8_unavailable.cache_clear()
    assert precision.int8_unavailable() is None


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
    kept = everything - set(int8.int8_layers(exact.model, int8.KEEP_FP32))
    assert set(_linear_names(den.model)) == kept and kept < everything
    assert any(isinstance(m, int8.Int8Linear) for m in den.model.modules())
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
    """Weights per output channel in 7 bits, each channel's largest at the edge of the
    range, and 8-bit inputs: a layer whose channels differ in scale by 100x answers within
    3% of each output channel's largest fp32 output, where one scale for all the weights
    (per tensor) loses the small channels."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(256, 256, bias=False)
    with torch.no_grad():  # channels of very different scales, as in a trained model
        layer.weight.mul_(torch.logspace(-2, 0, 256)[:, None])
    x = torch.randn(64, 256)
    want = layer(x).detach()
    ours = int8.quantise_int8(torch.nn.Sequential(layer))[0]
    codes = ours.weight
    assert codes.dtype == torch.int8 and codes.min() >= -64 and codes.max() <= 63
    assert (codes.abs().amax(1) >= 63).all()  # each channel uses its whole range
    per_tensor = layer.weight.detach().abs().max() / 63.5
    coarse = x @ (torch.round(layer.weight.detach() / per_tensor) * per_tensor).T

    def worst(got: torch.Tensor) -> float:  # relative to each output channel's largest
        return ((got - want).abs() / want.abs().amax(0, keepdim=True)).max().item()

    assert worst(ours(x)) < 0.03 and worst(ours(x)) < 0.1 * worst(coarse)


def _int8_kernel_is_exact(weight_range: int = 64) -> bool:
    """Whether the int8 kernel (oneDNN's, on prepacked weights) sums exactly
    with inputs at the edges of 8 bits and weights at the edges of `weight_range`: a row of
    the largest inputs against a channel of the largest weights, where a kernel without
    VNNI sums pairs in int16 (255 x 64 x 2 fits, 255 x 128 x 2 does not)."""
    torch.manual_seed(0)
    for rows, k, n in ((1, 8, 4), (5, 13, 9), (64, 512, 96)):
        layer = torch.nn.Linear(k, n, bias=False)
        with torch.no_grad():
            layer.weight.copy_(torch.randint(-weight_range, weight_range, (n, k)).float())
            layer.weight[0] = -weight_range  # that channel's codes: all -weight_range
        x = torch.randn(rows, k)
        x[0] = 1.0  # that row's codes: all 127
        scale = x.abs().amax(-1, keepdim=True).double() / 127
        codes = torch.round(x.double() / scale)
        q = int8.Int8Linear(layer, weight_range)
        want = (codes @ q.weight.double().T) * scale * q.weight_scale.double()
        if not torch.allclose(q(x).double(), want, rtol=1e-5, atol=1e-4):
            return False
    return True


def test_the_int8_kernel_stays_exact_with_7_bit_weights() -> None:
    assert _int8_kernel_is_exact()


@pytest.mark.slow
def test_the_int8_kernel_stays_exact_without_vnni() -> None:
    """The same with oneDNN held to AVX2 (no VNNI: the kernels of a CPU without bf16, where
    `auto` picks int8), in a process of its own (the cap is read when torch starts)."""
    code = (
        "import sys; sys.path.insert(0, 'tests'); import test_precision as t; "
        "assert t._int8_kernel_is_exact()"
    )
    env = {**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]


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
    q = int8.quantise_int8(model, keep_fp32=("*.mlp.Wo", "model.layers.0.attn.Wqkv"))
    assert _linear_names(q) == [
        "model.layers.0.attn.Wqkv",
        "model.layers.0.mlp.Wo",
        "model.layers.1.mlp.Wo",
    ]
    quantised = {n for n, m in q.named_modules() if isinstance(m, int8.Int8Linear)}
    assert quantised == set(every) - set(_linear_names(q))
    assert _linear_names(model) == every  # not quantised in place
    assert _linear_names(int8.quantise_int8(model, keep_fp32=())) == []


def test_int8_by_default_keeps_the_layers_whose_inputs_quantise_worst() -> None:
    """The default recipe: the first layer's Wqkv (fed by the embeddings' norm) and the
    head's dense layer stay fp32; every other linear layer is int8."""
    assert int8.KEEP_FP32 == ("model.layers.0.attn.Wqkv", "head.dense")
    q = int8.quantise_int8(_modernbert_shaped())
    assert _linear_names(q) == ["model.layers.0.attn.Wqkv", "head.dense"]
    assert sum(isinstance(m, int8.Int8Linear) for m in q.modules()) == 8


def test_a_scale_per_row_keeps_rows_of_very_different_sizes() -> None:
    """Rows (tokens) whose sizes differ by orders of magnitude (a masked slot's against the
    code's) each keep their precision: every row within 2% of its largest fp32 output,
    the smallest rows too, where one scale for the whole input would round them to zero.
    Leading dimensions and the bias are as nn.Linear's; no rows, no output rows."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(64, 32)
    x = torch.randn(2, 8, 64) * torch.logspace(-3, 1, 16).view(2, 8, 1)
    want = (layer(x) - layer.bias).detach()
    q = int8.quantise_int8(torch.nn.Sequential(layer), keep_fp32=())[0]
    got = q(x) - layer.bias
    assert got.shape == want.shape == (2, 8, 32)
    assert ((got - want).abs() / want.abs().amax(-1, keepdim=True)).max() < 0.02
    assert q(torch.zeros(0, 64)).shape == (0, 32)


def test_int8_without_deprecated_apis(tiny_model_dir: Path, recwarn) -> None:
    """Quantising and running a model raises no deprecation warning (the quantised layers
    are plain modules over int8 tensors, no quantized tensor types)."""
    den = load_denoiser(tiny_model_dir, dtype="int8")
    den.logits([den.encode("x = 1\n") + [den.special.mask]], [[0]])
    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning)]
    assert all(not b.is_quantized for m in den.model.modules() for b in m.buffers(recurse=False))


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
    times = {torch.float32: 1.0, torch.bfloat16: 0.3, torch.int8: 0.18}
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


def test_a_bf16_denoiser_stores_its_linear_weights_in_bf16_and_answers_as_before(
    tiny_model_dir: Path, monkeypatch
) -> None:
    """bf16 inference casts the linear layers' weights once at load (model/bf16.py), not
    at every pass under autocast: the same logits, full and cached, as autocast over the
    fp32 weights gave; the embeddings (tied to the decoder) and norms stay fp32."""
    monkeypatch.delenv("INFILL_DTYPE", raising=False)
    fp32 = load_denoiser(tiny_model_dir, dtype="fp32")
    before = HFDenoiser(  # bf16 autocast over the fp32 weights: each pass casts them
        fp32.model,
        fp32.tokenizer,
        fp32.special,
        fp32.max_length,
        "before",
        device=fp32.device,
        precision=precision.Precision(torch.bfloat16, "autocast over fp32 weights"),
    )
    den = load_denoiser(tiny_model_dir, dtype="bf16")
    linears = [m for m in den.model.modules() if isinstance(m, torch.nn.Linear)]
    assert linears and all(m.weight.dtype == torch.bfloat16 for m in linears)
    others = [
        p
        for m in den.model.modules()
        if not isinstance(m, torch.nn.Linear)
        for p in m.parameters(recurse=False)
    ]
    assert others and all(p.dtype == torch.float32 for p in others)
    canvas = den.encode("def add(a, b):\n    return a + b\n")
    canvas[5:8] = [den.special.mask] * 3
    pos = list(range(len(canvas)))
    np.testing.assert_array_equal(den.logits([canvas], [pos])[0], before.logits([canvas], [pos])[0])
    hint = CacheHint(key="k", active=(5, 6, 7), refresh=True)
    for d in (den, before):
        d.logits([canvas], [pos], [hint])
    part = [
        d.logits([canvas], [[5, 6, 7]], [replace(hint, refresh=False)])[0] for d in (den, before)
    ]
    np.testing.assert_array_equal(*part)


def test_the_probe_times_bf16_on_weights_stored_in_bf16(monkeypatch) -> None:
    """bf16 is timed as it runs (weights cast once), not with a cast at every call."""
    seen: dict[torch.dtype, torch.dtype] = {}

    def timed(layer, x, dtype: torch.dtype) -> float:
        if isinstance(layer, torch.nn.Linear):
            seen[dtype] = layer.weight.dtype
        return 1.0

    monkeypatch.setattr(precision, "_time_matmul", timed)
    precision._best_times(rounds=1)
    assert seen == {torch.float32: torch.float32, torch.bfloat16: torch.bfloat16}
