"""What the worker does with a request: the engine on the model thread, the scheduler for
the denoising, the worker's limits on top.

`RequestHandler.answer(msg)` turns a `fill`, `fix` or `score` request into its reply, or
raises an InfillError whose code is the reply's (`input` from the engine, `too_large` for a
limit, `model` for a failed forward pass). Nothing here knows about sockets: the
connection (infill/serve/connection.py) adds deadlines, cancellation and frames.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from typing import Any, TypeVar

from diffusion_infill.infill.core.engine import PreparedFill, prepare_fill, prepare_holes
from diffusion_infill.infill.core.errors import LimitError
from diffusion_infill.infill.core.options import SamplerOptions
from diffusion_infill.infill.core.repair import prepare_fix, score_text
from diffusion_infill.infill.serve.protocol import (
    FillRequest,
    FixRequest,
    Limits,
    Message,
    Result,
    ScoreRequest,
    Scores,
    Step,
)
from diffusion_infill.infill.serve.scheduler import Scheduler
from diffusion_infill.model.denoiser import Denoiser

T = TypeVar("T")
ModelRequest = FillRequest | FixRequest | ScoreRequest  # the requests that need the model


class RequestHandler:
    """Answers requests with one denoiser, on its model thread, through one scheduler."""

    def __init__(
        self,
        denoiser: Denoiser,
        scheduler: Scheduler,
        executor: ThreadPoolExecutor,
        limits: Limits,
        *,
        default_order: str | None = None,
    ) -> None:
        self.denoiser = denoiser
        # A request with the default order ("confidence") is decoded with this one: the
        # model's own sampler (DiffusionGemma: entropy-bound), so that clients that never
        # name an order (the language server) get it.
        self.default_order = default_order
        self.scheduler = scheduler
        self.executor = executor
        self.limits = limits

    async def answer(
        self, msg: ModelRequest, on_step: Callable[[Step], None] | None = None
    ) -> Message:
        """The reply to `msg`; `on_step` gets the `step` events of a streamed fill."""
        if len(msg.text) > self.limits.max_text:
            raise LimitError(
                f"the text has {len(msg.text)} characters; the limit is {self.limits.max_text}"
            )
        if isinstance(msg, ScoreRequest):
            scores = await self._on_model_thread(
                score_text,
                msg.text,
                denoiser=self.denoiser,
                start=msg.start,
                end=msg.end,
                language=msg.language,
            )
            return Scores(msg.id, scores)
        options = self._options(msg.options)
        if isinstance(msg, FixRequest):
            return await self._fix(msg, options)
        return await self._fill(msg, options, on_step)

    async def _fill(
        self, msg: FillRequest, options: SamplerOptions, on_step: Callable[[Step], None] | None
    ) -> Result:
        if msg.spans is not None and len(msg.spans) > self.limits.max_spans:
            raise LimitError(f"{len(msg.spans)} spans; the limit is {self.limits.max_spans}")
        fill = await self._on_model_thread(self._prepare_fill, msg, options)
        if msg.stream and on_step is not None:
            await self.scheduler.denoise(
                fill.job,
                snapshot=lambda: Step(msg.id, fill.job.steps, fill.span_texts()),
                on_step=on_step,
            )
        else:
            await self.scheduler.denoise(fill.job)
        return Result.of(msg.id, await self._on_model_thread(fill.result))

    async def _fix(self, msg: FixRequest, options: SamplerOptions) -> Result:
        if msg.max_fixes > self.limits.max_spans:
            raise LimitError(
                f"max_fixes {msg.max_fixes} exceeds the limit of {self.limits.max_spans}"
            )
        fill, scores = await self._on_model_thread(
            prepare_fix,
            msg.text,
            denoiser=self.denoiser,
            options=options,
            start=msg.start,
            end=msg.end,
            max_fixes=msg.max_fixes,
            min_suspicion=msg.min_suspicion,
            min_likely=msg.min_likely,
            language=msg.language,
            source=msg.source,
        )
        if fill is None:
            return Result(msg.id, msg.text, [], [], None, scores)
        await self.scheduler.denoise(fill.job)
        return Result.of(msg.id, await self._on_model_thread(fill.result), scores)

    def _options(self, o: SamplerOptions) -> SamplerOptions:
        """The request's options within the worker's caps (`max_steps`: the cap when the
        request names none; the worker's default order for a request with the default)."""
        lim = self.limits
        if self.default_order and o.order == SamplerOptions().order:
            o = replace(o, order=self.default_order)
        if o.max_span_tokens > lim.max_span_tokens:
            raise LimitError(
                f"max_span_tokens {o.max_span_tokens} exceeds the worker's limit "
                f"of {lim.max_span_tokens}"
            )
        if o.max_steps is None:
            return replace(o, max_steps=lim.max_steps)
        if o.max_steps > lim.max_steps:
            raise LimitError(
                f"max_steps {o.max_steps} exceeds the worker's limit of {lim.max_steps}"
            )
        return o

    def _prepare_fill(self, msg: FillRequest, options: SamplerOptions) -> PreparedFill:
        if msg.spans is None:
            return prepare_holes(
                msg.text,
                denoiser=self.denoiser,
                options=options,
                marker=msg.marker,
                language=msg.language,
                max_spans=self.limits.max_spans,
                context=msg.context,
                source=msg.source,
            )
        return prepare_fill(
            msg.text,
            msg.spans,
            denoiser=self.denoiser,
            options=options,
            rewrite=True,
            language=msg.language,
            context=msg.context,
            source=msg.source,
        )

    async def _on_model_thread(self, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(
            self.executor, partial(fn, *args, **kw)
        )
