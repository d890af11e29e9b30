"""Held-out fills and inline completions with what their confidence reads: the rows that
model/training/fit_confidence.py fits on and `benchmarks.eval_confidence` measures.

    python -m benchmarks.confidence_rows --split train --n 600 --out runs/confidence/train.jsonl
    python -m benchmarks.confidence_rows --real --n 400 --out runs/confidence/real.jsonl

Kinds (`--kinds`, comma-separated):
- `cursor`, `whole-line`, `part-of-line`: holes of benchmarks/shapes.py in 700-character
  windows, filled as `infill fill` fills a hole (checks, raced lengths, context reuse);
  right is eval_shapes's exact match;
- `mid-line`, `empty-line`: inline completions as the language server asks them
  (benchmarks/eval_completion.py's cases "mid-line" and "empty line, one line", its
  3,000-character documents and `completion_ask`); right is the offer, as the server
  shapes it, equal to the rest of the line (stripped); `prefix`, the offer is the start
  of it.

Each kind draws from `--seed` plus its place in KINDS (cursor and whole-line holes are
other lines). With `--real`, the holes come from the real files of packages outside the
corpus (data/real_files.jsonl), at most one per file and shape. Each row (JSON lines):
the kind, the truth, the offer (None: none; a fill held back by the checks), whether it
is right or a prefix, its confidence and every feature of infill/core/confidence.py, and
the same for each runner-up (`--runner-ups`, 2 by default), as the engine ranks them
(a completion's runner-up that offers nothing has the offer ""); a completion's row also
has the copies of its document that the server offers beside the fill (`copies`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from benchmarks.bench_lsp import WINDOW_CHARS
from benchmarks.eval_completion import requests
from benchmarks.eval_shapes import same_lines
from benchmarks.heldout import heldout_arguments, heldout_files, infill_examples, prepare_hole
from benchmarks.infill_scores import same_code
from benchmarks.real_files import load as load_real
from benchmarks.shapes import real_file_examples, shape_examples
from diffusion_infill import infill
from diffusion_infill.infill.core.confidence import FEATURES, features
from diffusion_infill.infill.core.copy_offers import completion_copies
from diffusion_infill.infill.core.engine import prepare_fill
from diffusion_infill.infill.core.evidence import Evidence
from diffusion_infill.infill.core.options import (
    DEFAULT_CACHE_REFRESH,
    DEFAULT_CHECKS,
    DEFAULT_LENGTHS,
)
from diffusion_infill.infill.core.sampler import denoise
from diffusion_infill.lsp.completion_ask import completion_ask
from diffusion_infill.lsp.settings import Settings
from diffusion_infill.model.loading import load_denoiser

KINDS = ("cursor", "whole-line", "part-of-line", "mid-line", "empty-line")
FILLS = KINDS[:3]
COMPLETION_CASES = {"mid-line": "mid-line", "empty-line": "empty line, one line"}


def feature_map(e: Evidence | None) -> dict[str, float] | None:
    """Every FEATURES value of `e` by name (None for none)."""
    if e is None or e.decided:
        return None
    return dict(zip(FEATURES, (float(v) for v in features(e, list(FEATURES))), strict=True))


def _row(kind: str, truth: str, offer: str | None, rated: Any, right: Callable, ups: list) -> dict:
    """One row: the offer (None: none), how right it is, its confidence and features, and
    each runner-up's (`ups`: (offer, runner-up, its evidence))."""
    return {
        "kind": kind,
        "truth": truth,
        "offer": offer,
        "right": offer is not None and right(offer, truth),
        "prefix": bool(offer and offer.strip() and truth.strip().startswith(offer.strip())),
        "confidence": rated.confidence if rated is not None else None,
        "features": feature_map(rated.evidence) if rated is not None else None,
        "runner_ups": [
            {
                "offer": text,
                "text": up.text,  # as the engine wrote it (a completion's offer is shaped)
                "right": bool(text) and right(text, truth),
                "prefix": bool(text.strip()) and truth.strip().startswith(text.strip()),
                "confidence": up.confidence,
                "features": feature_map(e),
            }
            for text, up, e in ups
        ],
    }


def fill_rows(den: Any, examples: list, kind: str, options: infill.SamplerOptions) -> Iterator:
    """Each hole filled as `infill fill` fills it (the engine's length)."""
    right = same_lines if kind == "whole-line" else same_code
    for ex in tqdm(examples, desc=kind, file=sys.stderr, leave=False):
        span = infill.Span(ex.start, ex.end, length=options.default_span_tokens)
        t0 = time.perf_counter()
        fill = prepare_hole(den, ex.text, span, options)
        denoise(fill.job, den)
        (f,) = fill.result().fills
        rated = fill.rated[0]
        offer = None if f.rejected is not None else f.text
        ups = [(u.text, u, e) for u, e in zip(rated.runner_ups, rated.runner_evidence, strict=True)]
        row = _row(kind, ex.truth, offer, rated, right, ups)
        yield {**row, "ms": round((time.perf_counter() - t0) * 1000, 1)}


