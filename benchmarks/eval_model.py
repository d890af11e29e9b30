"""Held-out evaluation of a model with the engine's default sampler.

    python -m benchmarks.eval_model [--model DIR] [--corpus data/corpus_v2] [--n 200]

On the test split (packages never trained on, see docs/DATA_CARD.md):
- single-line and multi-line (2-8 lines) infill exact match, with the length left to the
  model and with the true length given;
- masked-token accuracy by mask rate (one forward pass);
- bug finding and repair on injected bugs: top-1 localisation and exact repair;
- forward passes per token and milliseconds per infill on this machine;
- the fills' checks (infill/core/checks.py): the share of fills that add no syntax error
  (parse rate), that pass every check, that were rejected (every candidate failed), and
  how often the true text itself would fail the checks (false alarms).
`--checks` / `--candidates` set the engine's checks (docs/ARCHITECTURE.md, "Checks");
`--parts` runs only some of the measures. `--jobs N` runs the parts in N processes side by
side (one CPU thread each unless INFILL_THREADS says otherwise) and writes one merged
result: the held-out evaluation a training run ends with takes ~16 minutes on two cores
instead of ~28 on one.

Prints a table and writes JSON to benchmarks/results/eval_<model>.json. The measures are
benchmarks/infill_scores.py's (the holes) and benchmarks/model_scores.py's (masked tokens,
injected bugs).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from benchmarks.eval_parts import PARTS, SHIP_PARTS, merge_results, run_jobs, split_parts
from benchmarks.heldout import (
    HELDOUT_WINDOW_CHARS,
    bug_examples,
    heldout_arguments,
    heldout_holes,
    load_test_files,
)
from benchmarks.infill_scores import argument_examples, closeness, infill_scores
from benchmarks.model_scores import bug_scores, masked_accuracy
from benchmarks.results_file import write_results
from diffusion_infill import infill
from diffusion_infill.infill.core.errors import InfillError
from diffusion_infill.model.loading import default_model_dir, load_denoiser

__all__ = [  # with what the tests import from here
    "PARTS",
    "SHIP_PARTS",
    "closeness",
    "main",
    "merge_results",
    "split_parts",
]


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    parts = set(args.parts.split(","))
    _check_args(parser, args, parts)
    if args.jobs > 1:
        argv = sys.argv[1:] if argv is None else list(argv)
        results = run_jobs(
            _without(argv, "--jobs", "--parts", "--out"), split_parts(parts, args.jobs)
        )
        _print(results)
        write_results("eval", args.model, results, args.out)
        return
    try:
        options = infill.SamplerOptions(
            checks=args.checks,
            candidates=args.candidates,
            lengths=args.lengths,
            cache_refresh=args.cache_refresh,
            grow_cap=args.grow_cap,
            order=args.order,
            threshold=args.threshold,
            remask_threshold=args.remask_threshold,
        )
    except InfillError as exc:  # a value the sampler refuses: a usage error naming it
        parser.error(str(exc))

    den = load_denoiser(args.model)
    files = load_test_files(args.corpus, args.split)
    single, multi, bugs, args_ex = _examples(args, files, parts)
    t0 = time.perf_counter()
    results = _measure(
        args,
        parts,
        den,
        files,
        options,
        {"single_line": single, "multi_line": multi, "arguments": args_ex},
        bugs,
    )
    results["seconds"] = round(time.perf_counter() - t0, 1)
    training = Path(results["model"]) / "training.json"
    if training.exists():
        results["training"] = json.loads(training.read_text())

    _print(results)
    write_results("eval", args.model, results, args.out)


def _examples(
    args: argparse.Namespace, files: list[str], parts: set[str]
) -> tuple[list, list, list, list]:
    """The held-out examples drawn from `files` with the run's seed: single-line holes,
    multi-line holes, injected bugs, and holes inside a line ("arguments", only when that
    part runs)."""
    window = args.window_chars
    single = heldout_holes(files, "single-line", args.n, seed=args.seed, window_chars=window)
    multi = heldout_holes(
        files, "multi-line", args.n_multi, seed=args.seed + 1, window_chars=window
    )
    bugs = bug_examples(files, args.n_bugs, seed=args.seed + 2)
    args_ex = (
        argument_examples(
            files,
            args.n,
            seed=args.seed + 3,
            window_chars=args.window_chars,
        )
        if "arguments" in parts
        else []
    )
    return single, multi, bugs, args_ex


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    heldout_arguments(parser)
    parser.add_argument("--n", type=int, default=200, help="single-line examples")
    parser.add_argument("--n-multi", type=int, default=100, help="multi-line examples")
    parser.add_argument("--n-bugs", type=int, default=200, help="injected-bug examples")
    parser.add_argument("--seed", type=int, default=0, help="example selection seed")
    parser.add_argument(
        "--window-chars",
        type=int,
        default=HELDOUT_WINDOW_CHARS,
        help="characters of the test file around each infill example (the "
        "same holes at any size; the engine cuts what exceeds the model's "
        "context by scopes, as in the editor)",
    )
    parser.add_argument("--out", type=Path, default=None, help="results JSON path")
    _engine_arguments(parser)
    parser.add_argument(
        "--bug-order",
        choices=("preference", "suspicion"),
        default="preference",
        help="which token top-1 localisation names: the fixer's order "
        "(preference), or the highest suspicion",
    )
    parser.add_argument(
        "--parts",
        default=",".join(SHIP_PARTS),
        help=f"measures to run, comma-separated, of: {', '.join(PARTS)}",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="processes that share out the parts (one result is written)",
    )
    return parser


def _engine_arguments(parser: argparse.ArgumentParser) -> None:
    """The engine's options the fills run with: checks, candidates, lengths, the cache,
    growth and the sampler's order and thresholds."""
    parser.add_argument(
        "--checks",
        default=infill.SamplerOptions().checks,
        help="the engine's checks, comma-separated ('' for none)",
    )
    parser.add_argument(
        "--candidates",
        type=int,
        default=infill.SamplerOptions().candidates,
        help="candidates per fill when the checks are on",
    )
    parser.add_argument(
        "--lengths",
        type=int,
        default=infill.SamplerOptions().lengths,
        help="allocations raced per hole (1: the engine's one allocation)",
    )
    parser.add_argument(
        "--cache-refresh",
        type=int,
        default=infill.SamplerOptions().cache_refresh,
        help="reuse the context's keys/values, a full pass every K steps "
        "(0: every pass exact, the default)",
    )
    parser.add_argument(
        "--grow-cap",
        type=int,
        default=infill.SamplerOptions().grow_cap,
        help="the most tokens a hole grows to (default: the engine's, "
        f"{infill.SamplerOptions().grow_cap})",
    )
    parser.add_argument(
        "--order",
        default=infill.SamplerOptions().order,
        help=f"the sampler's commit order (default: {infill.SamplerOptions().order})",
    )
    parser.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="commit threshold of the sampler's order (default: the order's)",
    )
    parser.add_argument(
        "--remask-threshold",
        type=float,
        default=None,
        help="remask committed tokens whose probability fell below this "
        "(ReMDM-style self-correction; default: off)",
    )


