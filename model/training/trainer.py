"""One training run's pieces (model/training/train.py runs the loop over them): torch set
up for the device, the tokenizer, the model and its optimiser, the run's state (resumed
from its checkpoint when there is one), the training and validation data, the schedule's
progress, evaluation and export, checkpoints."""

from __future__ import annotations

import argparse
import os
import random
import sys
from contextlib import AbstractContextManager
from pathlib import Path

import torch
from tokenizers import Tokenizer

from diffusion_infill.model.precision import pick_training_precision
from diffusion_infill.model.training.batches import load_texts
from diffusion_infill.model.training.checkpoint import (
    RunState,
    export,
    load_checkpoint,
    plot,
    save_checkpoint,
)
from diffusion_infill.model.training.config import PRESETS
from diffusion_infill.model.training.fix_rows import load_fix_pairs
from diffusion_infill.model.training.init_model import build_model, init_record
from diffusion_infill.model.training.noising import (
    Batch,
    NoiseConfig,
    TextSampler,
    Vocab,
    make_batch,
)
from diffusion_infill.model.training.objective import estimate_loss, make_optimizer
from diffusion_infill.model.training.parallel import Group, rank_seed

VALID_NOISE = NoiseConfig(p_engine_alloc=0.0, p_reveal=0.0)  # the validation batches' noise


def stream_seed(seed: int, state: RunState) -> int:
    """The seed of a run's windows and masks. A warm restart counts its steps from 0 again,
    so a seed of `seed + step` gave every warm restart the windows and masks of the one
    before (three runs in a row trained on the same ~10M tokens); the tokens seen before
    this run make each run's stream its own, and a resumed run's step its own again."""
    return seed + state.step + state.tokens_before


