"""The worker's Scheduler, run for real (no sockets): the steps of concurrent fills share
forward passes, and each fill ends as it would alone."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from fakes import TargetDenoiser

from diffusion_infill.infill import SamplerOptions, fill_text, prepare_holes
from diffusion_infill.infill.serve.scheduler import Scheduler

TARGETS = {"a = ": "1 + 2", "b = ": "'x'"}
TEXTS = ["a = <mask>\n", "b = <mask>\nc = 3\n"]


def _denoise_together(denoiser: TargetDenoiser, fills: list, **kw) -> Scheduler:
    async def go() -> Scheduler:
        with ThreadPoolExecutor(1) as model_thread:
            scheduler = Scheduler(denoiser, model_thread, **kw)
            serving = asyncio.create_task(scheduler.serve())
            await asyncio.gather(*(scheduler.denoise(f.job) for f in fills))
            serving.cancel()
            return scheduler

    return asyncio.run(asyncio.wait_for(go(), 30))


def test_two_fills_share_each_forward_pass():
    """One denoiser call per step serves both requests, and each result is the one the
    request gets alone."""
    d = TargetDenoiser(TARGETS)
    fills = [prepare_holes(t, denoiser=d, options=SamplerOptions()) for t in TEXTS]
    scheduler = _denoise_together(d, fills)
    assert [f.result().text for f in fills] == ["a = 1 + 2\n", "b = 'x'\nc = 3\n"]
    for f, text in zip(fills, TEXTS, strict=True):
        alone = fill_text(text, denoiser=TargetDenoiser(TARGETS))
        assert (f.result().edits, f.job.steps) == (alone.edits, alone.stats.steps)
    assert len(d.calls) == scheduler.passes == max(f.job.steps for f in fills)
    assert len(d.calls[0][0]) == 2  # both canvases in the first pass
    assert scheduler.shared >= 1 and scheduler.canvases == sum(len(c) for c, _ in d.calls)
    assert len(scheduler) == 0


def test_without_batching_each_pass_serves_one_fill():
    d = TargetDenoiser(TARGETS)
    fills = [prepare_holes(t, denoiser=d, options=SamplerOptions()) for t in TEXTS]
    scheduler = _denoise_together(d, fills, batching=False)
    assert [f.result().text for f in fills] == ["a = 1 + 2\n", "b = 'x'\nc = 3\n"]
    assert {len(canvases) for canvases, _ in d.calls} == {1}
    assert scheduler.shared == 0 and scheduler.passes == sum(f.job.steps for f in fills)
