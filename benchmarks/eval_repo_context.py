"""Fills with and without repository context, paired on the same holes.

    python -m benchmarks.repo_set                      # the packages, once per machine
    python -m benchmarks.eval_repo_context [--split validation] [--shapes cursor,...]
                                           [--n 400] [--window-chars 700 | --editor-excerpt]

Each hole of benchmarks/repo_set.py (a file of a package outside the corpus, the rest of
the package present) is filled as `benchmarks.eval_shapes` fills it (the command's
defaults: checks, raced lengths, context reuse; the engine's length), once alone and once
with the snippets that infill/context retrieves for it from the package's other files
(`RepoContext.snippets`, the hole's own file left out), as `infill fill --repo auto`
sends them. A hole for which the snippets give no copy (infill/core/cross_copies.py) is
filled once: the engine does the same work with and without them. Exact match as
eval_shapes scores it; won / lost: holes right with context only / without only.
`--editor-excerpt` gives each of the same holes what the language server sends in place of
its window: its excerpt of the whole file (lsp/excerpt.py, the server's default context),
so the checks read the names the file defines beyond the window.

Writes benchmarks/results/repo_context_<checkpoint>[_editor]_<split>.json (or --out).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

from tqdm import tqdm

from benchmarks.eval_shapes import LINE_SHAPES, checkpoint, same_lines
from benchmarks.heldout import EDITOR_CONTEXT, HELDOUT_WINDOW_CHARS, prepare_hole
from benchmarks.infill_scores import same_code
from benchmarks.repo_set import DATA, PACKAGES, SPLITS, RepoHole, repo_holes
from benchmarks.results_file import RESULTS, write_results
from benchmarks.shapes import SHAPES
from diffusion_infill import infill
from diffusion_infill.infill.context import ContextSettings, RepoContext
from diffusion_infill.infill.core.cross_copies import repo_copies
from diffusion_infill.infill.core.options import (
    DEFAULT_CACHE_REFRESH,
    DEFAULT_CHECKS,
    DEFAULT_LENGTHS,
)
from diffusion_infill.infill.core.sampler import denoise
from diffusion_infill.infill.core.spans import neutralise
from diffusion_infill.lsp.excerpt import excerpt
from diffusion_infill.model.loading import default_model_dir, load_denoiser


def editor_hole(hole: RepoHole, data: Path) -> RepoHole | None:
    """`hole` with the language server's excerpt of its whole file (its default context)
    in place of its window, the hole the same; None where the window is not found exactly
    once in the file."""
    ex = hole.example
    full = (data / hole.package / hole.path).read_text()
    at = full.find(ex.text)
    if at < 0 or full.find(ex.text, at + 1) >= 0:
        return None
    start, end = at + ex.start, at + ex.end
    cut = excerpt(full, start, end, context=EDITOR_CONTEXT)
    wide = replace(ex, text=cut.text, start=start - cut.offset, end=end - cut.offset)
    return replace(hole, example=wide)


def _holes(args: argparse.Namespace, shape: str) -> tuple[list[RepoHole], int]:
    """The holes of `shape` (with --editor-excerpt, in the server's excerpt) and how many
    were left out for want of their window in the file."""
    holes = repo_holes(args.split, shape, args.n, args.seed, args.data, args.window_chars)
    if not args.editor_excerpt:
        return holes, 0
    wide = [editor_hole(h, args.data) for h in holes]
    return [h for h in wide if h is not None], sum(h is None for h in wide)


def _fill(den, hole: RepoHole, options, context) -> tuple[str, float]:  # noqa: ANN001
    """The hole's fill (its text; "" where rejected) and the milliseconds it took."""
    ex = hole.example
    span = infill.Span(ex.start, ex.end, length=options.default_span_tokens)
    t0 = time.perf_counter()
    fill = prepare_hole(den, ex.text, span, options, context)
    denoise(fill.job, den)
    (f,) = fill.result().fills
    return ("" if f.rejected is not None else f.text), (time.perf_counter() - t0) * 1000


def _record(den, hole: RepoHole, shape: str, options, repo: RepoContext) -> dict:  # noqa: ANN001
    """One hole filled without and with its snippets, scored."""
    ex = hole.example
    same = same_lines if shape in LINE_SHAPES else same_code
    t0 = time.perf_counter()
    snippets = repo.snippets(repo.root / hole.path, ex.text, [(ex.start, ex.end)])
    retrieval_ms = (time.perf_counter() - t0) * 1000
    before = neutralise(ex.text, [infill.Span(ex.start, ex.end)])
    copies = [c for c, _ in repo_copies(before, ex.start, ex.end, snippets)]
    alone, ms = _fill(den, hole, options, ())
    fill, ms_ctx = _fill(den, hole, options, snippets) if copies else (alone, ms)
    return {
        "package": hole.package,
        "path": hole.path,
        "truth": ex.truth,
        "alone": alone,
        "with_context": fill,
        "exact_alone": bool(alone) and same(alone, ex.truth),
        "exact_with_context": bool(fill) and same(fill, ex.truth),
        "snippets": len(snippets),
        "copies": copies,
        "truth_among_copies": any(c.strip() == ex.truth.strip() for c in copies),
        "ms_alone": round(ms, 1),
        "ms_with_context": round(ms_ctx, 1),
        "retrieval_ms": round(retrieval_ms, 2),
    }


def _summary(records: list[dict]) -> dict:
    n = len(records)
    alone = sum(r["exact_alone"] for r in records)
    ctx = sum(r["exact_with_context"] for r in records)
    return {
        "n": n,
        "exact_alone": alone / n if n else 0.0,
        "exact_with_context": ctx / n if n else 0.0,
        "ratio": ctx / alone if alone else None,
        "points": 100 * (ctx - alone) / n if n else 0.0,
        "won": sum(r["exact_with_context"] and not r["exact_alone"] for r in records),
        "lost": sum(r["exact_alone"] and not r["exact_with_context"] for r in records),
        "holes_with_snippets": sum(r["snippets"] > 0 for r in records),
        "holes_with_copies": sum(bool(r["copies"]) for r in records),
        "truth_among_copies": sum(r["truth_among_copies"] for r in records),
        "ms_p50_alone": _median([r["ms_alone"] for r in records]),
        "ms_p50_with_context": _median([r["ms_with_context"] for r in records]),
    }


def _median(values: list[float]) -> float:
    values = sorted(values)
    return values[len(values) // 2] if values else 0.0


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--split", default="validation", choices=SPLITS)
    p.add_argument("--shapes", default=",".join(SHAPES))
    p.add_argument("--n", type=int, default=400, help="holes per shape")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--window-chars", type=int, default=HELDOUT_WINDOW_CHARS)
    p.add_argument(
        "--editor-excerpt", action="store_true", help="the server's excerpt, not a window"
    )
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--model", type=Path, default=None)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    shapes = args.shapes.split(",")
    if set(shapes) - set(SHAPES) or args.n < 1:
        p.error(f"--shapes: of {', '.join(SHAPES)}; --n >= 1")
    names = [k for k, v in PACKAGES.items() if v[2] == args.split]
    if any(not (args.data / k).is_dir() for k in names):
        p.error(f"{args.data} lacks the packages: python -m benchmarks.repo_set")
    den = load_denoiser(args.model)
    options = infill.SamplerOptions(
        checks=DEFAULT_CHECKS, lengths=DEFAULT_LENGTHS, cache_refresh=DEFAULT_CACHE_REFRESH
    )
    settings = ContextSettings()
    repos = {k: RepoContext.build(args.data / k, settings, root=args.data / k) for k in names}
    model = args.model or default_model_dir()
    results: dict = {
        "command": " ".join(["python -m benchmarks.eval_repo_context", *(argv or sys.argv[1:])]),
        "model": str(model),
        "split": args.split,
        "packages": {
            k: {"version": v[0], "licence": v[1]} for k, v in PACKAGES.items() if v[2] == args.split
        },
        "files_indexed": {k: len(r.index.files) for k, r in repos.items()},
        "retrieval": "token-set Jaccard over 20-line windows, stride 10 (infill/context)",
        "window_chars": "editor excerpt" if args.editor_excerpt else args.window_chars,
        "shapes": {},
    }
    t0 = time.perf_counter()
    for shape in shapes:
        holes, missed = _holes(args, shape)
        records = [
            _record(den, h, shape, options, repos[h.package])
            for h in tqdm(holes, desc=shape, file=sys.stderr)
        ]
        row = {**_summary(records), "not_located": missed, "records": records}
        results["shapes"][shape] = row
        print(f"{shape:14s} " + ", ".join(f"{k} {v}" for k, v in _summary(records).items()))
        results["seconds"] = round(time.perf_counter() - t0, 1)  # written after each shape
        editor = "_editor" if args.editor_excerpt else ""
        name = f"repo_context_{checkpoint(Path(model))}{editor}_{args.split}.json"
        write_results("repo_context", args.model, results, args.out or RESULTS / name)


if __name__ == "__main__":
    main()
