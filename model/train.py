"""Train a masked-diffusion code model from scratch (ModernBERT, MDLM objective).

    python -m model.train --preset small --minutes 90 --out runs/small

Reads the corpus (model.corpus) and tokenizer (model.tokenizer), trains with the noise of
model.noising, shows a progress bar (loss, tokens/s, ETA), evaluates on the validation
split now and then, writes a resumable checkpoint (`ckpt.pt`: weights, optimiser, step,
elapsed time) and a Hugging Face export (`export/`: safetensors, config, tokenizer) that
`AutoModelForMaskedLM.from_pretrained` loads, and saves the loss curve as `loss.png`.
Running the same command again resumes from `ckpt.pt`.

With --minutes the learning-rate schedule follows the elapsed share of the time budget,
so a run that is cut short and resumed still ends its cosine decay on time. On CUDA the
forward pass runs in bf16 autocast; on a CPU with AMX bf16 autocast is ~2x faster than
fp32 too (measured in ../shared/notes/cpu-training-probe.md), so it is on by default.
For several GPUs, launch this script with `torchrun` (DDP through torch.distributed).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer
from transformers import ModernBertForMaskedLM

from model.config import PRESETS, modernbert_config
from model.noising import Batch, NoiseConfig, TextSampler, Vocab, make_batch
from model.tokenizer import save_for_transformers


def load_texts(corpus: Path, split: str) -> list[str]:
    with (corpus / f"{split}.jsonl").open() as fh:
        return [json.loads(line)["text"] for line in fh]


def weighted_loss(model: ModernBertForMaskedLM, batch: Batch) -> tuple[torch.Tensor, dict]:
    """Weighted cross-entropy, with the output head run only where there is a loss."""
    attention = batch.input_ids != model.config.pad_token_id
    hidden = model.model(input_ids=batch.input_ids,
                         attention_mask=attention.long()).last_hidden_state  # (B, T, H)
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


def lr_at(progress: float, peak: float, warmup: float) -> float:
    """Linear warm-up then cosine decay to 10% of peak; progress in [0, 1]."""
    if progress < warmup:
        return peak * progress / warmup
    p = min(1.0, (progress - warmup) / max(1e-9, 1 - warmup))
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))


@torch.no_grad()
def estimate_loss(model, batches: list[Batch], autocast) -> dict[str, float]:
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


def export(model: ModernBertForMaskedLM, tok: Tokenizer, out: Path, meta: dict) -> None:
    """A Hugging Face directory: safetensors (bf16), config, tokenizer, training record."""
    out.mkdir(parents=True, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    model.to(torch.float32)
    save_for_transformers(tok, out)
    (out / "training.json").write_text(json.dumps(meta, indent=1))


def plot(history: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    train = [h for h in history if "train_loss" in h]
    valid = [h for h in history if "valid_loss" in h]
    ax.plot([h["tokens"] / 1e6 for h in train], [h["train_loss"] for h in train],
            label="train (weighted)", alpha=0.6)
    ax.plot([h["tokens"] / 1e6 for h in valid], [h["valid_loss"] for h in valid], "o-",
            label="validation (weighted)")
    ax.plot([h["tokens"] / 1e6 for h in valid], [h["valid_masked_ce"] for h in valid], "s-",
            label="validation masked CE")
    ax.set_xlabel("tokens seen (M)")
    ax.set_ylabel("loss")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", choices=sorted(PRESETS), default="small",
                        help="network size")
    parser.add_argument("--corpus", type=Path, default=Path("data/corpus"),
                        help="folder with train/valid.jsonl")
    parser.add_argument("--tokenizer", type=Path, default=Path("data/tokenizer/tokenizer.json"),
                        help="tokenizer.json from model.tokenizer")
    parser.add_argument("--out", type=Path, default=Path("runs/small"), help="run folder")
    parser.add_argument("--batch-size", type=int, default=32, help="sequences per step")
    parser.add_argument("--seq-len", type=int, default=None,
                        help="canvas length (default: the preset's)")
    parser.add_argument("--lr", type=float, default=2e-3, help="peak learning rate")
    parser.add_argument("--warmup", type=float, default=0.03,
                        help="warm-up share of the run")
    parser.add_argument("--weight-decay", type=float, default=0.01, help="AdamW decay")
    parser.add_argument("--minutes", type=float, default=None,
                        help="wall-clock budget (sets the schedule); resumes count it")
    parser.add_argument("--max-steps", type=int, default=1000,
                        help="step budget when --minutes is not given")
    parser.add_argument("--eval-every", type=int, default=200, help="steps between evals")
    parser.add_argument("--save-every", type=int, default=100,
                        help="steps between checkpoints")
    parser.add_argument("--device", default=None, help="cuda or cpu (default: auto)")
    parser.add_argument("--no-bf16", action="store_true", help="train in fp32")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)

    from tqdm import tqdm
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()

    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    preset = PRESETS[args.preset]
    seq_len = args.seq_len or preset.seq_len
    tok = Tokenizer.from_file(str(args.tokenizer))
    tok.encode_special_tokens = True  # "<mask>" in source text is text, not a mask
    vocab = Vocab.of(tok)
    noise = NoiseConfig()

    config = modernbert_config(preset, vocab.size, vocab.pad, vocab.mask, vocab.eos)
    config.max_position_embeddings = seq_len
    model = ModernBertForMaskedLM(config).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "norm" not in n]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2 or "norm" in n]
    optim = torch.optim.AdamW(
        [{"params": decay, "weight_decay": args.weight_decay},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr, betas=(0.9, 0.98), eps=1e-8,
    )

    args.out.mkdir(parents=True, exist_ok=True)
    ckpt_path = args.out / "ckpt.pt"
    step, tokens, elapsed, history = 0, 0, 0.0, []
    if ckpt_path.exists():
        state = torch.load(ckpt_path, map_location=device, weights_only=False)
        model.load_state_dict(state["model"])
        optim.load_state_dict(state["optim"])
        step, tokens, elapsed = state["step"], state["tokens"], state["elapsed"]
        history = state["history"]
        rng.setstate(state["rng"])
        print(f"resumed at step {step}, {tokens / 1e6:.1f}M tokens, {elapsed / 60:.1f} min",
              file=sys.stderr)

    use_bf16 = not args.no_bf16

    def autocast():
        return torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_bf16)

    train_texts = load_texts(args.corpus, "train")
    sampler = TextSampler(train_texts, window_chars=seq_len * 6, seed=args.seed + step)
    valid_sampler = TextSampler(load_texts(args.corpus, "valid"), seq_len * 6, seed=1234)
    valid_rng = random.Random(1234)
    valid_batches = [
        make_batch(valid_sampler, tok, vocab, args.batch_size, seq_len, noise, valid_rng)
        for _ in range(8)
    ]
    valid_batches = [b.to(device) for b in valid_batches]

    def progress() -> float:
        if args.minutes:
            return min(1.0, elapsed / (args.minutes * 60))
        return min(1.0, step / args.max_steps)

    def save() -> None:
        state = {"model": model.state_dict(), "optim": optim.state_dict(), "step": step,
                 "tokens": tokens, "elapsed": elapsed, "history": history,
                 "rng": rng.getstate(), "preset": args.preset, "seq_len": seq_len}
        tmp = ckpt_path.with_suffix(".tmp")
        torch.save(state, tmp)
        os.replace(tmp, ckpt_path)

    meta = {"preset": args.preset, "parameters": n_params, "seq_len": seq_len,
            "batch_size": args.batch_size, "lr": args.lr, "device": str(device),
            "bf16": use_bf16, "noise": noise.__dict__, "threads": torch.get_num_threads()}
    print(f"{args.preset}: {n_params / 1e6:.2f}M parameters on {device}", file=sys.stderr)
    bar = tqdm(total=100, desc="train", unit="%", disable=args.quiet, file=sys.stderr,
               bar_format="{l_bar}{bar}| {n:.1f}/{total}% [{elapsed}<{remaining}] {postfix}")
    bar.update(100 * progress())
    model.train()
    window_tokens, window_start = 0, time.perf_counter()
    while progress() < 1.0:
        t0 = time.perf_counter()
        lr = lr_at(progress(), args.lr, args.warmup)
        for group in optim.param_groups:
            group["lr"] = lr
        batch = make_batch(sampler, tok, vocab, args.batch_size, seq_len, noise, rng).to(device)
        with autocast():
            loss, stats = weighted_loss(model, batch)
        optim.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optim.step()

        n_tok = int((batch.input_ids != vocab.pad).sum())
        step += 1
        tokens += n_tok
        window_tokens += n_tok
        before = progress()
        elapsed += time.perf_counter() - t0
        bar.update(100 * (progress() - before))
        if step % 10 == 0:
            rate = window_tokens / (time.perf_counter() - window_start)
            window_tokens, window_start = 0, time.perf_counter()
            history.append({"step": step, "tokens": tokens, "train_loss": loss.item(),
                            "masked_acc": stats["masked_acc"], "lr": lr})
            line = (f"loss {loss.item():.3f} acc {stats['masked_acc']:.3f} "
                    f"{rate:,.0f} tok/s lr {lr:.1e}")
            bar.set_postfix_str(line)
            if args.quiet and step % 50 == 0:
                print(f"step {step} {tokens / 1e6:.1f}M tokens {elapsed / 60:.1f} min {line}",
                      file=sys.stderr, flush=True)
        last = progress() >= 1.0
        if step % args.eval_every == 0 or last:
            v = estimate_loss(model, valid_batches, autocast)
            history.append({"step": step, "tokens": tokens, "valid_loss": v["loss"],
                            "valid_masked_ce": v["masked_ce"],
                            "valid_masked_acc": v["masked_acc"]})
            tqdm.write(f"step {step} tokens {tokens / 1e6:.1f}M valid loss {v['loss']:.3f} "
                       f"masked CE {v['masked_ce']:.3f} acc {v['masked_acc']:.3f}",
                       file=sys.stderr)
            export(model, tok, args.out / "export",
                   {**meta, "step": step, "tokens": tokens, "minutes": elapsed / 60,
                    "valid": v})
            plot(history, args.out / "loss.png")
        if step % args.save_every == 0 or last:
            save()
    bar.close()
    print(f"done: {step} steps, {tokens / 1e6:.1f}M tokens, {elapsed / 60:.1f} min",
          file=sys.stderr)


if __name__ == "__main__":
    main()
