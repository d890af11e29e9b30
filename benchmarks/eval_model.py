"""Held-out evaluation of a model with the engine's default sampler.

    python -m benchmarks.eval_model [--model DIR] [--corpus data/corpus_v2] [--n 200]

On the test split (packages never trained on, see docs/DATA_CARD.md):
- single-line and multi-line (2-8 lines) infill exact match, with the length left to the
  model and with the true length given;
- masked-token accuracy by mask rate (one forward pass);
- bug finding and repair on injected bugs: top-1 localisation and exact repair;
- forward passes per token and milliseconds per infill on this machine.

Prints a table and writes JSON to benchmarks/results/eval_<model>.json.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

import infill
from benchmarks.heldout import bug_examples, infill_examples, load_test_files
from benchmarks.results_file import write_results
from infill.core.repair import fix_text, score_text
from model.loading import default_model_dir, load_denoiser


def infill_scores(den, examples, *, true_length: bool, desc: str) -> dict[str, float]:
    hits, nfe, tokens, ms = 0, 0, 0, []
    for ex in tqdm(examples, desc=desc, file=sys.stderr, leave=False):
        if true_length:
            span = infill.Span(ex.start, ex.end, length=len(den.encode(ex.truth)), exact=True)
        else:  # what a hole marker gets: the default allocation, nulls and growth
            span = infill.Span(ex.start, ex.end, length=infill.SamplerOptions().default_span_tokens)
        t0 = time.perf_counter()
        result = infill.fill_spans(ex.text, [span], denoiser=den)
        ms.append((time.perf_counter() - t0) * 1000)
        (fill,) = result.fills
        hits += fill.text.strip() == ex.truth.strip()
        nfe += result.stats.nfe
        tokens += max(1, result.stats.tokens)
    return {"exact_match": hits / len(examples), "n": len(examples),
            "nfe_per_token": nfe / tokens, "ms_p50": statistics.median(ms),
            "ms_mean": statistics.fmean(ms)}


def masked_accuracy(den, files: list[str], rates: list[float], n: int, seed: int
                    ) -> dict[str, float]:
    rng = random.Random(seed)
    out = {}
    windows = []
    for _ in range(n):
        text = rng.choice(files)
        ids = den.encode(text)
        if len(ids) < 32:
            continue
        start = rng.randrange(0, max(1, len(ids) - den.max_length))
        windows.append(ids[start:start + den.max_length])
    for rate in rates:
        correct = total = 0
        for ids in windows:
            pos = [i for i in range(len(ids)) if rng.random() < rate] or [0]
            canvas = [den.special.mask if i in set(pos) else t for i, t in enumerate(ids)]
            (logits,) = den.logits([canvas], [pos])
            pred = logits.argmax(-1)
            correct += int((pred == np.array([ids[i] for i in pos])).sum())
            total += len(pos)
        out[f"{rate:.2f}"] = correct / total
    return out


def bug_scores(den, bugs, desc: str) -> dict[str, object]:
    by_kind: dict[str, list[tuple[bool, bool]]] = {}
    for bug in tqdm(bugs, desc=desc, file=sys.stderr, leave=False):
        scores = score_text(bug.buggy, denoiser=den)
        worst = max(scores, key=lambda s: s.suspicion)
        located = worst.start < bug.end and worst.end > bug.start
        result, _ = fix_text(bug.buggy, denoiser=den, min_suspicion=0.0)
        repaired = result is not None and result.text == bug.clean
        by_kind.setdefault(bug.kind, []).append((located, repaired))
    flat = [x for v in by_kind.values() for x in v]
    return {
        "top1_localisation": sum(a for a, _ in flat) / len(flat),
        "exact_repair": sum(b for _, b in flat) / len(flat),
        "n": len(flat),
        "by_kind": {k: {"top1_localisation": sum(a for a, _ in v) / len(v),
                        "exact_repair": sum(b for _, b in v) / len(v), "n": len(v)}
                    for k, v in sorted(by_kind.items())},
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=None,
                        help="model directory (default: the shipped model)")
    parser.add_argument("--corpus", type=Path, default=Path("data/corpus_v2"),
                        help="corpus folder with test.jsonl (python -m model.corpus)")
    parser.add_argument("--split", default="test", help="split to evaluate on")
    parser.add_argument("--n", type=int, default=200, help="single-line examples")
    parser.add_argument("--n-multi", type=int, default=100, help="multi-line examples")
    parser.add_argument("--n-bugs", type=int, default=200, help="injected-bug examples")
    parser.add_argument("--seed", type=int, default=0, help="example selection seed")
    parser.add_argument("--out", type=Path, default=None, help="results JSON path")
    args = parser.parse_args(argv)

    den = load_denoiser(args.model)
    files = load_test_files(args.corpus, args.split)
    single = infill_examples(files, "single-line", args.n, seed=args.seed)
    multi = infill_examples(files, "multi-line", args.n_multi, seed=args.seed + 1)
    bugs = bug_examples(files, args.n_bugs, seed=args.seed + 2)
    t0 = time.perf_counter()
    results = {
        "model": str(args.model or default_model_dir()),
        "split": args.split,
        "single_line": infill_scores(den, single, true_length=False, desc="single-line"),
        "single_line_true_length": infill_scores(den, single, true_length=True,
                                                 desc="single-line, true length"),
        "multi_line": infill_scores(den, multi, true_length=False, desc="multi-line"),
        "multi_line_true_length": infill_scores(den, multi, true_length=True,
                                                desc="multi-line, true length"),
        "masked_token_accuracy": masked_accuracy(den, files, [0.15, 0.3, 0.5, 0.7, 0.9],
                                                 n=100, seed=args.seed),
        "bugs": bug_scores(den, bugs, desc="bugs"),
    }
    results["seconds"] = round(time.perf_counter() - t0, 1)
    training = (Path(results["model"]) / "training.json")
    if training.exists():
        results["training"] = json.loads(training.read_text())

    for key in ("single_line", "single_line_true_length", "multi_line",
                "multi_line_true_length"):
        r = results[key]
        print(f"{key:26s} EM {100 * r['exact_match']:5.1f}%  n={r['n']}  "
              f"NFE/token {r['nfe_per_token']:.2f}  p50 {r['ms_p50']:.0f} ms")
    acc = results["masked_token_accuracy"]
    print("masked-token accuracy     " + "  ".join(f"{k}: {100 * v:.1f}%"
                                                  for k, v in acc.items()))
    b = results["bugs"]
    print(f"bugs                       top-1 localisation {100 * b['top1_localisation']:.1f}%"
          f"  exact repair {100 * b['exact_repair']:.1f}%  n={b['n']}")
    for kind, v in b["by_kind"].items():
        print(f"  {kind:24s} top-1 {100 * v['top1_localisation']:5.1f}%  "
              f"repair {100 * v['exact_repair']:5.1f}%  n={v['n']}")
    write_results("eval", args.model, results, args.out)


if __name__ == "__main__":
    main()
