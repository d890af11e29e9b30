"""How often a whole-line hole gets its true indentation: the rules alone against the
rules with the model's depth pass (infill/core/indents.py).

    python -m benchmarks.indent_study [--split valid] [--n 3000] [--model DIR]

The holes are the eval_shapes `whole-line` holes (benchmarks/shapes.py: the same lines for
a seed, in 700-character windows). For each, the indentation the engine would write
(`lines.indentation`), the depths the code allows (`indents.depths`) and the model's
log-probability of each; prints the share right by the rules alone and with the model's
pick at several margins (MARGINS; the engine's is indents.MARGIN), and writes
benchmarks/results/indent_study_<tokens seen>_<split>.json (or --out).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tqdm import tqdm

from benchmarks.eval_shapes import checkpoint
from benchmarks.heldout import heldout_arguments, heldout_files
from benchmarks.results_file import write_results
from benchmarks.shapes import shape_examples
from diffusion_infill.infill.core.indents import MARGIN, choose, depths, open_depths
from diffusion_infill.infill.core.lines import line_frames
from diffusion_infill.infill.core.spans import Span, neutralise
from diffusion_infill.model.loading import default_model_dir, load_denoiser

MARGINS = (0.0, 0.25, MARGIN, 1.0, 2.0)  # nats; MARGIN is what the engine uses


def study(den, examples: list) -> list[dict]:  # noqa: ANN001
    """Per hole: the true indentation's width, the rules', and where the code allows
    several depths, the model's log-probability of each (by width)."""
    records = []
    for ex in tqdm(examples, desc="indentation", file=sys.stderr, leave=False):
        span = Span(ex.start, ex.end)
        frames = line_frames(ex.text, [span])
        assert frames[0] is not None
        allowed = depths(ex.text, ex.start, ex.end)
        scores = open_depths(ex.text, neutralise(ex.text, [span]), [span], frames, den).get(0, {})
        truth = ex.truth[: len(ex.truth) - len(ex.truth.lstrip(" \t"))]
        records.append(
            {
                "truth": len(truth),
                "rules": len(frames[0].head),
                "allowed": [len(d) for d in allowed],
                "scores": {len(d): round(v, 4) for d, v in scores.items()},
            }
        )
    return records


def _pick(record: dict, margin: float) -> int:
    """The width the engine writes with the model's pass at `margin`."""
    scores = {" " * int(w): v for w, v in record["scores"].items()}
    return len(choose(scores, " " * record["rules"], margin))


def summary(records: list[dict]) -> dict[str, object]:
    n = len(records)
    open_ = [r for r in records if r["allowed"]]
    out: dict[str, object] = {
        "n": n,
        "rules_right": sum(r["rules"] == r["truth"] for r in records) / n,
        "open": len(open_),
        "open_truth_allowed": sum(r["truth"] in r["allowed"] for r in open_),
        "open_rules_right": sum(r["rules"] == r["truth"] for r in open_),
    }
    for margin in MARGINS:
        picks = [_pick(r, margin) for r in records]
        out[f"margin_{margin}"] = {
            "right": sum(p == r["truth"] for p, r in zip(picks, records, strict=True)) / n,
            "won": sum(p == r["truth"] != r["rules"] for p, r in zip(picks, records, strict=True)),
            "lost": sum(r["rules"] == r["truth"] != p for p, r in zip(picks, records, strict=True)),
        }
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    heldout_arguments(parser)
    parser.add_argument("--n", type=int, default=3000, help="whole-line holes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error("--n must be >= 1")
    files = heldout_files(parser, args)
    den = load_denoiser(args.model)
    t0 = time.perf_counter()
    records = study(den, shape_examples(files, "whole-line", args.n, seed=args.seed))
    found = summary(records)
    for key, value in found.items():
        print(f"{key:20} {value:.4f}" if isinstance(value, float) else f"{key:20} {value}")
    model = str(args.model or default_model_dir())
    results = {
        "command": " ".join(["python -m benchmarks.indent_study", *(argv or sys.argv[1:])]),
        "model": model,
        "split": args.split,
        "seed": args.seed,
        "margin": MARGIN,
        "summary": found,
        "seconds": round(time.perf_counter() - t0, 1),
        "records": records,
    }
    name = f"indent_study_{checkpoint(Path(model))}_{args.split}.json"
    out = args.out or Path("benchmarks/results") / name
    write_results("indent_study", args.model, results, out)


if __name__ == "__main__":
    main()
