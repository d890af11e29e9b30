"""Where a training run's batches come from: the corpus's texts, made into noised batches in
this process or in --loader-workers processes beside the loop, a corpus that arrives during
the run joining them, and one padded shape for torch.compile."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from diffusion_infill.model.training.corpus.records import is_test_path
from diffusion_infill.model.training.noising import Batch, make_batch
from diffusion_infill.model.training.parallel import rank_seed

# `trainer` below is a model.training.trainer.Trainer (its sampler, tokenizer, vocabulary,
# arguments and generator), not imported here: trainer imports this module.
Trainer = Any


def load_texts(corpus: Path, split: str, skip_tests: bool = False) -> list[str]:
    """The texts of a split; `skip_tests` leaves out the corpus's test files.

    Validation reads the validation units' library code only (their tests joined the
    corpus later), so that the validation loss compares across corpus versions."""
    with (corpus / f"{split}.jsonl").open() as fh:
        rows = [json.loads(line) for line in fh]
    return [r["text"] for r in rows if not (skip_tests and is_test_path(r.get("path", "")))]


class BatchStream(torch.utils.data.IterableDataset):
    """Endless training batches, made in --loader-workers processes beside the loop.

    Each process draws its own windows and masks (its seed is the run's stream seed and its
    number); torch's generator in each is seeded by the DataLoader from the run's. A resumed
    run draws a new stream (the stream seed counts steps), not the one it would have drawn."""

    def __init__(self, trainer: Trainer) -> None:
        self.sampler, self.tok, self.vocab = trainer.sampler, trainer.tok, trainer.vocab
        self.batch_size, self.seq_len = trainer.args.batch_size, trainer.seq_len
        self.noise, self.seed = trainer.noise, trainer.rng.randrange(2**31)
        self.fixes = trainer.fixes

    def __iter__(self) -> Iterator[Batch]:
        info = torch.utils.data.get_worker_info()
        worker = info.id if info is not None else 0
        rng = random.Random(rank_seed(self.seed, worker))
        self.sampler.rng = random.Random(rng.randrange(2**31))
        while True:
            yield make_batch(
                self.sampler,
                self.tok,
                self.vocab,
                self.batch_size,
                self.seq_len,
                self.noise,
                rng,
                self.fixes,
            )


MORE_CHECK_SECONDS = 10.0  # how often a run with --more-corpus looks for new .jsonl files
# (unless --more-check-seconds says)


def _stream(trainer: Trainer) -> Iterator[Batch]:
    """Batches from the trainer's sampler as it is now: made in this process, or by
    --loader-workers processes."""
    a = trainer.args
    if a.loader_workers <= 0:
        while True:
            yield make_batch(
                trainer.sampler,
                trainer.tok,
                trainer.vocab,
                a.batch_size,
                trainer.seq_len,
                trainer.noise,
                trainer.rng,
                trainer.fixes,
            )
    loader = torch.utils.data.DataLoader(
        BatchStream(trainer),
        batch_size=None,
        num_workers=a.loader_workers,
        prefetch_factor=4,
        pin_memory=trainer.device.type == "cuda",
    )
    yield from loader


def batches(trainer: Trainer) -> Iterator[Batch]:
    """The training batches. With --more-corpus, each .jsonl file that appears there
    (train.jsonl, or parts brought one per device call: part_1.jsonl, part_2.jsonl, ...)
    has its texts join the sampler's, and the batches come from all of them (the loader
    processes, which hold copies of the old sampler, are replaced)."""
    more, every = trainer.args.more_corpus, trainer.args.more_check_seconds
    every = MORE_CHECK_SECONDS if every is None else every
    while True:
        stream = _stream(trainer)
        checked = time.monotonic()
        for batch in stream:
            yield batch
            if more is None or time.monotonic() - checked < every:
                continue
            checked = time.monotonic()
            new = new_parts(more, trainer.more_parts)
            if new:
                for part in new:
                    trainer.add_texts(load_texts(more, part), part)
                break
        stream.close()  # the old loader's processes end here


def new_parts(folder: Path, known: Collection[str]) -> list[str]:
    """The names (without .jsonl) of the .jsonl files in `folder` not in `known`, sorted;
    a file is written under another name and renamed there, so never read half-written."""
    return sorted(p.stem for p in folder.glob("*.jsonl") if p.stem not in known)


def padded(batch: Batch, length: int, pad: int) -> Batch:
    """`batch` widened to `length` positions (padding, no loss): one shape for compile."""
    extra = length - batch.input_ids.shape[1]
    if extra <= 0:
        return batch
    return Batch(
        F.pad(batch.input_ids, (0, extra), value=pad),
        F.pad(batch.targets, (0, extra), value=pad),
        F.pad(batch.weights, (0, extra)),
        F.pad(batch.masked, (0, extra)),
    )
