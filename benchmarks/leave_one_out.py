"""What each stage of a fill earns: every switchable stage off in turn, on the same holes.

    python -m benchmarks.leave_one_out [--split valid] [--n 400]
                                       [--shapes cursor,whole-line,part-of-line,block]
                                       [--stages all|NAME,...] [--runs DIR] [--out PATH]

Runs `benchmarks.eval_shapes` (the command's defaults, the engine's length) once with
every stage on and once with each stage off (`--no-<stage>`), all on the same holes, and
pairs each run with the first: per stage and shape, the holes the stage wins (right with
it, wrong without) and loses, the two-sided sign test's p of that split, the change in
exact match, and what the stage costs in forward passes per token and in p50 latency.
Block holes, where exact match stays near 0, are judged by the holes the stage brings
closer to the truth and further from it (difflib's similarity, a refused fill 0). A stage
whose removal loses nothing significant does not pay for itself.

A stage that acts where a user types (`COMPLETION_STAGES`: a completion inside a word,
one at a line's end) is judged on inline completions (`benchmarks.eval_completion`, its
mid-line and mid-word cases, --n lines of --split), paired the same way: instead of the
holes where it never acts on them (`word_starts`: the holes are selections), beside them
where it acts on both (`statement_ends`).

Each run's eval_shapes file lands in --runs (default benchmarks/results/leave_one_out/),
named by split, n and stage; a run whose file is there already, made with the same fill
code (a hash of infill/core/ and model/, weights included), is not run again, so the
table can be built up over several sittings, and a change to the engine re-runs it all.
The table is printed and written to --out (default
benchmarks/results/leave_one_out_<split>.json).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path

from benchmarks import eval_completion, eval_shapes
from benchmarks.infill_scores import closeness
from benchmarks.results_file import RESULTS, fill_code, write_results

# stage -> the eval_shapes arguments that turn it off
STAGES = {  # the stages whose gain was least sure when kept first
    "context_copies": ["--no-context-copies"],
    "checks": ["--checks", ""],
    "statement_ends": ["--no-statement-ends"],
    "indent_pass": ["--no-indent-pass"],
    "selection_lines": ["--no-selection-lines"],
    "line_holes": ["--no-line-holes"],
}
# stage -> the eval_completion arguments that turn it off: stages that act where a user
# types, never on the held-out holes above (selections of whole nodes and lines)
COMPLETION_STAGES = {  # stages that act where a user types, judged on completions too
    "word_starts": ["--no-word-starts"],
    "statement_ends": ["--no-statement-ends"],
}
EVERY_STAGE = list(dict.fromkeys([*STAGES, *COMPLETION_STAGES]))  # once each, in order
COMPLETION_CASES = ("mid-line", "mid-word")
SHAPES = ("cursor", "whole-line", "part-of-line", "block")
MULTI_LINE = ("block",)  # judged by similarity: exact match is flat near 0
SIGNIFICANT = 0.05  # the sign test's p below which a split of won / lost counts


def sign_test(won: int, lost: int) -> float:
    """Two-sided exact sign test: the chance of a split at least this uneven if each
    changed hole were a fair coin."""
    n = won + lost
    if n == 0:
        return 1.0
    k = min(won, lost)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def _similarity(record: dict) -> float:
    """How near a fill came to the truth (infill_scores.closeness); 0 for one refused."""
    if record.get("rejected") is not None:
        return 0.0
    return float(closeness(record["fill"], record["truth"])["similarity"])


def _split(base: dict, off: dict, right: Callable[[dict], bool], what: str) -> dict:
    """The row fields both kinds of stage share: of the same `what` (holes, requests) in
    both runs, those right with the stage on and wrong off (won) and the reverse (lost),
    the sign test's p of that split, exact match and p50 of each run."""
    a, b = base["records"], off["records"]
    if [r["truth"] for r in a] != [r["truth"] for r in b]:
        raise ValueError(f"the two runs hold different {what}")
    won = sum(right(x) and not right(y) for x, y in zip(a, b, strict=True))
    lost = sum(right(y) and not right(x) for x, y in zip(a, b, strict=True))
    p = sign_test(won, lost)
    return {
        "n": len(a),
        "won": won,
        "lost": lost,
        "p": round(p, 4),
        "significant": p < SIGNIFICANT,
        "exact_with": base["exact_match"],
        "exact_without": off["exact_match"],
        "p50_ms_with": round(base["ms_p50"], 1),
        "p50_ms_without": round(off["ms_p50"], 1),
    }


