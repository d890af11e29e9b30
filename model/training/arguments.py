"""The training command's arguments (model/training/train.py) and its noise overrides."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from diffusion_infill.model.training.config import PRESETS
from diffusion_infill.model.training.noising import NoiseConfig

DESCRIPTION = (
    "Train a masked-diffusion code model (ModernBERT, MDLM objective), from scratch or warm."
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    add = parser.add_argument
    _run_arguments(add)
    _budget_arguments(add)
    _machine_arguments(add)
    add(
        "--more-corpus",
        type=Path,
        default=None,
        help="a folder where .jsonl files of training rows may appear during the run "
        "(later device calls bring them, one part each: write each elsewhere, then rename "
        "it there); each one's texts join the training split's within --more-check-seconds",
    )
    add(
        "--more-check-seconds",
        type=float,
        default=None,
        help="how often --more-corpus is looked at (default 10; 0: after every batch, "
        "so that a part joins at the next step)",
    )
    add(
        "--fix-pairs",
        type=Path,
        default=None,
        help="a .jsonl file of real fixes from training packages' releases "
        "(model/training/fix_pairs.py); noise p_fix sets their share of the rows",
    )
    add("--compile", action="store_true", help="run the encoder under torch.compile")
    add(
        "--noise",
        type=noise_config,
        default=NoiseConfig(),
        help="noise overrides, e.g. t_dist=bell,p_tokens=0.1 (fields of NoiseConfig)",
    )
    add("--seed", type=int, default=0, help="random seed")
    add("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    if args.noise.p_fix > 0 and args.fix_pairs is None:
        parser.error("noise p_fix needs --fix-pairs (a .jsonl file of fix pairs)")
    if args.fix_pairs is not None and not args.fix_pairs.is_file():
        parser.error(
            f"--fix-pairs {args.fix_pairs} not found: "
            "python -m diffusion_infill.model.training.fix_pairs"
        )
    return args


def _run_arguments(add: Callable[..., Any]) -> None:
    """What the run reads and writes: the network, the corpus, the tokenizer, a model to
    start from, the run folder."""
    add("--preset", choices=sorted(PRESETS), default="small", help="network size")
    add("--corpus", type=Path, default=Path("data/corpus_v2"), help="folder with *.jsonl")
    add(
        "--tokenizer",
        type=Path,
        default=None,
        help="tokenizer.json (default: --init-from's, else data/tokenizer/tokenizer.json)",
    )
    add(
        "--init-from",
        type=Path,
        default=None,
        help="warm restart from an exported model directory (weights and history)",
    )
    add("--out", type=Path, default=Path("runs/small"), help="run folder")


def _budget_arguments(add: Callable[..., Any]) -> None:
    """Batches, the learning-rate schedule, the budget, and how often to evaluate and save."""
    add("--batch-size", type=int, default=32, help="sequences per step")
    add("--seq-len", type=int, default=None, help="canvas length (default: the preset's)")
    add("--lr", type=float, default=2e-3, help="peak learning rate")
    add("--warmup", type=float, default=0.03, help="warm-up share of the run")
    add("--weight-decay", type=float, default=0.01, help="AdamW decay")
    add(
        "--minutes",
        type=float,
        default=None,
        help="wall-clock budget (sets the schedule); resumes count it; 0: none, as unset",
    )
    add(
        "--max-steps",
        type=int,
        default=1000,
        help="step budget without --minutes or --tokens (sets the schedule)",
    )
    add(
        "--tokens",
        type=float,
        default=None,
        help="token budget of this run (sets the schedule), e.g. 5e6 for an ablation row",
    )
    add("--eval-every", type=int, default=200, help="steps between evals")
    add("--save-every", type=int, default=100, help="steps between checkpoints")


def _machine_arguments(add: Callable[..., Any]) -> None:
    """Where and how it computes: device, precision, threads, processes."""
    add("--device", default=None, help="cuda or cpu (default: auto)")
    add(
        "--dtype",
        default="auto",
        choices=["auto", "fp32", "bf16"],
        help="auto (the faster here), fp32 or bf16",
    )
    add("--no-bf16", dest="dtype", action="store_const", const="fp32", help="= --dtype fp32")
    add(
        "--threads",
        type=int,
        default=None,
        help="CPU threads per worker (default: torch's; cores / workers with --workers)",
    )
    add(
        "--workers",
        type=int,
        default=1,
        help="data-parallel worker processes, one per core (gradients averaged each step)",
    )
    add(
        "--loader-workers",
        type=int,
        default=0,
        help="processes that build batches beside the training loop (for a GPU: batches "
        "are made on the CPU, ~0.2M tokens/s per process: benchmarks/bench_loader)",
    )


def noise_config(spec: str, base: NoiseConfig | None = None) -> NoiseConfig:
    """`base` (the defaults: NoiseConfig()) with "field=value,field=value" overrides, values
    typed by the field's default."""
    base = NoiseConfig() if base is None else base
    changes: dict[str, object] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not hasattr(base, key):
            raise argparse.ArgumentTypeError(
                f"{item!r}: expected FIELD=VALUE with a field of {sorted(base.__dict__)}"
            )
        kind = type(getattr(base, key))
        changes[key] = kind(value)
    return replace(base, **changes)
