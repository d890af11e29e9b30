"""Is the model short of capacity or of data? Masked CE on training windows beside
held-out ones, the same batches for every model.

    python -m benchmarks.fit_gap --models shipped=model/weights,runs/grown12/export [--batches 8]

For each model: masked cross-entropy and accuracy (the validation noise of model.training.train, one
forward pass) on `--batches` fixed batches of 16 x 512 windows from the training split and
from the validation split (library code only, as model.training.train's validation), drawn with one
seed so that every model, every run and every machine reads the same batches (the
trainer's own validation batches depend on its `--seed`). A model whose training CE still
falls as fast as its validation CE is short of capacity or compute; one whose gap widens
is learning its (repeated) training windows rather than code. Weights load as the engine
loads them (bf16 or packed int8; model/modernbert.py), in the dtype model.precision picks.
Figures go to benchmarks/results/fit_gap.json (--out).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import torch
from tokenizers import Tokenizer
from tqdm import tqdm

from benchmarks.results_file import RESULTS, write_results
from diffusion_infill.model import modernbert
from diffusion_infill.model.precision import pick_training_precision
from diffusion_infill.model.training.batches import load_texts
from diffusion_infill.model.training.noising import TextSampler, Vocab, make_batch
from diffusion_infill.model.training.objective import estimate_loss
from diffusion_infill.model.training.train import VALID_NOISE, init_record

SEED = 1234


def fixed_batches(
    corpus: Path, split: str, tok: Tokenizer, n: int, batch: int = 16, length: int = 512
) -> list:
    """`n` batches of `split`'s library windows, the same on every call."""
    torch.manual_seed(SEED)  # make_batch's substitutions draw from torch's generator
    sampler = TextSampler(load_texts(corpus, split, skip_tests=True), length * 6, seed=SEED)
    rng = random.Random(SEED)
    vocab = Vocab.of(tok)
    return [make_batch(sampler, tok, vocab, batch, length, VALID_NOISE, rng) for _ in range(n)]


def measure(model_dir: Path, corpus: Path, n: int, dtype: str | None, length: int = 512) -> dict:
    loaded = modernbert.load(model_dir)
    if loaded is None:
        raise SystemExit(f"{model_dir}: not a ModernBERT directory this project trains")
    _, model = loaded
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.encode_special_tokens = True
    precision = pick_training_precision(torch.device("cpu"), dtype)

    def autocast():
        return torch.autocast(
            "cpu", dtype=torch.bfloat16, enabled=precision.dtype == torch.bfloat16
        )

    record = init_record(model_dir)
    row: dict = {
        "model": str(model_dir),
        "layers": model.config.num_hidden_layers,
        "tokens_total": record.get("tokens_total", record.get("tokens")),
        "dtype": precision.name,
    }
    for split in ("train", "valid"):
        batches = fixed_batches(corpus, split, tok, n, length=length)
        row[split] = estimate_loss(model, batches, autocast)
    row["gap_masked_ce"] = row["valid"]["masked_ce"] - row["train"]["masked_ce"]
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--models",
        default="model/weights",
        help="comma-separated model directories, each NAME=DIR or DIR",
    )
    parser.add_argument("--corpus", type=Path, default=Path("data/corpus_v2"))
    parser.add_argument("--batches", type=int, default=8, help="batches of 16 windows per split")
    parser.add_argument("--length", type=int, default=512, help="window tokens")
    parser.add_argument("--dtype", default=None, help="fp32 or bf16 (default: per machine)")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", type=Path, default=RESULTS / "fit_gap.json")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    start = time.perf_counter()
    rows = []
    for entry in tqdm(args.models.split(","), desc="models", file=sys.stderr):
        name, _, path = entry.rpartition("=")
        row = measure(Path(path), args.corpus, args.batches, args.dtype, args.length)
        row["name"] = name or path
        rows.append(row)
        print(
            f"{row['name']}: {row['layers']} layers, {(row['tokens_total'] or 0) / 1e6:,.1f}M "
            f"tokens: masked CE train {row['train']['masked_ce']:.3f}, valid "
            f"{row['valid']['masked_ce']:.3f}, gap {row['gap_masked_ce']:.3f}",
            flush=True,
        )
    write_results(
        "fit_gap",
        None,
        {
            "batches": args.batches,
            "batch": [16, args.length],
            "seed": SEED,
            "rows": rows,
            "seconds": time.perf_counter() - start,
        },
        args.out,
    )


if __name__ == "__main__":
    main()
