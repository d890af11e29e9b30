"""How fast one process makes training batches, and how many a device needs.

    python -m benchmarks.bench_loader [--batch-size 64] [--seq-len 512] [--batches 8]
                                      [--noise k=v,...] [--device-rate 1.4e6]

`model.training.train` makes its batches (model/training/noising.py: tokenizing, holes,
bug-shaped swaps) in `--loader-workers` processes beside the one that steps the model. On a GPU the
batches may be what limits the run: an H200 took 1.2-1.4M tokens/s from 14 of
them. This times `make_batch` in this process on the training split (one thread, as each
loader process runs), with the noise of the shipped model (model/weights/training.json)
unless `--noise` says otherwise, after one batch that is not timed, and prints tokens/s
per process, the share of the time the swaps take, and the processes `--device-rate`
tokens/s would need. Writes benchmarks/results/loader_<cpu>.json.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from dataclasses import fields
from pathlib import Path

import torch
from tokenizers import Tokenizer
from tqdm import tqdm

from benchmarks.bench_train import cpu_tag
from benchmarks.results_file import RESULTS, cpu, write_results
from diffusion_infill.model.training.arguments import noise_config
from diffusion_infill.model.training.batches import load_texts
from diffusion_infill.model.training.corruptions import swaps_of
from diffusion_infill.model.training.noising import NoiseConfig, TextSampler, Vocab, make_batch

WEIGHTS = Path(__file__).resolve().parents[1] / "model" / "weights"


def shipped_noise() -> NoiseConfig:
    """The noise the shipped model last trained with (the defaults without a record)."""
    path = WEIGHTS / "training.json"
    recorded = json.loads(path.read_text()).get("noise", {}) if path.exists() else {}
    names = {f.name for f in fields(NoiseConfig)}
    return NoiseConfig(**{k: v for k, v in recorded.items() if k in names})


def time_batches(
    sampler: TextSampler,
    tok: Tokenizer,
    cfg: NoiseConfig,
    batch_size: int,
    seq_len: int,
    batches: int,
    seed: int,
) -> dict[str, float]:
    """Tokens/s of `make_batch` here, and the seconds spent in the swaps' `pick`."""
    vocab = Vocab.of(tok)
    rng = random.Random(seed)
    make_batch(sampler, tok, vocab, batch_size, seq_len, cfg, rng)  # swap tables, caches
    swaps = swaps_of(tok)
    pick, in_pick = swaps.pick, [0.0]

    def timed_pick(*args, **kwargs):
        t = time.perf_counter()
        try:
            return pick(*args, **kwargs)
        finally:
            in_pick[0] += time.perf_counter() - t

    swaps.pick = timed_pick  # type: ignore[method-assign]
    tokens, start = 0, time.perf_counter()
    try:
        for _ in tqdm(range(batches), desc="batches", file=sys.stderr, leave=False):
            batch = make_batch(sampler, tok, vocab, batch_size, seq_len, cfg, rng)
            tokens += int((batch.input_ids != vocab.pad).sum())
    finally:
        del swaps.pick
    seconds = time.perf_counter() - start
    return {
        "tokens": tokens,
        "seconds": seconds,
        "tokens_per_s": tokens / seconds,
        "swap_share": in_pick[0] / seconds,
    }


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    for name in ("batch_size", "seq_len", "batches"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if not (args.corpus / "train.jsonl").exists():
        raise SystemExit(
            f"no {args.corpus}/train.jsonl: build it with "
            "python -m diffusion_infill.model.training.corpus"
        )

    torch.set_num_threads(1)  # as in each loader process
    try:
        cfg = noise_config(args.noise, shipped_noise())
    except argparse.ArgumentTypeError as e:
        raise SystemExit(f"--noise: {e}") from None
    texts = load_texts(args.corpus, "train")
    if args.texts:
        texts = random.Random(args.seed).sample(texts, min(args.texts, len(texts)))
    sampler = TextSampler(texts, args.seq_len * 6, seed=args.seed)
    tok = Tokenizer.from_file(str(args.tokenizer))
    r = time_batches(sampler, tok, cfg, args.batch_size, args.seq_len, args.batches, args.seed)
    needed = math.ceil(args.device_rate / r["tokens_per_s"])
    print(
        f"{r['tokens_per_s']:,.0f} tokens/s per process ({r['tokens']:,} tokens in "
        f"{r['seconds']:.1f} s, swaps {r['swap_share']:.0%} of it); "
        f"{args.device_rate:,.0f} tokens/s needs {needed} such processes"
    )
    write_results(
        "loader",
        None,
        {
            "cpu": cpu(),
            "batch_size": args.batch_size,
            "seq_len": args.seq_len,
            "batches": args.batches,
            "noise": cfg.__dict__,
            **r,
            "device_rate": args.device_rate,
            "processes_needed": needed,
        },
        args.out or RESULTS / f"loader_{cpu_tag()}.json",
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=Path("data/corpus_v2"))
    parser.add_argument("--tokenizer", type=Path, default=WEIGHTS / "tokenizer.json")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--batches", type=int, default=8, help="timed batches")
    parser.add_argument("--noise", default="", help="overrides of the shipped noise, k=v,...")
    parser.add_argument(
        "--device-rate",
        type=float,
        default=1.4e6,
        help="tokens/s the device trains at (an H200: 1.4e6)",
    )
    parser.add_argument(
        "--texts", type=int, default=2000, help="training files to sample from (all: 0)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    return parser


if __name__ == "__main__":
    main()
