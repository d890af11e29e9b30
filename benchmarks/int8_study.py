"""Which int8 keeps inline completion right: exact match and ms per number format.

    python -m benchmarks.int8_study [--split valid] [--n 400] [--options fp32,int8,...]
                                    [--agreement 400]

Each option runs the same held-out inline completions (eval_completion's `mid-line` case,
lines cut after the space nearest their middle, the server's completion options) with
the shipped model in this process, each hole asked of every option in turn, and the table
gives exact match, similarity to the truth and ms per completion (p50 / p95, engine only,
no language server):

- `fp32`, `bf16`: the model as loaded in that dtype (bf16 only where the CPU has it);
- `int8`: what `INFILL_DTYPE=int8` loads (model/int8.py `quantise_int8`): weights per
  output channel in 7 bits (-64..63), inputs in 8 with a scale per row (token), the
  linear layers of `KEEP_FP32` in fp32;
- `int8-channels`: the same with weights in the full 8 bits (the int16 sums of kernels
  without VNNI can overflow);
- `int8-all`: every linear layer in int8 (none kept in fp32);
- `int8-keep:PATTERNS`: the `int8` recipe with the linear layers whose names match one of
  the `+`-joined fnmatch patterns kept in fp32 instead of `KEEP_FP32` (`int8-keep:decoder`,
  `int8-keep:*.mlp.Wo`, `int8-keep:model.layers.0.*+decoder`);
- `int8-smooth:ALPHA`: the input channels of the MLPs' output layers smoothed first
  (SmoothQuant, alpha in (0, 1], folded into the MLPs' input layers;
  benchmarks/int8_smooth.py), calibrated on
  windows of the first CALIBRATION_FILES files of the corpus's training split, then the
  `int8` recipe.

With `--agreement M` (default 0: off) the first M of those holes are also scored against
fp32 without sampling: each one's hole, masked in a window of the server's inline
completion size around it, goes through one pass of the model in fp32 and in each option,
and the table gives the mean KL divergence of the option's token distributions at the
masked slots from fp32's, and how often their most likely tokens agree (a continuous
signal, far less noisy than exact match). Wins / losses count the holes an option fills
exactly where fp32 does not, and the other way round.

Set `ONEDNN_MAX_CPU_ISA=AVX2` (the int8 kernels; and `MKL_ENABLE_INSTRUCTIONS=AVX2
ATEN_CPU_CAPABILITY=avx2`) to run the kernels a CPU without AVX-512 would run. Writes
benchmarks/results/int8_study_<split>_<model>.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from benchmarks.bench_lsp import WINDOW_CHARS
from benchmarks.eval_completion import offer, requests, score
from benchmarks.heldout import heldout_arguments, heldout_files, infill_examples
from benchmarks.int8_smooth import SMOOTH, input_max, smooth_alpha, smoothed, with_model
from benchmarks.results_file import write_results
from diffusion_infill.lsp.budgets import SLOW_CPU_COMPLETION_WINDOW
from diffusion_infill.lsp.settings import Settings
from diffusion_infill.model.hf import HFDenoiser
from diffusion_infill.model.int8 import KEEP_FP32, Int8Linear, quantise_int8
from diffusion_infill.model.loading import default_model_dir, load_denoiser
from diffusion_infill.model.precision import BF16_FLAGS, Precision, cpu_flags

OPTIONS = ("fp32", "bf16", "int8-channels", "int8", "int8-all")
KEEP = "int8-keep:"  # + `+`-joined name patterns of linear layers kept in fp32
WINDOW_TOKENS = SLOW_CPU_COMPLETION_WINDOW  # tokens of an agreement canvas: int8's window
CALIBRATION_FILES = 64  # training files whose windows calibrate int8-smooth
# what int8-smooth keeps in fp32: KEEP_FP32 (the smoothed MLPs' output layers go int8)
SMOOTH_KEEP = KEEP + "+".join(KEEP_FP32)


def keep_patterns(option: str) -> tuple[str, ...] | None:
    """The name patterns `option` keeps in fp32 (None: the default, `KEEP_FP32`)."""
    if option == "int8-all":
        return ()
    if option.startswith(KEEP):
        return tuple(p for p in option[len(KEEP) :].split("+") if p)
    return None


def _quantised(den: HFDenoiser, option: str) -> HFDenoiser:
    """`den` (fp32) with its linear layers quantised as `option` says."""
    if option == "int8-channels":  # the shipped recipe with weights in the full 8 bits
        model = quantise_int8(den.model, weight_range=128)
    else:
        model = quantise_int8(den.model, keep_fp32=keep_patterns(option))
    return with_model(den, model, Precision(torch.float32, option, int8=True))


def denoiser(model: Path | None, option: str, corpus: Path | None = None) -> HFDenoiser | None:
    """The shipped (or `model`) denoiser in `option`; None for bf16 on a CPU without it.
    `corpus`: the folder whose train.jsonl calibrates int8-smooth."""
    if option == "bf16" and not cpu_flags() & BF16_FLAGS:
        return None
    den = load_denoiser(model, dtype="bf16" if option == "bf16" else "fp32")
    assert isinstance(den, HFDenoiser)
    alpha = smooth_alpha(option)
    if alpha is not None:
        assert corpus is not None
        maxima = input_max(den, calibration(den, corpus))
        return _quantised(smoothed(den, maxima, alpha), SMOOTH_KEEP)
    return den if option in ("fp32", "bf16") else _quantised(den, option)


def calibration(den: HFDenoiser, corpus: Path) -> list[tuple[list[int], list[int]]]:
    """Inline-completion canvases from the first CALIBRATION_FILES files of the training
    split (never the held-out files an option is scored on)."""
    texts = []
    with (corpus / "train.jsonl").open() as fh:
        for line in fh:
            texts.append(json.loads(line)["text"])
            if len(texts) >= CALIBRATION_FILES:
                break
    lines = infill_examples(
        texts, "single-line", 2 * CALIBRATION_FILES, seed=1, window_chars=WINDOW_CHARS
    )
    return canvases(den, requests(lines, "mid-line"))


def measure(
    dens: dict[str, HFDenoiser], asks: list[tuple[str, int, str]]
) -> dict[str, dict[str, Any]]:
    """Exact match, similarity and ms of the inline completions `asks` with each option's
    denoiser, every hole asked of each option in turn: a load that comes or goes while
    measuring (other jobs on the machine) falls on all options alike."""
    settings = Settings()
    offers: dict[str, list[str]] = {o: [] for o in dens}
    ms: dict[str, list[float]] = {o: [] for o in dens}
    nfe = dict.fromkeys(dens, 0)
    for text, at, _ in tqdm(asks, desc="holes", file=sys.stderr, leave=False):
        for option, den in dens.items():
            t = time.perf_counter()
            got, passes, _ = offer(den, text, at, settings)
            ms[option].append((time.perf_counter() - t) * 1000)
            offers[option].append(got)
            nfe[option] += passes
    truths = [truth for _, _, truth in asks]
    return {
        o: {
            **score(offers[o], truths, ms[o]),
            "nfe_per_request": nfe[o] / len(asks),
            "offers": offers[o],
            "fp32_layers": [
                name for name, m in den.model.named_modules() if isinstance(m, torch.nn.Linear)
            ],
            "int8_layers": [
                name for name, m in den.model.named_modules() if isinstance(m, Int8Linear)
            ],
        }
        for o, den in dens.items()
    }


def canvases(
    den: HFDenoiser, asks: list[tuple[str, int, str]]
) -> list[tuple[list[int], list[int]]]:
    """(canvas, masked positions) of each hole of `asks`: as many mask slots as its truth
    has tokens (1..the server's completionTokens) in a window of WINDOW_TOKENS, the code
    before it taking what the code after it leaves, up to 3/4 of the window."""
    most = Settings().completion_tokens
    out = []
    for text, at, truth in asks:
        hole = min(max(len(den.encode(truth)), 1), most)
        before, after = den.encode(text[:at]), den.encode(text[at:])
        room = WINDOW_TOKENS - hole
        left = min(len(before), max(room * 3 // 4, room - len(after)))
        right = min(len(after), room - left)
        canvas = before[len(before) - left :] + [den.special.mask] * hole + after[:right]
        out.append((canvas, list(range(left, left + hole))))
    return out


def log_probs(den: HFDenoiser, cases: list[tuple[list[int], list[int]]]) -> list[torch.Tensor]:
    """Log-probabilities (slots, vocabulary) of `den` at each case's masked slots."""
    return [torch.from_numpy(den.logits([c], [p])[0]).float().log_softmax(-1) for c, p in cases]


def agreement(want: list[torch.Tensor], got: list[torch.Tensor]) -> dict[str, float]:
    """Mean KL divergence of `got`'s distributions from `want`'s (nats per slot) and how
    often their most likely tokens agree, over every masked slot."""
    p, q = torch.cat(want), torch.cat(got)
    kl = (p.exp() * (p - q)).sum(-1)
    return {
        "kl_vs_fp32": kl.mean().item(),
        "top1_vs_fp32": (p.argmax(-1) == q.argmax(-1)).float().mean().item(),
        "slots": p.shape[0],
    }


def paired(offers: list[str], base: list[str], truths: list[str]) -> dict[str, int]:
    """Holes `offers` fills exactly where `base` does not (wins), and the other way round."""
    right = [
        [o.strip() == t.strip() for o, t in zip(x, truths, strict=True)] for x in (offers, base)
    ]
    return {
        "wins_vs_fp32": sum(a and not b for a, b in zip(*right, strict=True)),
        "losses_vs_fp32": sum(b and not a for a, b in zip(*right, strict=True)),
    }


def row(option: str, r: dict[str, Any], width: int) -> str:
    """One line of the printed table."""
    nan = float("nan")
    return (
        f"{option:{width}} {r['exact_match']:6.1%} {r['similarity']:7.3f} "
        f"{r['ms_p50']:7.0f} {r['ms_p95']:7.0f} {r['nfe_per_request']:6.2f} "
        f"{r.get('wins_vs_fp32', '-'):>4} {r.get('losses_vs_fp32', '-'):>4} "
        f"{r.get('kl_vs_fp32', nan):7.4f} {r.get('top1_vs_fp32', nan):6.1%}"
    )


def parse(argv: list[str] | None) -> tuple[argparse.Namespace, list[str], list[str]]:
    """The arguments, the options to run and the held-out files."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    heldout_arguments(parser)
    parser.add_argument("--n", type=int, default=400, help="completions per option")
    parser.add_argument("--seed", type=int, default=0, help="example selection seed")
    parser.add_argument(
        "--options",
        default=",".join(OPTIONS),
        help=f"comma-separated, of: {', '.join(OPTIONS)}, {KEEP}PATTERNS, {SMOOTH}ALPHA",
    )
    parser.add_argument(
        "--agreement",
        type=int,
        default=0,
        help="holes also scored against fp32's token distributions",
    )
    parser.add_argument("--out", type=Path, default=None, help="results JSON path")
    args = parser.parse_args(argv)
    options = [o for o in args.options.split(",") if o]
    unknown = sorted(
        o for o in set(options) - set(OPTIONS) if not keep_patterns(o) and smooth_alpha(o) is None
    )
    if unknown or not options:
        parser.error(
            f"unknown option(s) {', '.join(unknown) or '(none)'}: use {', '.join(OPTIONS)}, "
            f"{KEEP}PATTERNS or {SMOOTH}ALPHA (alpha in (0, 1])"
        )
    calibrated = any(smooth_alpha(o) is not None for o in options)
    if calibrated and not (args.corpus / "train.jsonl").is_file():
        parser.error(f"{SMOOTH}ALPHA calibrates on {args.corpus / 'train.jsonl'}: not found")
    if args.n < 1:
        parser.error(f"--n must be at least 1, got {args.n}")
    if not 0 <= args.agreement <= args.n:
        parser.error(f"--agreement must be within 0..--n, got {args.agreement}")
    return args, options, heldout_files(parser, args)


def main(argv: list[str] | None = None) -> None:
    args, options, files = parse(argv)
    lines = infill_examples(files, "single-line", args.n, seed=args.seed, window_chars=WINDOW_CHARS)
    asks = requests(lines, "mid-line")
    truths = [truth for _, _, truth in asks]
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
        "agreement_holes": args.agreement,
        "keep_fp32_default": list(KEEP_FP32),
        "formats": {},
    }
    dens = {}
    for option in options:
        den = denoiser(args.model, option, args.corpus)
        if den is None:
            print(f"{option} skipped: this CPU has no bf16 instructions")
        else:
            dens[option] = den
    formats = results["formats"] = measure(dens, asks)
    cases: list[tuple[list[int], list[int]]] = []
    want: list[torch.Tensor] = []
    if args.agreement:
        reference = dens.get("fp32") or denoiser(args.model, "fp32")
        assert reference is not None
        cases = canvases(reference, asks[: args.agreement])
        want = log_probs(reference, cases)
    width = max(14, *map(len, options))
    print(
        f"{'option':{width}} {'exact':>6} {'similar':>7} {'p50 ms':>7} {'p95 ms':>7} "
        f"{'passes':>6} {'win':>4} {'loss':>4} {'KL':>7} {'top-1':>6}"
    )
    for option, r in formats.items():
        if "fp32" in formats:
            r.update(paired(r["offers"], formats["fp32"]["offers"], truths))
        if cases:
            r.update(agreement(want, log_probs(dens[option], cases)))
        print(row(option, r, width))
    write_results(f"int8_study_{args.split}", args.model, results, args.out)


if __name__ == "__main__":
    main()
