"""Copies of the code around a hole, studied: how often the truth is among them, and which
score tells a right copy from the engine's fill.

    python -m benchmarks.copy_study RECORDS.json [--split valid] [--shape part-of-line]

RECORDS.json is an `eval_shapes` results file whose `--shape` row (the engine's length)
holds the fills of the same holes (`--split`, seed 0, `--window-chars`, the first n);
infill/core/copy_fills.py `context_copies` gives each hole its copies. For the hole's fill
and each copy, both as their text encodes, one canvas per token masks that token alone
(pseudo-log-likelihood, `pll`) and one canvas masks them all (`masked`: the pass the
engine runs). Rules replayed offline: a copy replaces the fill when its score (sum, or
mean per token) beats the fill's by more than a margin; won / lost against the engine's
fill by exact match. Writes benchmarks/results/copy_study_<checkpoint>_<shape>_<split>.json
(or --out). About 1.3 s a hole on one CPU thread. `--lines K` studies another kind of copy,
for holes that hold a line's code (cursor and whole-line holes): the K lines elsewhere at
the hole's indentation likest the engine's fill.
"""

from __future__ import annotations

import argparse
import difflib
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from benchmarks.eval_shapes import checkpoint, recorded_holes, replay_arguments
from benchmarks.results_file import RESULTS, machine, write_results
from diffusion_infill.infill.core.canvas import fitted
from diffusion_infill.infill.core.copy_fills import context_copies
from diffusion_infill.infill.core.scoring import log_softmax
from diffusion_infill.infill.core.spans import Span, neutralise
from diffusion_infill.model.loading import default_model_dir, load_denoiser

MARGINS = (-1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0)
BATCH = 8


def scores(den, left: list[int], right: list[int], ids: list[int]) -> dict[str, float]:  # noqa: ANN001
    """`pll` and `masked` sums of `ids` written as masks between `left` and `right`."""
    mask = den.special.mask
    base, at = fitted(left, ids, right, den.max_length)
    canvases, positions = [], []
    for i in range(len(ids)):
        one = list(base)
        one[at + i] = mask
        canvases.append(one)
        positions.append([at + i])
    canvases.append(base[:at] + [mask] * len(ids) + base[at + len(ids) :])
    positions.append(list(range(at, at + len(ids))))
    rows: list[np.ndarray] = []
    for b in range(0, len(canvases), BATCH):
        rows += den.logits(canvases[b : b + BATCH], positions[b : b + BATCH])
    pll = sum(float(log_softmax(rows[i])[0, t]) for i, t in enumerate(ids))
    masked = float(log_softmax(rows[-1])[np.arange(len(ids)), ids].sum())
    return {"pll": pll, "masked": masked, "tokens": len(ids)}


def line_copies(text: str, start: int, end: int, fill: str, limit: int) -> list[str]:
    """For a hole that holds a line's code (`start` after its indentation): the code of the
    other lines at that indentation (at least 3 characters, not the fill's, each once),
    the `limit` likest the fill first (difflib ratio). None where code precedes the hole."""
    line_start = text.rfind("\n", 0, start) + 1
    indent = text[line_start:start]
    if indent.strip():
        return []
    fill = fill.strip()
    likeness: dict[str, float] = {}
    at = 0
    for line in text.split("\n"):
        here, at = at, at + len(line) + 1
        code = line[len(indent) :].rstrip()
        if line_start <= here <= end or not line.startswith(indent) or code[:1] in ("", " ", "\t"):
            continue
        if len(code) >= 3 and code != fill and code not in likeness:
            likeness[code] = difflib.SequenceMatcher(None, code, fill).ratio()
    return sorted(likeness, key=lambda c: -likeness[c])[:limit]


def replay(records: list[dict], key: str, per_token: bool, margin: float) -> dict[str, int]:
    """Won / lost against the engine's fill when the best copy replaces it where its score
    beats the fill's by more than `margin`."""
    won = lost = 0
    for r in records:
        if not r["copies"] or r["own"] is None:
            continue

        def value(s: dict) -> float:
            return s[key] / (s["tokens"] if per_token else 1)

        best = max(r["copies"], key=value)
        if value(best) > value(r["own"]) + margin:
            right = best["text"].strip() == r["truth"].strip()
            won += right and not r["exact"]
            lost += r["exact"] and not right
    return {"won": won, "lost": lost}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    replay_arguments(p)
    p.add_argument("--shape", default="part-of-line")
    p.add_argument("--lines", type=int, default=0, help="line copies, the K likest the fill")
    args = p.parse_args(argv)
    holes, recs = recorded_holes(p, args, args.shape)
    den = load_denoiser(args.model)
    t0 = time.perf_counter()
    out = [
        _hole(den, h, r, args.lines)
        for h, r in tqdm(list(zip(holes, recs, strict=True)), file=sys.stderr, desc="holes")
    ]
    summary = _summary(out)
    for k, v in summary.items():
        print(f"{k:28} {v}")
    model = args.model or default_model_dir()
    lines = f"_lines{args.lines}" if args.lines else ""
    shape = args.shape.replace("-", "_")
    name = f"copy_study_{checkpoint(Path(model))}_{shape}{lines}_{args.split}"
    found = {
        "command": " ".join(["python -m benchmarks.copy_study", *(argv or sys.argv[1:])]),
        "machine": machine(),
        "model": str(model),
        **summary,
    }
    found["seconds"] = round(time.perf_counter() - t0, 1)
    found["records"] = out
    write_results("copy_study", model, found, args.out or RESULTS / f"{name}.json")


def _hole(den, h, r: dict, lines: int) -> dict:  # noqa: ANN001
    """One hole's record: its fill's scores and each copy's. A whole-line hole (framed by
    the engine) is read as its fill's indentation, the code between it and the line break."""
    text = neutralise(h.text, [Span(h.start, h.end)])
    fill, start, end = r["fill"], h.start, h.end
    if lines and h.truth.endswith("\n"):
        head = fill[: len(fill) - len(fill.lstrip(" \t"))]
        text = text[: h.start] + head + "\n" + text[h.end :]
        start = end = h.start + len(head)
        fill = fill.strip()
    left, right = den.encode(text[:start]), den.encode(text[end:])
    copies = (
        line_copies(text, start, end, fill, lines) if lines else context_copies(text, start, end)
    )
    own = den.encode(fill) if fill.strip() and copies else []
    return {
        "truth": h.truth,
        "exact": r["exact"],
        "own": scores(den, left, right, own) if own else None,
        "copies": [{"text": c, **scores(den, left, right, den.encode(c))} for c in copies],
    }


def _summary(out: list[dict]) -> dict:
    with_copies = [r for r in out if r["copies"]]
    truth_in = [
        r for r in with_copies if any(c["text"].strip() == r["truth"].strip() for c in r["copies"])
    ]
    rules = {
        f"{key} {'mean' if per else 'sum'} margin {m}": replay(out, key, per, m)
        for key in ("masked", "pll")
        for per in (True, False)
        for m in MARGINS
    }
    return {
        "n": len(out),
        "engine_exact": sum(r["exact"] for r in out),
        "holes_with_copies": len(with_copies),
        "copies_per_hole_with_any": float(np.mean([len(r["copies"]) for r in with_copies] or [0])),
        "truth_among_copies": len(truth_in),
        "truth_among_copies_engine_wrong": sum(not r["exact"] for r in truth_in),
        "rules_won_lost": rules,
    }


if __name__ == "__main__":
    main()
