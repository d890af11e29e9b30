"""The model a training run starts from (model/training/train.py): a fresh ModernBERT for
the preset, or `--init-from`'s export (its safetensors weights, or packed int8 weights
dequantized), whose training.json carries the tokens seen and the history on."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from transformers import ModernBertForMaskedLM

from diffusion_infill.model import weight_files
from diffusion_infill.model.training.checkpoint import RunState
from diffusion_infill.model.training.config import PRESETS, modernbert_config
from diffusion_infill.model.training.noising import Vocab


def build_model(
    args: argparse.Namespace, vocab: Vocab, seq_len: int, state: RunState, record: dict
) -> ModernBertForMaskedLM:
    """A fresh model for the preset, or --init-from's weights (history carried over from
    its `record`, `init_record`)."""
    if args.init_from is None:
        config = modernbert_config(
            PRESETS[args.preset], vocab.size, vocab.pad, vocab.mask, vocab.eos
        )
        config.max_position_embeddings = seq_len
        return ModernBertForMaskedLM(config)
    model = _warm_model(args.init_from, vocab)
    _carry_history(state, record)
    return model


def _warm_model(init_from: Path, vocab: Vocab) -> ModernBertForMaskedLM:
    """The ModernBERT exported in `init_from`, in fp32; SystemExit when it is another
    model, has another vocabulary, or its weights do not fit its config."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(init_from, local_files_only=True)
    if config.model_type != "modernbert":
        raise SystemExit(
            f"--init-from {init_from}: a {config.model_type} model; this script trains ModernBERT"
        )
    if config.vocab_size != vocab.size:
        raise SystemExit(
            f"--init-from {init_from} has a {config.vocab_size}-token "
            f"vocabulary; the tokenizer has {vocab.size}"
        )
    if (init_from / weight_files.WEIGHTS).is_file():
        return ModernBertForMaskedLM.from_pretrained(init_from, dtype=torch.float32)
    # packed int8 weights (a shipped model too large for bf16): dequantized
    model = ModernBertForMaskedLM(config)
    tensors = {k: v.float() for k, v in weight_files.read_weights(init_from).items()}
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    if unexpected or set(missing) - {"decoder.weight"}:
        raise SystemExit(
            f"--init-from {init_from}: the weights do not fit its "
            f"config.json (missing {sorted(missing)[:3]}, "
            f"unexpected {sorted(unexpected)[:3]})"
        )
    model.tie_weights()
    return model


def _carry_history(state: RunState, record: dict) -> None:
    """The tokens seen and the history of the run `record` (a training.json) describes,
    carried into `state`: its validation figures alone when it kept no history."""
    state.tokens_before = int(record.get("tokens_total", record.get("tokens", 0)))
    state.history = list(record.get("history", []))
    if not state.history and "valid" in record:
        v = record["valid"]
        state.history = [
            {
                "tokens": state.tokens_before,
                "valid_loss": v["loss"],
                "valid_masked_ce": v["masked_ce"],
                "valid_masked_acc": v["masked_acc"],
            }
        ]


def init_record(init_from: Path | None) -> dict:
    """The training.json of --init-from's model ({} without one)."""
    path = init_from / "training.json" if init_from is not None else None
    return json.loads(path.read_text()) if path is not None and path.exists() else {}
