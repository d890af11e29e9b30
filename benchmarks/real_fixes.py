"""Real one-line fixes: lines that a package's next release changed, and the fixer on them.

    python -m benchmarks.real_fixes build          # -> data/real_fixes.jsonl (once)
    python -m benchmarks.real_fixes build --select # choose the changes again (rewrites MANIFEST)
    python -m benchmarks.real_fixes eval [--n N]   # -> benchmarks/results/real_fixes_<M>Mtok.json
    python -m benchmarks.real_fixes build --split valid   # the validation set (its own packages)

The set: for every pair of consecutive pinned releases (PINS) of small pure-Python
packages that the corpus does not hold (neither data/corpus_v2/split.json nor
model/training/corpus/packages.py names them), both archives are fetched with `pip download
--no-deps` into data/real_fixes_cache (the wheel, else the sdist) and every .py file
present in both is diffed. A hunk is kept when one line became one other line with the
same indentation, the rest of the file is the same within the window around it (~700
characters of whole lines, as the held-out windows), and the change reads as a fix
(model/training/corpus/line_changes.py: not whitespace, a comment, a docstring or an annotation;
not an import, a version string, a reworded message, a row of data, a signature that only
grows or a rename); tests,
docs, setup and version files are not read. Then: a window most of whose long lines
(over 40 characters) are in the corpus's training split is dropped, one example is kept
per (buggy line, fixed line), and at most PER_FILE per file and release pair (more reads
as a sweep through the file, not as fixes). A package that ships a public benchmark
(HumanEval, MBPP, QuixBugs, ...) is dropped. Which changes make the set is pinned in MANIFEST
(benchmarks/real_fixes.json: release pair, path, line and the window's sha256), so that
every machine builds the same set from the releases alone (a pinned change not found is
an error that names it); `build --select` chooses them again against a corpus and
rewrites the pins. Nothing requires the release notes to
mention a fix: each record says whether the notes of the newer release (from its sdist's
changelog) say "fix" (`notes_fix`), and the line of the notes that says it and names the
changed function or a word of the line (`notes_line`), when there is one.

Record: {"package", "old_version", "new_version", "path", "line" (1-based, old file),
"buggy_line", "fixed_line", "window" (old text), "fixed_window", "window_line" (0-based,
in the window), "words_changed", "notes_fix", "notes_line"}.

The evaluation runs the fixer as the injected-bug figures do (benchmarks/model_scores.py
`bug_scores`): each window is scored (`score_text`, through `fix_text`) and its tokens
taken worst first by `preference`; the lines in the order of their worst token are the
fixer's ranking. It reports top-1 and top-3 line localisation against a random ranking
of the lines that have a token (1/lines and 3/lines, exact), whether the worst token
lies in the changed characters, and exact repair (`fix_text` with no thresholds gives
the new window). Run it with INFILL_THREADS=1 under `nice` on a shared machine.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks.fix_releases import PINS, build_set
from benchmarks.fix_releases_valid import VALID_PINS
from benchmarks.results_file import write_results

SET = Path("data/real_fixes.jsonl")
MANIFEST = Path(__file__).with_name("real_fixes.json")  # the pinned changes
CACHE = Path("data/real_fixes_cache")
# the validation set: its own packages (benchmarks/fix_releases_valid.py), set and pins
SPLITS = {
    "test": (PINS, SET, MANIFEST),
    "valid": (
        VALID_PINS,
        Path("data/real_fixes_valid.jsonl"),
        Path(__file__).with_name("real_fixes_valid.json"),
    ),
}


def _arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.real_fixes", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", metavar="{build,eval}")
    build = sub.add_parser("build", help="fetch the pinned releases and write the set")
    build.add_argument(
        "--split",
        choices=sorted(SPLITS),
        default="test",
        help="test (the figures reported) or valid (its own packages: to choose on)",
    )
    build.add_argument("--out", type=Path, default=None, help="default: the split's set")
    build.add_argument("--cache", type=Path, default=CACHE)
    build.add_argument(
        "--select",
        action="store_true",
        help="choose the changes again against --corpus (rewrites the split's pins)",
    )
    build.add_argument(
        "--corpus",
        type=Path,
        default=Path("data/corpus_v2"),
        help="with --select: the corpus whose training split windows must not come from",
    )
    run = sub.add_parser("eval", help="run the fixer on the set")
    run.add_argument(
        "--set",
        type=Path,
        default=SET,
        help=f"the set (default {SET}; the validation set: {SPLITS['valid'][1]})",
    )
    run.add_argument(
        "--model", type=Path, default=None, help="model directory (default: the shipped model)"
    )
    run.add_argument("--n", type=int, default=None, help="only the first N examples")
    run.add_argument("--out", type=Path, default=None, help="results JSON path")
    return parser


def load_set(path: Path) -> list[dict]:
    with path.open() as fh:
        return [json.loads(line) for line in fh if line.strip()]


def main(argv: list[str] | None = None) -> None:
    parser = _arguments()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.error("say what to do: build (write the set) or eval (run the fixer on it)")
    if args.command == "build":
        if args.select and not (args.corpus / "train.jsonl").is_file():
            parser.error(
                f"{args.corpus}/train.jsonl not found: "
                "python -m diffusion_infill.model.training.corpus"
            )
        pins, out, manifest = SPLITS[args.split]
        if not args.select and not manifest.is_file():
            parser.error(f"{manifest} not found: choose the changes with build --select")
        corpus = args.corpus if args.select else None
        build_set(args.out or out, args.cache, corpus, pins, manifest)
        return
    if args.n is not None and args.n < 1:
        parser.error(f"--n must be at least 1, got {args.n}")
    if not args.set.is_file():
        parser.error(f"{args.set} not found: build it with python -m benchmarks.real_fixes build")
    examples = load_set(args.set)[: args.n]
    if not examples:
        parser.error(f"{args.set} holds no examples")
    from benchmarks.fix_eval import evaluate, print_table, results_path

    results = evaluate(examples, args.model)
    print_table(results)
    write_results("real_fixes", args.model, results, args.out or results_path(args.model))


if __name__ == "__main__":
    main()
