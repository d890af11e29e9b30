"""Training throughput on this machine: tokens/s and achieved FLOP/s per configuration.

    python -m benchmarks.bench_train [--preset small] [--seconds 40] [--configs a,b,...]

Each configuration runs real optimiser steps of model.training.train (forward, backward, AdamW) on
batches from model.training.noising (the training corpus when data/corpus_v2 exists, else synthetic
token windows with the same noise), after warm-up steps that are not timed (torch.compile
compiles there). Configurations are run in turn, twice, in ABBA order, so that a drift in
the machine's load falls on all of them alike (one that takes minutes per step runs once);
the figure is the median step.

Configurations (name: what changes against `fp32`):
  today      the default of model/training/train.py before this benchmark existed: bf16 autocast
             (= bf16; on a CPU without bf16 instructions a step takes minutes)
  fp32       fp32, torch's default threads, batch 32 x 256, output head on loss positions
  compile    fp32, the encoder under torch.compile
  compile-bf16  bf16 autocast, the encoder under torch.compile
  threads1   one thread
  full-head  the output head on every position (the work a plain MLM loss would do)
  b16x512 / b64x128 / b8x1024    other batch x sequence shapes (same tokens per step)
  deep-threads1     the `small-deep` shape (192 x 8 layers), one thread
  vocab8k-threads1  the 8k vocabulary (data/tokenizer8k), one thread: compare chars/s,
                    since its tokens carry fewer characters

FLOP/s counts the matrix products only (dense layers, attention scores and values, the
output head at the positions it runs on), forward and backward (3x forward). Prints a
table, the speed-up of the automatic choice (model.precision) over `today`, and writes
benchmarks/results/train_<cpu>.json.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from diffusion_infill.model import openmp as _before_torch  # noqa: F401  (sets its OpenMP spin: model/openmp.py)
import torch
from tokenizers import Tokenizer
from tqdm import tqdm
from transformers import ModernBertForMaskedLM

from benchmarks.results_file import RESULTS, cpu, write_results
from diffusion_infill.model.cpu import BF16_FLAGS, cpu_flags
from diffusion_infill.model.precision import pick_training_precision
from diffusion_infill.model.training.config import PRESETS, Preset, modernbert_config
from diffusion_infill.model.training.noising import (
    Batch,
    NoiseConfig,
    TextSampler,
    Vocab,
    make_batch,
)
from diffusion_infill.model.training.tokenizer import chars_per_token
from diffusion_infill.model.training.arguments import parse_args
from diffusion_infill.model.training.train import make_optimizer, train_step

WEIGHTS = Path(__file__).resolve().parents[1] / "model" / "weights"


@dataclass(frozen=True)
class Config:
    name: str
    dtype: torch.dtype = torch.float32
    compile: bool = False
    threads: int | None = None
    batch: int = 32
    seq_len: int = 256
    full_head: bool = False
    preset: str | None = None  # another shape than --preset's
    tokenizer: str | None = None  # another vocabulary than --tokenizer's


def configs() -> dict[str, Config]:
    base = Config("fp32")
    return {
        c.name: c
        for c in [
            replace(base, name="today", dtype=torch.bfloat16),
            base,
            replace(base, name="compile", compile=True),
            replace(base, name="compile-bf16", dtype=torch.bfloat16, compile=True),
            replace(base, name="threads1", threads=1),
            # one thread is how the long run trains beside other work on the machine
            replace(base, name="compile-threads1", compile=True, threads=1),
            replace(base, name="full-head", full_head=True),
            replace(base, name="b16x512", batch=16, seq_len=512),
            replace(base, name="b64x128", batch=64, seq_len=128),
            replace(base, name="b8x1024", batch=8, seq_len=1024),
            # the recipe ablation's other shape and vocabulary, on one thread like its rows
            replace(base, name="deep-threads1", threads=1, preset="small-deep"),
            replace(
                base,
                name="vocab8k-threads1",
                threads=1,
                tokenizer="data/tokenizer8k/tokenizer.json",
            ),
        ]
    }


def flops_per_step(preset: Preset, vocab: int, batch: Batch) -> float:
    """Matrix-product FLOPs of one training step (forward + backward = 3x forward)."""
    h, i, layers = preset.hidden, preset.intermediate, preset.layers
    B, T = batch.input_ids.shape
    n_global = len(range(0, layers, preset.global_every))
    span = n_global * T + (layers - n_global) * min(T, preset.local_window)
    dense = 2 * layers * (4 * h * h + 3 * h * i) * B * T  # qkv + out, GLU in (2i) + out
    attention = 2 * 2 * h * span * B * T  # scores and weighted values
    head_rows = int((batch.weights > 0).sum())
    head = 2 * (h * h + h * vocab) * head_rows
    return 3.0 * (dense + attention + head)


@dataclass
class Text:
    """A vocabulary's tokenizer, ids and training windows."""

    tok: Tokenizer
    vocab: Vocab
    sampler: TextSampler
    chars_per_token: float


