"""HFDenoiser: a Hugging Face masked LM directory behind the engine's Denoiser interface.

Loads the shipped checkpoint (model/weights) or a user's local directory holding any
`AutoModelForMaskedLM` (ModernBERT, BERT-likes), and LLaDA / Dream-family models whose
code lives in the directory, only when the user opts in to `trust_remote_code`. Weights
are read from safetensors only (model.loading refuses a directory with nothing but pickled
`.bin` / `.pt` weights, because unpickling runs arbitrary code). Nothing is downloaded:
every load is `local_files_only`. Programs load through `model.loading.load_denoiser`;
reading the directory (tokenizer, network, special ids) is model/hf_loading.py's.
"""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer

from diffusion_infill.model import cache_batch
from diffusion_infill.model.bf16 import bf16_linear_weights
from diffusion_infill.model.cache import COPY_MARGIN, CachedModernBert, ContextCache
from diffusion_infill.model.calibration import Calibration, load_calibration
from diffusion_infill.model.denoiser import CacheHint, ModelLoadError, SpecialIds
from diffusion_infill.model.hf_loading import (
    load_network,
    load_tokenizer,
    network_digest,
    pick_device,
    set_threads,
    special_ids,
)
from diffusion_infill.model.int8 import quantise_int8
from diffusion_infill.model.precision import Precision, cpu_bf16, pick_precision
from diffusion_infill.model.threads import ThreadGovernor

log = logging.getLogger(__name__)

# Requests in a row (keystrokes) whose context entries may be carried over from the last
# one before a full pass; see benchmarks/results/lsp_carry.json for what it was chosen by.
CARRY_LIMIT = 8
# Memory the context entries may hold: a 512-token canvas of the shipped model takes 6 MiB
# in fp32 (6 layers of keys and values), so about 170 canvases.
CACHE_BYTES = 1 << 30


