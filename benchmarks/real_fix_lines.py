"""Real one-line fixes, their lines ranked with each line masked: a second look at where
the fixer looks.

    python -m benchmarks.real_fix_lines [--set data/real_fixes.jsonl] [--n N] [--model DIR]
    python -m benchmarks.real_fix_lines --injected 400 [--split valid]

The fixer (benchmarks/real_fixes.py) ranks a window's lines by their worst token in one
pass with every token in view. Here each line with a non-whitespace character (the lines
the fixer can name) is masked after its indentation, as many masks as it has tokens, and
one pass gives the log-probability of each of its tokens with the line out of view; a
second pass with the line in view gives what the fixer's pass sees. Rules rank the lines
by these, most surprising first (RULES), beside two baselines: the line with the most
tokens first, and random; among every line, and among the lines that are not comments
alone (a one-line fix in the set never is). Prints top-1 and top-3 line localisation per
rule and writes
benchmarks/results/real_fix_lines_<tokens seen>.json (or --out). Two passes per line:
about 0.6 s a window of 17 lines on two CPU threads. `--injected N` ranks the lines of
the injected-bug windows the fixer's held-out figure comes from instead
(`eval_model --parts bugs --n-bugs N`), to _injected_<split>.json. Each line keeps the
fixer's worst preference too (`worst`), for benchmarks/line_gate.py, and its regret
(`masked_regret`: how much likelier the masked pass's own token is, summed over the line).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from tqdm import tqdm

from benchmarks.fix_eval import checkpoint
from benchmarks.heldout import bug_examples, load_test_files
from benchmarks.real_fixes import SET, load_set
from benchmarks.results_file import write_results
from diffusion_infill.infill.core.canvas import fitted
from diffusion_infill.infill.core.repair import score_text
from diffusion_infill.infill.core.scoring import log_softmax
from diffusion_infill.infill.core.suspect_lines import code_lines
from diffusion_infill.model.loading import default_model_dir, load_denoiser

BUG_SEED = 2  # the injected bugs' seed: eval_model's (--seed 0 + 2), the fixer's figure

# rule -> score of a line (higher: more suspicious) from its masked and in-view token
# log-probabilities, and the masked pass's likeliest token's log-probability at each slot
# (its regret: how much likelier the model's own choice is than what is written)
RULES: dict[str, Callable[[np.ndarray, np.ndarray, np.ndarray], float]] = {
    "most tokens (baseline)": lambda m, v, b: float(len(m)),
    "in view, sum": lambda m, v, b: -float(v.sum()),
    "masked, mean": lambda m, v, b: -float(m.mean()),
    "masked, sum": lambda m, v, b: -float(m.sum()),
    "masked, worst 3 tokens": lambda m, v, b: -float(np.sort(m)[:3].sum()),
    "masked - in view, sum": lambda m, v, b: float(v.sum() - m.sum()),
    "masked regret, sum": lambda m, v, b: float((b - m).sum()),
    "masked regret, worst token": lambda m, v, b: float((b - m).max()),
    "masked regret, mean": lambda m, v, b: float((b - m).mean()),
}


def _canvases(den, window: str, line: int) -> tuple[list[int], list[int], list[int], int]:  # noqa: ANN001
    """The masked canvas of one line of `window`, the same in view, the line's tokens and
    where they start on the canvas."""
    lines = window.split("\n")
    start = sum(len(x) + 1 for x in lines[:line])
    text = lines[line]
    a, b = start + len(text) - len(text.lstrip()), start + len(text)
    left, mid, right = den.encode(window[:a]), den.encode(window[a:b]), den.encode(window[b:])
    masked, at = fitted(left, [den.special.mask] * len(mid), right, den.max_length)
    seen, _ = fitted(left, mid, right, den.max_length)
    return masked, seen, mid, at


def window_lines(den, ex: dict) -> dict:  # noqa: ANN001
    """One window's lines with their token log-probabilities, masked and in view."""
    text = ex["window"].split("\n")
    names = [i for i, line in enumerate(text) if line.strip()]
    made = [_canvases(den, ex["window"], i) for i in names]
    positions = [list(range(at, at + len(t))) for _, _, t, at in made]
    masked = den.logits([m for m, _, _, _ in made], positions)
    seen = den.logits([v for _, v, _, _ in made], positions)
    worst = {
        x.line: x.worst for x in code_lines(ex["window"], score_text(ex["window"], denoiser=den))
    }
    lines = []
    for i, (_, _, tokens, _), am, av in zip(names, made, masked, seen, strict=True):
        rows = np.arange(len(tokens))
        lines.append(
            {
                "line": i,
                "comment": text[i].lstrip().startswith("#"),
                "worst": worst.get(i),  # the fixer's worst preference; None: prose only
                "masked": np.round(log_softmax(am)[rows, tokens], 4).tolist(),
                "masked_best": np.round(log_softmax(am).max(axis=1), 4).tolist(),
                "in_view": np.round(log_softmax(av)[rows, tokens], 4).tolist(),
            }
        )
    return {"truth": ex["window_line"], "package": ex.get("package"), "lines": lines}


