"""A ModernBERT forward pass that reuses the context's keys and values across steps.

Between two denoising steps only the span slots of a canvas change; the context around
them stays. A full pass stores every layer's keys and values (after RoPE); the next steps
recompute only the *active* positions (the span slots) through every layer, attending to
the stored keys/values of the context and fresh ones of the active positions. The
context's entries are then slightly stale (they were computed against older span tokens),
which is the approximation Fast-dLLM's DualCache makes; the sampler refreshes the cache
every few steps. `transformers` has no such partial forward for an encoder, hence this
hand-written one, checked against the library's own forward in tests/test_cache.py.

Across requests (`carry`): when the next canvas differs from the cached one only in a
middle part (the user typed a character before the cursor), the entries of the common
prefix are kept where they are, those of the common suffix are moved to their new positions
(a RoPE key at position i becomes one at i + shift by one more rotation, which is exact),
and only the middle and the span slots are recomputed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

if TYPE_CHECKING:  # transformers' class, or model/modernbert.py's twin with the same parts
    from transformers import ModernBertForMaskedLM


CARRY_MARGIN = 4  # tokens each side of a change that `carry` recomputes too (they moved most)
# the same where a canvas is built from another canvas of its request (a copy of a window
# with a hole of up to 16 masks remade at another length: more moved); chosen on validation
# (docs/ARCHITECTURE.md, "A window's copy starts from the window's context entries")
COPY_MARGIN = 16


@dataclass
class LayerKV:
    keys: torch.Tensor  # (heads, T, head_dim), RoPE applied
    values: torch.Tensor  # (heads, T, head_dim)


@dataclass
class ContextCache:
    ids: torch.Tensor  # (T,) the canvas the cache was computed from
    layers: list[LayerKV]
    carried: int = 0  # requests since the last full pass (entries carried over by `carry`)
    nbytes: int = field(init=False, repr=False)  # memory of its keys and values

    def __post_init__(self) -> None:
        self.nbytes = sum(
            t.element_size() * t.nelement() for kv in self.layers for t in (kv.keys, kv.values)
        )


def common_ends(old: torch.Tensor, new: torch.Tensor) -> tuple[int, int]:
    """Lengths of the longest common prefix and suffix of two id sequences, not overlapping
    in the shorter one."""
    n = min(old.shape[0], new.shape[0])
    same = (old[:n] == new[:n]).tolist()
    prefix = same.index(False) if False in same else n
    tail = (old.flip(0)[: n - prefix] == new.flip(0)[: n - prefix]).tolist()
    suffix = tail.index(False) if False in tail else n - prefix
    return prefix, suffix


def signed_pair(cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE's cos and sin (..., d) as one tensor (..., 2, d), the sin's first half negated:
    what `rope` reads."""
    half = sin.shape[-1] // 2
    return torch.stack((cos, torch.cat((-sin[..., :half], sin[..., half:]), dim=-1)), dim=-2)


def rope(x: torch.Tensor, rotation: torch.Tensor) -> torch.Tensor:
    """RoPE on x (..., d) in fp32, back to x's dtype: x * cos + rotate_half(x) * sin, with
    cos and sin from `rotation` (..., 2, d) (`signed_pair`), which broadcasts to x once its
    pair axis is dropped (x (heads, n, d): rotation (n, 2, d)). rotate_half's negation is
    in the sin's sign: the same numbers as with the negation in x, in fewer operations."""
    cos, signed_sin = rotation.unbind(dim=-2)
    half = x.shape[-1] // 2
    wide = x.float()
    return (wide * cos + wide.roll(half, dims=-1) * signed_sin).to(x.dtype)


