"""The training objective: the weighted masked-token loss (model.training.noising's weights),
one optimiser step on it, its average over fixed validation batches; the optimiser (AdamW,
no weight decay on norms and biases) and the learning-rate schedule."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from contextlib import AbstractContextManager

import torch
import torch.nn.functional as F
from transformers import ModernBertForMaskedLM

from diffusion_infill.model.training.noising import Batch
from diffusion_infill.model.training.parallel import Group

Autocast = Callable[[], AbstractContextManager]


def weighted_loss(
    model: ModernBertForMaskedLM, batch: Batch, encoder: Callable | None = None
) -> tuple[torch.Tensor, dict]:
    """Weighted cross-entropy, with the output head run only where there is a loss.

    `encoder` stands in for `model.model` (a torch.compile'd copy, say)."""
    attention = batch.input_ids != model.config.pad_token_id
    hidden = (model.model if encoder is None else encoder)(
        input_ids=batch.input_ids, attention_mask=attention.long()
    ).last_hidden_state
    sel = batch.weights > 0  # (B, T)
    logits = model.decoder(model.head(hidden[sel]))  # (N, V)
    ce = F.cross_entropy(logits.float(), batch.targets[sel], reduction="none")  # (N,)
    loss = (ce * batch.weights[sel]).sum() / attention.sum()
    with torch.no_grad():
        masked = batch.masked[sel]
        correct = logits.argmax(-1) == batch.targets[sel]
        stats = {
            "masked_ce": ce[masked].mean().item() if masked.any() else float("nan"),
            "masked_acc": correct[masked].float().mean().item() if masked.any() else 0.0,
        }
    return loss, stats


def make_optimizer(model: torch.nn.Module, args: argparse.Namespace) -> torch.optim.AdamW:
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "norm" not in n]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2 or "norm" in n]
    return torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": args.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=args.lr,
        betas=(0.9, 0.98),
        eps=1e-8,
    )


def train_step(
    model: ModernBertForMaskedLM,
    optim: torch.optim.Optimizer,
    batch: Batch,
    autocast: Autocast,
    encoder: Callable | None = None,
    group: Group | None = None,
) -> tuple[float, dict]:
    """One optimiser step on one batch (this worker's share of it): (loss, stats)."""
    with autocast():
        loss, stats = weighted_loss(model, batch, encoder)
    optim.zero_grad(set_to_none=True)
    loss.backward()
    if group is not None:
        group.average_gradients(model)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optim.step()
    return loss.item(), stats


def lr_at(progress: float, peak: float, warmup: float) -> float:
    """Linear warm-up then cosine decay to 10% of peak; progress in [0, 1]."""
    if progress < warmup:
        return peak * progress / warmup
    p = min(1.0, (progress - warmup) / max(1e-9, 1 - warmup))
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))


@torch.no_grad()
def estimate_loss(model, batches: list[Batch], autocast: Autocast) -> dict[str, float]:
    model.eval()
    totals = {"loss": 0.0, "masked_ce": 0.0, "masked_acc": 0.0}
    for batch in batches:
        with autocast():
            loss, stats = weighted_loss(model, batch)
        totals["loss"] += loss.item()
        totals["masked_ce"] += stats["masked_ce"]
        totals["masked_acc"] += stats["masked_acc"]
    model.train()
    return {k: v / len(batches) for k, v in totals.items()}
