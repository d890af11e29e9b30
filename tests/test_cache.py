"""The hand-written cached forward pass agrees with transformers' own ModernBERT."""

from __future__ import annotations

import numpy as np
import torch
from transformers import ModernBertForMaskedLM

from model.cache import CachedModernBert
from model.config import PRESETS, modernbert_config
from model.denoiser import CacheHint, SpecialIds
from model.hf import HFDenoiser


def _model(local: int = 16) -> ModernBertForMaskedLM:
    torch.manual_seed(0)
    cfg = modernbert_config(PRESETS["tiny"], 300, pad_id=0, mask_id=1, eos_id=3)
    cfg.local_attention = local  # smaller than the canvas, so sliding windows matter
    return ModernBertForMaskedLM(cfg).eval()


def test_full_pass_matches_the_library_forward() -> None:
    model = _model()
    ids = torch.randint(4, 300, (100,))
    with torch.no_grad():
        ref = model.model(input_ids=ids[None]).last_hidden_state[0]
    hidden, _ = CachedModernBert(model).full(ids)
    torch.testing.assert_close(hidden, ref, atol=1e-5, rtol=1e-4)


def test_partial_pass_on_an_unchanged_canvas_is_exact() -> None:
    model = _model()
    ids = torch.randint(4, 300, (90,))
    cached = CachedModernBert(model)
    hidden, cache = cached.full(ids)
    active = torch.tensor([10, 11, 12, 60])
    torch.testing.assert_close(cached.partial(ids, active, cache), hidden[active],
                               atol=1e-5, rtol=1e-4)


def test_partial_pass_after_an_edit_is_close_to_a_fresh_one() -> None:
    model = _model()
    ids = torch.randint(4, 300, (90,))
    cached = CachedModernBert(model)
    _, cache = cached.full(ids)
    edited = ids.clone()
    active = torch.arange(40, 48)
    edited[active] = 1
    with torch.no_grad():
        fresh = model.model(input_ids=edited[None]).last_hidden_state[0][active]
    approx = cached.partial(edited, active, cache)
    # Active rows see their own fresh keys; only the context's entries are stale.
    assert (approx - fresh).abs().max() < 0.5 * fresh.abs().mean() + 1e-3


def _denoiser() -> HFDenoiser:
    return HFDenoiser(_model(), tokenizer=None, special=SpecialIds(mask=1, null=2, pad=0),
                      max_length=128, name="test", device=torch.device("cpu"))


def test_denoiser_hints_refresh_equals_an_uncached_pass() -> None:
    den = _denoiser()
    canvas = list(range(4, 80))
    positions = [5, 6, 7]
    plain = den.logits([canvas], [positions])[0]
    hint = CacheHint(key="job", active=(5, 6, 7), refresh=True)
    cached = den.logits([canvas], [positions], [hint])[0]
    np.testing.assert_allclose(cached, plain, atol=0.05)
    again = den.logits([canvas], [positions], [CacheHint("job", (5, 6, 7), False)])[0]
    np.testing.assert_allclose(again, plain, atol=0.05)
    den.forget("job")
    assert "job" not in den._caches
