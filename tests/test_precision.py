"""The compute dtype is chosen per machine: fp32 where bf16 is emulated, bf16 where timed
faster; a request or $INFILL_DTYPE overrides; the loaded denoiser says what it chose."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from model import precision
from model.denoiser import ModelLoadError
from model.loading import load_denoiser


def test_cpu_without_bf16_instructions_computes_in_fp32(monkeypatch) -> None:
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"fpu", "avx2", "fma"}))
    precision._fastest_on_cpu.cache_clear()
    monkeypatch.delenv("INFILL_DTYPE", raising=False)
    chosen = precision.pick_precision("cpu")
    assert chosen.dtype == torch.float32 and "no bf16 instructions" in chosen.reason
    precision._fastest_on_cpu.cache_clear()


def test_cpu_flags_are_read_from_cpuinfo(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu amx_bf16 avx512_bf16\n")
    assert {"amx_bf16", "avx512_bf16"} <= precision.cpu_flags(info)
    assert precision.cpu_flags(tmp_path / "missing") == frozenset()


def test_cpu_with_bf16_instructions_times_both(monkeypatch) -> None:
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"amx_bf16"}))
    monkeypatch.setattr(precision, "_time_matmul",
                        lambda dtype: 1.0 if dtype == torch.float32 else 0.4)
    precision._fastest_on_cpu.cache_clear()
    monkeypatch.delenv("INFILL_DTYPE", raising=False)
    assert precision.pick_precision("cpu").dtype == torch.bfloat16
    precision._fastest_on_cpu.cache_clear()


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


def test_infill_threads_sets_the_cpu_threads(tiny_model_dir: Path, monkeypatch,
                                             restore_threads) -> None:
    monkeypatch.setenv("INFILL_THREADS", "1")
    load_denoiser(tiny_model_dir, dtype="fp32")
    assert torch.get_num_threads() == 1
    for bad in ("0", "two", "-3"):
        monkeypatch.setenv("INFILL_THREADS", bad)
        with pytest.raises(ModelLoadError, match="INFILL_THREADS must be a positive"):
            load_denoiser(tiny_model_dir, dtype="fp32")
