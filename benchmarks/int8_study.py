"""Which int8 keeps inline completion right: exact match and ms per number format.

    python -m benchmarks.int8_study [--split valid] [--n 400] [--options fp32,int8,...]

Each option runs the same held-out inline completions (eval_completion's `mid-line` case,
lines cut after the space nearest their middle, the server's completion options) with
the shipped model in this process, and the table gives exact match, similarity to the
truth and ms per completion (p50 / p95, engine only, no language server):

- `fp32`, `bf16`: the model as loaded in that dtype (bf16 only where the CPU has it);
- `int8-stock`: PyTorch's dynamic int8 as it comes (weights per tensor, inputs in 7 bits);
- `int8-channels`: weights per output channel in the full 8 bits, inputs in 8 bits (the
  int16 sums of AVX2 kernels without VNNI can overflow);
- `int8`: what `INFILL_DTYPE=int8` loads (model/precision.py `quantise_int8`): weights per
  output channel in 7 bits (-64..63), inputs in 8.

Set `FBGEMM_ENABLE_INSTRUCTIONS=AVX2` (and `MKL_ENABLE_INSTRUCTIONS=AVX2
ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2`) to run the kernels a CPU without
AVX-512 would run. Writes benchmarks/results/int8_study_<model>_<split>.json (or --out).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from benchmarks.bench_lsp import WINDOW_CHARS
from benchmarks.eval_completion import offer, requests, score
from benchmarks.heldout import heldout_arguments, heldout_files, infill_examples
from benchmarks.results_file import write_results
from diffusion_infill.lsp.settings import Settings
from diffusion_infill.model.hf import HFDenoiser
from diffusion_infill.model.loading import default_model_dir, load_denoiser
from diffusion_infill.model.precision import BF16_FLAGS, Precision, cpu_flags, quantise_int8

OPTIONS = ("fp32", "bf16", "int8-stock", "int8-channels", "int8")


def _quantised(den: HFDenoiser, option: str) -> HFDenoiser:
    """`den` (fp32) with its linear layers quantised as `option` says."""
    from torch.ao.quantization import quantize_dynamic  # noqa: PLC0415

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if option == "int8":
            model = quantise_int8(den.model)
        elif option == "int8-stock":
            model = quantize_dynamic(den.model, {torch.nn.Linear}, dtype=torch.qint8)
        else:  # int8-channels: the shipped recipe with weights in the full 8 bits
            model = quantise_int8(den.model, weight_range=128)
    return HFDenoiser(
        model,
        den.tokenizer,
        den.special,
        den.max_length,
        name=den.name,
        device=den.device,
        precision=Precision(torch.float32, option, int8=True),
    )


def denoiser(model: Path | None, option: str) -> HFDenoiser | None:
    """The shipped (or `model`) denoiser in `option`; None for bf16 on a CPU without it."""
    if option == "bf16" and not cpu_flags() & BF16_FLAGS:
        return None
    den = load_denoiser(model, dtype="bf16" if option == "bf16" else "fp32")
    assert isinstance(den, HFDenoiser)
    return den if option in ("fp32", "bf16") else _quantised(den, option)


def measure(den: HFDenoiser, asks: list[tuple[str, int, str]], option: str) -> dict[str, Any]:
    """Exact match, similarity and ms of the inline completions `asks` with `den`."""
    settings = Settings()
    offers, ms, nfe = [], [], 0
    for text, at, _ in tqdm(asks, desc=option, file=sys.stderr, leave=False):
        t = time.perf_counter()
        got, passes, _ = offer(den, text, at, settings)
        ms.append((time.perf_counter() - t) * 1000)
        offers.append(got)
        nfe += passes
    truths = [truth for _, _, truth in asks]
    return {**score(offers, truths, ms), "nfe_per_request": nfe / len(asks), "offers": offers}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    heldout_arguments(parser)
    parser.add_argument("--n", type=int, default=400, help="completions per option")
    parser.add_argument("--seed", type=int, default=0, help="example selection seed")
    parser.add_argument(
        "--options", default=",".join(OPTIONS), help=f"comma-separated, of: {', '.join(OPTIONS)}"
    )
    parser.add_argument("--out", type=Path, default=None, help="results JSON path")
    args = parser.parse_args(argv)
    options = [o for o in args.options.split(",") if o]
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown or not options:
        parser.error(
            f"unknown option(s) {', '.join(unknown) or '(none)'}: use {', '.join(OPTIONS)}"
        )
    if args.n < 1:
        parser.error(f"--n must be at least 1, got {args.n}")
    files = heldout_files(parser, args)
    lines = infill_examples(files, "single-line", args.n, seed=args.seed, window_chars=WINDOW_CHARS)
    asks = requests(lines, "mid-line")
    kernels = {
        k: v
        for k, v in os.environ.items()
        if k.endswith(("_INSTRUCTIONS", "_CPU_ISA", "_CPU_CAPABILITY"))
    }
    results: dict[str, Any] = {
        "command": "python -m benchmarks.int8_study "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "model": str(args.model or default_model_dir()),
        "split": args.split,
        "n": args.n,
        "case": "mid-line",
        "threads": torch.get_num_threads(),
        "kernels": kernels,
        "formats": {},
    }
    print(f"{'option':14} {'exact':>6} {'similar':>7} {'p50 ms':>7} {'p95 ms':>7} {'passes':>6}")
    for option in options:
        den = denoiser(args.model, option)
        if den is None:
            print(f"{option:14} skipped: this CPU has no bf16 instructions")
            continue
        r = results["formats"][option] = measure(den, asks, option)
        print(
            f"{option:14} {r['exact_match']:6.1%} {r['similarity']:7.3f} {r['ms_p50']:7.0f} "
            f"{r['ms_p95']:7.0f} {r['nfe_per_request']:6.2f}"
        )
    write_results(f"int8_study_{args.split}", args.model, results, args.out)


if __name__ == "__main__":
    main()
