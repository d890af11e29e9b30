"""Does the model end a hole where the code after it says it ends? One forward pass per
hole, so it is cheap enough to follow a training run (the `arguments` part of
benchmarks/eval_model.py decodes each hole and takes minutes).

    python -m benchmarks.inline_ends [--model DIR] [--split test] [--n 100]

For each held-out hole (a call's arguments inside a line, and a line's content after its
indentation) the engine's first pass over its default allocation (16 slots, all masked)
gives p(<null>) at every slot. A model that has learnt where a hole ends puts <null> on the
slot just after the truth's last token ("p(null) at the end") and on the allocation's last
slot; one that has not writes content into every slot and the engine grows the hole.
Figures go to benchmarks/results/inline_ends_<model>.json.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

from tqdm import tqdm

from benchmarks.heldout import infill_examples, load_test_files
from benchmarks.infill_scores import argument_examples
from benchmarks.length_study import null_profile
from benchmarks.results_file import write_results
from diffusion_infill import infill
from diffusion_infill.model.loading import default_model_dir, load_denoiser


def hole_ends(den, examples, options: infill.SamplerOptions, desc: str) -> dict[str, object]:
    """The first pass's p(<null>) where each hole should end, summarised over `examples`."""
    at_end: list[float] = []  # p(null) on the slot after the truth (truths under 16 tokens)
    last: list[float] = []  # p(null) on the allocation's last slot
    for ex in tqdm(examples, desc=desc, file=sys.stderr, leave=False):
        slots = options.default_span_tokens
        span = infill.Span(ex.start, ex.end, length=slots)
        p = [math.exp(lp) for lp in null_profile(den, ex.text, span, options)]
        n = len(den.encode(ex.truth))
        if n < len(p):
            at_end.append(p[n])
        last.append(p[-1])
    return {
        "n": len(examples),
        "n_shorter_than_allocation": len(at_end),
        "p_null_at_end_mean": statistics.fmean(at_end) if at_end else None,
        "p_null_at_end_median": statistics.median(at_end) if at_end else None,
        "ends_at_truth": (sum(x > 0.5 for x in at_end) / len(at_end)) if at_end else None,
        "p_null_last_slot_mean": statistics.fmean(last),
        "last_slot_null": sum(x > 0.5 for x in last) / len(last),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model", type=Path, default=None, help="model directory (default: the shipped model)"
    )
    parser.add_argument("--corpus", type=Path, default=Path("data/corpus_v2"))
    parser.add_argument("--split", default="test")
    parser.add_argument("--n", type=int, default=100, help="holes of each kind")
    parser.add_argument("--seed", type=int, default=0, help="the evaluation's seed")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    den = load_denoiser(args.model)
    options = infill.SamplerOptions()
    files = load_test_files(args.corpus, args.split)
    kinds = {  # the examples benchmarks/eval_model.py draws with the same seed
        "arguments": argument_examples(files, args.n, seed=args.seed + 3),
        "single_line": infill_examples(files, "single-line", args.n, seed=args.seed),
    }
    results: dict[str, object] = {
        "model": str(args.model or default_model_dir()),
        "split": args.split,
    }
    for kind, examples in kinds.items():
        r = hole_ends(den, examples, options, kind)
        results[kind] = r
        at_end = (
            "no truth shorter than the allocation"
            if r["p_null_at_end_mean"] is None
            else f"mean {r['p_null_at_end_mean']:.3f} median "
            f"{r['p_null_at_end_median']:.3f}, > 0.5 in "
            f"{100 * r['ends_at_truth']:.0f}%"
        )
        print(
            f"{kind:12s} n={r['n']:3d}  p(null) where the hole ends: {at_end}  |  last "
            f"slot: mean {r['p_null_last_slot_mean']:.3f}, > 0.5 in "
            f"{100 * r['last_slot_null']:.0f}%"
        )
    results["seconds"] = round(time.perf_counter() - started, 1)
    results["command"] = "python -m benchmarks.inline_ends " + " ".join(argv or sys.argv[1:])
    write_results("inline_ends", args.model, results, args.out)


if __name__ == "__main__":
    main()
