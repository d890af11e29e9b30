"""ModernBERT masked-LM inference in plain torch, without importing transformers.

Importing `transformers` and its ModernBERT took 4.5 s of the command's 8 s start-up on the
development machine (torch itself 2.4 s), for a network of four layers. This module runs
the same forward pass from the directory's `config.json` and its weights, with the
attribute names transformers uses (`model.embeddings`, `model.layers[i].attn.Wqkv`, `head`,
`decoder`, `model.rotary_emb(x, position_ids, layer_type)`), so that model/cache.py and
model/hf.py drive either. tests/test_modernbert.py checks it against the library's forward.

It serves only what this project trains and ships (`ModernBertForMaskedLM`, GELU, no biases
but the decoder's, default RoPE per layer type); `load` returns None for anything else and
the caller loads through transformers.

Training still uses transformers (model/training/train.py); only inference skips it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

SUPPORTED = dict(
    architectures=["ModernBertForMaskedLM"],
    model_type="modernbert",
    hidden_activation="gelu",
    classifier_activation="gelu",
    attention_bias=False,
    mlp_bias=False,
    norm_bias=False,
    classifier_bias=False,
    decoder_bias=True,
    tie_word_embeddings=True,
)


def supported(raw: dict[str, Any]) -> bool:
    """Whether `config.json`'s fields are a ModernBERT this module runs exactly."""
    if any(raw.get(k, v) != v for k, v in SUPPORTED.items()):
        return False
    rope = raw.get("rope_parameters") or {}
    types = raw.get("layer_types") or []
    return (
        bool(types)
        and all(
            rope.get(t, {}).get("rope_type", "default") == "default"
            and "rope_theta" in rope.get(t, {})
            for t in set(types)
        )
        and set(types) <= {"full_attention", "sliding_attention"}
    )


class Rotary(nn.Module):
    """cos/sin of default RoPE, one base per layer type (as transformers' rotary_emb)."""

    def __init__(self, head_dim: int, thetas: dict[str, float]) -> None:
        super().__init__()
        exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim
        for kind, theta in thetas.items():  # buffers: they follow the module's device
            self.register_buffer(f"inv_{kind}", 1.0 / (theta**exponents), persistent=False)

    def forward(
        self, x: torch.Tensor, position_ids: torch.Tensor, layer_type: str
    ) -> tuple[torch.Tensor, torch.Tensor]:
        inv = getattr(self, f"inv_{layer_type}")
        freqs = position_ids[..., None].float() * inv  # (B, n, d/2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return (x.float() * cos + rotated.float() * sin).to(x.dtype)


