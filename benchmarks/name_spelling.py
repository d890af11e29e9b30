"""What counts as a spelling for the `name` check: identifiers of the code, or any word?

    python -m benchmarks.name_spelling [--eval benchmarks/results/eval_shipped.json]

The `name` check (infill/core/checks.py) blames a fill that loads a name the text before
never spells. Today a spelling is an identifier of the code (`_spelled`); until the
807M-token checkpoint it was any word, comments and strings included (`lines` of a
docstring let `lines` through). This replays both rules without a model:

- the true line as the fill, in 1,500 random lines of whole validation files (what the
  command and the server check) and in the held-out 700-character windows (400 one-line,
  200 multi-line; a window can miss imports and parameters): false alarms;
- the fills an evaluation recorded (`--eval`, the test split's records of
  `benchmarks.eval_model`, replayed on the same windows): how many each rule blames, and
  how many of those equal the truth (a right fill lost).

Prints a table and writes benchmarks/results/name_spelling.json (or `--out`).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.heldout import Example, infill_examples, load_test_files, random_content_line
from benchmarks.results_file import RESULTS, write_results
from diffusion_infill.infill.core import checks
from diffusion_infill.infill.core.spans import Span, neutralise

_WORD = re.compile(r"[^\W\d]\w*")
Case = tuple[str, str, int, int]  # before (span neutralised), after (truth in place), start, end


def _any_word(_root: Any, data: bytes) -> set[str]:
    return set(_WORD.findall(data.decode("utf-8", "replace")))


RULES: dict[str, Callable[[Any, bytes], set[str]]] = {
    "identifiers": checks._spelled,
    "any_word": _any_word,
}


@contextmanager
def _rule(name: str) -> Iterator[None]:
    saved = checks._spelled
    checks._spelled = RULES[name]
    try:
        yield
    finally:
        checks._spelled = saved


def _neutral(text: str, a: int, b: int) -> str:
    return neutralise(text, [Span(a, b)])


def _blamed(before: str, text: str, a: int, b: int, fill: str) -> bool:
    after, filled = checks.splice(text, [(a, b)], [fill])
    return any(
        p.kind == "name"
        for p in checks.check_fills(before, after, [(a, b)], filled, kinds=("name",))
    )


def whole_file_lines(files: list[str], n: int, seed: int) -> list[Case]:
    rng = random.Random(seed)
    out: list[Case] = []
    while len(out) < n:
        picked = random_content_line(files, rng)
        if picked is not None:
            text, a, b = picked
            out.append((_neutral(text, a, b), text, a, b))
    return out


def window_cases(examples: list[Example]) -> list[Case]:
    return [(_neutral(ex.text, ex.start, ex.end), ex.text, ex.start, ex.end) for ex in examples]


def false_alarms(cases: list[Case]) -> dict[str, Any]:
    out: dict[str, Any] = {"n": len(cases)}
    for rule in RULES:
        ms, blamed = [], 0
        with _rule(rule):
            for before, text, a, b in cases:
                t0 = time.perf_counter()
                blamed += _blamed(before, text, a, b, text[a:b])
                ms.append((time.perf_counter() - t0) * 1000)
        out[rule] = {"truth_blamed": blamed, "check_ms_p50": round(statistics.median(ms), 2)}
    return out


def replay(records: list[dict[str, Any]], examples: list[Example]) -> dict[str, Any]:
    out: dict[str, Any] = {"n": len(records)}
    for rule in RULES:
        blamed = right = 0
        with _rule(rule):
            for ex, r in zip(examples, records, strict=True):
                if ex.text[ex.start : ex.end] != r["truth"]:
                    raise SystemExit("the records are not of these examples (split, n, seed)")
                hit = _blamed(
                    _neutral(ex.text, ex.start, ex.end), ex.text, ex.start, ex.end, r["fill"]
                )
                blamed += hit
                right += hit and r["fill"].strip() == r["truth"].strip()
        out[rule] = {"fills_blamed": blamed, "right_fills_blamed": right}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=Path("data/corpus_v2"))
    parser.add_argument(
        "--eval",
        type=Path,
        default=RESULTS / "eval_shipped.json",
        help="an eval_model result with records (test split, seed 0)",
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    valid = load_test_files(args.corpus, "valid")
    results: dict[str, Any] = {
        "false_alarms": {
            "whole_file_lines": false_alarms(whole_file_lines(valid, 1500, seed=1)),
            "one_line_windows": false_alarms(
                window_cases(infill_examples(valid, "single-line", 400, seed=0))
            ),
            "multi_line_windows": false_alarms(
                window_cases(infill_examples(valid, "multi-line", 200, seed=0))
            ),
        }
    }
    if args.eval.exists():
        recorded = json.loads(args.eval.read_text())
        test = load_test_files(args.corpus, "test")
        kinds = {"single_line": ("single-line", 0), "multi_line": ("multi-line", 1)}
        results["recorded_fills"] = {"eval": str(args.eval)}
        for key in (
            "single_line",
            "single_line_true_length",
            "multi_line",
            "multi_line_true_length",
        ):
            if key in recorded and "records" in recorded[key]:
                kind, seed = kinds[key.removesuffix("_true_length")]
                records = recorded[key]["records"]
                results["recorded_fills"][key] = replay(
                    records, infill_examples(test, kind, len(records), seed=seed)
                )
    for group, rows in results.items():
        for key, row in rows.items():
            if isinstance(row, dict):
                print(
                    f"{group:15s} {key:25s} "
                    + "  ".join(f"{rule}: {json.dumps(row[rule])}" for rule in RULES)
                )
    write_results("name_spelling", None, results, args.out or RESULTS / "name_spelling.json")


if __name__ == "__main__":
    main()
