"""The copies offered at a completion (infill/core/copy_offers.py), each with its features
and whether it is right: the rows that model/training/fit_copy_confidence.py fits on.

    python -m benchmarks.copy_rows [--n 8000] [--out runs/copy_confidence/rows.jsonl]
    python -m benchmarks.copy_rows --rows runs/confidence/train.jsonl \
        runs/confidence/valid.jsonl
    python -m diffusion_infill.model.training.fit_copy_confidence

Two cases of copy, on lines of the corpus's splits in the 12,000 characters the language
server sends (no model is run):

- the rest of a line: lines cut after the space nearest their middle, as a user typing
  them is (benchmarks/heldout.py `mid_line_cut`); where the file holds copies
  (copy_texts.py `context_copies`), each is right when it is the rest of the line.
- the next line: the cursor on an empty line, where a line's code was (the completion
  case "empty line, one line"); where the file holds lines after the line before the
  cursor (`next_line_copies`), each is right when it is the line's code.

A row is each of the first `RANKS` copies a cursor offers (copy_offers.py), from `--n`
lines of the training split (set `train`), half as many of the validation split
(`valid`) and, where the repository set is present (python -m benchmarks.repo_set), 400
cursors in the files of its validation packages with the copies of their other files
(`repository_valid`).

With `--rows TRAIN VALID` (confidence rows of the training and validation splits,
benchmarks/confidence_rows.py: inline completions as the server asks them, with their
copies), the rows of a completion's items too, per case (after code, an empty line): one
per distinct text it could offer, with copy_offers.py `item_features` (the confidence the
model's decode gives it, read with the model's weights, and the surest copy that reads as
it); they name the network of the confidence weights that read them.

Each row (JSON lines): `case`, `set`, `features`, `right` (and an item's `network`).
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.eval_completion import requests
from benchmarks.eval_confidence import Scorer, completion_candidates
from benchmarks.heldout import EDITOR_CONTEXT, infill_examples, load_test_files
from benchmarks.repo_set import DATA, PACKAGES, repo_holes
from diffusion_infill.infill.context import ContextSettings, RepoContext
from diffusion_infill.infill.core.copy_offers import RANKS, item_features
from diffusion_infill.infill.core.copy_texts import (
    next_line_copies,
    tailed_context_copies,
    tailed_inline_copies,
)
from diffusion_infill.infill.core.snippets import Snippet
from diffusion_infill.lsp.offers import vouching
from diffusion_infill.model.loading import default_model_dir
from diffusion_infill.model.training.fit_copy_confidence import ITEM_CASES, ROWS

CORPUS = Path("data/corpus_v2")
Row = tuple[list[float], bool]  # features, the copy right
Finder = Callable[[str, int, str, list[Snippet] | None], list[Row]]
CASES = {"rest of the line": "mid-line", "next line": "empty line, one line"}
ITEM_KINDS = {"mid-line": False, "empty-line": True}  # confidence rows' kinds: an empty line
REPOSITORY_CURSORS = 400


def rest_of_line(doc: str, at: int, truth: str, snippets: list[Snippet] | None) -> list[Row]:
    """The rows of a mid-line cut, one per copy offered (`RANKS`): from the file's copies,
    or with `snippets` theirs."""
    if snippets is None:
        found, tail = tailed_context_copies(doc, at, at)
    else:
        found, tail = tailed_inline_copies(doc, at, at, snippets)
    if not found or not truth.strip():
        return []
    x = [1.0, math.log(tail), float(len(found) > 1)]
    return [([*x, float(k > 0)], c.strip() == truth.strip()) for k, c in enumerate(found[:RANKS])]


def next_line(doc: str, at: int, truth: str, snippets: list[Snippet] | None) -> list[Row]:
    """The rows of a cursor on an empty line, one per line offered (`RANKS`): from the
    file's lines, or the snippets'."""
    own, other = next_line_copies(doc, at, snippets or ())
    found = own if snippets is None else other
    if not found.lines or not truth.strip():
        return []
    x = [1.0, math.log(max(found.key, 1)), float(len(found.lines) > 1)]
    return [
        ([*x, float(k < found.agree), float(k > 0)], line == truth.strip())
        for k, line in enumerate(found.lines[:RANKS])
    ]


FINDERS: dict[str, Finder] = {"rest of the line": rest_of_line, "next line": next_line}


def corpus_rows(kind: str, split: str, n: int) -> list[Row]:
    files = load_test_files(CORPUS, split)
    examples = infill_examples(files, "single-line", n, seed=0, window_chars=EDITOR_CONTEXT)
    return [r for d, a, t in requests(examples, CASES[kind]) for r in FINDERS[kind](d, a, t, None)]


def repo_rows(kind: str, n: int) -> list[Row]:
    """The rows of copies from the other files of the repository set's validation
    packages (none without the set)."""
    names = [k for k, v in PACKAGES.items() if v[2] == "validation"]
    if any(not (DATA / k).is_dir() for k in names):
        return []
    repos = {k: RepoContext.build(DATA / k, ContextSettings(), root=DATA / k) for k in names}
    rows = []
    for hole in repo_holes("validation", "cursor", n):
        ((doc, at, truth),) = requests([hole.example], CASES[kind])
        snippets = repos[hole.package].snippets(DATA / hole.package / hole.path, doc, [(at, at)])
        rows += FINDERS[kind](doc, at, truth, list(snippets))
    return rows


def item_rows(path: Path, score: Scorer) -> dict[bool, list[Row]]:
    """From confidence rows (benchmarks/confidence_rows.py), per case (an empty line or
    not), one row per distinct text an inline completion could offer (lsp/offers.py
    `vouching` of eval_confidence's `completion_candidates`: its fill, runner-ups and
    copies, the decode's confidences read with the model's weights), right or not."""
    out: dict[bool, list[Row]] = {False: [], True: []}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if r["kind"] not in ITEM_KINDS:
            continue
        fill, ups, copies, facts = completion_candidates(r, score)
        for v in vouching(fill, ups, copies):
            x = item_features(v.decoded, v.copied, v.runner_up)
            out[ITEM_KINDS[r["kind"]]].append((x, bool(facts[v.text.strip()][0])))
    return out


def copy_rows(n: int) -> list[dict[str, Any]]:
    """The rows of both cases of copy: `n` training lines, half as many validation lines
    and the repository set's validation cursors."""
    out = []
    for case in FINDERS:
        sets = {
            "train": corpus_rows(case, "train", n),
            "valid": corpus_rows(case, "valid", n // 2),
            "repository_valid": repo_rows(case, REPOSITORY_CURSORS),
        }
        for name, rows in sets.items():
            out += [{"case": case, "set": name, "features": x, "right": y} for x, y in rows]
            print(f"{case}, {name}: {len(rows)} rows, {sum(y for _, y in rows)} right")
    return out


def items(train: Path, valid: Path, model: Path) -> list[dict[str, Any]]:
    """The items' rows of the confidence rows of the training and validation splits, per
    case (`ITEM_CASES`: after code, an empty line)."""
    score = Scorer(model)
    out = []
    for name, path in (("train", train), ("valid", valid)):
        for empty_line, rows in item_rows(path, score).items():
            case = ITEM_CASES[empty_line]
            network = score.calibration.network
            out += [
                {"case": case, "set": name, "features": x, "right": y, "network": network}
                for x, y in rows
            ]
            print(f"items, {case}, {name}: {len(rows)} rows, {sum(y for _, y in rows)} right")
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=8000, help="training lines")
    p.add_argument(
        "--rows",
        nargs=2,
        type=Path,
        metavar=("TRAIN", "VALID"),
        help="confidence rows (benchmarks/confidence_rows.py) to make the items' rows of",
    )
    p.add_argument("--model", type=Path, default=default_model_dir(), help="its confidence")
    p.add_argument("--out", type=Path, default=ROWS)
    args = p.parse_args(argv)
    if args.n < 2:
        p.error(f"--n must be at least 2, got {args.n}")
    for path in args.rows or ():
        if not path.is_file():
            p.error(f"{path} not found: python -m benchmarks.confidence_rows ... --out {path}")
    rows = copy_rows(args.n)
    if args.rows:
        rows += items(*args.rows, args.model)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