def completion_rows(den: Any, examples: list, kind: str, runner_ups: int) -> Iterator:
    """Each request completed as the language server completes it (`completion_ask`)."""
    settings = Settings()
    for text, at, truth in tqdm(
        requests(examples, COMPLETION_CASES[kind]), desc=kind, file=sys.stderr, leave=False
    ):
        line_end = text.find("\n", at)
        bounds = (text.rfind("\n", 0, at) + 1, len(text) if line_end < 0 else line_end)
        ask = completion_ask(text, at, bounds, settings)
        if ask is None:
            yield _row(kind, truth, None, None, same_code, [])
            continue
        options = replace(ask.options, runner_ups=runner_ups)
        t0 = time.perf_counter()
        try:
            fill = prepare_fill(
                ask.excerpt.text, [ask.span], denoiser=den, options=options, rewrite=True
            )
            denoise(fill.job, den)
            (f,) = fill.result().fills
        except infill.InfillError:  # tokens that are no text: the server offers nothing
            yield _row(kind, truth, None, None, same_code, [])
            continue
        rated = fill.rated[0]
        offer = ask.offer(f.text) or None
        ups = [
            (ask.offer(u.text), u, e)
            for u, e in zip(rated.runner_ups, rated.runner_evidence, strict=True)
        ]
        row = _row(kind, truth, offer, rated, same_code, ups)
        ms = round((time.perf_counter() - t0) * 1000, 1)
        yield {**row, "ms": ms, "copies": _copies(ask, truth)}


def _copies(ask: Any, truth: str) -> list[dict]:
    """The in-file copies a completion offers beside its fill (infill/core/copy_offers.py),
    each as the server shapes it, with its confidence and whether it is right."""
    out = []
    for c in completion_copies(ask.excerpt.text, ask.span.start):
        text = ask.offer(c.text)
        right = bool(text.strip()) and same_code(text, truth)
        prefix = bool(text.strip()) and truth.strip().startswith(text.strip())
        out.append({"offer": text, "right": right, "prefix": prefix, "confidence": c.confidence})
    return out


def examples_of(files: list[str], kind: str, n: int, seed: int, real: bool) -> list:
    """The holes (or for a completion kind, the lines) of `kind`."""
    if kind in COMPLETION_CASES:
        return infill_examples(files, "single-line", n, seed=seed, window_chars=WINDOW_CHARS)
    if real and kind != "part-of-line":
        return real_file_examples(files, kind, seed=seed)[:n]
    return shape_examples(files, kind, n, seed=seed)


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    if not kinds or set(kinds) - set(KINDS):
        parser.error(f"--kinds: use some of {', '.join(KINDS)}")
    if args.n < 1 or args.runner_ups < 0:
        parser.error("--n must be at least 1 and --runner-ups at least 0")
    if args.real:
        if not args.real_files.is_file():
            parser.error(f"{args.real_files} not found: python -m benchmarks.real_files")
        files = load_real(args.real_files)
    else:
        files = heldout_files(parser, args)
    den = load_denoiser(args.model)
    options = infill.SamplerOptions(
        checks=DEFAULT_CHECKS,
        lengths=DEFAULT_LENGTHS,
        cache_refresh=DEFAULT_CACHE_REFRESH,
        runner_ups=args.runner_ups,
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w") as fh:
        for kind in kinds:
            found = examples_of(files, kind, args.n, args.seed + KINDS.index(kind), args.real)
            rows = (
                fill_rows(den, found, kind, options)
                if kind in FILLS
                else completion_rows(den, found, kind, args.runner_ups)
            )
            count = right = 0
            for row in rows:
                fh.write(json.dumps({"split": "real" if args.real else args.split, **row}) + "\n")
                count, right = count + 1, right + row["right"]
            fh.flush()
            print(f"{kind}: {count} rows, {right} right", flush=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    heldout_arguments(parser)
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"of: {', '.join(KINDS)}")
    parser.add_argument("--n", type=int, default=400, help="holes (or lines) per kind")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runner-ups", type=int, default=2, help="runner-ups per fill")
    parser.add_argument("--real", action="store_true", help="the real files' holes instead")
    parser.add_argument("--real-files", type=Path, default=Path("data/real_files.jsonl"))
    parser.add_argument("--out", type=Path, required=True, help="rows (JSON lines)")
    return parser


if __name__ == "__main__":
    main()