class Embeddings(nn.Module):
    def __init__(self, c: SimpleNamespace) -> None:
        super().__init__()
        self.tok_embeddings = nn.Embedding(c.vocab_size, c.hidden_size)
        self.norm = nn.LayerNorm(c.hidden_size, eps=c.norm_eps, bias=False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.norm(self.tok_embeddings(input_ids))


class Attention(nn.Module):
    def __init__(self, c: SimpleNamespace) -> None:
        super().__init__()
        self.Wqkv = nn.Linear(c.hidden_size, 3 * c.hidden_size, bias=False)
        self.Wo = nn.Linear(c.hidden_size, c.hidden_size, bias=False)


class MLP(nn.Module):
    def __init__(self, c: SimpleNamespace) -> None:
        super().__init__()
        self.Wi = nn.Linear(c.hidden_size, 2 * c.intermediate_size, bias=False)
        self.Wo = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        value, gate = self.Wi(x).chunk(2, dim=-1)
        return self.Wo(F.gelu(value) * gate)


class Layer(nn.Module):
    def __init__(self, c: SimpleNamespace, index: int) -> None:
        super().__init__()
        self.attn_norm: nn.Module = (
            nn.Identity() if index == 0 else nn.LayerNorm(c.hidden_size, eps=c.norm_eps, bias=False)
        )
        self.attn = Attention(c)
        self.mlp_norm = nn.LayerNorm(c.hidden_size, eps=c.norm_eps, bias=False)
        self.mlp = MLP(c)


class Body(nn.Module):
    """The encoder: `forward(input_ids, attention_mask)` -> `.last_hidden_state`."""

    def __init__(self, c: SimpleNamespace) -> None:
        super().__init__()
        self.config = c
        self.embeddings = Embeddings(c)
        self.layers = nn.ModuleList(Layer(c, i) for i in range(c.num_hidden_layers))
        self.final_norm = nn.LayerNorm(c.hidden_size, eps=c.norm_eps, bias=False)
        self.heads = c.num_attention_heads
        self.head_dim = c.hidden_size // c.num_attention_heads
        self.rotary_emb = Rotary(
            self.head_dim, {t: float(p["rope_theta"]) for t, p in c.rope_parameters.items()}
        )

    def _masks(self, attention_mask: torch.Tensor, dtype: torch.dtype) -> dict[str, torch.Tensor]:
        """Additive masks (B, 1, T, T): padding keys, and for sliding layers keys farther
        than local_attention // 2."""
        t = attention_mask.shape[1]
        pad = (attention_mask[:, None, None, :] == 0).expand(-1, 1, t, t)
        pos = torch.arange(t, device=attention_mask.device)
        far = (pos[:, None] - pos[None, :]).abs() > self.config.local_attention // 2
        out = {}
        for name, blocked in (("full_attention", pad), ("sliding_attention", pad | far)):
            mask = torch.zeros(blocked.shape, dtype=dtype, device=attention_mask.device)
            out[name] = mask.masked_fill_(blocked, float("-inf"))
        return out

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> SimpleNamespace:
        b, t = input_ids.shape
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        hidden = self.embeddings(input_ids)
        masks = self._masks(attention_mask, hidden.dtype)
        positions = torch.arange(t, device=input_ids.device)[None, :]
        rope = {k: self.rotary_emb(hidden, positions, k) for k in masks}
        for kind, layer in zip(self.config.layer_types, self.layers, strict=True):
            qkv = layer.attn.Wqkv(layer.attn_norm(hidden)).view(b, t, 3, self.heads, self.head_dim)
            q, k, v = (x.transpose(1, 2) for x in qkv.unbind(dim=2))  # (B, h, T, d)
            cos, sin = (r[:, None] for r in rope[kind])  # (B, 1, T, d)
            q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=masks[kind], scale=1 / math.sqrt(self.head_dim)
            )
            hidden = hidden + layer.attn.Wo(out.transpose(1, 2).reshape(b, t, -1))
            hidden = hidden + layer.mlp(layer.mlp_norm(hidden))
        return SimpleNamespace(last_hidden_state=self.final_norm(hidden))


class Head(nn.Module):
    def __init__(self, c: SimpleNamespace) -> None:
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.hidden_size, bias=False)
        self.norm = nn.LayerNorm(c.hidden_size, eps=c.norm_eps, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(F.gelu(self.dense(x)))


class ModernBertMaskedLM(nn.Module):
    """`model` (the encoder), `head`, `decoder` (tied to the token embeddings)."""

    def __init__(self, c: SimpleNamespace) -> None:
        super().__init__()
        self.config = c
        self.model = Body(c)
        self.head = Head(c)
        self.decoder = nn.Linear(c.hidden_size, c.vocab_size, bias=True)
        self.decoder.weight = self.model.embeddings.tok_embeddings.weight

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> SimpleNamespace:
        hidden = self.model(input_ids, attention_mask).last_hidden_state
        return SimpleNamespace(logits=self.decoder(self.head(hidden)))


def load(path: Path) -> tuple[SimpleNamespace, ModernBertMaskedLM] | None:
    """(config, model in fp32) of a model directory this module runs, else None (then load
    it through transformers). Its weights: model.safetensors, or model.int8.safetensors
    (model/training/packing.py), dequantized. Raises what safetensors or torch raise on a
    broken file."""
    from diffusion_infill.model import weight_files  # noqa: PLC0415 - safetensors, only when loading

    raw = json.loads((Path(path) / "config.json").read_text())
    if not supported(raw) or not weight_files.has_weights(Path(path)):
        return None
    config = SimpleNamespace(**raw)
    model = ModernBertMaskedLM(config)
    state = {k: v.float() for k, v in weight_files.read_weights(Path(path)).items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or set(missing) - {"decoder.weight"}:
        return None
    return config, model.eval()
