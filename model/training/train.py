"""Train a masked-diffusion code model (ModernBERT, MDLM objective), from scratch or warm.

    python -m diffusion_infill.model.training.train --preset small --minutes 90 --out runs/small
    python -m diffusion_infill.model.training.train --init-from model/weights --minutes 120 \\
        --out runs/long

Reads the corpus (model.training.corpus) and tokenizer (model.training.tokenizer), trains with
the noise of model.training.noising, shows a progress bar (loss, tokens/s, ETA), evaluates on
the validation split now and then, writes a resumable checkpoint (`ckpt.pt`: weights, optimiser,
step, elapsed time) and a Hugging Face export (`export/`: safetensors, config, tokenizer,
`training.json` with the cumulative history) that `AutoModelForMaskedLM.from_pretrained` loads,
and saves the loss curve as `loss.png`. Running the same command again resumes from `ckpt.pt`.

`--workers N` trains data-parallel in N processes, one per core (model.training.parallel): each
draws its own windows and masks, and the gradients are averaged before every step, so a
step sees N batches of --batch-size.

`--init-from DIR` starts from an exported model's weights (the shipped `model/weights`, or
the tracked resume folder): a warm restart with a fresh optimiser and a short warm-up,
which is how training continues across sessions without optimiser state in git. Tokens
seen and the validation history carry on from DIR's `training.json`.

With --minutes the learning-rate schedule follows the elapsed share of the time budget, so
a run that is cut short and resumed still ends its cosine decay on time. The compute dtype
is chosen per machine (model.precision: bf16 autocast only where it is faster; on a CPU
without bf16 instructions it is ~40x slower in training); --dtype overrides.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import random
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer
from transformers import ModernBertForMaskedLM

from diffusion_infill.model import weight_files
from diffusion_infill.model.precision import pick_precision
from diffusion_infill.model.training.checkpoint import (
    RunState,
    export,
    load_checkpoint,
    plot,
    save_checkpoint,
)
from diffusion_infill.model.training.config import PRESETS, modernbert_config
from diffusion_infill.model.training.corpus.records import is_test_path
from diffusion_infill.model.training.noising import (
    Batch,
    NoiseConfig,
    TextSampler,
    Vocab,
    make_batch,
)
from diffusion_infill.model.training.parallel import Group, launch, rank_seed

Autocast = Callable[[], AbstractContextManager]
VALID_NOISE = NoiseConfig(p_engine_alloc=0.0, p_reveal=0.0)  # the validation batches' noise


def load_texts(corpus: Path, split: str, skip_tests: bool = False) -> list[str]:
    """The texts of a split; `skip_tests` leaves out the corpus's test files.

    Validation reads the validation units' library code only (their tests joined the
    corpus later), so that the validation loss compares across corpus versions."""
    with (corpus / f"{split}.jsonl").open() as fh:
        rows = [json.loads(line) for line in fh]
    return [r["text"] for r in rows
            if not (skip_tests and is_test_path(r.get("path", "")))]


def weighted_loss(model: ModernBertForMaskedLM, batch: Batch,
                  encoder: Callable | None = None) -> tuple[torch.Tensor, dict]:
    """Weighted cross-entropy, with the output head run only where there is a loss.

    `encoder` stands in for `model.model` (a torch.compile'd copy, say)."""
    attention = batch.input_ids != model.config.pad_token_id
    hidden = (model.model if encoder is None else encoder)(input_ids=batch.input_ids,
                                      attention_mask=attention.long()).last_hidden_state
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


def stream_seed(seed: int, state: RunState) -> int:
    """The seed of a run's windows and masks. A warm restart counts its steps from 0 again,
    so a seed of `seed + step` gave every session the windows and masks of the one before
    (three runs in a row trained on the same ~10M tokens); the tokens seen before
    this run make each session's stream its own, and a resumed run's step its own again."""
    return seed + state.step + state.tokens_before


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


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--preset", choices=sorted(PRESETS), default="small", help="network size")
    add("--corpus", type=Path, default=Path("data/corpus_v2"), help="folder with *.jsonl")
    add("--tokenizer", type=Path, default=None,
        help="tokenizer.json (default: --init-from's, else data/tokenizer/tokenizer.json)")
    add("--init-from", type=Path, default=None,
        help="warm restart from an exported model directory (weights and history)")
    add("--out", type=Path, default=Path("runs/small"), help="run folder")
    add("--batch-size", type=int, default=32, help="sequences per step")
    add("--seq-len", type=int, default=None, help="canvas length (default: the preset's)")
    add("--lr", type=float, default=2e-3, help="peak learning rate")
    add("--warmup", type=float, default=0.03, help="warm-up share of the run")
    add("--weight-decay", type=float, default=0.01, help="AdamW decay")
    add("--minutes", type=float, default=None,
        help="wall-clock budget (sets the schedule); resumes count it")
    add("--max-steps", type=int, default=1000,
        help="step budget without --minutes or --tokens")
    add("--tokens", type=float, default=None,
        help="token budget of this run (sets the schedule), e.g. 5e6 for an ablation row")
    add("--eval-every", type=int, default=200, help="steps between evals")
    add("--save-every", type=int, default=100, help="steps between checkpoints")
    add("--device", default=None, help="cuda or cpu (default: auto)")
    add("--dtype", default="auto", choices=["auto", "fp32", "bf16"],
        help="auto (the faster here), fp32 or bf16")
    add("--no-bf16", dest="dtype", action="store_const", const="fp32", help="= --dtype fp32")
    add("--threads", type=int, default=None,
        help="CPU threads per worker (default: torch's; cores / workers with --workers)")
    add("--workers", type=int, default=1,
        help="data-parallel worker processes, one per core (gradients averaged each step)")
    add("--loader-workers", type=int, default=0,
        help="processes that build batches beside the training loop (for a GPU: batches "
             "are made on the CPU, ~0.2M tokens/s per process: benchmarks/bench_loader)")
    add("--more-corpus", type=Path, default=None,
        help="a folder whose train.jsonl may appear during the run (a later device call "
             "brings it: write it elsewhere, then rename it there); its texts join the "
             "training split's within MORE_CHECK_SECONDS")
    add("--compile", action="store_true", help="run the encoder under torch.compile")
    add("--noise", type=noise_config, default=NoiseConfig(),
        help="noise overrides, e.g. t_dist=bell,p_tokens=0.1 (fields of NoiseConfig)")
    add("--seed", type=int, default=0, help="random seed")
    add("--quiet", action="store_true", help="no progress bar")
    return parser.parse_args(argv)


def noise_config(spec: str, base: NoiseConfig | None = None) -> NoiseConfig:
    """`base` (the defaults: NoiseConfig()) with "field=value,field=value" overrides, values
    typed by the field's default."""
    base = NoiseConfig() if base is None else base
    changes: dict[str, object] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not hasattr(base, key):
            raise argparse.ArgumentTypeError(f"{item!r}: expected FIELD=VALUE with a field "
                                             f"of {sorted(base.__dict__)}")
        kind = type(getattr(base, key))
        changes[key] = kind(value)
    return replace(base, **changes)


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
        # Validation noise is fixed whatever the run trains with (the first session's
        # recipe), so that ablation rows and sessions are compared on the same kind of batch.
        valid = TextSampler(load_texts(args.corpus, "valid", skip_tests=True),
                            self.seq_len * 6, seed=1234)
        valid_rng = random.Random(1234)
        self.valid_batches = [
            make_batch(valid, self.tok, self.vocab, args.batch_size, self.seq_len,
                       VALID_NOISE, valid_rng).to(self.device) for _ in range(8)]
        # torch's generator draws make_batch's substitutions and identity targets. Until
        # here it is where `args.seed` and building the model left it, which is what
        # the validation batches have always been drawn with (so the validation losses
        # of all sessions compare); from here each worker and each session draws its own.
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


class BatchStream(torch.utils.data.IterableDataset):
    """Endless training batches, made in --loader-workers processes beside the loop.

    Each process draws its own windows and masks (its seed is the run's stream seed and its
    number); torch's generator in each is seeded by the DataLoader from the run's. A resumed
    run draws a new stream (the stream seed counts steps), not the one it would have drawn."""

    def __init__(self, trainer: Trainer) -> None:
        self.sampler, self.tok, self.vocab = trainer.sampler, trainer.tok, trainer.vocab
        self.batch_size, self.seq_len = trainer.args.batch_size, trainer.seq_len
        self.noise, self.seed = trainer.noise, trainer.rng.randrange(2**31)

    def __iter__(self) -> Iterator[Batch]:
        info = torch.utils.data.get_worker_info()
        worker = info.id if info is not None else 0
        rng = random.Random(rank_seed(self.seed, worker))
        self.sampler.rng = random.Random(rng.randrange(2**31))
        while True:
            yield make_batch(self.sampler, self.tok, self.vocab, self.batch_size,
                             self.seq_len, self.noise, rng)


MORE_CHECK_SECONDS = 10.0  # how often a run with --more-corpus looks for its train.jsonl


def _stream(trainer: Trainer) -> Iterator[Batch]:
    """Batches from the trainer's sampler as it is now: made in this process, or by
    --loader-workers processes."""
    a = trainer.args
    if a.loader_workers <= 0:
        while True:
            yield make_batch(trainer.sampler, trainer.tok, trainer.vocab, a.batch_size,
                             trainer.seq_len, trainer.noise, trainer.rng)
    loader = torch.utils.data.DataLoader(
        BatchStream(trainer), batch_size=None, num_workers=a.loader_workers,
        prefetch_factor=4, pin_memory=trainer.device.type == "cuda")
    yield from loader


def batches(trainer: Trainer) -> Iterator[Batch]:
    """The training batches. With --more-corpus, once its train.jsonl is there, its texts
    join the sampler's and the batches come from both (the loader processes, which hold
    copies of the old sampler, are replaced)."""
    more = trainer.args.more_corpus
    while True:
        stream = _stream(trainer)
        checked = time.monotonic()
        for batch in stream:
            yield batch
            if more is None or trainer.more_texts or \
                    time.monotonic() - checked < MORE_CHECK_SECONDS:
                continue
            checked = time.monotonic()
            if (more / "train.jsonl").exists():
                trainer.add_texts(load_texts(more, "train"))
                break
        stream.close()  # the old loader's processes end here


def padded(batch: Batch, length: int, pad: int) -> Batch:
    """`batch` widened to `length` positions (padding, no loss): one shape for compile."""
    extra = length - batch.input_ids.shape[1]
    if extra <= 0:
        return batch
    return Batch(F.pad(batch.input_ids, (0, extra), value=pad),
                 F.pad(batch.targets, (0, extra), value=pad),
                 F.pad(batch.weights, (0, extra)), F.pad(batch.masked, (0, extra)))


def return_big_buffers_to_the_os() -> None:
    """Serve allocations of 1 MiB and more by mmap, so that freeing them returns memory.

    Each step allocates logits of a different size (one row per loss position); glibc's
    heap then fragments and a CPU run grew to 5.8 GB resident on a 0.5 GB corpus. With
    this (what MALLOC_MMAP_THRESHOLD_=1048576 does) the same run stayed at 1.4 GB."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if sys.platform.startswith("linux") and name:
        m_mmap_threshold = -3
        ctypes.CDLL(name).mallopt(m_mmap_threshold, 1 << 20)


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
