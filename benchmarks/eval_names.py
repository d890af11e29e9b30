"""How often returned fills name what does not exist: the rates the `member` check targets.

    python -m benchmarks.eval_names RESULTS.json [RESULTS.json ...] [--out PATH]
    python -m benchmarks.eval_names WITHOUT.json WITH.json --pair    # a check's paired effect

Reads `benchmarks.eval_shapes` results files (their engine-length records), draws the same
holes again (the file's split, n, seed and window; `real`/`real-cursor` from
--real-files), puts each returned fill (not rejected) back into the *whole file* its
window was cut from, and counts the share of returned fills that

- (a) `missing`: use an attribute or module member that jedi shows does not exist on a
  base it knows whole, or a keyword argument that a callee known whole (without
  `**kwargs`) does not take (infill/core/jedi_names.py, no time budget here);
- (b) `unspelled`: load a bare identifier (not an attribute, not a keyword argument) that
  the fill does not bind, spelled nowhere in the whole file (its words, comments and
  strings included), and not defined by Python (builtins, keywords, the standard
  library's module names).

The same rates of the true code of each hole (`truth_*`) are the floor: what the measures
call wrong in code that is right (jedi's false alarms, a name used once in a file).

`--pair`: the two files are runs on the same holes without and with a change (say
`--checks` without and with `member`); per shape, the holes the change wins (right with
it, wrong without) and loses, the two-sided sign test's p (benchmarks/leave_one_out.py),
exact match and holes left as they were in each, beside each run's rates.
Prints a table and writes benchmarks/results/names/eval_names_<split>.json (or --out).
"""

from __future__ import annotations

import argparse
import builtins
import json
import keyword
import re
import sys
import time
from pathlib import Path

from benchmarks.heldout import load_test_files
from benchmarks.leave_one_out import paired
from benchmarks.real_files import load as load_real
from benchmarks.results_file import write_results
from benchmarks.shapes import real_file_examples, shape_examples
from diffusion_infill.infill.core.checks import member_uses, splice
from diffusion_infill.infill.core.jedi_names import missing_members
from diffusion_infill.infill.core.scopes import python_parser
from diffusion_infill.infill.core.syntax_tree import byte_ranges, names_at

PYTHON_NAMES = (
    frozenset(dir(builtins))
    | frozenset(keyword.kwlist)
    | frozenset(keyword.softkwlist)
    | frozenset(sys.stdlib_module_names)
    | {"__file__", "__name__", "__doc__", "__all__", "__path__", "__class__", "__module__"}
)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def whole_file(window: str, files: list[str], hint: dict[str, int]) -> tuple[str, int] | None:
    """The file `window` was cut from and the window's offset in it (None: not found)."""
    at = hint.get(window[:200])
    order = ([at] if at is not None else []) + list(range(len(files)))
    for i in order:
        j = files[i].find(window)
        if j >= 0:
            hint[window[:200]] = i
            return files[i], j
    return None


def unspelled(text: str, start: int, fill: str, original: str) -> list[str]:
    """The bare names `fill` (at `start` of `text`, already in it) loads that it does not
    bind, that `original` (the file without the fill) never spells, and that Python does
    not define."""
    data = text.encode("utf-8")
    root = python_parser().parse(data).root_node
    (r,) = byte_ranges(text, [(start, start + len(fill))])
    loads, bound = names_at(root, data, r)
    words = set(_WORD.findall(original))
    return sorted(
        {w for w, _ in loads if w not in bound and w not in words and w not in PYTHON_NAMES}
    )


def missing(text: str, start: int, fill: str) -> list[str]:
    """jedi's messages for the attributes and keyword arguments of `fill` (at `start` of
    `text`) that do not exist (see the module docstring)."""
    data = text.encode("utf-8")
    root = python_parser().parse(data).root_node
    (r,) = byte_ranges(text, [(start, start + len(fill))])
    uses = [(0, u) for u in member_uses(root, data, r)]
    found = missing_members(text, uses) if uses else []
    return [m.message for m in found or ()]


def judge(file_text: str, offset: int, ex, fill: str) -> dict[str, list[str]]:  # noqa: ANN001
    """The two measures of `fill` in the hole of `ex` (a window at `offset` of the file)."""
    a, b = offset + ex.start, offset + ex.end
    after, ((s, _),) = splice(file_text, [(a, b)], [fill])
    original = file_text[:a] + file_text[b:]
    return {"missing": missing(after, s, fill), "unspelled": unspelled(after, s, fill, original)}


def _examples(results: dict, shape: str, args: argparse.Namespace) -> tuple[list, list[str]]:
    """The holes of a results file's `shape` row, drawn again, and the files they are cut
    from."""
    window, seed, n = results["window_chars"], results["seed"], results["n"]
    if shape.startswith("real"):
        files = load_real(args.real_files)
        kind = "cursor" if shape == "real-cursor" else "whole-line"
        return real_file_examples(files, kind, seed=seed, window_chars=window), files
    files = load_test_files(args.corpus, results["split"])
    return shape_examples(files, shape, n, seed=seed, window_chars=window), files


