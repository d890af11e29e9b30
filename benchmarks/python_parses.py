"""Do the fills of an eval_shapes run leave Python parsing? A measure apart from the checks.

    python -m benchmarks.python_parses RESULTS.json [RESULTS.json ...] [--out OUT.json]

The checks decide which fills the engine returns, and eval_shapes counts as "broken" the
fills that fail them, so its 0% says only that the checks agree with themselves. Here
Python's own parser (`ast`) judges: the run's holes are drawn again (the same shapes, n,
seed and window as the results file says), and among the holes whose text parses with
the truth in place and whose fill was returned, the fills with which it does not are
counted, per shape and length, with Python's message for a few of them; and of the texts
that parse, how many still do with the hole neutralised to `_`s and with the checks'
stand-in (where neither does, the checks cannot ask Python's parser). The real-file
shapes are left out (their files are not in the corpus). Prints a table and writes
benchmarks/results/python_parses_<first file's name>.json (or --out).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from benchmarks.heldout import heldout_files
from benchmarks.results_file import RESULTS, write_results
from benchmarks.shapes import SHAPES, holding, shape_examples
from diffusion_infill.infill.core.checks import syntax_error
from diffusion_infill.infill.core.spans import Span, neutralise
from diffusion_infill.infill.core.stand_ins import parsing_stand_in

EXAMPLES_KEPT = 5  # messages kept per cell


def unparseable(examples: Iterable[Any], records: Iterable[dict]) -> dict[str, Any]:
    """Of the examples whose text parses and whose fill was returned, those whose text
    with the fill does not: counts and the first few (fill, Python's message). And how
    often the checks had Python's parser to judge with: of the texts that parse, those
    that parse with the hole neutralised (`_`s), and with a stand-in
    (infill/core/stand_ins.py)."""
    judged, broken, kept = 0, 0, []
    parsing = {"texts": 0, "neutralised": 0, "stand_in": 0}
    for ex, rec in zip(examples, records, strict=True):
        if syntax_error(ex.text) is not None:
            continue
        neutral = neutralise(ex.text, [Span(ex.start, ex.end)])
        parsing["texts"] += 1
        stood = parsing_stand_in(neutral, [(ex.start, ex.end)])  # the text itself if it parses
        parsing["neutralised"] += stood is not None and stood.text == neutral
        parsing["stand_in"] += stood is not None
        if rec.get("rejected") is not None or rec.get("fill") is None:
            continue
        judged += 1
        error = syntax_error(ex.text[: ex.start] + rec["fill"] + ex.text[ex.end :])
        if error is not None:
            broken += 1
            if len(kept) < EXAMPLES_KEPT:
                kept.append({"fill": rec["fill"][:80], "error": error})
    return {"judged": judged, "unparseable": broken, "examples": kept, "parsing": parsing}


def judge(results: dict[str, Any], files: list[str]) -> dict[str, Any]:
    """Per shape and length of one eval_shapes results file: `unparseable`."""
    out: dict[str, Any] = {}
    for shape, row in results["shapes"].items():
        if shape not in SHAPES:
            continue
        examples = holding(
            shape_examples(
                files,
                shape,
                results["n"],
                seed=results["seed"],
                window_chars=results["window_chars"],
            ),
            results.get("holes_containing"),
        )
        out[shape] = {key: unparseable(examples, cell["records"]) for key, cell in row.items()}
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, nargs="+", help="eval_shapes results files")
    parser.add_argument("--corpus", type=Path, default=Path("data/corpus_v2"))
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    runs = {}
    for path in args.results:
        if not path.is_file():
            parser.error(f"{path} not found")
        results = json.loads(path.read_text())
        if "shapes" not in results or "split" not in results:
            parser.error(f"{path} is not an eval_shapes results file")
        args.split = results["split"]
        runs[path.name] = judge(results, heldout_files(parser, args))
    print(f"{'file':58} {'shape':13} {'length':13} {'judged':>6} {'unparseable':>11}", end="")
    print(f" {'parse':>6} {'as _':>6} {'stand-in':>8}")
    for name, shapes in runs.items():
        for shape, cells in shapes.items():
            for key, c in cells.items():
                print(
                    f"{name:58} {shape:13} {key:13} {c['judged']:6d} {c['unparseable']:11d}", end=""
                )
                p = c["parsing"]
                print(f" {p['texts']:6d} {p['neutralised']:6d} {p['stand_in']:8d}")
    command = "python -m benchmarks.python_parses " + " ".join(str(p) for p in args.results)
    out = args.out or RESULTS / f"python_parses_{args.results[0].stem}.json"
    write_results("python_parses", None, {"command": command, "runs": runs}, out)


if __name__ == "__main__":
    main()
