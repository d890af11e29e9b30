"""Train a masked-diffusion code model (ModernBERT, MDLM objective), from scratch or warm.

    python -m diffusion_infill.model.training.train --preset small --minutes 90 --out runs/small
    python -m diffusion_infill.model.training.train --init-from model/weights --minutes 120 \
        --out runs/long

Reads the corpus and tokenizer, trains with the noise of model.training.noising (batches:
model.training.batches; arguments: model.training.arguments; the run's pieces:
model.training.trainer; the model it starts from: model.training.init_model), shows a
progress bar, evaluates on the validation split now and then, writes a resumable
checkpoint (`ckpt.pt`) and a Hugging Face export (`export/`, with `training.json`, the
cumulative history) that `AutoModelForMaskedLM.from_pretrained` loads, and saves the loss
curve as `loss.png`. Running the same command again resumes from `ckpt.pt`. `--workers N`
trains data-parallel in N processes (model.training.parallel); `--init-from DIR` is a warm
restart from an export (fresh optimiser, short warm-up; tokens seen and history carry
on). With --minutes or --tokens the learning-rate schedule follows the budget's elapsed
share, so a run cut short and resumed ends its decay on time. The dtype is chosen per
machine (model.precision); --dtype overrides.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from diffusion_infill.model.training.arguments import parse_args
from diffusion_infill.model.training.batches import batches, load_texts, padded
from diffusion_infill.model.training.init_model import init_record
from diffusion_infill.model.training.noising import Batch
from diffusion_infill.model.training.objective import lr_at, make_optimizer, train_step
from diffusion_infill.model.training.parallel import (
    Group,
    launch,
    return_big_buffers_to_the_os,
)
from diffusion_infill.model.training.trainer import VALID_NOISE, Trainer, stream_seed

__all__ = [  # with the run's pieces that benchmarks, tests and the docs name from here
    "VALID_NOISE",
    "Trainer",
    "batches",
    "init_record",
    "load_texts",
    "main",
    "make_optimizer",
    "padded",
    "parse_args",
    "run",
    "stream_seed",
    "train_step",
    "train_worker",
]


@dataclass
class _Window:
    """The steps since the last logged one: tokens trained on, and seconds spent waiting
    for the next batch (the loader's processes falling behind the device)."""

    tokens: int = 0
    start: float = field(default_factory=time.perf_counter)
    wait: float = 0.0

    def close(self) -> tuple[float, float]:
        """(tokens per second, the share of the time spent waiting for data: ~0 when the
        loader keeps up); the next window starts now."""
        seconds = time.perf_counter() - self.start
        rate, waited = self.tokens / seconds, self.wait / seconds
        self.tokens, self.start, self.wait = 0, time.perf_counter(), 0.0
        return rate, waited


def run(trainer: Trainer) -> None:
    """The training loop: schedule, step, log, evaluate, checkpoint."""
    a, s, model, group = trainer.args, trainer.state, trainer.model, trainer.group
    _announce(trainer)
    bar = _progress_bar(trainer)
    model.train()
    encoder = torch.compile(model.model) if a.compile else None
    stream = batches(trainer)
    window = _Window()
    while trainer.progress() < 1.0:
        lr, loss, stats = _step(trainer, stream, encoder, window, bar)
        if s.step % 10 == 0:
            _log(trainer, bar, window, lr, loss, stats)
        last = trainer.progress() >= 1.0
        if (s.step % a.eval_every == 0 or last) and group.leader:
            trainer.evaluate_and_export()
        if s.step % a.save_every == 0 or last:
            group.check_in_sync(model)
            if group.leader:
                trainer.save()
    bar.close()
    if group.leader:
        print(
            f"done: {s.step} steps, {s.tokens / 1e6:.1f}M tokens this run "
            f"({s.total_tokens / 1e6:.1f}M in all), {s.elapsed / 60:.1f} min",
            file=sys.stderr,
        )


def _announce(trainer: Trainer) -> None:
    """The run's first line (worker 0's): the model, the device, the precision, workers."""
    group = trainer.group
    if not group.leader:
        return
    n_params = sum(p.numel() for p in trainer.model.parameters())
    workers = (
        f", {group.world} workers x {torch.get_num_threads()} threads" if group.world > 1 else ""
    )
    print(
        f"{trainer.args.preset}: {n_params / 1e6:.2f}M parameters on {trainer.device}, "
        f"{trainer.precision.name} ({trainer.precision.reason}){workers}",
        file=sys.stderr,
    )


def _progress_bar(trainer: Trainer) -> Any:
    """A progress bar in percent of the run's budget (worker 0's, unless --quiet), at the
    share already done."""
    from tqdm import tqdm

    bar = tqdm(
        total=100,
        desc="train",
        unit="%",
        disable=trainer.args.quiet or not trainer.group.leader,
        file=sys.stderr,
        bar_format="{l_bar}{bar}| {n:.1f}/{total}% [{elapsed}<{remaining}] {postfix}",
    )
    bar.update(100 * trainer.progress())
    return bar


def _step(
    trainer: Trainer, stream: Iterator[Batch], encoder: Callable | None, window: _Window, bar: Any
) -> tuple[float, float, dict]:
    """One optimiser step at the schedule's learning rate, counted in the run's state and
    the progress bar: (learning rate, loss, stats)."""
    a, s, group = trainer.args, trainer.state, trainer.group
    t0 = time.perf_counter()
    lr = lr_at(trainer.progress(), a.lr, a.warmup)
    for param_group in trainer.optim.param_groups:
        param_group["lr"] = lr
    t_wait = time.perf_counter()
    batch = next(stream)
    window.wait += time.perf_counter() - t_wait
    if a.compile:
        batch = padded(batch, trainer.seq_len, trainer.vocab.pad)
    real_tokens = float((batch.input_ids != trainer.vocab.pad).sum())
    batch = batch.to(trainer.device)
    loss, stats = train_step(
        trainer.model, trainer.optim, batch, trainer.autocast, encoder, group=group
    )
    # every worker counts all workers' tokens and worker 0's step time (the others'
    # include waiting for its evaluations), so that all of them agree on the
    # schedule, the evaluations and the end
    n_tok, seconds = group.sum([real_tokens, time.perf_counter() - t0 if group.leader else 0.0])
    n_tok = int(n_tok)
    before = trainer.progress()  # before the step counts: steps, tokens and time
    s.step, s.tokens, window.tokens = s.step + 1, s.tokens + n_tok, window.tokens + n_tok
    s.elapsed += seconds
    bar.update(100 * (trainer.progress() - before))
    return lr, loss, stats


def _log(trainer: Trainer, bar: Any, window: _Window, lr: float, loss: float, stats: dict) -> None:
    """A logged step (every 10th): a point of the history, the progress bar's figures, and
    with --quiet a line on stderr every 50 steps (worker 0's)."""
    s = trainer.state
    rate, waited = window.close()
    s.history.append(
        {
            "step": s.step,
            "tokens": s.total_tokens,
            "train_loss": loss,
            "masked_acc": stats["masked_acc"],
            "lr": lr,
        }
    )
    line = (
        f"loss {loss:.3f} acc {stats['masked_acc']:.3f} {rate:,.0f} tok/s "
        f"data {waited:.0%} lr {lr:.1e}"
    )
    bar.set_postfix_str(line)
    if trainer.args.quiet and trainer.group.leader and s.step % 50 == 0:
        print(
            f"step {s.step} {s.total_tokens / 1e6:.1f}M tokens {s.elapsed / 60:.1f} min {line}",
            file=sys.stderr,
            flush=True,
        )


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