class CachedModernBert:
    """Full and partial forward passes of a ModernBertForMaskedLM, returning final hidden
    states (apply `model.head` and `model.decoder` for logits)."""

    def __init__(self, model: ModernBertForMaskedLM) -> None:  # or ModernBertMaskedLM
        self.model = model
        self.body = model.model
        cfg = model.config
        self.heads = cfg.num_attention_heads
        self.head_dim = cfg.hidden_size // cfg.num_attention_heads
        self.half_window = cfg.local_attention // 2
        self.layer_types = list(cfg.layer_types)
        self.margin = CARRY_MARGIN
        self._rotations: dict[tuple[str, torch.dtype, torch.device], torch.Tensor] = {}

    def _cos_sin(
        self, positions: torch.Tensor, layer_type: str, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        cos, sin = self.body.rotary_emb(
            torch.empty(0, dtype=dtype, device=positions.device), positions[None, :], layer_type
        )
        return cos[0].float(), sin[0].float()  # (n, d)

    def rotation(
        self, layer_type: str, dtype: torch.dtype, length: int, device: torch.device
    ) -> torch.Tensor:
        """RoPE's cos and sin of positions 0 .. length - 1, as `_cos_sin` gives them at
        `dtype`, (positions, 2, d) in fp32 (`signed_pair`).
        Computed once per layer type and dtype (grown when a longer canvas comes): a pass
        looks its positions up instead of computing them in every layer."""
        key = (layer_type, dtype, device)
        table = self._rotations.get(key)
        if table is None or table.shape[0] < length:
            size = max(128, 1 << max(0, length - 1).bit_length())
            cos, sin = self._cos_sin(torch.arange(size, device=device), layer_type, dtype)
            table = self._rotations[key] = signed_pair(cos, sin)
        return table

    def _layers(
        self,
        hidden: torch.Tensor,
        positions: torch.Tensor,
        cache: ContextCache | None,
        store: list[LayerKV] | None,
        update: bool = False,
    ) -> torch.Tensor:
        """Run the encoder layers over `hidden` (n, H) at `positions` (n,).

        With `cache`, attention reads the cached keys/values with the rows at `positions`
        replaced by fresh ones (written into `cache` itself when `update`); without, the n
        positions are the whole canvas.
        """
        n = hidden.shape[0]
        total = cache.ids.shape[0] if cache is not None else n
        key_pos = torch.arange(total, device=hidden.device)
        rows: dict[str, torch.Tensor] = {}  # each layer type's cos/sin at `positions`
        for li, layer in enumerate(self.body.layers):
            layer_type = self.layer_types[li]
            attn = layer.attn
            x = layer.attn_norm(hidden)
            qkv = attn.Wqkv(x).view(n, 3, self.heads, self.head_dim)  # (n, 3, h, d)
            if layer_type not in rows:
                table = self.rotation(layer_type, qkv.dtype, total, hidden.device)
                rows[layer_type] = table[positions][:, None, None]  # (n, 1, 1, 2, d)
            qk = rope(qkv[:, :2], rows[layer_type])  # (n, 2, h, d)
            q, k = (t.transpose(0, 1) for t in qk.unbind(dim=1))  # (h, n, d) each
            v = qkv[:, 2].transpose(0, 1)
            if cache is not None:
                keys, values = cache.layers[li].keys, cache.layers[li].values
                if not update:
                    keys, values = keys.clone(), values.clone()
                keys[:, positions] = k.to(keys.dtype)
                values[:, positions] = v.to(values.dtype)
            else:
                keys, values = k, v
                if store is not None:
                    store.append(LayerKV(k.detach(), v.detach()))
            mask = None
            if layer_type == "sliding_attention":
                far = (positions[:, None] - key_pos[None, :]).abs() > self.half_window
                mask = torch.zeros(far.shape, dtype=q.dtype, device=q.device)
                mask.masked_fill_(far, float("-inf"))
            out = F.scaled_dot_product_attention(
                q, keys.to(q.dtype), values.to(q.dtype), attn_mask=mask
            )  # (h, n, d)
            out = attn.Wo(out.transpose(0, 1).reshape(n, -1))
            hidden = hidden + out
            hidden = hidden + layer.mlp(layer.mlp_norm(hidden))
        return self.body.final_norm(hidden)

    @torch.inference_mode()
    def full(self, ids: torch.Tensor) -> tuple[torch.Tensor, ContextCache]:
        """Hidden states (T, H) of the whole canvas `ids` (T,), and a fresh cache."""
        hidden = self.body.embeddings(input_ids=ids[None, :])[0]
        store: list[LayerKV] = []
        positions = torch.arange(ids.shape[0], device=ids.device)
        out = self._layers(hidden, positions, None, store)
        return out, ContextCache(ids.clone(), store)

    @torch.inference_mode()
    def partial(self, ids: torch.Tensor, active: torch.Tensor, cache: ContextCache) -> torch.Tensor:
        """Hidden states (n, H) at the `active` positions (n,) of canvas `ids` (T,)."""
        hidden = self.body.embeddings(input_ids=ids[active][None, :])[0]
        return self._layers(hidden, active, cache, None)

    @torch.inference_mode()
    def carry(
        self,
        ids: torch.Tensor,
        old: ContextCache,
        active: torch.Tensor,
        margin: int | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, ContextCache] | None:
        """The cache of canvas `ids` built from the cache `old` of another canvas: the
        common prefix's entries kept, the common suffix's moved to their new positions, the
        rest and `active` recomputed. Returns the recomputed positions (m,), sorted and
        including `active`, their hidden states (m, H), and the cache. `margin`: the
        tokens recomputed each side of the change (None: `self.margin`).

        None when less than half of the new canvas is common to both (a full pass is then
        about as cheap, and exact)."""
        total = ids.shape[0]
        prefix, suffix = common_ends(old.ids, ids)
        if 2 * (prefix + suffix) < total:
            return None
        shift = total - old.ids.shape[0]
        layers = []
        for li, kv in enumerate(old.layers):
            keys = kv.keys.new_empty((self.heads, total, self.head_dim))
            values = kv.values.new_empty((self.heads, total, self.head_dim))
            keys[:, :prefix], values[:, :prefix] = kv.keys[:, :prefix], kv.values[:, :prefix]
            if suffix:
                moved = kv.keys[:, kv.keys.shape[1] - suffix :]
                if shift:
                    cos, sin = self._cos_sin(
                        torch.tensor([shift], device=ids.device), self.layer_types[li], moved.dtype
                    )
                    moved = rope(moved, signed_pair(cos, sin))
                keys[:, total - suffix :] = moved
                values[:, total - suffix :] = kv.values[:, kv.values.shape[1] - suffix :]
            layers.append(LayerKV(keys, values))
        cache = ContextCache(ids.clone(), layers, carried=old.carried + 1)
        # the tokens nearest the change are recomputed too: their entries moved most
        margin = self.margin if margin is None else margin
        stale = torch.arange(
            max(0, prefix - margin),
            min(total, total - suffix + margin),
            device=ids.device,
        )
        active = torch.unique(torch.cat((stale, active)))  # sorted
        hidden = self.body.embeddings(input_ids=ids[active][None, :])[0]
        return active, self._layers(hidden, active, cache, None, update=True), cache
