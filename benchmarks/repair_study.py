"""How should the fixer rewrite the token it flags? Exact repairs of injected bugs.

    python -m benchmarks.repair_study [--split valid] [--n 100] [--model DIR]

Each window of `--n` (benchmarks/heldout.py `bug_examples`, one injected operator,
comparison, variable or off-by-one bug) is scored once (`score_text`); the worst token is
the fixer's pick (`suspicious_spans` with no thresholds, so every window gets one). Then:

- `located`: the pick overlaps the bug (top-1 localisation);
- `substitute`: the pick replaced by the model's likeliest other token there;
- `redenoise_exact`: the pick's word masked and re-denoised at its own token count;
- `redenoise_raced`: the same with one slot more, nulls allowed, racing halvings
  (lengths 3, no growth), the model's score picks;
- `shipped`: what `fix_text` does (`repair_plan`: substitute a whole word, else
  re-denoise the word exactly);
- `oracle_*`: the two re-denoise variants on the bug's own word (localisation taken out).

A repair counts when the window comes back exactly as it was before the bug. Checks as the
command's. Prints counts per kind and writes benchmarks/results/repair_study.json.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from tqdm import tqdm

from benchmarks.heldout import bug_examples, load_test_files
from benchmarks.results_file import write_results
from diffusion_infill.infill.core.engine import prepare_fill
from diffusion_infill.infill.core.options import DEFAULT_CHECKS, SamplerOptions
from diffusion_infill.infill.core.repair import _widen, prepare_repair, score_text, suspicious_spans
from diffusion_infill.infill.core.sampler import denoise
from diffusion_infill.infill.core.spans import Span
from diffusion_infill.model.loading import load_denoiser

VARIANTS = (
    "located",
    "substitute",
    "redenoise_exact",
    "redenoise_raced",
    "shipped",
    "oracle_exact",
    "oracle_raced",
)


def _redenoise(den, text: str, s: int, e: int, options: SamplerOptions, *, raced: bool) -> str:
    n = max(1, len(den.encode(text[s:e])))
    if raced:
        span, opts = Span(s, e, length=n + 1), replace(options, lengths=3, grow=0)
    else:
        span, opts = Span(s, e, length=n, exact=True), options
    fill = prepare_fill(text, [span], denoiser=den, options=opts, rewrite=True)
    denoise(fill.job, den)
    return fill.result().text


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=None, help="model directory")
    parser.add_argument("--corpus", type=Path, default=Path("data/corpus_v2"))
    parser.add_argument("--split", default="valid", help="split the bugs are cut from")
    parser.add_argument("--n", type=int, default=100, help="bug windows")
    parser.add_argument("--seed", type=int, default=2, help="bug selection seed")
    parser.add_argument("--out", type=Path, default=None, help="results JSON path")
    args = parser.parse_args(argv)
    den = load_denoiser(args.model)
    bugs = bug_examples(load_test_files(args.corpus, args.split), args.n, seed=args.seed)
    options = SamplerOptions(checks=DEFAULT_CHECKS)
    counts: dict[str, dict[str, int]] = {}
    for bug in tqdm(bugs, desc="bugs", file=sys.stderr):
        text = bug.buggy
        scores = score_text(text, denoiser=den)
        picked = suspicious_spans(scores, text=text, max_fixes=1, min_suspicion=0.0, min_likely=0.0)
        s, e, worst = picked[0]
        fill = prepare_repair(den, text, picked, options)
        denoise(fill.job, den)
        bs, be = _widen(text, bug.start, bug.end)
        got = {
            "located": s < bug.end and e > bug.start,
            "substitute": text[: worst.start] + worst.likely + text[worst.end :] == bug.clean,
            "redenoise_exact": _redenoise(den, text, s, e, options, raced=False) == bug.clean,
            "redenoise_raced": _redenoise(den, text, s, e, options, raced=True) == bug.clean,
            "shipped": fill.result().text == bug.clean,
            "oracle_exact": _redenoise(den, text, bs, be, options, raced=False) == bug.clean,
            "oracle_raced": _redenoise(den, text, bs, be, options, raced=True) == bug.clean,
        }
        for kind in (bug.kind, "all"):
            row = counts.setdefault(kind, dict.fromkeys(("n", *VARIANTS), 0))
            row["n"] += 1
            for name, ok in got.items():
                row[name] += bool(ok)
    print(f"{'kind':<12}" + "".join(f"{v:>17}" for v in ("n", *VARIANTS)))
    for kind, row in sorted(counts.items()):
        print(f"{kind:<12}" + "".join(f"{row[v]:>17}" for v in ("n", *VARIANTS)))
    write_results(
        "repair_study",
        args.model,
        {"split": args.split, "n": args.n, "seed": args.seed, "counts": counts},
        args.out,
    )


if __name__ == "__main__":
    main()