class Bench:
    """One model per configuration; batches drawn once per shape and vocabulary, reused."""

    def __init__(self, preset_name: str, corpus: Path, tokenizer: Path) -> None:
        self.preset_name, self.corpus, self.tokenizer = preset_name, corpus, tokenizer
        self.texts = _texts(corpus)
        self._text: dict[str, Text] = {}
        self.batches: dict[tuple[int, int, str], list[Batch]] = {}

    def preset(self, cfg: Config) -> Preset:
        return PRESETS[cfg.preset or self.preset_name]

    def text(self, cfg: Config) -> Text:
        path = cfg.tokenizer or str(self.tokenizer)
        if path not in self._text:
            tok = Tokenizer.from_file(path)
            tok.encode_special_tokens = True
            per_token = (
                chars_per_token(tok, self.corpus)
                if (self.corpus / "valid.jsonl").exists()
                else float("nan")
            )
            self._text[path] = Text(
                tok,
                Vocab.of(tok),
                TextSampler(self.texts, window_chars=1024 * 6, seed=0),
                per_token,
            )
        return self._text[path]

    def batches_for(self, cfg: Config, n: int = 4) -> list[Batch]:
        text = self.text(cfg)
        key = (cfg.batch, cfg.seq_len, cfg.tokenizer or "")
        if key not in self.batches:
            rng = random.Random(0)
            self.batches[key] = [
                make_batch(
                    text.sampler, text.tok, text.vocab, cfg.batch, cfg.seq_len, NoiseConfig(), rng
                )
                for _ in range(n)
            ]
        got = self.batches[key]
        if cfg.full_head:
            got = [
                Batch(
                    b.input_ids,
                    b.targets,
                    torch.where(
                        b.input_ids != text.vocab.pad, b.weights.clamp(min=1e-6), b.weights
                    ),
                    b.masked,
                )
                for b in got
            ]
        return got

    def measure(self, cfg: Config, seconds: float) -> list[float]:
        """Seconds per step for `cfg`: one untimed step (two under torch.compile, which
        compiles in the first), then timed steps until `seconds` (at least one)."""
        threads = torch.get_num_threads()
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        torch.manual_seed(0)
        vocab = self.text(cfg).vocab
        config = modernbert_config(
            replace(self.preset(cfg), seq_len=max(cfg.seq_len, 256)),
            vocab.size,
            vocab.pad,
            vocab.mask,
            vocab.eos,
        )
        model = ModernBertForMaskedLM(config)
        optim = make_optimizer(model, parse_args([]))
        encoder = torch.compile(model.model) if cfg.compile else None

        def autocast():
            return torch.autocast("cpu", dtype=torch.bfloat16, enabled=cfg.dtype == torch.bfloat16)

        batches = self.batches_for(cfg)
        times: list[float] = []
        try:
            for k in range(2 if cfg.compile else 1):
                train_step(model, optim, batches[k % len(batches)], autocast, encoder)
            start = time.perf_counter()
            k = 0
            while not times or time.perf_counter() - start < seconds:
                t0 = time.perf_counter()
                train_step(model, optim, batches[k % len(batches)], autocast, encoder)
                times.append(time.perf_counter() - t0)
                k += 1
        finally:
            torch.set_num_threads(threads)
        return times


