"""The headline figures at one commit: the runs behind the README's quality table, and the
table itself, written from their results files only.

    python -m benchmarks.headline [--list] [--only NAME,...] [--force]
    python -m benchmarks.headline --readme [--check]

Each run (`RUNS`) is a standing benchmark with fixed arguments that writes
benchmarks/results/headline/<name>.json, and records in it the hash of what decides its
figures (`measured`: the engine, the model's code and weights, the evaluation's own
modules). A run whose file records the checkout's hash, made from a clean commit, is not
run again unless `--force`, so the set can be completed over several sittings (commits
that change none of those files) and is always of one fill code; `--list` says which are
done, at which commit.

`--readme` rewrites the README's quality table (between `<!-- headline:quality -->` and
`<!-- /headline:quality -->`) from those files: every cell links the file it comes from,
and the line under the table names the fill code and the commits the files record
(several hashes are named, each with its runs, until the set is complete at one).
`--check` changes nothing and exits 1 if the README differs from what `--readme` would
write (the test suite runs it).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.results_file import RESULTS, commit, fill_code

HEADLINE = RESULTS / "headline"
README = RESULTS.parent.parent / "README.md"
BEGIN, END = "<!-- headline:quality -->", "<!-- /headline:quality -->"
N = 400  # holes per shape
# what decides the figures besides the fill code: the evaluation's modules
EVALUATION = tuple(
    f"benchmarks/{m}.py"
    for m in ("eval_shapes", "shapes", "heldout", "infill_scores", "real_files")
)
SHAPES = "cursor,whole-line,line-marker,part-of-line,block,real,real-cursor,real-marker"


@dataclass(frozen=True)
class Run:
    """One standing benchmark: `python -m benchmarks.<module> <argv> --out <file>`."""

    name: str
    module: str
    argv: tuple[str, ...]
    caption: str

    @property
    def path(self) -> Path:
        return HEADLINE / f"{self.name}.json"

    def command(self) -> list[str]:
        out = str(self.path.relative_to(RESULTS.parent.parent))
        return [sys.executable, "-m", f"benchmarks.{self.module}", *self.argv, "--out", out]


# line holes are scored on the whole text with the engine's length only (eval_shapes)
TRUE_SHAPES = "cursor,whole-line,part-of-line,block,real,real-cursor"
_HOLES = ("--split", "test", "--n", str(N), "--shapes")
RUNS = {
    r.name: r
    for r in (
        Run(
            "shapes",
            "eval_shapes",
            (*_HOLES, SHAPES, "--lengths-only", "engine"),
            "engine's length",
        ),
        Run(
            "shapes_true",
            "eval_shapes",
            (*_HOLES, TRUE_SHAPES, "--lengths-only", "true"),
            "true length",
        ),
        Run(
            "shapes_editor",
            "eval_shapes",
            (*_HOLES, SHAPES, "--lengths-only", "engine", "--editor-excerpt"),
            "what the editor sends: engine's length",
        ),
        Run(
            "shapes_editor_true",
            "eval_shapes",
            (*_HOLES, TRUE_SHAPES, "--lengths-only", "true", "--editor-excerpt"),
            "what the editor sends: true length",
        ),
    )
}
# the table's rows: (label, shape in the results files)
ROWS = (
    ("cursor: a line's code, indentation and line break given", "cursor"),
    ("whole line: a selected line, indentation and line break in the hole", "whole-line"),
    ("line hole: `<mask>` alone at the start of the line", "line-marker"),
    ("part of a line: an expression, arguments, a condition, a right-hand side", "part-of-line"),
    ("block: 2-8 whole lines (exact match; similarity to the truth)", "block"),
    ("real files, whole line (one line per file of packages outside the corpus)", "real"),
    ("real files, cursor", "real-cursor"),
    ("real files, line hole", "real-marker"),
)


def load(run: Run) -> dict[str, Any] | None:
    """A run's results, or None where it has not been run."""
    try:
        return json.loads(run.path.read_text())
    except (OSError, ValueError):
        return None


