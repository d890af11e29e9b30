"""What a training run leaves on disk: resumable checkpoints, Hugging Face exports, the
loss plot.

- `ckpt.pt` (runs only, never committed): weights, optimiser, RNG, step, tokens, elapsed
  time and history, written atomically so that a run killed mid-write resumes cleanly;
- `export/`: safetensors (bf16), config, tokenizer and `training.json` (the run's record
  with the validation history over all runs), loadable by
  `AutoModelForMaskedLM.from_pretrained`;
- `loss.png`: training and validation loss against tokens seen.
"""

from __future__ import annotations

import copy
import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tokenizers import Tokenizer
from transformers import ModernBertForMaskedLM

from diffusion_infill.model.training.tokenizer import save_for_transformers


def export(model: ModernBertForMaskedLM, tok: Tokenizer, out: Path, meta: dict) -> None:
    """A Hugging Face directory: safetensors (bf16), config, tokenizer, training record.

    A bf16 copy is written; the model itself keeps its fp32 weights. (Until 2026-11-24 the
    export cast the training model to bf16 and back, rounding the live weights every
    evaluation: every 100 steps in the long run.)"""
    out.mkdir(parents=True, exist_ok=True)
    copy.deepcopy(model).to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    save_for_transformers(tok, out)
    (out / "training.json").write_text(json.dumps(meta, indent=1))


def plot(history: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    train = [h for h in history if "train_loss" in h]
    valid = [h for h in history if "valid_loss" in h]
    ax.plot(
        [h["tokens"] / 1e6 for h in train],
        [h["train_loss"] for h in train],
        label="train (weighted)",
        alpha=0.6,
    )
    ax.plot(
        [h["tokens"] / 1e6 for h in valid],
        [h["valid_loss"] for h in valid],
        "o-",
        label="validation (weighted)",
    )
    ax.plot(
        [h["tokens"] / 1e6 for h in valid],
        [h["valid_masked_ce"] for h in valid],
        "s-",
        label="validation masked CE",
    )
    ax.set_xlabel("tokens seen (M, all runs)")
    ax.set_ylabel("loss")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


@dataclass
class RunState:
    """What a checkpoint carries besides weights and optimiser."""

    step: int = 0
    tokens: int = 0  # tokens seen in this run
    elapsed: float = 0.0  # seconds of training in this run
    tokens_before: int = 0  # tokens seen by --init-from's model in earlier runs
    history: list[dict] = field(default_factory=list)  # tokens counted over all runs

    @property
    def total_tokens(self) -> int:
        return self.tokens_before + self.tokens


def save_checkpoint(
    path: Path,
    model: torch.nn.Module,
    optim: torch.optim.Optimizer,
    state: RunState,
    rng: random.Random,
    extra: dict,
) -> None:
    blob = {
        "model": model.state_dict(),
        "optim": optim.state_dict(),
        "step": state.step,
        "tokens": state.tokens,
        "elapsed": state.elapsed,
        "tokens_before": state.tokens_before,
        "history": state.history,
        "rng": rng.getstate(),
        **extra,
    }
    tmp = path.with_suffix(".tmp")
    torch.save(blob, tmp)
    os.replace(tmp, path)


def load_checkpoint(
    path: Path,
    model: torch.nn.Module,
    optim: torch.optim.Optimizer,
    rng: random.Random,
    device: torch.device,
) -> RunState:
    blob = torch.load(path, map_location=device, weights_only=False)
    model.load_state_dict(blob["model"])
    optim.load_state_dict(blob["optim"])
    rng.setstate(blob["rng"])
    return RunState(
        step=blob["step"],
        tokens=blob["tokens"],
        elapsed=blob["elapsed"],
        tokens_before=blob.get("tokens_before", 0),
        history=blob["history"],
    )
