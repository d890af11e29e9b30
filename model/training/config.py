"""Model presets: the network sizes this project trains, as typed dataclasses."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from transformers import ModernBertConfig


@dataclass(frozen=True)
class Preset:
    hidden: int  # model width
    layers: int  # transformer blocks
    heads: int  # attention heads (hidden / heads = head dim)
    intermediate: int  # GLU MLP width
    seq_len: int  # training canvas length; also the engine's window limit
    local_window: int  # sliding-window attention span of the local layers
    global_every: int  # every n-th layer attends globally (ModernBERT's pattern)


PRESETS: dict[str, Preset] = {
    # For tests: trains in seconds, ~0.6M parameters with a 16k vocabulary.
    "tiny": Preset(
        hidden=32, layers=2, heads=2, intermediate=64, seq_len=128, local_window=64, global_every=2
    ),
    # For a CPU run of a few hours: ~7.5M parameters (4.2M of them the tied embedding).
    "small": Preset(
        hidden=256,
        layers=4,
        heads=4,
        intermediate=768,
        seq_len=256,
        local_window=128,
        global_every=2,
    ),
    # Shape ablation beside `small`: narrower and twice as deep, about the same FLOPs/token.
    "small-deep": Preset(
        hidden=192,
        layers=8,
        heads=3,
        intermediate=576,
        seq_len=256,
        local_window=128,
        global_every=2,
    ),
    # For a GPU: ~29M parameters, ~58 MB in bf16, inside the 64 MiB shipped-size limit.
    "base": Preset(
        hidden=512,
        layers=6,
        heads=8,
        intermediate=1536,
        seq_len=512,
        local_window=128,
        global_every=3,
    ),
}


def modernbert_config(
    preset: Preset, vocab_size: int, pad_id: int, mask_id: int, eos_id: int
) -> ModernBertConfig:
    """A ModernBERT config for a preset. Special ids come from the tokenizer."""
    return ModernBertConfig(
        vocab_size=vocab_size,
        hidden_size=preset.hidden,
        num_hidden_layers=preset.layers,
        num_attention_heads=preset.heads,
        intermediate_size=preset.intermediate,
        max_position_embeddings=preset.seq_len,
        local_attention=preset.local_window,
        global_attn_every_n_layers=preset.global_every,
        pad_token_id=pad_id,
        mask_token_id=mask_id,
        eos_token_id=eos_id,
        bos_token_id=eos_id,
        cls_token_id=eos_id,
        sep_token_id=eos_id,
        tie_word_embeddings=True,
        # The engine asks for logits at a few positions; training computes them sparsely.
        sparse_prediction=False,
        attention_dropout=0.0,
        embedding_dropout=0.0,
        mlp_dropout=0.0,
    )


def describe(preset: Preset) -> dict[str, int]:
    return asdict(preset)
