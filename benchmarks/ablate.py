"""Recipe ablation at a fixed token budget: train each row from scratch, score it on the
validation split with the engine, and keep a table that grows across runs.

    python -m benchmarks.ablate [--tokens 3e6] [--rows baseline,t-bell,...]
    python -m benchmarks.ablate --init-from model/weights --lr 4e-4 --tokens 1e6 \
        --out benchmarks/results/ablation_warm.json --rows baseline,no-reveal,neither
    python -m benchmarks.ablate --init-from model/weights --lr 1.5e-4 --tokens 1e6 \
        --noise p_reveal=0.0,p_engine_alloc=0.0 --out benchmarks/results/ablation_recipe.json \
        --runs runs/recipe --rows baseline,t-bell,t-stratified,engine-holes,spans-80,spans-30

Every row trains `model.training.train` for the same number of tokens (same seed, data, batch,
schedule), from scratch or, with `--init-from`, continuing the same exported model (a
"warm" row: what a recipe change does to the model we have, which is what the long run
decides), and differs from `baseline` in one thing (ROWS below). It is then
scored on the validation split (packages never trained on, never in the test split) by
`benchmarks.eval_model --split valid`: single-line exact match with the true length and
with the engine's length (does the fill end in the right place?), multi-line exact match,
top-1 bug localisation, masked-token accuracy, plus the validation loss of the training
script. Rows already in the results file are skipped, so an interrupted table resumes in
the next run. Writes benchmarks/results/ablation.json and prints the table in the
markdown of docs/TRAINING.md; the command that reproduces each row is stored beside it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from benchmarks.eval_model import PARTS
from benchmarks.results_file import RESULTS

# the 8k vocabulary's steps are this much faster (benchmarks/results/train_shapes.json)
VOCAB_8K_SPEED = 1.26
# name: (what changes, extra arguments of model.training.train)
ROWS: dict[str, tuple[str, list[str]]] = {
    "baseline": (
        "the table's recipe: its --noise (t uniform unless it says), 30% token / "
        "15% block / 55% editor spans, 16k vocab, small",
        [],
    ),
    "t-bell": ("mask rate t ~ Beta(2, 2) instead of U(0, 1)", ["--noise", "t_dist=bell"]),
    "t-stratified": (
        "t low-discrepancy: evenly spaced strata across a batch",
        ["--noise", "t_dist=stratified"],
    ),
    "spans-80": (
        "80% editor-shaped spans (10% token masks, 10% block)",
        ["--noise", "p_tokens=0.1,p_block=0.1"],
    ),
    "spans-30": (
        "30% editor-shaped spans (50% token masks, 20% block)",
        ["--noise", "p_tokens=0.5,p_block=0.2"],
    ),
    "no-reveal": ("holes always fully masked (no part-decoded holes)", ["--noise", "p_reveal=0.0"]),
    "no-engine-alloc": (
        "null tails only from short random extras, not engine-sized",
        ["--noise", "p_engine_alloc=0.0"],
    ),
    "neither": (
        "neither part-decoded holes nor engine-sized allocations (the first run's holes)",
        ["--noise", "p_reveal=0.0,p_engine_alloc=0.0"],
    ),
    # in a table whose --noise turns them off (the long run's): both back on, as by default
    "engine-holes": (
        "part-decoded holes and engine-sized allocations (the default noise)",
        ["--noise", "p_reveal=0.5,p_engine_alloc=0.5"],
    ),
    "vocab-8k": (
        "8,192-token BPE vocabulary (data/tokenizer8k)",
        ["--tokenizer", "data/tokenizer8k/tokenizer.json"],
    ),
    "shape-deep": (
        "192 wide x 8 layers instead of 256 x 4 (similar FLOPs/token)",
        ["--preset", "small-deep"],
    ),
    "vocab-8k-compute": (
        f"8,192-token vocabulary at the baseline's compute: "
        f"{VOCAB_8K_SPEED}x its tokens (8k steps are that much faster: "
        "benchmarks/results/train_shapes.json)",
        ["--tokenizer", "data/tokenizer8k/tokenizer.json"],
    ),
}
# rows that train for a multiple of the table's tokens (equal compute, not equal tokens)
TOKEN_SCALE = {"vocab-8k-compute": VOCAB_8K_SPEED}
OUT = RESULTS / "ablation.json"


def train_args(name: str, args: argparse.Namespace) -> list[str]:
    base = [
        "--corpus",
        str(args.corpus),
        "--out",
        str(args.runs / name),
        "--tokens",
        f"{args.tokens * TOKEN_SCALE.get(name, 1.0):g}",
        "--eval-every",
        "1000000",
        "--save-every",
        "50",
        "--quiet",
    ]
    if args.init_from:  # the model's own shape and tokenizer
        base += ["--init-from", str(args.init_from)]
    else:
        base += ["--preset", "small", "--tokenizer", "model/weights/tokenizer.json"]
    if args.lr:
        base += ["--lr", f"{args.lr:g}"]
    if args.threads:  # only how fast, not what is computed
        base += ["--threads", str(args.threads)]
    extra = list(ROWS[name][1])
    if args.noise:  # the table's common noise; a row's own fields are appended (they win)
        if "--noise" in extra:
            i = extra.index("--noise") + 1
            extra[i] = f"{args.noise},{extra[i]}"
        else:
            extra += ["--noise", args.noise]
    if args.init_from and ("--tokenizer" in extra or "--preset" in extra):
        sys.exit(
            f"row {name} changes the model's shape or vocabulary: it cannot continue "
            f"{args.init_from}"
        )
    if "--tokenizer" in extra:  # the row's own tokenizer replaces the default
        i = base.index("--tokenizer")
        del base[i : i + 2]
    return base + extra


def score(export: Path, corpus: Path, n: int, parts: str) -> dict:
    """The row's validation figures; a part left out of `parts` scores None."""
    from benchmarks import eval_model

    row, runs = export.parent.name, export.parent.parent.name
    # rows of another runs folder (warm rows, other learning rates) get its name too
    path = (
        RESULTS / "ablation_rows" / (f"{row}.json" if runs == "ablation" else f"{runs}_{row}.json")
    )
    eval_model.main(
        [
            "--model",
            str(export),
            "--corpus",
            str(corpus),
            "--split",
            "valid",
            "--n",
            str(n),
            "--n-multi",
            str(n // 2),
            "--n-bugs",
            str(n),
            "--parts",
            parts,
            "--out",
            str(path),
        ]
    )
    ev = json.loads(path.read_text())
    single, true, multi = (
        ev.get(k, {}) for k in ("single_line", "single_line_true_length", "multi_line")
    )
    return {
        "single_line_true_length": true.get("exact_match"),
        "single_line": single.get("exact_match"),
        "length_error_tokens": single.get("length_error_tokens"),
        "ends_within_1": single.get("ends_within_1"),
        "multi_line": multi.get("exact_match"),
        "bug_top1": ev.get("bugs", {}).get("top1_localisation"),
        "masked_acc_0.5": ev.get("masked_token_accuracy", {}).get("0.50"),
        "nfe_per_token": single.get("nfe_per_token"),
    }


def _percent(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{100 * value:.{digits}f}%"


def table(results: dict) -> str:
    head = (
        "| row | change | valid masked CE | per char | single-line EM (true len) | "
        "single-line EM (engine len) | length error (tokens) | ends within 1 | "
        "multi-line EM | bug top-1 | tokens/s | command |\n" + "|---" * 12 + "|"
    )
    lines = [head]
    for name, r in results["rows"].items():
        s = r["scores"]
        error, ends = s.get("length_error_tokens"), s.get("ends_within_1")
        cpt = r.get("chars_per_token")  # the earliest rows lack it
        per_char = "-" if cpt is None else f"{r['valid_masked_ce'] / cpt:.3f}"
        lines.append(
            f"| {name} | {ROWS[name][0]} | {r['valid_masked_ce']:.3f} | {per_char} | "
            f"{_percent(s['single_line_true_length'])} | {_percent(s['single_line'])} | "
            f"{'-' if error is None else f'{error:.2f}'} | {_percent(ends, 0)} | "
            f"{_percent(s['multi_line'])} | {_percent(s['bug_top1'])} | "
            f"{r['tokens_per_s']:,.0f} | `{r['command']}` |"
        )
    return "\n".join(lines)


def chars_per_token(export: Path, corpus: Path) -> float:
    """The row's tokenizer's characters per token on the validation split."""
    from tokenizers import Tokenizer

    from diffusion_infill.model.training.tokenizer import chars_per_token as measure

    tok = Tokenizer.from_file(str(export / "tokenizer.json"))
    tok.encode_special_tokens = True
    return measure(tok, corpus)


def run_row(name: str, args: argparse.Namespace) -> dict:
    from diffusion_infill.model.training import train

    argv = train_args(name, args)
    t0 = time.perf_counter()
    train.main(argv)
    seconds = time.perf_counter() - t0
    record = json.loads((args.runs / name / "export" / "training.json").read_text())
    return {
        "command": "python -m diffusion_infill.model.training.train " + " ".join(argv),
        "tokens": record["tokens"],
        "train_minutes": record["minutes"],
        "tokens_per_s": record["tokens"] / max(1e-9, record["minutes"] * 60),
        "wall_seconds": round(seconds),
        "valid_loss": record["valid"]["loss"],
        "valid_masked_ce": record["valid"]["masked_ce"],
        "chars_per_token": chars_per_token(args.runs / name / "export", args.corpus),
        "eval_parts": args.parts,
        "scores": score(args.runs / name / "export", args.corpus, args.n, args.parts),
    }


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    out = args.out
    results = json.loads(out.read_text()) if out.exists() else {"rows": {}}
    settings = {
        "tokens": args.tokens,
        "corpus": str(args.corpus),
        "init_from": str(args.init_from or ""),
        "lr": args.lr,
        "noise": args.noise,
    }
    for key, value in settings.items():
        if results.get(key, value) != value:
            flag = key.replace("_", "-")
            sys.exit(
                f"{out} holds rows with {key}={results[key]}; rows compare only at equal "
                f"{key}: pass --{flag} {results[key]} or --out for a new table"
            )
    results.update(settings)
    for name in args.rows.split(","):
        if name not in ROWS:
            sys.exit(f"unknown row {name!r}: {', '.join(ROWS)}")
        if name in results["rows"]:
            print(f"{name}: done before, skipped", file=sys.stderr)
            continue
        results["rows"][name] = run_row(name, args)
        out.write_text(json.dumps(results, indent=1) + "\n")
        print(table(results), flush=True)
    print(table(results))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=float, default=3e6, help="training tokens per row")
    parser.add_argument("--rows", default=",".join(ROWS), help="comma-separated row names")
    parser.add_argument("--corpus", type=Path, default=Path("data/corpus_v2"))
    parser.add_argument("--out", type=Path, default=OUT, help="the table's results file")
    parser.add_argument("--runs", type=Path, default=Path("runs/ablation"))
    parser.add_argument("--n", type=int, default=200, help="single-line / bug examples")
    parser.add_argument(
        "--parts",
        default=",".join(PARTS),
        help="eval_model's measures per row (from-scratch rows of a few "
        "million tokens: single_line_true_length,masked,bugs_top1; an "
        "untrained model never ends a fill, and the engine's growth "
        "then takes ~10 s per hole)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="CPU threads per training run (1 when the cores are shared)",
    )
    parser.add_argument(
        "--init-from",
        type=Path,
        default=None,
        help="continue this exported model in every row (warm rows)",
    )
    parser.add_argument("--lr", type=float, default=None, help="peak learning rate")
    parser.add_argument(
        "--noise",
        default="",
        help="noise fields every row trains with (e.g. the long run's "
        "p_reveal=0.0,p_engine_alloc=0.0); a row's own fields win",
    )
    return parser


if __name__ == "__main__":
    main()
