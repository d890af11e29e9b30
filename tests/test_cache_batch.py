"""Cached passes of several canvases in one batch (model/cache_batch.py) give what the
one-at-a-time passes give: canvases of different lengths, different active sets, a layer
with a sliding window smaller than the canvases."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import ModernBertForMaskedLM

from diffusion_infill.model import cache_batch
from diffusion_infill.model.cache import CachedModernBert, ContextCache
from diffusion_infill.model.denoiser import CacheHint, SpecialIds
from diffusion_infill.model.hf import HFDenoiser
from diffusion_infill.model.precision import Precision
from diffusion_infill.model.training.config import PRESETS, modernbert_config

LENGTHS = (40, 90, 70, 128)  # the last one as long as the model takes
SPANS = ((10, 14), (30, 41), (60, 63), (100, 106))  # (start, end) of each canvas's slots


def _model() -> ModernBertForMaskedLM:
    torch.manual_seed(0)
    cfg = modernbert_config(PRESETS["tiny"], 300, pad_id=0, mask_id=1, eos_id=3)
    cfg.local_attention = 16  # layer 1 slides over 8 keys each side: less than any canvas
    cfg.initializer_range = 0.2  # sharper attention than the default's: keys matter more
    return ModernBertForMaskedLM(cfg).eval()


def _denoiser(model: ModernBertForMaskedLM, dtype: torch.dtype = torch.float32) -> HFDenoiser:
    return HFDenoiser(
        model,
        tokenizer=None,
        special=SpecialIds(mask=1, null=2, pad=0),
        max_length=128,
        name="test",
        device=torch.device("cpu"),
        precision=Precision(dtype, "test"),
    )


def _canvases(seed: int) -> list[list[int]]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(4, 300, (n,), generator=gen).tolist() for n in LENGTHS]


def _edit(canvas: list[int], span: tuple[int, int], step: int) -> list[int]:
    """The canvas with its slots rewritten (a denoising step committed some)."""
    out = list(canvas)
    for j in range(*span):
        out[j] = 1 if (j + step) % 3 else 4 + (7 * j + step) % 290
    return out


def _steps() -> list[tuple[list[list[int]], list[list[int]], list[CacheHint]]]:
    """Three passes over the four canvases: a refresh, then two partial passes after edits,
    each canvas scoring a different subset of its own slots."""
    canvases = _canvases(0)
    out = []
    for step in range(3):
        canvases = [_edit(c, s, step) for c, s in zip(canvases, SPANS, strict=True)]
        spans = [tuple(range(*s)) for s in SPANS]
        positions = [list(s[step % 2 :: 2]) or [s[0]] for s in spans]
        hints = [
            CacheHint(key=("job", i), active=s, refresh=step == 0) for i, s in enumerate(spans)
        ]
        out.append((canvases, positions, hints))
    return out


def _one_at_a_time(
    den: HFDenoiser, canvases: list[list[int]], positions: list[list[int]], hints: list[CacheHint]
) -> list[np.ndarray]:
    return [
        den.logits([c], [p], [h])[0] for c, p, h in zip(canvases, positions, hints, strict=True)
    ]


class _Reference:
    """model/cache.py's passes of one canvas, a full pass keeping the entries: what the
    batch must give (that module's full pass is checked against transformers' forward)."""

    def __init__(self, model: ModernBertForMaskedLM) -> None:
        self.model, self.cached = model, CachedModernBert(model)
        self.entries: dict[object, ContextCache] = {}

    def logits(self, canvas: list[int], pos: list[int], hint: CacheHint) -> np.ndarray:
        ids = torch.tensor(canvas)
        if hint.refresh:
            hidden, self.entries[hint.key] = self.cached.full(ids)
            active = torch.arange(len(canvas))
        else:
            active = torch.tensor(sorted(set(hint.active) | set(pos)))
            hidden = self.cached.partial(ids, active, self.entries[hint.key])
        with torch.inference_mode():
            rows = hidden[torch.searchsorted(active, torch.tensor(pos))]
            return self.model.decoder(self.model.head(rows)).numpy()


def _counting(monkeypatch: pytest.MonkeyPatch, den: HFDenoiser) -> list[int]:
    """Batch sizes of the batched passes `den` runs from now on."""
    sizes: list[int] = []
    real = cache_batch.many

    def many(cached, *args):  # type: ignore[no-untyped-def]
        if cached is den._cached:
            sizes.append(len(args[0]))
        return real(cached, *args)

    monkeypatch.setattr(cache_batch, "many", many)
    return sizes


def test_a_batch_of_cached_passes_equals_the_passes_one_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = _model()
    alone, together, reference = _denoiser(model), _denoiser(model), _Reference(model)
    sizes = _counting(monkeypatch, together)
    for canvases, positions, hints in _steps():
        want = [reference.logits(*a) for a in zip(canvases, positions, hints, strict=True)]
        one = _one_at_a_time(alone, canvases, positions, hints)
        got = together.logits(canvases, positions, hints)
        for w, o, g in zip(want, one, got, strict=True):
            assert g.shape == o.shape == w.shape
            np.testing.assert_allclose(o, w, atol=1e-5, rtol=1e-4)
            np.testing.assert_allclose(g, w, atol=1e-5, rtol=1e-4)
    assert sizes == [4, 4, 4]  # a full batch, then two partial ones
    # the kept entries are the same too (the full batch's are each canvas's own)
    for i, n in enumerate(LENGTHS):
        a, b = alone._caches[("job", i)], together._caches[("job", i)]
        assert b.ids.tolist() == a.ids.tolist() and b.layers[0].keys.shape[1] == n
        for la, lb in zip(a.layers, b.layers, strict=True):
            torch.testing.assert_close(lb.keys, la.keys, atol=1e-5, rtol=1e-4)
            torch.testing.assert_close(lb.values, la.values, atol=1e-5, rtol=1e-4)


def test_the_batch_is_not_an_exact_pass_but_the_cached_approximation() -> None:
    # Partial passes read the stale context: had the batch recomputed every position, the
    # test above would compare two different things and still pass only by chance.
    model = _model()
    den, exact = _denoiser(model), _denoiser(model)
    steps = _steps()
    for canvases, positions, hints in steps:
        got = den.logits(canvases, positions, hints)
    fresh = exact.logits(canvases, positions)
    assert max(np.abs(g - f).max() for g, f in zip(got, fresh, strict=True)) > 1e-3


def test_mixed_calls_and_small_budgets_still_match(monkeypatch: pytest.MonkeyPatch) -> None:
    # A call with a canvas without a hint, one that carries another request's entries and
    # a budget that splits the batches (into pairs and singles) serves each as alone.
    model = _model()
    alone, together = _denoiser(model), _denoiser(model)
    monkeypatch.setattr(cache_batch, "PARTIAL_BATCH_TOKENS", 2 * 90)
    monkeypatch.setattr(cache_batch, "FULL_BATCH_TOKENS", 2 * 90)
    doc = _canvases(1)[2]
    for den in (alone, together):  # an earlier request left entries under "doc"
        den.logits([doc], [[5]], [CacheHint(("old", 0), (5,), True, carry="doc")])
    sizes = _counting(monkeypatch, together)
    for step, (canvases, positions, hints) in enumerate(_steps()):
        canvases = [*canvases, doc[:40] + [9] + doc[40:], canvases[0]]
        positions = [*positions, [41], [10, 11]]
        hints = [
            *hints,
            CacheHint(("new", 0), (41,), step == 0, carry="doc" if step == 0 else None),
            None,
        ]
        want = _one_at_a_time(alone, canvases[:-1], positions[:-1], hints[:-1])
        want.append(alone.logits([canvases[-1]], [positions[-1]])[0])
        got = together.logits(canvases, positions, hints)
        for w, g in zip(want, got, strict=True):
            np.testing.assert_allclose(g, w, atol=1e-5, rtol=1e-4)
    assert together._caches["doc"].carried == 1
    # by length, within 180 padded tokens: full passes (40, 70) (90) (128), then partial
    # ones (40, 70) (71, 90) (128)
    assert sizes == [2, 1, 1] + [2, 2, 1] * 2


def test_a_carry_from_a_canvas_with_too_little_in_common_is_a_full_pass() -> None:
    den = _denoiser(_model())
    old, new = _canvases(2)[1], _canvases(3)[1]  # two unrelated canvases of 90 tokens
    den.logits([old], [[5]], [CacheHint(("old", 0), (5,), True, carry="doc")])
    got = den.logits([new], [[20, 21]], [CacheHint(("new", 0), (20, 21), True, carry="doc")])[0]
    np.testing.assert_allclose(got, den.logits([new], [[20, 21]])[0], atol=1e-5, rtol=1e-4)
    # kept under its key and the carry's name, as a fresh entry (nothing carried over)
    assert den._caches[("new", 0)] is den._caches["doc"]
    assert den._caches["doc"].carried == 0 and den._caches["doc"].ids.tolist() == new


def test_a_padded_key_or_a_far_key_changes_the_result(monkeypatch: pytest.MonkeyPatch) -> None:
    # What the mask hides matters: the shortest canvas's rows would read the keys past its
    # end (the longer canvases' padding), and the sliding layer's rows keys more than 8
    # positions away.
    model = _model()
    cached = _denoiser(model)._cached
    assert cached is not None and "sliding_attention" in cached.layer_types
    canvases = _steps()[0][0]
    ids = [torch.tensor(c) for c in canvases]
    actives = [torch.arange(len(c)) for c in canvases]
    states, _ = cache_batch.many(cached, ids, actives, None)
    real = cache_batch._masks
    for broken in ("pad", "far"):
        monkeypatch.setattr(cache_batch, "_masks", _broken_masks(real, broken))
        wrong, _ = cache_batch.many(cached, ids, actives, None)
        assert (wrong[0] - states[0]).abs().max() > 1e-3, broken


def _broken_masks(real, broken: str):  # type: ignore[no-untyped-def]
    def masks(cached, positions, lengths, dtype):  # type: ignore[no-untyped-def]
        if broken == "pad":  # every canvas as long as the longest
            return real(cached, positions, torch.full_like(lengths, int(lengths.max())), dtype)
        out = real(cached, positions, lengths, dtype)  # the sliding layer as a global one
        out["sliding_attention"] = out["full_attention"]
        return out

    return masks
