"""A ModernBERT forward pass that reuses the context's keys and values across steps.

Between two denoising steps only the span slots of a canvas change; the context around
them stays. A full pass stores every layer's keys and values (after RoPE); the next steps
recompute only the *active* positions (the span slots) through every layer, attending to
the stored keys/values of the context and fresh ones of the active positions. The
context's entries are then slightly stale (they were computed against older span tokens),
which is the approximation Fast-dLLM's DualCache makes; the sampler refreshes the cache
every few steps. `transformers` has no such partial forward for an encoder, hence this
hand-written one, checked against the library's own forward in tests/test_cache.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

if TYPE_CHECKING:  # transformers' class, or model/modernbert.py's twin with the same parts
    from transformers import ModernBertForMaskedLM


@dataclass
class LayerKV:
    keys: torch.Tensor  # (heads, T, head_dim), RoPE applied
    values: torch.Tensor  # (heads, T, head_dim)


@dataclass
class ContextCache:
    ids: torch.Tensor  # (T,) the canvas the cache was computed from
    layers: list[LayerKV]


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE on (heads, n, d) with cos/sin (n, d)."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return (x.float() * cos + rotated.float() * sin).to(x.dtype)


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

    def _cos_sin(self, positions: torch.Tensor, layer_type: str, dtype: torch.dtype
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        cos, sin = self.body.rotary_emb(torch.empty(0, dtype=dtype, device=positions.device),
                                        positions[None, :], layer_type)
        return cos[0].float(), sin[0].float()  # (n, d)

    def _layers(self, hidden: torch.Tensor, positions: torch.Tensor,
                cache: ContextCache | None, store: list[LayerKV] | None) -> torch.Tensor:
        """Run the encoder layers over `hidden` (n, H) at `positions` (n,).

        With `cache`, attention reads the cached keys/values with the rows at `positions`
        replaced by fresh ones; without, the n positions are the whole canvas.
        """
        n = hidden.shape[0]
        total = cache.ids.shape[0] if cache is not None else n
        key_pos = torch.arange(total, device=hidden.device)
        for li, layer in enumerate(self.body.layers):
            layer_type = self.layer_types[li]
            attn = layer.attn
            x = layer.attn_norm(hidden)
            qkv = attn.Wqkv(x).view(n, 3, self.heads, self.head_dim)  # (n, 3, h, d)
            q, k, v = (t.transpose(0, 1) for t in qkv.unbind(dim=1))  # (h, n, d) each
            cos, sin = self._cos_sin(positions, layer_type, q.dtype)
            q, k = _rope(q, cos, sin), _rope(k, cos, sin)
            if cache is not None:
                keys = cache.layers[li].keys.clone()
                values = cache.layers[li].values.clone()
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
            out = F.scaled_dot_product_attention(q, keys.to(q.dtype), values.to(q.dtype),
                                                 attn_mask=mask)  # (h, n, d)
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
    def partial(self, ids: torch.Tensor, active: torch.Tensor, cache: ContextCache
                ) -> torch.Tensor:
        """Hidden states (n, H) at the `active` positions (n,) of canvas `ids` (T,)."""
        hidden = self.body.embeddings(input_ids=ids[active][None, :])[0]
        return self._layers(hidden, active, cache, None)
