"""A window's copy starts from the window's context entries.

A failing hole's alternatives (infill/core/alternatives.py) are copies of a window's
canvas with one hole remade at another length: the code around it is the same. With
context reuse on (`cache_refresh`), a copy's first pass would be a full pass of its own;
instead its first request names the window's entries in the round it was copied from as
the CacheHint's `source`, and a denoiser that honours it (model/hf.py) recomputes only the
hole and `COPY_MARGIN` tokens each side of it (model/cache.py), leaving the window's
entries as they are. Its later refreshes are full passes, as any canvas's.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import replace

from diffusion_infill.infill.core.sampler import DenoiseJob
from diffusion_infill.infill.core.steps import LogitsRequest


class FromWindows:
    """Rewrites the first request of each canvas of `copies` (canvas i copies canvas
    `windows[i]` of `origin`) to start from that window's entries."""

    def __init__(self, copies: DenoiseJob, windows: Sequence[int], origin: DenoiseJob) -> None:
        self._source: dict[Hashable, Hashable] = {
            copies.cache_key(i): origin.cache_key(w) for i, w in enumerate(windows)
        }

    def __call__(self, requests: list[LogitsRequest]) -> list[LogitsRequest]:
        return [self._first(r) for r in requests] if self._source else requests

    def _first(self, r: LogitsRequest) -> LogitsRequest:
        if r.hint is None or (source := self._source.pop(r.hint.key, None)) is None:
            return r
        return r._replace(hint=replace(r.hint, source=source))