def _texts(corpus: Path) -> list[str]:
    path = corpus / "valid.jsonl"
    if path.exists():
        with path.open() as fh:
            return [json.loads(line)["text"] for line in fh]
    rng = random.Random(0)  # synthetic code-like lines
    words = ["def", "return", "self", "x", "=", "(", ")", ":", "if", "for", "in", "None"]
    return ["\n".join(" ".join(rng.choices(words, k=8)) for _ in range(400))] * 4


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)

    chosen = [configs()[name] for name in args.configs.split(",")]
    bench = Bench(args.preset, args.corpus, args.tokenizer)
    order = chosen + chosen[::-1]  # ABBA: load drift falls on every configuration alike
    times: dict[str, list[float]] = {c.name: [] for c in chosen}
    for cfg in tqdm(order, desc="configurations", file=sys.stderr):
        done = times[cfg.name]
        if done and statistics.median(done) > 3 * args.seconds:
            continue  # minutes per step (bf16 without bf16 instructions): once is plenty
        done += bench.measure(cfg, args.seconds)
        tqdm.write(f"{cfg.name}: {1000 * statistics.median(done):.0f} ms/step", file=sys.stderr)
    auto = pick_training_precision("cpu")
    rows = {cfg.name: _row(bench, cfg, times[cfg.name], args.preset) for cfg in chosen}
    print(
        f"{'config':16s} {'ms/step':>9s} {'tokens/s':>9s} {'chars/s':>9s} {'GFLOP/s':>8s} "
        f"{'steps':>5s}"
    )
    for name, r in rows.items():
        print(
            f"{name:16s} {r['step_ms']:9.0f} {r['tokens_per_s']:9.0f} "
            f"{r['chars_per_s']:9.0f} {r['gflop_per_s']:8.1f} {r['steps_timed']:5d}"
        )
    picked = "bf16" if auto.name == "bf16" else "fp32"
    result = {
        "machine": _machine(),
        "preset": args.preset,
        "auto_dtype": auto.name,
        "auto_reason": auto.reason,
        "configs": rows,
    }
    if "today" in rows and picked in rows:
        result["speedup_auto_over_today"] = (
            rows[picked]["tokens_per_s"] / rows["today"]["tokens_per_s"]
        )
        print(
            f"automatic choice: {auto.name} ({auto.reason}); "
            f"{result['speedup_auto_over_today']:.1f}x today's tokens/s"
        )
    write_results("train", None, result, args.out or RESULTS / f"train_{cpu_tag()}.json")


def _row(bench: Bench, cfg: Config, times: list[float], preset: str) -> dict:
    """One configuration's figures, from the seconds its timed steps took."""
    step = statistics.median(times)
    batches, text = bench.batches_for(cfg), bench.text(cfg)
    tokens = statistics.mean(int((b.input_ids != text.vocab.pad).sum()) for b in batches)
    flops = statistics.mean(flops_per_step(bench.preset(cfg), text.vocab.size, b) for b in batches)
    return {
        "step_ms": 1000 * step,
        "tokens_per_s": tokens / step,
        # what a vocabulary change must be compared on
        "chars_per_s": tokens / step * text.chars_per_token,
        "preset": cfg.preset or preset,
        "vocab": text.vocab.size,
        "gflop_per_s": flops / step / 1e9,
        "steps_timed": len(times),
        "dtype": str(cfg.dtype).removeprefix("torch."),
        "compile": cfg.compile,
        "threads": cfg.threads or torch.get_num_threads(),
        "batch": cfg.batch,
        "seq_len": cfg.seq_len,
        "full_head": cfg.full_head,
    }


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="small", choices=sorted(PRESETS))
    parser.add_argument("--corpus", type=Path, default=Path("data/corpus_v2"))
    parser.add_argument("--tokenizer", type=Path, default=WEIGHTS / "tokenizer.json")
    parser.add_argument(
        "--seconds",
        type=float,
        default=30.0,
        help="timed seconds per configuration and round (at least 1 step)",
    )
    parser.add_argument(
        "--configs",
        default=",".join(configs()),
        help="comma-separated names (see the module docstring)",
    )
    parser.add_argument("--out", type=Path, default=None, help="results file")
    return parser


def cpu_tag() -> str:
    flags = cpu_flags()
    return "amx" if "amx_bf16" in flags else ("avx512" if "avx512f" in flags else "avx2")


def _machine() -> dict:
    return {
        "cpu": cpu(),
        "threads": torch.get_num_threads(),
        "bf16_flags": sorted(cpu_flags() & BF16_FLAGS),
        "torch": torch.__version__,
    }


if __name__ == "__main__":
    main()