def _check_args(parser: argparse.ArgumentParser, args: argparse.Namespace, parts: set[str]) -> None:
    """Usage errors (argparse's exit status 2) for values the parser cannot refuse."""
    if parts - set(PARTS):
        parser.error(f"unknown part(s): {', '.join(sorted(parts - set(PARTS)))}")
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    if args.window_chars < 1:
        parser.error(f"--window-chars must be at least 1, got {args.window_chars}")


def _measure(
    args: argparse.Namespace,
    parts: set[str],
    den,
    files: list[str],
    options: infill.SamplerOptions,
    holes: dict[str, list],
    bugs: list,
) -> dict:
    """The figures of `parts`: each kind of hole of `holes` filled (with the engine's length
    and with the true length), masked tokens, injected bugs."""
    results: dict = {
        "model": str(args.model or default_model_dir()),
        "split": args.split,
        "checks": args.checks,
        "candidates": args.candidates,
        "lengths": args.lengths,
        "cache_refresh": args.cache_refresh,
        "window_chars": args.window_chars,
        "grow_cap": args.grow_cap,
        "order": args.order,
        "threshold": args.threshold,
        "remask_threshold": args.remask_threshold,
    }
    for key, examples in holes.items():
        for true_length in (False, True):
            name = key + ("_true_length" if true_length else "")
            if name in parts:
                results[name] = infill_scores(
                    den,
                    examples,
                    true_length=true_length,
                    desc=name.replace("_", " "),
                    options=options,
                )
    if "masked" in parts:
        results["masked_token_accuracy"] = masked_accuracy(
            den, files, [0.15, 0.3, 0.5, 0.7, 0.9], n=100, seed=args.seed
        )
    if parts & {"bugs", "bugs_top1"}:
        results["bugs"] = bug_scores(
            den, bugs, desc="bugs", repair="bugs" in parts, order=args.bug_order
        )
        results["bug_order"] = args.bug_order
    return results


def _without(argv: list[str], *options: str) -> list[str]:
    """`argv` less each of `options` and its value (`--x v` or `--x=v`)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in options:
            skip = True
        elif not a.startswith(tuple(o + "=" for o in options)):
            out.append(a)
    return out


def _print(results: dict) -> None:
    for key in PARTS[:5]:
        if key not in results:
            continue
        r = results[key]
        print(
            f"{key:26s} EM {100 * r['exact_match']:5.1f}%  n={r['n']}  "
            f"NFE/token {r['nfe_per_token']:.2f}  p50 {r['ms_p50']:.0f} ms  "
            f"parse {100 * r['parse_rate']:.1f}%  clean {100 * r['clean']:.1f}%  "
            f"rejected {100 * r['rejected']:.1f}%  similarity {r['similarity']:.3f}  "
            f"lines in place {100 * r['lines_in_place']:.1f}%  "
            f"loops {100 * r['repeated_line_fills']:.0f}%"
        )
    if "masked_token_accuracy" in results:
        acc = results["masked_token_accuracy"]
        print(
            "masked-token accuracy     " + "  ".join(f"{k}: {100 * v:.1f}%" for k, v in acc.items())
        )
    if "bugs" not in results:
        return
    b = results["bugs"]
    pct = lambda x: "-" if x is None else f"{100 * x:5.1f}%"  # noqa: E731 (no repair run)
    print(
        f"bugs                       top-1 localisation {100 * b['top1_localisation']:.1f}%"
        f"  exact repair {pct(b['exact_repair'])}  n={b['n']}"
    )
    for kind, v in b["by_kind"].items():
        print(
            f"  {kind:24s} top-1 {100 * v['top1_localisation']:5.1f}%  "
            f"repair {pct(v['exact_repair'])}  n={v['n']}"
        )


if __name__ == "__main__":
    main()