def _verdict(row: dict, won: int, lost: int) -> dict:
    """`row` with what the table says of the stage: a significant split either way."""
    verdict = ("pays" if won > lost else "loses") if row["significant"] else "neither"
    return row | {"verdict": verdict}


def paired(base: dict, off: dict, *, multi_line: bool = False) -> dict:
    """A stage's row for one shape: `base` (all stages on) against `off` (this one off),
    both eval_shapes rows of the engine's length on the same holes. For multi-line holes
    (`multi_line`), where exact match is flat near 0, the holes it brings closer to the
    truth and further from it (difflib's similarity) decide instead, by the same test."""
    row = _split(base, off, lambda r: r["exact"], "holes")
    row |= {
        "passes_per_token_with": round(base["nfe_per_token"], 3),
        "passes_per_token_without": round(off["nfe_per_token"], 3),
    }
    won, lost = row["won"], row["lost"]
    if multi_line:
        a, b = base["records"], off["records"]
        near = [(_similarity(x), _similarity(y)) for x, y in zip(a, b, strict=True)]
        closer = sum(x > y + 1e-9 for x, y in near)
        further = sum(y > x + 1e-9 for x, y in near)
        p_near = sign_test(closer, further)
        row |= {
            "similarity_with": round(sum(x for x, _ in near) / len(near), 3),
            "similarity_without": round(sum(y for _, y in near) / len(near), 3),
            "closer": closer,
            "further": further,
            "p_similarity": round(p_near, 4),
            "significant": p_near < SIGNIFICANT,
        }
        won, lost = closer, further
    return _verdict(row, won, lost)


def run_path(runs: Path, args: argparse.Namespace, stage: str | None) -> Path:
    return runs / f"{args.split}_n{args.n}_{stage or 'all_on'}.json"


def _cached(path: Path, run: Callable[[], None], covers: Callable[[dict], bool]) -> dict:
    """The results at `path` where they were made with this fill code (`fill_code`) and
    `covers` them, else those of `run()` (which writes `path`), stamped with it."""
    code = fill_code()
    if path.is_file():
        done = json.loads(path.read_text())
        if done.get("fill_code") == code and covers(done):
            return done
    run()
    done = json.loads(path.read_text())
    done["fill_code"] = code
    path.write_text(json.dumps(done, indent=1) + "\n")
    return done


def _common(args: argparse.Namespace, path: Path) -> list[str]:
    """The arguments every run takes: the split, n, corpus, out and model."""
    argv = ["--split", args.split, "--n", str(args.n), "--corpus", str(args.corpus)]
    argv += ["--out", str(path)]
    return argv + (["--model", str(args.model)] if args.model is not None else [])


def ensure_run(runs: Path, args: argparse.Namespace, stage: str | None) -> dict:
    """The eval_shapes results of one run (all stages on, or `stage` off): read from
    --runs when a run of the same fill code (`fill_code`) is there, else run now."""
    path = run_path(runs, args, stage)
    argv = _common(args, path) + ["--shapes", ",".join(args.shapes), "--lengths-only", "engine"]

    def run() -> None:
        print(f"-- {stage or 'all stages on'}", file=sys.stderr, flush=True)
        eval_shapes.main(argv + (STAGES[stage] if stage is not None else []))

    return _cached(path, run, lambda done: set(args.shapes) <= set(done["shapes"]))


def completion_paired(base: dict, off: dict) -> dict:
    """A completion stage's row for one case: `base` (all stages on) against `off`, both
    eval_completion cases on the same requests; right is the offer equal to the truth."""
    row = _split(base, off, lambda r: r["offer"].strip() == r["truth"].strip(), "requests")
    row |= {
        "passes_per_request_with": round(base["nfe_per_request"], 3),
        "passes_per_request_without": round(off["nfe_per_request"], 3),
    }
    return _verdict(row, row["won"], row["lost"])


