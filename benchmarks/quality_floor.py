"""The test suite's quality floor: a few dozen fixed held-out holes, filled by the shipped
model as `infill fill` fills them.

    python -m benchmarks.quality_floor --write   # draw the holes, fill them, write the file
    python -m benchmarks.quality_floor           # fill them again: which changed

The holes come from the validation split (data/corpus_v2/valid.jsonl, seed 0), of each
shape a user writes: a cursor hole (a line's code), a line hole (a `<mask>` alone at the
start of its line) and part of a line (benchmarks/shapes.py), each as a hole marker in its
700-character window. They are filled with the command's options in fp32, so that every
CPU gives the same fills, and a fill is right when the filled window is the original,
line by line. The shipped model gets about one such hole in ten right, so a dozen drawn
holes would hold one right fill to lose; `--write` keeps, per shape, the first RIGHT holes
of the draw it fills right and the first WRONG it does not (so that a gain shows too),
and records them in tests/data/quality_floor.json; tests/test_quality_floor.py fills them
again and fails when fewer are right than recorded (less two, for the last bits of
floating point on other CPUs' kernels). A floor, not a figure: the held-out figures are
eval_shapes'.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks.heldout import load_test_files
from benchmarks.infill_scores import marker_text
from benchmarks.shapes import shape_examples
from diffusion_infill import infill
from diffusion_infill.infill.core.options import (
    DEFAULT_CACHE_REFRESH,
    DEFAULT_CHECKS,
    DEFAULT_LENGTHS,
)
from diffusion_infill.infill.core.spans import DEFAULT_MARKER

FLOOR = Path(__file__).resolve().parent.parent / "tests" / "data" / "quality_floor.json"
SOURCE = (  # the validation split's packages and their licences (docs/DATA_CARD.md)
    "validation split: itsdangerous (BSD-3-Clause), h11 (MIT), toolz (BSD-3-Clause), "
    "Python's csv and argparse modules (PSF-2.0)"
)
RIGHT, WRONG = 8, 4  # holes kept per shape that the model fills right / wrong
DRAW = 300  # holes drawn per shape to find them
SHAPES = {"cursor": "cursor", "line-marker": "whole-line", "part-of-line": "part-of-line"}
OPTIONS = infill.SamplerOptions(
    checks=DEFAULT_CHECKS, lengths=DEFAULT_LENGTHS, cache_refresh=DEFAULT_CACHE_REFRESH
)


def holes(files: list[str], denoiser: infill.Denoiser) -> list[dict]:
    """Per shape, the first RIGHT holes of the draw the model fills right and the first
    WRONG it does not: the window with its hole marker, the window, and which."""
    out = []
    for name, shape in SHAPES.items():
        kept = {True: 0, False: 0}
        for ex in shape_examples(files, shape, DRAW, seed=0):
            if DEFAULT_MARKER in ex.text:
                continue  # the code itself spells the marker
            if name == "line-marker":
                text = marker_text(ex, "alone")
            else:
                text = ex.text[: ex.start] + DEFAULT_MARKER + ex.text[ex.end :]
            row = {"shape": name, "text": text, "want": ex.text}
            (right,) = fill_all([row], denoiser)
            if kept[right] < (RIGHT if right else WRONG):
                out.append({**row, "right": right})
                kept[right] += 1
            if kept == {True: RIGHT, False: WRONG}:
                break
    return out


def same_lines(a: str, b: str) -> bool:
    return [ln.rstrip() for ln in a.split("\n")] == [ln.rstrip() for ln in b.split("\n")]


def fill_all(rows: list[dict[str, str]], denoiser: infill.Denoiser) -> list[bool]:
    """Whether each hole's fill gives back its window."""
    right = []
    for row in rows:
        result = infill.fill_text(row["text"], denoiser=denoiser, options=OPTIONS)
        right.append(same_lines(result.text, row["want"]))
    return right


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="draw the holes and record them")
    parser.add_argument("--corpus", type=Path, default=Path("data/corpus_v2"))
    parser.add_argument("--floor", type=Path, default=FLOOR)
    args = parser.parse_args(argv)
    from diffusion_infill.model.loading import load_denoiser  # torch: after the arguments

    if args.write and not (args.corpus / "valid.jsonl").is_file():
        parser.error(f"{args.corpus}/valid.jsonl not found: python -m {corpus_module()}")
    if not args.write and not args.floor.is_file():
        parser.error(f"{args.floor} not found: python -m benchmarks.quality_floor --write")
    den = load_denoiser(dtype="fp32")
    if args.write:
        rows = holes(load_test_files(args.corpus, "valid"), den)
        right = [row["right"] for row in rows]
    else:
        rows = json.loads(args.floor.read_text())["holes"]
        right = fill_all(rows, den)
    for shape in SHAPES:
        hits = [r for row, r in zip(rows, right, strict=True) if row["shape"] == shape]
        print(f"{shape:13s} {sum(hits)} of {len(hits)} right")
    if args.write:
        args.floor.parent.mkdir(parents=True, exist_ok=True)
        record = {"source": SOURCE, "right": sum(right), "holes": rows}
        args.floor.write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {args.floor}", file=sys.stderr)
        return
    changed = [i for i, (row, r) in enumerate(zip(rows, right, strict=True)) if row["right"] != r]
    print(f"{sum(right)} right (recorded {sum(row['right'] for row in rows)}); changed: {changed}")


def corpus_module() -> str:
    return "diffusion_infill.model.training.corpus"


if __name__ == "__main__":
    main()
