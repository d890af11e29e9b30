"""Train a masked-diffusion code model (ModernBERT, MDLM objective), from scratch or warm.

    python -m diffusion_infill.model.training.train --preset small --minutes 90 --out runs/small
    python -m diffusion_infill.model.training.train --init-from model/weights --minutes 120 \
        --out runs/long

Reads the corpus and tokenizer, trains with the noise of model.training.noising (batches:
model.training.batches; arguments: model.training.arguments), shows a progress bar,
evaluates on the validation split now and then, writes a resumable checkpoint (`ckpt.pt`)
and a Hugging Face export (`export/`, with `training.json`, the cumulative history) that
`AutoModelForMaskedLM.from_pretrained` loads, and saves the loss curve as `loss.png`.
Running the same command again resumes from `ckpt.pt`. `--workers N` trains data-parallel
in N processes (model.training.parallel); `--init-from DIR` is a warm restart from an
export (fresh optimiser, short warm-up; tokens seen and history carry on). With --minutes
or --tokens the learning-rate schedule follows the budget's elapsed share, so a run cut
short and resumed ends its decay on time. The dtype is chosen per machine
(model.precision); --dtype overrides.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import torch
from tokenizers import Tokenizer
from transformers import ModernBertForMaskedLM

from diffusion_infill.model import weight_files
from diffusion_infill.model.precision import pick_precision
from diffusion_infill.model.training.arguments import parse_args
from diffusion_infill.model.training.batches import batches, load_texts, padded
from diffusion_infill.model.training.checkpoint import (
    RunState,
    export,
    load_checkpoint,
    plot,
    save_checkpoint,
)
from diffusion_infill.model.training.config import PRESETS, modernbert_config
from diffusion_infill.model.training.noising import (
    Batch,
    NoiseConfig,
    TextSampler,
    Vocab,
    make_batch,
)
from diffusion_infill.model.training.objective import estimate_loss, lr_at, weighted_loss
from diffusion_infill.model.training.parallel import (
    Group,
    launch,
    rank_seed,
    return_big_buffers_to_the_os,
)

Autocast = Callable[[], AbstractContextManager]
VALID_NOISE = NoiseConfig(p_engine_alloc=0.0, p_reveal=0.0)  # the validation batches' noise


def stream_seed(seed: int, state: RunState) -> int:
    """The seed of a run's windows and masks. A warm restart counts its steps from 0 again,
    so a seed of `seed + step` gave every warm restart the windows and masks of the one
    before (three runs in a row trained on the same ~10M tokens); the tokens seen before
    this run make each run's stream its own, and a resumed run's step its own again."""
    return seed + state.step + state.tokens_before


def build_model(args: argparse.Namespace, vocab: Vocab, seq_len: int,
                state: RunState, record: dict) -> ModernBertForMaskedLM:
    """A fresh model for the preset, or --init-from's weights (history carried over from
    its `record`, `init_record`)."""
    if args.init_from is None:
        config = modernbert_config(PRESETS[args.preset], vocab.size, vocab.pad, vocab.mask,
                                   vocab.eos)
        config.max_position_embeddings = seq_len
        return ModernBertForMaskedLM(config)
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(args.init_from, local_files_only=True)
    if config.model_type != "modernbert":
        raise SystemExit(f"--init-from {args.init_from}: a {config.model_type} model; this "
                         "script trains ModernBERT")
    if config.vocab_size != vocab.size:
        raise SystemExit(f"--init-from {args.init_from} has a {config.vocab_size}-token "
                         f"vocabulary; the tokenizer has {vocab.size}")
    if (args.init_from / weight_files.WEIGHTS).is_file():
        model = ModernBertForMaskedLM.from_pretrained(args.init_from, dtype=torch.float32)
    else:  # packed int8 weights (a shipped model too large for bf16): dequantized
        model = ModernBertForMaskedLM(config)
        tensors = {k: v.float() for k, v in weight_files.read_weights(args.init_from).items()}
        missing, unexpected = model.load_state_dict(tensors, strict=False)
        if unexpected or set(missing) - {"decoder.weight"}:
            raise SystemExit(f"--init-from {args.init_from}: the weights do not fit its "
                             f"config.json (missing {sorted(missing)[:3]}, "
                             f"unexpected {sorted(unexpected)[:3]})")
        model.tie_weights()
    state.tokens_before = int(record.get("tokens_total", record.get("tokens", 0)))
    state.history = list(record.get("history", []))
    if not state.history and "valid" in record:
        v = record["valid"]
        state.history = [{"tokens": state.tokens_before, "valid_loss": v["loss"],
                          "valid_masked_ce": v["masked_ce"],
                          "valid_masked_acc": v["masked_acc"]}]
    return model


def init_record(init_from: Path | None) -> dict:
    """The training.json of --init-from's model ({} without one)."""
    path = init_from / "training.json" if init_from is not None else None
    return json.loads(path.read_text()) if path is not None and path.exists() else {}


