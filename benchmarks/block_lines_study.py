"""A selection of k lines filled one line at a time, studied against the engine's fill.

    python -m benchmarks.block_lines_study RECORDS.json [--split valid] [--mode plain|insert]

RECORDS.json is an `eval_shapes` results file whose `block` row (the engine's length)
holds the engine's fills of the same blocks (`--split`, seed 0, `--window-chars`, the
first n). Each block of k lines is filled again top to bottom: line i is a one-line
selection (the engine frames it: its indentation from the code around, its line break),
with the lines already written above it and the code after the block below it; `insert`
also leaves an insertion point after it while lines remain, so that the model sees that
more code follows (its fill is dropped). The command's defaults otherwise. Printed and
written: similarity to the truth (difflib ratio, as `eval_shapes`), holes closer / further
than the engine's fill, exact matches, fills that write a line twice in a row, fills with
fewer lines than the truth, ms per block. Writes
benchmarks/results/block_lines_study_<checkpoint>_<mode>_<split>.json (or --out).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from tqdm import tqdm

from benchmarks.eval_shapes import checkpoint, recorded_holes, replay_arguments, same_lines
from benchmarks.infill_scores import closeness
from benchmarks.results_file import RESULTS, machine, write_results
from diffusion_infill import infill
from diffusion_infill.infill.core.options import (
    DEFAULT_CACHE_REFRESH,
    DEFAULT_CHECKS,
    DEFAULT_LENGTHS,
)
from diffusion_infill.model.loading import default_model_dir, load_denoiser

PLACEHOLDER = "pass\n"  # the line each step selects (its text is masked, never read)


def similarity(fill: str | None, truth: str) -> float:
    """difflib's ratio of the two texts, as `eval_shapes` reports it (none for no fill)."""
    return float(closeness(fill or "", truth)["similarity"])


def repeats_a_line(fill: str) -> bool:
    """Whether the fill writes a non-blank line twice in a row."""
    lines = [ln.strip() for ln in fill.split("\n") if ln.strip()]
    return any(a == b for a, b in zip(lines, lines[1:], strict=False))


def fill_by_lines(den, text: str, start: int, end: int, mode: str, options) -> str:  # noqa: ANN001
    """The block text[start:end] (k whole lines) written again one line at a time."""
    k = text[start:end].count("\n")
    prefix, suffix = text[:start], text[end:]
    lines: list[str] = []
    for i in range(k):
        head = prefix + "".join(lines)
        line = infill.Span(len(head), len(head) + len(PLACEHOLDER), length=16)
        spans = [line]
        if mode == "insert" and i < k - 1:
            spans.append(infill.Span(line.end, line.end, length=16))
        result = infill.fill_spans(
            head + PLACEHOLDER + suffix, spans, denoiser=den, options=options
        )
        first = result.fills[0]
        written = "" if first.rejected else first.text
        lines.append(written if written.endswith("\n") or not written else written + "\n")
    return "".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    replay_arguments(p)
    p.add_argument("--mode", choices=("plain", "insert"), default="plain")
    args = p.parse_args(argv)
    blocks, recs = recorded_holes(p, args, "block")
    den = load_denoiser(args.model)
    options = infill.SamplerOptions(
        checks=DEFAULT_CHECKS, lengths=DEFAULT_LENGTHS, cache_refresh=DEFAULT_CACHE_REFRESH
    )
    out = []
    for b, r in tqdm(list(zip(blocks, recs, strict=True)), file=sys.stderr, desc="blocks"):
        t0 = time.perf_counter()
        fill = fill_by_lines(den, b.text, b.start, b.end, args.mode, options)
        engine = None if r["rejected"] else r["fill"]
        out.append(
            {
                "truth": b.truth,
                "fill": fill,
                "engine_fill": engine,
                "similarity": similarity(fill, b.truth),
                "engine_similarity": similarity(engine, b.truth),
                "exact": same_lines(fill, b.truth),
                "ms": round((time.perf_counter() - t0) * 1000, 1),
            }
        )
    summary = _summary(out)
    for k, v in summary.items():
        print(f"{k:32} {v}")
    model = args.model or default_model_dir()
    name = f"block_lines_study_{checkpoint(Path(model))}_{args.mode}_{args.split}.json"
    found = {
        "command": " ".join(["python -m benchmarks.block_lines_study", *(argv or sys.argv[1:])]),
        "machine": machine(),
        "model": str(model),
        **summary,
        "records": out,
    }
    write_results("block_lines_study", model, found, args.out or RESULTS / name)


def _summary(out: list[dict]) -> dict:
    def mean(key: str) -> float:
        return round(statistics.mean(r[key] for r in out), 4) if out else 0.0

    return {
        "n": len(out),
        "similarity": mean("similarity"),
        "engine_similarity": mean("engine_similarity"),
        "closer": sum(r["similarity"] > r["engine_similarity"] for r in out),
        "further": sum(r["similarity"] < r["engine_similarity"] for r in out),
        "exact": sum(r["exact"] for r in out),
        "repeat_a_line": sum(repeats_a_line(r["fill"]) for r in out),
        "engine_repeat_a_line": sum(repeats_a_line(r["engine_fill"] or "") for r in out),
        "fewer_lines_than_truth": sum(r["fill"].count("\n") < r["truth"].count("\n") for r in out),
        "ms_p50": round(statistics.median(r["ms"] for r in out), 1) if out else 0.0,
    }


if __name__ == "__main__":
    main()
