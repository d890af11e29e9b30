"""The hand-written cached forward pass agrees with transformers' own ModernBERT."""

from __future__ import annotations

import numpy as np
import torch
from transformers import ModernBertForMaskedLM

from diffusion_infill.model.cache import CachedModernBert
from diffusion_infill.model.denoiser import CacheHint, SpecialIds
from diffusion_infill.model.hf import HFDenoiser
from diffusion_infill.model.training.config import PRESETS, modernbert_config


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


def test_one_cached_model_serves_longer_canvases_after_shorter_ones() -> None:
    """RoPE's cos/sin are looked up in a table kept per layer type, grown when a longer
    canvas comes: every pass agrees with the library's, before and after it grew."""
    model = _model()
    model.config.max_position_embeddings = 400  # RoPE has no limit of its own
    cached = CachedModernBert(model)
    for n in (40, 300, 40, 129):
        ids = torch.randint(4, 300, (n,))
        with torch.no_grad():
            ref = model.model(input_ids=ids[None]).last_hidden_state[0]
        hidden, cache = cached.full(ids)
        torch.testing.assert_close(hidden, ref, atol=1e-5, rtol=1e-4)
        active = torch.tensor([0, n // 2, n - 1])
        torch.testing.assert_close(
            cached.partial(ids, active, cache), hidden[active], atol=1e-5, rtol=1e-4
        )


def test_partial_pass_on_an_unchanged_canvas_is_exact() -> None:
    model = _model()
    ids = torch.randint(4, 300, (90,))
    cached = CachedModernBert(model)
    hidden, cache = cached.full(ids)
    active = torch.tensor([10, 11, 12, 60])
    torch.testing.assert_close(
        cached.partial(ids, active, cache), hidden[active], atol=1e-5, rtol=1e-4
    )


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
    return HFDenoiser(
        _model(),
        tokenizer=None,
        special=SpecialIds(mask=1, null=2, pad=0),
        max_length=128,
        name="test",
        device=torch.device("cpu"),
    )


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


def test_every_live_canvas_of_a_request_keeps_its_entries_within_the_memory_budget() -> None:
    den = _denoiser()
    canvas = list(range(4, 80))
    for i in range(70):  # a file of 70 holes: 70 windows, each needed at every step
        den.logits([canvas], [[5]], [CacheHint(("job", i), (5,), True)])
    assert len(den._caches) == 70
    one = den._cache_nbytes() // 70
    den.cache_bytes = 3 * one  # the least recently used go first
    den.logits([canvas], [[5]], [CacheHint(("job", 70), (5,), True)])
    assert list(den._caches) == [("job", 68), ("job", 69), ("job", 70)]


# -- carrying a cache over to the next request's canvas ----------------------------------


def _typed(ids: torch.Tensor, at: int, new: list[int]) -> torch.Tensor:
    """`ids` with the tokens `new` inserted at `at` (a user typed before the cursor)."""
    return torch.cat((ids[:at], torch.tensor(new, dtype=ids.dtype), ids[at:]))


def test_carry_moves_the_suffix_keys_to_their_new_positions_exactly() -> None:
    # Layer 0's keys depend on the token and its position alone, so after an insertion the
    # moved suffix keys (one more RoPE rotation) must equal a fresh pass's, as must the
    # kept prefix's; the deeper layers' are the (stale) approximation.
    model = _model()
    cached = CachedModernBert(model)
    cached.margin = 0  # recompute the changed tokens alone
    old = torch.randint(4, 300, (90,))
    _, old_cache = cached.full(old)
    for inserted in ([7], [7, 8, 9], [], None):
        # None: a backspace (two tokens deleted, the suffix moves left)
        new = _typed(old, 50, inserted) if inserted is not None else torch.cat((old[:50], old[52:]))
        inserted = inserted or []
        _, fresh = cached.full(new)
        out = cached.carry(new, old_cache, torch.tensor([40, 41]))
        assert out is not None
        active, hidden, cache = out
        assert cache.carried == 1 and torch.equal(cache.ids, new)
        torch.testing.assert_close(cache.layers[0].keys, fresh.layers[0].keys, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(
            cache.layers[0].values, fresh.layers[0].values, atol=1e-5, rtol=1e-4
        )
        assert {40, 41} <= set(active.tolist())
        assert set(range(50, 50 + len(inserted))) <= set(active.tolist())
        assert len(active) == len(inserted) + 2  # only the new tokens and the asked rows
    cached.margin = 3  # and by default a few tokens each side of the change
    active, _, _ = cached.carry(_typed(old, 50, [7]), old_cache, torch.tensor([40]))
    assert active.tolist() == [40, *range(47, 54)]
    active, _, _ = cached.carry(_typed(old, 50, [7]), old_cache, torch.tensor([40]), margin=8)
    assert active.tolist() == [40, *range(42, 59)]  # a margin of the caller's


def test_carry_of_the_same_canvas_is_exact_and_of_an_edit_close() -> None:
    model = _model()
    cached = CachedModernBert(model)
    ids = torch.randint(4, 300, (90,))
    full, cache = cached.full(ids)
    out = cached.carry(ids, cache, torch.tensor([10, 60]))
    assert out is not None
    torch.testing.assert_close(out[1], full[out[0]], atol=1e-5, rtol=1e-4)
    new = _typed(ids, 30, [5])
    fresh, _ = cached.full(new)
    out = cached.carry(new, cache, torch.tensor([31, 32]))
    assert out is not None
    active, hidden, _ = out
    err = (hidden - fresh[active]).abs().max()
    assert err < 0.5 * fresh.abs().mean() + 1e-3


def test_carry_refuses_canvases_that_share_less_than_half() -> None:
    cached = CachedModernBert(_model())
    ids = torch.randint(4, 300, (90,))
    _, cache = cached.full(ids)
    other = ids.clone()
    other[20:70] = torch.randint(4, 300, (50,))
    other[20] = ids[20] + 1 if ids[20] < 299 else 4  # the prefix stops at 20
    other[69] = ids[69] + 1 if ids[69] < 299 else 4  # the suffix at 20
    assert cached.carry(other, cache, torch.tensor([30])) is None


def test_denoiser_carries_a_keyed_cache_across_requests_up_to_its_limit() -> None:
    den = _denoiser()
    den.carry_limit = 2
    canvas = list(range(4, 80))
    for i in range(4):  # four keystrokes: a token typed at 30 each time
        canvas = canvas[:30] + [200 + i] + canvas[30:]
        pos = [31, 32]
        plain = den.logits([canvas], [pos])[0]
        hint = CacheHint(key=("job", i), active=(31, 32), refresh=True, carry="doc")
        got = den.logits([canvas], [pos], [hint])[0]
        # first a full pass, then carried twice (the limit), then a full pass again
        assert den._caches["doc"].carried == [0, 1, 2, 0][i]
        assert den._caches[("job", i)] is den._caches["doc"]
        den.forget(("job", i))  # the request ended; what it left for the next stays
        if i in (0, 3):
            np.testing.assert_allclose(got, plain, atol=0.05)
        assert np.abs(got - plain).max() < 0.5 * np.abs(plain).mean() + 0.05
        assert den._caches["doc"].ids.tolist() == canvas


def test_a_canvas_built_from_another_canvas_leaves_that_ones_entries_as_they_are() -> None:
    den = _denoiser()
    window = list(range(4, 80))
    pos = list(range(30, 46))
    first = CacheHint(key="window", active=tuple(pos), refresh=True)
    den.logits([window], [pos], [first])
    kept = den._caches["window"]
    copy = window[:30] + [1] * 5 + window[46:]  # the hole remade as 5 masks
    plain = den.logits([copy], [list(range(30, 35))])[0]
    hint = CacheHint(key="copy", active=tuple(range(30, 35)), refresh=True, source="window")
    got = den.logits([copy], [list(range(30, 35))], [hint])[0]
    assert den._caches["window"] is kept and den._caches["window"].ids.tolist() == window
    assert den._caches["copy"].carried == 1 and den._caches["copy"].ids.tolist() == copy
    assert np.abs(got - plain).max() < 0.5 * np.abs(plain).mean() + 0.05
    den.forget("window")  # nothing to build from: a full pass of its own, exact
    hint = CacheHint(key="copy2", active=tuple(range(30, 35)), refresh=True, source="window")
    np.testing.assert_allclose(
        den.logits([copy], [list(range(30, 35))], [hint])[0], plain, atol=1e-4
    )
    assert "window" not in den._caches and den._caches["copy2"].carried == 0