class HFDenoiser:
    """A masked diffusion LM on one device, answering logits at requested positions."""

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: Tokenizer,
        special: SpecialIds,
        max_length: int,
        name: str,
        device: torch.device,
        precision: Precision | None = None,
        network: str = "",
        calibration: Calibration | None = None,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.special = special
        self.max_length = max_length
        self.name = name
        self.device = device
        self.vocab_size = int(model.config.vocab_size)
        # ModernBERT exposes body, head and decoder: the head then runs only where asked.
        self._sparse_head = all(hasattr(model, a) for a in ("model", "head", "decoder"))
        self.network = network  # model/hf_loading.py `network_digest`, "" when unnamed
        # the fills' confidence weights (model/calibration.py); None: no confidence
        self.calibration = calibration
        # bf16 autocast speeds a CPU with AMX ~2x and is the usual choice on CUDA, but a
        # CPU without bf16 instructions runs it ~3x slower than fp32: chosen per machine.
        self.precision = precision or pick_precision(device)
        # said to clients, which choose their budgets by it (infill.serve.protocol.Welcome)
        self.cpu_bf16 = device.type == "cpu" and cpu_bf16()
        self._autocast = torch.autocast(
            device.type, dtype=torch.bfloat16, enabled=self.precision.dtype == torch.bfloat16
        )
        # Context key/value reuse (model/cache.py) for ModernBERT; others ignore hints.
        self._cached = (
            CachedModernBert(model)
            if getattr(model.config, "model_type", "") == "modernbert"
            else None
        )
        self._caches: OrderedDict[Hashable, ContextCache] = OrderedDict()
        # On a CPU, fewer threads while another process holds a core (model/threads.py).
        self.threads = (
            ThreadGovernor(torch.get_num_threads(), torch.set_num_threads)
            if device.type == "cpu"
            else None
        )
        # Dream-family models keep their autoregressive parent's shift: the logits at
        # position i predict token i + 1.
        self._shifted = getattr(model.config, "model_type", "").lower() == "dream"
        # Canvases whose context entries are kept (LRU), within CACHE_BYTES. Every live
        # canvas of a request needs its entry at each step: a file of 70 holes (70 windows)
        # under a cap of 64 lost every entry before its next use, so each pass was full.
        self.cache_size = 256
        self.cache_bytes = CACHE_BYTES
        self.carry_limit = CARRY_LIMIT  # carried entries grow staler with each request

    @classmethod
    def load(
        cls,
        path: Path,
        *,
        device: str | None = None,
        trust_remote_code: bool = False,
        dtype: str | None = None,
    ) -> HFDenoiser:
        """The model in `path`, a directory `model.loading.check_model_dir` accepted (call
        `model.loading.load_denoiser`, which checks it first)."""
        path = Path(path)
        dev = pick_device(device)
        tokenizer = load_tokenizer(path)
        config, model = load_network(path, trust_remote_code)
        model.to(dev).eval()
        max_length = int(getattr(config, "max_position_embeddings", 0) or 2048)
        try:
            precision = pick_precision(dev, dtype)
        except ValueError as exc:
            raise ModelLoadError(str(exc)) from exc
        network = network_digest(model)  # before int8: the weights as stored
        try:
            calibration = load_calibration(path, network)
        except ValueError as exc:
            raise ModelLoadError(str(exc)) from exc
        if precision.int8:
            model = quantise_int8(model)
        elif precision.dtype == torch.bfloat16:
            model = bf16_linear_weights(model)  # cast once, not at every pass
        set_threads(os.environ.get("INFILL_THREADS"))
        log.info(
            "model %s on %s in %s (%s), %d CPU threads",
            path,
            dev,
            precision.name,
            precision.reason,
            torch.get_num_threads(),
        )
        return cls(
            model,
            tokenizer,
            special_ids(tokenizer, config, path),
            max_length,
            name=path.name if path.name != "weights" else "shipped",
            device=dev,
            precision=precision,
            network=network,
            calibration=calibration,
        )

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)

    def logits(
        self,
        canvases: Sequence[Sequence[int]],
        positions: Sequence[Sequence[int]],
        hints: Sequence[CacheHint | None] | None = None,
    ) -> list[np.ndarray]:
        if self.threads is None:
            return self._logits(canvases, positions, hints)
        return self.threads.run(lambda: self._logits(canvases, positions, hints))

    def _logits(
        self,
        canvases: Sequence[Sequence[int]],
        positions: Sequence[Sequence[int]],
        hints: Sequence[CacheHint | None] | None,
    ) -> list[np.ndarray]:
        if self._cached is None or hints is None or all(h is None for h in hints):
            return self._batched(canvases, positions)
        out: list[np.ndarray] = [np.empty(0)] * len(canvases)
        groups: dict[str, list[int]] = {"plain": [], "partial": [], "full": [], "alone": []}
        for i, hint in enumerate(hints):
            groups["plain" if hint is None else self._route(canvases[i], hint)].append(i)
        for i, arr in zip(
            groups["plain"],
            self._batched(
                [canvases[i] for i in groups["plain"]], [positions[i] for i in groups["plain"]]
            ),
            strict=True,
        ):
            out[i] = arr
        # Canvases whose passes are alike run as one batch (model/cache_batch.py): a step
        # of a request of many windows is then a few passes, not one per window.
        for kind, budget in (
            ("partial", cache_batch.PARTIAL_BATCH_TOKENS),
            ("full", cache_batch.FULL_BATCH_TOKENS),
        ):
            for chunk in cache_batch.alike_chunks(groups[kind], canvases, budget):
                arrays = self._many(
                    [canvases[i] for i in chunk],
                    [positions[i] for i in chunk],
                    [hints[i] for i in chunk],
                    full=kind == "full",
                )
                for i, arr in zip(chunk, arrays, strict=True):
                    out[i] = arr
        for i in groups["alone"]:  # carries: one at a time
            out[i] = self._carried(canvases[i], positions[i], hints[i])  # type: ignore[arg-type]
        return out

    def _route(self, canvas: Sequence[int], hint: CacheHint) -> str:
        """How this canvas is served: "partial" (its kept entries serve as they are), "full"
        (a full pass of its own) or "alone" (a refresh that may carry an earlier request's
        entries over: `_carried`, one at a time)."""
        if hint.refresh and hint.origin is not None:
            source = self._caches.get(hint.origin)
            if source is not None and source.carried < self.carry_limit:
                return "alone"
        entry = self._caches.get(hint.key)
        if hint.refresh or entry is None or entry.ids.shape[0] != len(canvas):
            return "full"
        return "partial"

    @torch.inference_mode()
    def _many(
        self,
        canvases: Sequence[Sequence[int]],
        positions: Sequence[Sequence[int]],
        hints: Sequence[CacheHint],
        full: bool,
    ) -> list[np.ndarray]:
        """Logits of several canvases with cache hints, all partial or all full, in one
        pass; their context entries kept under their keys (and carry names)."""
        with self._autocast:
            flat = self._project(torch.cat(self._many_states(canvases, positions, hints, full)))
        bounds = np.cumsum([0] + [len(p) for p in positions])
        return [flat[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]

    def _many_states(
        self,
        canvases: Sequence[Sequence[int]],
        positions: Sequence[Sequence[int]],
        hints: Sequence[CacheHint],
        full: bool,
    ) -> list[torch.Tensor]:
        """`_many`'s final hidden states at `positions`, per canvas."""
        assert self._cached is not None
        dev = self.device
        ids = [torch.tensor(c, dtype=torch.long, device=dev) for c in canvases]
        if full:
            actives = [torch.arange(len(c), device=dev) for c in canvases]
            entries = None
        else:
            actives = [
                torch.tensor(sorted(set(h.active) | set(p)), dtype=torch.long, device=dev)
                for h, p in zip(hints, positions, strict=True)
            ]
            entries = [self._caches[h.key] for h in hints]
        wanted = [
            torch.searchsorted(a, torch.tensor(p, dtype=torch.long, device=dev))
            for a, p in zip(actives, positions, strict=True)
        ]
        with self._autocast:
            states, fresh = cache_batch.many(self._cached, ids, actives, entries, wanted)
        kept = fresh if fresh is not None else entries
        assert kept is not None
        for hint, entry in zip(hints, kept, strict=True):
            self._keep(hint.key, entry)
            if hint.refresh and hint.carry is not None:
                self._keep(hint.carry, entry)  # for the next request of that name
        return states

    def _project(self, hidden: torch.Tensor) -> np.ndarray:
        """Logits (N, V) from final hidden states (N, H)."""
        return self.model.decoder(self.model.head(hidden)).float().cpu().numpy()

    @torch.inference_mode()
    def _carried(self, canvas: Sequence[int], pos: Sequence[int], hint: CacheHint) -> np.ndarray:
        """A refresh whose context entries may be carried over from an earlier request's
        or another canvas's (`_route` said "alone"): those entries moved to this canvas,
        the rest recomputed; a full pass of its own where too little of the canvas is
        common to both."""
        origin = hint.origin
        assert self._cached is not None and origin is not None
        ids = torch.tensor(canvas, dtype=torch.long, device=self.device)
        active = torch.tensor(
            sorted(set(hint.active) | set(pos)), dtype=torch.long, device=self.device
        )
        with self._autocast:
            margin = COPY_MARGIN if hint.carry is None else None  # a copy's hole moved more
            carried = self._cached.carry(ids, self._caches[origin], active, margin)
            if carried is not None:
                active, hidden, entry = carried
                where = torch.tensor(pos, dtype=torch.long, device=self.device)
                logits = self._project(hidden[torch.searchsorted(active, where)])
        if carried is None:
            return self._many([canvas], [pos], [hint], full=True)[0]
        self._keep(hint.key, entry)
        if hint.carry is not None:
            self._keep(hint.carry, entry)  # for the next request of that name
        return logits

    def _keep(self, key: Hashable, entry: ContextCache) -> None:
        self._caches[key] = entry
        self._caches.move_to_end(key)
        while len(self._caches) > 1 and (
            len(self._caches) > self.cache_size or self._cache_nbytes() > self.cache_bytes
        ):
            self._caches.popitem(last=False)

    def _cache_nbytes(self) -> int:
        """Memory held by the kept entries (an entry kept under two names counted once)."""
        return sum({id(e): e.nbytes for e in self._caches.values()}.values())

    def forget(self, key: Hashable) -> None:
        """Drop the cached context of a finished canvas."""
        self._caches.pop(key, None)

    @torch.inference_mode()
    def _batched(
        self, canvases: Sequence[Sequence[int]], positions: Sequence[Sequence[int]]
    ) -> list[np.ndarray]:
        if not canvases:
            return []
        with self._autocast:
            if self._sparse_head:
                flat = self._project(self._plain_states(canvases, positions))  # (N, V)
            else:
                ids, attn, rows, cols = self._padded(canvases, positions)
                full = self.model(input_ids=ids, attention_mask=attn).logits  # (B, T, V)
                if self._shifted:
                    full = torch.cat([full[:, :1], full[:, :-1]], dim=1)
                flat = full[rows, cols].float().cpu().numpy()
        result, start = [], 0
        for p in positions:
            result.append(flat[start : start + len(p)])
            start += len(p)
        return result

    def _plain_states(
        self, canvases: Sequence[Sequence[int]], positions: Sequence[Sequence[int]]
    ) -> torch.Tensor:
        """Final hidden states at `positions` of each canvas, concatenated, from the
        network's own forward over the padded batch (no cache)."""
        ids, attn, rows, cols = self._padded(canvases, positions)
        return self.model.model(input_ids=ids, attention_mask=attn).last_hidden_state[rows, cols]

    def _padded(
        self, canvases: Sequence[Sequence[int]], positions: Sequence[Sequence[int]]
    ) -> tuple[torch.Tensor, ...]:
        """`canvases` as one padded batch: ids, attention mask, and the (row, column) of
        every position asked for, on the device."""
        width = max(len(c) for c in canvases)
        ids = torch.full((len(canvases), width), self.special.pad, dtype=torch.long)
        attn = torch.zeros((len(canvases), width), dtype=torch.long)
        for i, c in enumerate(canvases):
            ids[i, : len(c)] = torch.tensor(c, dtype=torch.long)
            attn[i, : len(c)] = 1
        rows = torch.tensor([i for i, p in enumerate(positions) for _ in p], dtype=torch.long)
        cols = torch.tensor([j for p in positions for j in p], dtype=torch.long)
        return tuple(t.to(self.device) for t in (ids, attn, rows, cols))
