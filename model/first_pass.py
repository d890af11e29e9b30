"""A hole's length and a job's first step from one forward pass (HFDenoiser's length head).

The length head (model/length_head.py) reads the first pass over a hole's 16 masked slots.
That pass is the one the decode's first step makes anyway: the same canvas, every slot
masked. `first_pass` answers both from it, the logits a job's first step asks for (with the
context entries its cache hints name kept, as `HFDenoiser.logits` keeps them) and each
hole's length log-probabilities, so that asking the head costs no pass of its own.
`fill_lengths` is the head alone (what the benchmarks read), `slot_features` what it reads
(what `benchmarks/fit_length_head.py` fits it on).

A first step with cache hints runs the cached model's full pass (model/cache_batch.py), one
without runs the network's own forward, as `logits` would; the head reads whichever ran.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from diffusion_infill.model import cache_batch
from diffusion_infill.model.denoiser import CacheHint
from diffusion_infill.model.length_head import SLOTS

if TYPE_CHECKING:
    from diffusion_infill.model.cache import CachedModernBert
    from diffusion_infill.model.length_head import LengthHead


class FirstPass:
    """The length head's passes, mixed into model.hf.HFDenoiser."""

    model: Any
    device: torch.device
    special: Any
    name: str
    length_head: LengthHead | None
    _sparse_head: bool
    _autocast: torch.autocast
    _cached: CachedModernBert | None

    if TYPE_CHECKING:  # HFDenoiser's

        def _route(self, canvas: Sequence[int], hint: CacheHint) -> str: ...

        def _many_states(
            self,
            canvases: Sequence[Sequence[int]],
            positions: Sequence[Sequence[int]],
            hints: Sequence[CacheHint],
            full: bool,
        ) -> list[torch.Tensor]: ...

    def first_pass(
        self,
        canvases: Sequence[Sequence[int]],
        positions: Sequence[Sequence[int]],
        hints: Sequence[CacheHint | None] | None,
        slots: Sequence[Sequence[Sequence[int]]],
    ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """One forward pass per canvas: the logits `logits(canvases, positions, hints)`
        gives, and for canvas i an array (len(slots[i]), 17) of its holes' length
        log-probabilities (0..15 tokens and "16 or more"; each hole the canvas positions of
        its 16 masked slots; none: an empty array). A hint whose canvas would read kept or
        carried entries is a ValueError (a first step has none); hints are all given or
        all None. RuntimeError when the model has no length head."""
        if self.length_head is None:
            raise RuntimeError(f"{self.name} has no length head")
        logits, (states, null) = self._pass(canvases, positions, hints, slots)
        with torch.inference_mode():
            lengths = torch.log_softmax(self.length_head(states, null), dim=-1).numpy()
        per_hole = np.cumsum([0] + [len(per) for per in slots])
        return logits, [lengths[a:b] for a, b in zip(per_hole[:-1], per_hole[1:], strict=True)]

    def fill_lengths(
        self, canvases: Sequence[Sequence[int]], slots: Sequence[Sequence[Sequence[int]]]
    ) -> list[np.ndarray]:
        """`first_pass`'s length log-probabilities alone, without cache hints."""
        return self.first_pass(canvases, [[] for _ in canvases], None, slots)[1]

    def slot_features(
        self, canvases: Sequence[Sequence[int]], slots: Sequence[Sequence[Sequence[int]]]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """What the length head reads of each hole (`slots` as in `first_pass`): the
        prediction head's output at its 16 slots (holes, 16, width) and their `<null>`
        log-probabilities (holes, 16), float32, from the pass `fill_lengths` makes."""
        if not self._sparse_head:
            raise RuntimeError(f"{self.name} has no prediction head to read slots from")
        return self._pass(canvases, [[] for _ in canvases], None, slots)[1]

    @torch.inference_mode()
    def _pass(
        self,
        canvases: Sequence[Sequence[int]],
        positions: Sequence[Sequence[int]],
        hints: Sequence[CacheHint | None] | None,
        slots: Sequence[Sequence[Sequence[int]]],
    ) -> tuple[list[np.ndarray], tuple[torch.Tensor, torch.Tensor]]:
        """One full pass: the logits at `positions` per canvas, and what the head reads of
        each hole of `slots` (as `slot_features` gives it)."""
        holes = sum(len(per) for per in slots)
        if any(len(p) != SLOTS for per in slots for p in per):
            raise ValueError(f"the length head reads exactly {SLOTS} slots per hole")
        wanted = [
            [*p, *(j for s in per for j in s)] for p, per in zip(positions, slots, strict=True)
        ]
        rows = np.cumsum([0] + [len(w) for w in wanted])
        with self._autocast:
            heads = self.model.head(self._full_states(canvases, wanted, hints))
            logits = self.model.decoder(heads).float()
            read = torch.tensor(  # the slots' rows: after each canvas's positions
                [j for i, p in enumerate(positions) for j in range(rows[i] + len(p), rows[i + 1])],
                dtype=torch.long,
            )
            null = torch.log_softmax(logits[read], dim=-1)[:, self.special.null]
            states = heads[read].float().reshape(holes, SLOTS, heads.shape[-1])
        out = logits.cpu().numpy()
        return (
            [out[a : a + len(p)] for a, p in zip(rows[:-1], positions, strict=True)],
            (states.cpu(), null.reshape(holes, SLOTS).cpu()),
        )

    def _full_states(
        self,
        canvases: Sequence[Sequence[int]],
        wanted: Sequence[Sequence[int]],
        hints: Sequence[CacheHint | None] | None,
    ) -> torch.Tensor:
        """Final hidden states at the `wanted` positions of each canvas, concatenated, from
        a full pass: the cached model's (its entries kept under the hints' keys) when
        hints are given, else the network's forward."""
        given = [h for h in hints or () if h is not None]
        if given and len(given) != len(canvases):
            raise ValueError("cache hints must be given for every canvas or for none")
        if not given or self._cached is None:
            return self._plain_states(canvases, wanted)
        if any(self._route(c, h) != "full" for c, h in zip(canvases, given, strict=True)):
            raise ValueError("a first pass reads no kept entries: every hint must ask a full pass")
        out: list[torch.Tensor] = [torch.empty(0)] * len(canvases)
        budget = cache_batch.FULL_BATCH_TOKENS
        for chunk in cache_batch.alike_chunks(range(len(canvases)), canvases, budget):
            states = self._many_states(
                [canvases[i] for i in chunk],
                [wanted[i] for i in chunk],
                [given[i] for i in chunk],
                full=True,
            )
            for i, state in zip(chunk, states, strict=True):
                out[i] = state
        return torch.cat(out)

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