def summary(records: list[dict], *, code_only: bool = False) -> dict[str, dict[str, float]]:
    """Top-1 and top-3 line localisation per rule, and random's, among every line the
    fixer can name, or with `code_only` among those that are not comments alone."""
    pools = [[x for x in r["lines"] if not (code_only and x["comment"])] for r in records]
    out: dict[str, dict[str, float]] = {}
    for name, rule in RULES.items():
        top1 = top3 = 0
        for r, pool in zip(records, pools, strict=True):
            scores = [
                rule(np.array(x["masked"]), np.array(x["in_view"]), np.array(x["masked_best"]))
                for x in pool
            ]
            order = [pool[k]["line"] for k in np.argsort(-np.array(scores), kind="stable")]
            top1 += order[0] == r["truth"]
            top3 += r["truth"] in order[:3]
        out[name] = {"top1_line": top1 / len(records), "top3_line": top3 / len(records)}
    out["random"] = {
        "top1_line": float(np.mean([1 / len(p) for p in pools])),
        "top3_line": float(np.mean([min(3, len(p)) / len(p) for p in pools])),
    }
    return out


def compact(record: dict) -> dict:
    """A window's record as the results file keeps it: per line its token count and the
    sums the rules read, not every token's log-probability."""
    lines = []
    for x in record["lines"]:
        m, v, b = np.array(x["masked"]), np.array(x["in_view"]), np.array(x["masked_best"])
        lines.append(
            {
                "line": x["line"],
                "comment": x["comment"],
                "worst": None if x["worst"] is None else round(x["worst"], 4),
                "tokens": len(m),
                "masked_sum": round(float(m.sum()), 3),
                "masked_worst3": round(float(np.sort(m)[:3].sum()), 3),
                "in_view_sum": round(float(v.sum()), 3),
                "masked_regret": round(float((b - m).sum()), 3),
            }
        )
    return {"truth": record["truth"], "package": record["package"], "lines": lines}


def _examples(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[dict]:
    """The windows: the real-fix set's, or --injected bug windows (the changed line is
    the one that holds the injected bug)."""
    if args.injected is None:
        if not args.set.is_file():
            parser.error(f"{args.set} not found: python -m benchmarks.real_fixes build")
        return load_set(args.set)[: args.n]
    path = args.corpus / f"{args.split}.jsonl"
    if not path.is_file():
        parser.error(f"{path} not found: python -m diffusion_infill.model.training.corpus")
    bugs = bug_examples(load_test_files(args.corpus, args.split), args.injected, seed=BUG_SEED)
    return [{"window": b.buggy, "window_line": b.buggy.count("\n", 0, b.start)} for b in bugs]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", type=Path, default=SET, help="the real-fix set (jsonl)")
    parser.add_argument("--n", type=int, default=None, help="the first N windows")
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument(
        "--injected",
        type=int,
        default=None,
        metavar="N",
        help="instead, N injected-bug windows of --split (eval_model's: the fixer's figure)",
    )
    parser.add_argument("--split", default="valid", help="with --injected")
    parser.add_argument("--corpus", type=Path, default=Path("data/corpus_v2"))
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.n is not None and args.n < 1:
        parser.error(f"--n must be at least 1, got {args.n}")
    if args.injected is not None and args.injected < 1:
        parser.error(f"--injected must be at least 1, got {args.injected}")
    examples = _examples(parser, args)
    den = load_denoiser(args.model)
    t0 = time.perf_counter()
    records = [window_lines(den, ex) for ex in tqdm(examples, file=sys.stderr, leave=False)]
    found = {
        "every line": summary(records),
        "code lines (no comment-only line)": summary(records, code_only=True),
    }
    for pool, rows in found.items():
        print(pool)
        for name, row in rows.items():
            print(f"  {name:28} top-1 {row['top1_line']:6.1%}  top-3 {row['top3_line']:6.1%}")
    model = args.model or default_model_dir()
    results = {
        "command": " ".join(["python -m benchmarks.real_fix_lines", *(argv or sys.argv[1:])]),
        "model": str(model),
        "n": len(records),
        "rules": found,
        "seconds": round(time.perf_counter() - t0, 1),
        "records": [compact(r) for r in records],
    }
    which = "" if args.injected is None else f"_injected_{args.split}"
    out = args.out or Path("benchmarks/results") / f"real_fix_lines_{checkpoint(model)}{which}.json"
    write_results("real_fix_lines", args.model, results, out)


if __name__ == "__main__":
    main()