def ensure_completion_run(runs: Path, args: argparse.Namespace, stage: str | None) -> dict:
    """The eval_completion results (mid-line and mid-word) of one run, all stages on or
    `stage` off, cached in --runs by fill code as `ensure_run`'s."""
    path = runs / f"{args.split}_n{args.n}_completion_{stage or 'all_on'}.json"
    argv = _common(args, path) + ["--cases", ",".join(COMPLETION_CASES)]

    def run() -> None:
        print(f"-- completion, {stage or 'all stages on'}", file=sys.stderr, flush=True)
        eval_completion.main(argv + (COMPLETION_STAGES[stage] if stage is not None else []))

    return _cached(path, run, lambda done: True)


def table(base: dict, runs: dict[str, dict], shapes: list[str]) -> dict[str, dict]:
    """Per stage, per shape: `paired`."""
    return {
        stage: {
            s: paired(
                base["shapes"][s]["engine_length"],
                run["shapes"][s]["engine_length"],
                multi_line=s in MULTI_LINE,
            )
            for s in shapes
        }
        for stage, run in runs.items()
    }


def print_table(rows: dict[str, dict]) -> None:
    print(
        f"{'stage off':16s} {'shape':13s} {'won':>4s} {'lost':>4s} {'p':>7s}  exact on/off"
        "  (multi-line: closer / further, p, similarity on/off)"
    )
    print("*: the stage pays (its removal loses holes significantly); !: it loses them")
    for stage, by_shape in rows.items():
        for shape, r in by_shape.items():
            star = {"pays": " *", "loses": " !"}.get(r["verdict"], "")
            near = (
                f"  ({r['closer']} / {r['further']}, {r['p_similarity']:.3f}, "
                f"{r['similarity_with']:.3f} / {r['similarity_without']:.3f})"
                if "closer" in r
                else ""
            )
            print(
                f"{stage:16s} {shape:13s} {r['won']:4d} {r['lost']:4d} {r['p']:7.3f}  "
                f"{r['exact_with']:.1%} / {r['exact_without']:.1%}{near}{star}"
            )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", default="valid")
    parser.add_argument("--n", type=int, default=400, help="holes per shape")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument(
        "--stages",
        default="all",
        help=f"all, or of: {', '.join(EVERY_STAGE)}",
    )
    parser.add_argument("--corpus", type=Path, default=Path("data/corpus_v2"))
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--runs", type=Path, default=RESULTS / "leave_one_out")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    args.shapes = args.shapes.split(",")
    if set(args.shapes) - set(SHAPES):
        parser.error(f"shapes are of: {', '.join(SHAPES)}")
    stages = EVERY_STAGE if args.stages == "all" else args.stages.split(",")
    if set(stages) - set(EVERY_STAGE):
        parser.error(f"unknown stage(s): {', '.join(sorted(set(stages) - set(EVERY_STAGE)))}")
    if args.n < 1:
        parser.error("--n must be >= 1")
    if not (args.corpus / f"{args.split}.jsonl").is_file():
        parser.error(
            f"{args.corpus / (args.split + '.jsonl')} not found: "
            "python -m diffusion_infill.model.training.corpus"
        )
    args.runs.mkdir(parents=True, exist_ok=True)
    rows: dict[str, dict] = {}
    if any(stage in STAGES for stage in stages):
        base = ensure_run(args.runs, args, None)
        runs = {stage: ensure_run(args.runs, args, stage) for stage in stages if stage in STAGES}
        rows |= table(base, runs, args.shapes)
    if any(stage in COMPLETION_STAGES for stage in stages):
        typed = ensure_completion_run(args.runs, args, None)["cases"]
        for stage in (s for s in stages if s in COMPLETION_STAGES):
            off = ensure_completion_run(args.runs, args, stage)["cases"]
            cases = {c: completion_paired(typed[c], off[c]) for c in COMPLETION_CASES}
            rows[stage] = rows.get(stage, {}) | cases  # beside its shapes' rows, if any
    print_table(rows)
    results = {
        "command": "python -m benchmarks.leave_one_out " + " ".join(argv or sys.argv[1:]),
        "split": args.split,
        "n": args.n,
        "significant_below": SIGNIFICANT,
        "fill_code": fill_code(),
        "stages": rows,
    }
    out = args.out or RESULTS / f"leave_one_out_{args.split}.json"
    write_results("leave_one_out", args.model, results, out)


if __name__ == "__main__":
    main()
