"""A failing hole's alternatives (infill/core/reused_entries.py): copies of its window's canvas
whose first pass starts from the window's context entries, not a full pass of its own."""

from __future__ import annotations

from fakes import TargetDenoiser

from diffusion_infill.infill import fill_text

CODE = "def area(w, h):\n    return <mask>\n\nprint(area(2, 3))\n"


def test_a_failing_holes_alternatives_start_from_their_windows_entries():
    den = TargetDenoiser(["w * h)"])  # fails to parse: it races 4, 2 and 1 tokens
    r = fill_text(CODE, denoiser=den, checks="parse", lengths=4, cache_refresh=2)
    assert r.stats.candidates == 3
    primary = den.hints[0][0].key
    alternatives = next(i for i, h in enumerate(den.hints) if h[0].key != primary)
    first = den.hints[alternatives]
    assert len(first) == 3 and len({h.key for h in first}) == 3  # 4, 2 and 1 slots
    assert all(h.refresh and h.source == primary for h in first)
    assert all(h.source is None for hints in den.hints[alternatives + 1 :] for h in hints)


def test_without_context_reuse_nothing_is_carried():
    den = TargetDenoiser(["w * h)"])
    fill_text(CODE, denoiser=den, checks="parse", lengths=4, cache_refresh=0)
    assert all(hints is None or all(h is None for h in hints) for hints in den.hints)