def make_optimizer(model: torch.nn.Module, args: argparse.Namespace) -> torch.optim.AdamW:
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "norm" not in n]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2 or "norm" in n]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": args.weight_decay},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr, betas=(0.9, 0.98), eps=1e-8,
    )


def train_step(model: ModernBertForMaskedLM, optim: torch.optim.Optimizer, batch: Batch,
               autocast: Autocast, encoder: Callable | None = None,
               group: Group | None = None) -> tuple[float, dict]:
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


class Trainer:
    """The loop's pieces: data, schedule, evaluation and export for one run."""

    def __init__(self, args: argparse.Namespace, group: Group | None = None) -> None:
        group = group or Group()
        self.args, self.group = args, group
        self.device = torch.device(args.device or ("cuda" if torch.cuda.is_available()
                                                   else "cpu"))
        threads = args.threads or (max(1, (os.cpu_count() or 1) // group.world)
                                   if group.world > 1 else None)
        if threads:
            torch.set_num_threads(threads)
        if self.device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        torch.manual_seed(args.seed)
        self.seq_len = args.seq_len or PRESETS[args.preset].seq_len
        tok_path = args.tokenizer or (args.init_from / "tokenizer.json" if args.init_from
                                      else Path("data/tokenizer/tokenizer.json"))
        self.tok = Tokenizer.from_file(str(tok_path))
        self.tok.encode_special_tokens = True  # "<mask>" in source text is text, not a mask
        self.vocab = Vocab.of(self.tok)
        self.noise = args.noise
        self.precision = pick_precision(self.device, args.dtype)
        self.state = RunState()
        record = init_record(args.init_from)
        self.model = build_model(args, self.vocab, self.seq_len, self.state,
                                 record).to(self.device)
        # the masks' generator; a resumed run's checkpoint restores its state below
        self.rng = random.Random(rank_seed(stream_seed(args.seed, self.state), group.rank))
        if args.init_from is not None:
            self.seq_len = min(self.seq_len, self.model.config.max_position_embeddings)
        self.optim = make_optimizer(self.model, args)
        # a model grown by model.training.grow says so in every export trained from it
        self.grown = record.get("grown")
        args.out.mkdir(parents=True, exist_ok=True)
        self.ckpt = args.out / "ckpt.pt"
        if self.ckpt.exists():
            self.state = load_checkpoint(self.ckpt, self.model, self.optim, self.rng,
                                         self.device)
            s = self.state
            if group.rank > 0:  # the checkpoint holds worker 0's generator
                self.rng = random.Random(rank_seed(stream_seed(args.seed, s), group.rank))
            if group.leader:
                print(f"resumed at step {s.step}, {s.tokens / 1e6:.1f}M tokens, "
                      f"{s.elapsed / 60:.1f} min", file=sys.stderr)
        seed = rank_seed(stream_seed(args.seed, self.state), group.rank)
        self.sampler = TextSampler(load_texts(args.corpus, "train"), self.seq_len * 6,
                                   seed=seed)
        self.more_texts, self.more_at = 0, -1  # files added by --more-corpus, and when
        # Validation noise is fixed whatever the run trains with (the first run's recipe),
        # so that ablation rows and runs are compared on the same kind of batch.
        valid = TextSampler(load_texts(args.corpus, "valid", skip_tests=True),
                            self.seq_len * 6, seed=1234)
        valid_rng = random.Random(1234)
        self.valid_batches = [
            make_batch(valid, self.tok, self.vocab, args.batch_size, self.seq_len,
                       VALID_NOISE, valid_rng).to(self.device) for _ in range(8)]
        # torch's generator draws make_batch's substitutions and identity targets. Until
        # here it is where `args.seed` and building the model left it, which is what
        # the validation batches have always been drawn with (so the validation losses
        # of all runs compare); from here each worker and each run draws its own.
        torch.manual_seed(seed)

    def add_texts(self, texts: list[str]) -> None:
        """Train on `texts` too, from the next batch on (--more-corpus)."""
        self.more_texts = len(texts)
        self.more_at = self.state.step
        self.sampler = TextSampler(self.sampler.texts + texts, self.seq_len * 6,
                                   seed=self.rng.randrange(2**31))
        if self.group.leader:
            print(f"step {self.state.step}: {len(texts)} more training files "
                  f"({sum(map(len, texts)) / 1e6:.1f}M characters) from "
                  f"{self.args.more_corpus}", file=sys.stderr, flush=True)

    def autocast(self) -> AbstractContextManager:
        return torch.autocast(self.device.type, dtype=torch.bfloat16,
                              enabled=self.precision.dtype == torch.bfloat16)

    def progress(self) -> float:
        if self.args.minutes:
            return min(1.0, self.state.elapsed / (self.args.minutes * 60))
        if self.args.tokens:
            return min(1.0, self.state.tokens / self.args.tokens)
        return min(1.0, self.state.step / self.args.max_steps)

    def meta(self) -> dict:
        a, s = self.args, self.state
        return {"preset": a.preset, "parameters": sum(p.numel() for p in
                                                      self.model.parameters()),
                "seq_len": self.seq_len, "batch_size": a.batch_size, "lr": a.lr,
                "device": str(self.device), "dtype": self.precision.name,
                "dtype_reason": self.precision.reason, "noise": self.noise.__dict__,
                "threads": torch.get_num_threads(), "workers": self.group.world,
                "loader_workers": a.loader_workers, "compile": a.compile,
                "more_corpus": {"path": str(a.more_corpus), "files": self.more_texts,
                                "at_step": self.more_at} if a.more_corpus else None,
                "init_from": str(a.init_from or ""),
                "step": s.step, "tokens": s.tokens, "tokens_total": s.total_tokens,
                "minutes": s.elapsed / 60, "history": [h for h in s.history
                                                       if "valid_loss" in h],
                **({"grown": self.grown} if self.grown else {})}

    def evaluate_and_export(self) -> None:
        v = estimate_loss(self.model, self.valid_batches, self.autocast)
        s = self.state
        s.history.append({"step": s.step, "tokens": s.total_tokens, "valid_loss": v["loss"],
                          "valid_masked_ce": v["masked_ce"],
                          "valid_masked_acc": v["masked_acc"]})
        print(f"step {s.step} tokens {s.total_tokens / 1e6:.1f}M valid loss {v['loss']:.3f} "
              f"masked CE {v['masked_ce']:.3f} acc {v['masked_acc']:.3f}", file=sys.stderr,
              flush=True)
        export(self.model, self.tok, self.args.out / "export", {**self.meta(), "valid": v})
        plot(s.history, self.args.out / "loss.png")

    def save(self) -> None:
        save_checkpoint(self.ckpt, self.model, self.optim, self.state, self.rng,
                        {"preset": self.args.preset, "seq_len": self.seq_len})


def run(trainer: Trainer) -> None:
    """The training loop: schedule, step, log, evaluate, checkpoint."""
    from tqdm import tqdm

    a, s, model, group = trainer.args, trainer.state, trainer.model, trainer.group
    n_params = sum(p.numel() for p in model.parameters())
    if group.leader:
        workers = f", {group.world} workers x {torch.get_num_threads()} threads" \
            if group.world > 1 else ""
        print(f"{a.preset}: {n_params / 1e6:.2f}M parameters on {trainer.device}, "
              f"{trainer.precision.name} ({trainer.precision.reason}){workers}",
              file=sys.stderr)
    bar = tqdm(total=100, desc="train", unit="%", disable=a.quiet or not group.leader,
               file=sys.stderr,
               bar_format="{l_bar}{bar}| {n:.1f}/{total}% [{elapsed}<{remaining}] {postfix}")
    bar.update(100 * trainer.progress())
    model.train()
    encoder = torch.compile(model.model) if a.compile else None
    stream = batches(trainer)
    # data: the share of the window's wall time spent waiting for the next batch (the
    # loader's processes falling behind the device; ~0 when they keep up)
    window_tokens, window_start, window_wait = 0, time.perf_counter(), 0.0
    while trainer.progress() < 1.0:
        t0 = time.perf_counter()
        lr = lr_at(trainer.progress(), a.lr, a.warmup)
        for param_group in trainer.optim.param_groups:
            param_group["lr"] = lr
        t_wait = time.perf_counter()
        batch = next(stream)
        window_wait += time.perf_counter() - t_wait
        if a.compile:
            batch = padded(batch, trainer.seq_len, trainer.vocab.pad)
        real_tokens = float((batch.input_ids != trainer.vocab.pad).sum())
        batch = batch.to(trainer.device)
        loss, stats = train_step(model, trainer.optim, batch, trainer.autocast, encoder,
                                 group=group)
        # every worker counts all workers' tokens and worker 0's step time (the others'
        # include waiting for its evaluations), so that all of them agree on the
        # schedule, the evaluations and the end
        n_tok, seconds = group.sum([real_tokens,
                                    time.perf_counter() - t0 if group.leader else 0.0])
        n_tok = int(n_tok)
        before = trainer.progress()  # before the step counts: steps, tokens and time
        s.step, s.tokens, window_tokens = s.step + 1, s.tokens + n_tok, window_tokens + n_tok
        s.elapsed += seconds
        bar.update(100 * (trainer.progress() - before))
        if s.step % 10 == 0:
            window = time.perf_counter() - window_start
            rate, waited = window_tokens / window, window_wait / window
            window_tokens, window_start, window_wait = 0, time.perf_counter(), 0.0
            s.history.append({"step": s.step, "tokens": s.total_tokens, "train_loss": loss,
                              "masked_acc": stats["masked_acc"], "lr": lr})
            line = (f"loss {loss:.3f} acc {stats['masked_acc']:.3f} {rate:,.0f} tok/s "
                    f"data {waited:.0%} lr {lr:.1e}")
            bar.set_postfix_str(line)
            if a.quiet and group.leader and s.step % 50 == 0:
                print(f"step {s.step} {s.total_tokens / 1e6:.1f}M tokens "
                      f"{s.elapsed / 60:.1f} min {line}", file=sys.stderr, flush=True)
        last = trainer.progress() >= 1.0
        if (s.step % a.eval_every == 0 or last) and group.leader:
            trainer.evaluate_and_export()
        if s.step % a.save_every == 0 or last:
            group.check_in_sync(model)
            if group.leader:
                trainer.save()
    bar.close()
    if group.leader:
        print(f"done: {s.step} steps, {s.tokens / 1e6:.1f}M tokens this run "
              f"({s.total_tokens / 1e6:.1f}M in all), {s.elapsed / 60:.1f} min",
              file=sys.stderr)


def train_worker(args: argparse.Namespace, group: Group) -> None:
    """One worker's whole run (the only one without --workers)."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    return_big_buffers_to_the_os()
    run(Trainer(args, group))


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.workers < 1:
        raise SystemExit(f"--workers {args.workers}: expected 1 or more")
    # `model.training.train.train_worker` by name, so that spawned workers can unpickle it even
    # when this module runs as __main__
    from diffusion_infill.model.training import train as this_module

    launch(functools.partial(this_module.train_worker, args), args.workers)


if __name__ == "__main__":
    main()