def cell(run: Run, shape: str) -> str:
    """A shape's exact match in a run, linked to its file ("-": not measured there)."""
    done = load(run)
    rows = (done or {}).get("shapes", {}).get(shape, {})
    row = rows.get("engine_length") or rows.get("true_length")
    if row is None:
        return "-"
    figure = f"{row['exact_match']:.1%}"
    if shape == "block" and "similarity" in row:
        figure += f"; {row['similarity']:.2f}"
    return f"[{figure}](benchmarks/results/headline/{run.path.name})"


def table() -> str:
    """The README's quality table from the headline files, and the commits they record."""
    runs = list(RUNS.values())
    head = "| hole | " + " | ".join(r.caption for r in runs) + " |"
    lines = [head, "|---|" + "---|" * len(runs)]
    lines += [f"| {label} | " + " | ".join(cell(r, s) for r in runs) + " |" for label, s in ROWS]
    codes: dict[str, list[str]] = {}
    for r in runs:
        done = load(r)
        key = (
            f"fill code {done.get('measured', 'unknown')} (commit {done.get('commit', '?')[:12]})"
            if done
            else "not run"
        )
        codes.setdefault(key, []).append(r.name)
    said = "; ".join(f"{c}: {', '.join(names)}" for c, names in sorted(codes.items()))
    lines += ["", f"Test split, n = {N} per shape (real files: every one). {said}."]
    return "\n".join(lines)


def readme(text: str) -> str:
    """`text` (the README) with its quality table written again."""
    a, b = text.find(BEGIN), text.find(END)
    if a < 0 or b < a:
        raise ValueError(f"README.md has no {BEGIN} ... {END} block")
    return text[: a + len(BEGIN)] + "\n" + table() + "\n" + text[b:]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="the runs and the commit of each")
    parser.add_argument("--only", default=None, help=f"of: {', '.join(RUNS)}")
    parser.add_argument("--force", action="store_true", help="run even where done at this commit")
    parser.add_argument("--readme", action="store_true", help="write the README's table")
    parser.add_argument("--check", action="store_true", help="with --readme: compare only")
    args = parser.parse_args(argv)
    names = list(RUNS) if args.only is None else args.only.split(",")
    if unknown := [n for n in names if n not in RUNS]:
        parser.error(f"unknown run(s): {', '.join(unknown)}; of: {', '.join(RUNS)}")
    if args.check and not args.readme:
        parser.error("--check goes with --readme")
    if args.readme:
        text = README.read_text()
        new = readme(text)
        if args.check:
            if new != text:
                sys.exit(
                    "README.md's quality table is not what the headline files say: "
                    "python -m benchmarks.headline --readme"
                )
            return
        README.write_text(new)
        print(f"wrote {README}")
        return
    here, code = commit(), fill_code(EVALUATION)
    for name in names:
        run, done = RUNS[name], load(RUNS[name])
        at = f"{done.get('measured')} at {done.get('commit', 'unknown')[:12]}" if done else None
        if args.list:
            print(f"{name:20s} {at or 'not run'}  {' '.join(run.command()[1:])}")
            continue
        if done and done.get("measured") == code and not args.force:
            print(f"-- {name}: done, fill code {code}", file=sys.stderr)
            continue
        if here.endswith("-dirty"):
            sys.exit(
                f"{name}: the checkout has changes; commit them first (runs record the commit)"
            )
        HEADLINE.mkdir(parents=True, exist_ok=True)
        print(f"-- {name}: {' '.join(run.command()[1:])}", file=sys.stderr, flush=True)
        subprocess.run(run.command(), check=True, cwd=RESULTS.parent.parent)
        made = json.loads(run.path.read_text())
        run.path.write_text(json.dumps({**made, "measured": code}, indent=1) + "\n")


if __name__ == "__main__":
    main()
