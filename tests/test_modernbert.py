"""model/modernbert.py runs the shipped architecture without transformers, and agrees with
transformers' own ModernBERT; anything else still loads through transformers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import ModernBertForMaskedLM

from diffusion_infill.model import modernbert
from diffusion_infill.model.denoiser import ModelLoadError
from diffusion_infill.model.loading import load_denoiser
from diffusion_infill.model.training.config import PRESETS, modernbert_config

ROOT = Path(__file__).resolve().parent.parent


def _saved(tmp_path: Path, **overrides) -> tuple[Path, ModernBertForMaskedLM]:
    torch.manual_seed(0)
    cfg = modernbert_config(PRESETS["tiny"], 300, pad_id=0, mask_id=1, eos_id=3)
    cfg.local_attention = 16  # smaller than the canvas, so sliding windows matter
    for k, v in overrides.items():
        setattr(cfg, k, v)
    ref = ModernBertForMaskedLM(cfg).eval()
    ref.save_pretrained(tmp_path)
    return tmp_path, ref


def test_logits_match_the_library_with_padding_and_sliding_windows(tmp_path: Path) -> None:
    path, ref = _saved(tmp_path)
    loaded = modernbert.load(path)
    assert loaded is not None
    _, own = loaded
    ids = torch.randint(4, 300, (3, 90))
    attn = torch.ones_like(ids)
    attn[1, 70:] = 0
    attn[2, 20:] = 0
    with torch.no_grad():
        want = ref(input_ids=ids, attention_mask=attn).logits
        got = own(input_ids=ids, attention_mask=attn).logits
    for row, n in enumerate((90, 70, 20)):  # padded positions are never read
        torch.testing.assert_close(got[row, :n], want[row, :n], atol=1e-5, rtol=1e-4)


def test_an_architecture_it_does_not_run_goes_through_transformers(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    path, _ = _saved(tmp_path, hidden_activation="silu")
    assert modernbert.load(path) is None
    for f in tiny_model_dir.glob("tokenizer*"):
        (path / f.name).write_bytes(f.read_bytes())
    assert isinstance(load_denoiser(path, dtype="fp32").model, ModernBertForMaskedLM)
    assert isinstance(
        load_denoiser(tiny_model_dir, dtype="fp32").model, modernbert.ModernBertMaskedLM
    )
    raw = json.loads((path / "config.json").read_text())
    assert not modernbert.supported(raw) and modernbert.supported(
        {**raw, "hidden_activation": "gelu"}
    )


def test_a_broken_weights_file_is_a_load_error(tiny_model_dir: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    for f in tiny_model_dir.iterdir():
        if f.is_file():
            (broken / f.name).write_bytes(f.read_bytes())
    (broken / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}garbage")
    with pytest.raises(ModelLoadError, match="cannot load model"):
        load_denoiser(broken, dtype="fp32")


def test_the_shipped_model_loads_without_importing_transformers() -> None:
    code = (
        "import sys; from diffusion_infill.model.loading import load_denoiser; "
        "d = load_denoiser(); "
        "d.logits([[5, 6, 1, 7]], [[2]]); print('transformers' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert out.strip() == "False"