def rates(results: dict, shape: str, args: argparse.Namespace) -> dict:
    """The measures of one shape's engine-length records."""
    records = results["shapes"][shape]["engine_length"]["records"]
    examples, files = _examples(results, shape, args)
    if [e.truth for e in examples[: len(records)]] != [r["truth"] for r in records]:
        raise SystemExit(f"{shape}: the records are not the holes drawn again")
    hint: dict[str, int] = {}
    returned = fill_missing = fill_unspelled = either = 0
    truth_missing = truth_unspelled = located = 0
    cases: list[dict] = []
    t0 = time.perf_counter()
    for ex, rec in zip(examples, records, strict=False):
        found = whole_file(ex.text, files, hint)
        if found is None:
            continue
        located += 1
        file_text, offset = found
        truth = judge(file_text, offset, ex, ex.truth)
        truth_missing += bool(truth["missing"])
        truth_unspelled += bool(truth["unspelled"])
        if rec["rejected"] is not None:
            continue
        returned += 1
        got = judge(file_text, offset, ex, rec["fill"])
        fill_missing += bool(got["missing"])
        fill_unspelled += bool(got["unspelled"])
        either += bool(got["missing"] or got["unspelled"])
        if got["missing"] or got["unspelled"]:
            cases.append({"fill": rec["fill"], "truth": rec["truth"], **got})
    return {
        "holes": len(records),
        "located": located,
        "returned": returned,
        "missing": round(fill_missing / max(1, returned), 4),
        "unspelled": round(fill_unspelled / max(1, returned), 4),
        "either": round(either / max(1, returned), 4),
        "missing_count": fill_missing,
        "unspelled_count": fill_unspelled,
        "truth_missing": round(truth_missing / max(1, located), 4),
        "truth_unspelled": round(truth_unspelled / max(1, located), 4),
        "exact_match": results["shapes"][shape]["engine_length"]["exact_match"],
        "seconds": round(time.perf_counter() - t0, 1),
        "cases": cases,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, nargs="+", help="eval_shapes results files")
    parser.add_argument("--corpus", type=Path, default=Path("data/corpus_v2"))
    parser.add_argument("--real-files", type=Path, default=Path("data/real_files.jsonl"))
    parser.add_argument(
        "--pair", action="store_true", help="two files: without and with a change, paired"
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.pair and len(args.results) != 2:
        parser.error("--pair takes two results files: without, then with")
    out: dict = {
        "command": "python -m benchmarks.eval_names "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "runs": {},
    }
    split = None
    for path in args.results:
        results = json.loads(path.read_text())
        split = results["split"]
        run: dict = {"checks": results.get("options", {}), "shapes": {}}
        for shape, row in results["shapes"].items():
            if "engine_length" not in row:
                continue
            r = rates(results, shape, args)
            run["shapes"][shape] = r
            print(
                f"{path.name:50s} {shape:13s} returned {r['returned']:3d}/{r['holes']:3d}  "
                f"missing {r['missing']:6.1%}  unspelled {r['unspelled']:6.1%}  "
                f"either {r['either']:6.1%}  (truth: missing {r['truth_missing']:5.1%}, "
                f"unspelled {r['truth_unspelled']:5.1%})  exact {r['exact_match']:.1%}",
                flush=True,
            )
        out["runs"][str(path)] = run
    if args.pair:
        out["paired"] = _paired(*args.results)
    default = Path("benchmarks/results/names") / f"eval_names_{split}.json"
    write_results("eval_names", None, out, args.out or default)


def _paired(without: Path, with_: Path) -> dict:
    """Per shape both runs hold: won, lost, p, exact match and left as they were."""
    a = json.loads(without.read_text())["shapes"]
    b = json.loads(with_.read_text())["shapes"]
    out = {}
    for shape in [s for s in a if s in b]:
        base, off = b[shape]["engine_length"], a[shape]["engine_length"]
        row = paired(base, off)
        keep = ("n", "won", "lost", "p", "significant", "p50_ms_without", "p50_ms_with")
        row = {k: row[k] for k in keep}
        row.update(
            exact_without=off["exact_match"],
            exact_with=base["exact_match"],
            left_without=off["rejected"],
            left_with=base["rejected"],
            changed=sum(
                x["fill"] != y["fill"] or x["rejected"] != y["rejected"]
                for x, y in zip(base["records"], off["records"], strict=True)
            ),
        )
        out[shape] = row
        print(
            f"{shape:13s} exact {row['exact_without']:.2%} -> {row['exact_with']:.2%}  "
            f"won {row['won']} lost {row['lost']} p {row['p']}  left "
            f"{row['left_without']:.2%} -> {row['left_with']:.2%}  fills changed {row['changed']}  "
            f"p50 {row['p50_ms_without']:.0f} -> {row['p50_ms_with']:.0f} ms",
            flush=True,
        )
    return out


if __name__ == "__main__":
    main()