def _set_up_torch(args: argparse.Namespace, group: Group) -> torch.device:
    """The run's device, and torch set up for it: its CPU threads (--threads, else cores /
    workers with --workers), TF32 matmuls on CUDA, its generator seeded with `args.seed`
    (what building the model and the validation batches draw from)."""
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    threads = args.threads or (
        max(1, (os.cpu_count() or 1) // group.world) if group.world > 1 else None
    )
    if threads:
        torch.set_num_threads(threads)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    torch.manual_seed(args.seed)
    return device


def _tokenizer(args: argparse.Namespace) -> Tokenizer:
    """--tokenizer, else --init-from's, else data/tokenizer's."""
    path = args.tokenizer or (
        args.init_from / "tokenizer.json"
        if args.init_from
        else Path("data/tokenizer/tokenizer.json")
    )
    tok = Tokenizer.from_file(str(path))
    tok.encode_special_tokens = True  # "<mask>" in source text is text, not a mask
    return tok


class Trainer:
    """The loop's pieces: data, schedule, evaluation and export for one run."""

    def __init__(self, args: argparse.Namespace, group: Group | None = None) -> None:
        group = group or Group()
        self.args, self.group = args, group
        self.device = _set_up_torch(args, group)
        self.seq_len = args.seq_len or PRESETS[args.preset].seq_len
        self.tok = _tokenizer(args)
        self.vocab = Vocab.of(self.tok)
        self.noise = args.noise
        self.precision = pick_training_precision(self.device, args.dtype)
        self.state = RunState()
        record = init_record(args.init_from)
        self.model = build_model(args, self.vocab, self.seq_len, self.state, record).to(self.device)
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
            self._resume()
        seed = rank_seed(stream_seed(args.seed, self.state), group.rank)
        self.sampler = TextSampler(load_texts(args.corpus, "train"), self.seq_len * 6, seed=seed)
        self.fixes = load_fix_pairs(args.fix_pairs) if args.fix_pairs else []
        # the parts --more-corpus added: name -> (files, the step they joined at)
        self.more_parts: dict[str, tuple[int, int]] = {}
        self.valid_batches = self._valid_batches()
        # torch's generator draws make_batch's substitutions and identity targets. Until
        # here it is where `args.seed` and building the model left it, which is what
        # the validation batches have always been drawn with (so the validation losses
        # of all runs compare); from here each worker and each run draws its own.
        torch.manual_seed(seed)

    def _resume(self) -> None:
        """Carry on from the run's checkpoint: weights, optimiser, counters, history and
        the masks' generator."""
        self.state = load_checkpoint(self.ckpt, self.model, self.optim, self.rng, self.device)
        s, group = self.state, self.group
        if group.rank > 0:  # the checkpoint holds worker 0's generator
            self.rng = random.Random(rank_seed(stream_seed(self.args.seed, s), group.rank))
        if group.leader:
            print(
                f"resumed at step {s.step}, {s.tokens / 1e6:.1f}M tokens, {s.elapsed / 60:.1f} min",
                file=sys.stderr,
            )

    def _valid_batches(self) -> list[Batch]:
        """Eight validation batches. Their noise is fixed whatever the run trains with (the
        first run's recipe), so that ablation rows and runs are compared on the same kind
        of batch."""
        valid = TextSampler(
            load_texts(self.args.corpus, "valid", skip_tests=True), self.seq_len * 6, seed=1234
        )
        valid_rng = random.Random(1234)
        return [
            make_batch(
                valid,
                self.tok,
                self.vocab,
                self.args.batch_size,
                self.seq_len,
                VALID_NOISE,
                valid_rng,
            ).to(self.device)
            for _ in range(8)
        ]

    @property
    def more_texts(self) -> int:
        """Files added by --more-corpus so far."""
        return sum(files for files, _ in self.more_parts.values())

    def add_texts(self, texts: list[str], part: str = "train") -> None:
        """Train on `texts` (--more-corpus's file `part`.jsonl) too, from the next batch on."""
        self.more_parts[part] = (len(texts), self.state.step)
        self.sampler = TextSampler(
            self.sampler.texts + texts, self.seq_len * 6, seed=self.rng.randrange(2**31)
        )
        if self.group.leader:
            print(
                f"step {self.state.step}: {len(texts)} more training files "
                f"({sum(map(len, texts)) / 1e6:.1f}M characters) from "
                f"{self.args.more_corpus / part}.jsonl",
                file=sys.stderr,
                flush=True,
            )

    def autocast(self) -> AbstractContextManager:
        return torch.autocast(
            self.device.type, dtype=torch.bfloat16, enabled=self.precision.dtype == torch.bfloat16
        )

    def progress(self) -> float:
        if self.args.minutes:
            return min(1.0, self.state.elapsed / (self.args.minutes * 60))
        if self.args.tokens:
            return min(1.0, self.state.tokens / self.args.tokens)
        return min(1.0, self.state.step / self.args.max_steps)

    def meta(self) -> dict:
        a, s = self.args, self.state
        return {
            "preset": a.preset,
            "parameters": sum(p.numel() for p in self.model.parameters()),
            "seq_len": self.seq_len,
            "batch_size": a.batch_size,
            "lr": a.lr,
            "device": str(self.device),
            "dtype": self.precision.name,
            "dtype_reason": self.precision.reason,
            "noise": self.noise.__dict__,
            "threads": torch.get_num_threads(),
            "workers": self.group.world,
            "loader_workers": a.loader_workers,
            "compile": a.compile,
            "more_corpus": {
                "path": str(a.more_corpus),
                "files": self.more_texts,
                "parts": {n: {"files": f, "at_step": at} for n, (f, at) in self.more_parts.items()},
            }
            if a.more_corpus
            else None,
            "fix_pairs": {"path": str(a.fix_pairs), "pairs": len(self.fixes)}
            if a.fix_pairs
            else None,
            "init_from": str(a.init_from or ""),
            "step": s.step,
            "tokens": s.tokens,
            "tokens_total": s.total_tokens,
            "minutes": s.elapsed / 60,
            "history": [h for h in s.history if "valid_loss" in h],
            **({"grown": self.grown} if self.grown else {}),
        }

    def evaluate_and_export(self) -> None:
        v = estimate_loss(self.model, self.valid_batches, self.autocast)
        s = self.state
        s.history.append(
            {
                "step": s.step,
                "tokens": s.total_tokens,
                "valid_loss": v["loss"],
                "valid_masked_ce": v["masked_ce"],
                "valid_masked_acc": v["masked_acc"],
            }
        )
        print(
            f"step {s.step} tokens {s.total_tokens / 1e6:.1f}M valid loss {v['loss']:.3f} "
            f"masked CE {v['masked_ce']:.3f} acc {v['masked_acc']:.3f}",
            file=sys.stderr,
            flush=True,
        )
        export(self.model, self.tok, self.args.out / "export", {**self.meta(), "valid": v})
        plot(s.history, self.args.out / "loss.png")

    def save(self) -> None:
        save_checkpoint(
            self.ckpt,
            self.model,
            self.optim,
            self.state,
            self.rng,
            {"preset": self.args.preset, "seq_len": self.seq_len},
        )
