"""Can a second look rerank the fixer's worst tokens? Top-1 localisation of injected bugs.

    python -m benchmarks.rerank_study [--split valid] [--n 200] [--k 8] [--model DIR]

The fixer (infill/core/repair.py) scores a window in one pass with nothing masked and takes
the token the model would most like to replace (`preference`). Its top-K list holds the
bug far more often than its top 1; this study asks whether K more forward passes pick
the bug out of that list better. For each window of `--n` (benchmarks/heldout.py
`bug_examples`) and each of the K worst tokens:

- `masked`: the token masked, one pass: log p(likeliest other) - log p(written), with the
  written token out of view (what a plain masked model would say);
- `swapped`: the window with the token replaced by its likeliest other token, one pass with
  nothing masked: the change in the window's total log-probability (does the rest of the
  window read better after the swap?), and `residual`: the fixer's worst preference
  left in the swapped window (the right fix leaves a clean window; a wrong one leaves the
  bug and adds a change).

Rules over the records (no more passes) combine them with the one-pass preference. Prints
top-1 localisation and exact repair (the swap gives back the clean window) per rule and
writes benchmarks/results/rerank_study_<model>.json (or `--out`).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from benchmarks.heldout import bug_examples, heldout_arguments, heldout_files
from benchmarks.results_file import write_results
from diffusion_infill.infill.core.repair import _char_offsets, score_text
from diffusion_infill.infill.core.scoring import log_softmax
from diffusion_infill.infill.core.suspicion import preference, worst_first
from diffusion_infill.model.loading import load_denoiser

RULES = {
    "one pass (the fixer's preference)": lambda c: c["pref"],
    "masked": lambda c: c["masked"],
    "preference + masked": lambda c: c["pref"] + c["masked"],
    "preference + 0.5 masked": lambda c: c["pref"] + 0.5 * c["masked"],
    "swapped": lambda c: c["swapped"],
    "preference + swapped": lambda c: c["pref"] + c["swapped"],
    "preference + 0.1 swapped": lambda c: c["pref"] + 0.1 * c["swapped"],
    "residual": lambda c: -c["residual"],
    "preference - residual": lambda c: c["pref"] - c["residual"],
    "preference - 0.5 residual": lambda c: c["pref"] - 0.5 * c["residual"],
}


def _candidates(den, bug, k: int) -> list[dict]:
    """The K worst tokens of the buggy window with their scores (the one-pass
    preference, masked, swapped, residual), whether each is the bug, and whether its swap
    repairs it."""
    text = bug.buggy
    ids = den.encode(text)
    offsets = _char_offsets(den, ids, text)
    if offsets is None or len(ids) > den.max_length:
        return []
    at = {span: i for i, span in enumerate(offsets)}
    worst = [
        s
        for s in worst_first(score_text(text, denoiser=den))
        if (s.start, s.end) in at and "\ufffd" not in s.likely
    ][:k]
    sp = den.special
    masked = [
        [sp.mask if j == at[(s.start, s.end)] else t for j, t in enumerate(ids)] for s in worst
    ]
    rows = den.logits(masked, [[at[(s.start, s.end)]] for s in worst])
    swaps = [text[: s.start] + s.likely + text[s.end :] for s in worst]
    seqs = [ids] + [den.encode(t) for t in swaps]
    if any(len(q) > den.max_length for q in seqs):
        return []
    totals, residuals = [], []
    for q, lg in zip(seqs, den.logits(seqs, [list(range(len(q))) for q in seqs]), strict=True):
        lp = log_softmax(lg).astype(np.float64)
        written = lp[np.arange(len(q)), q]
        totals.append(float(written.sum()))
        lp[np.arange(len(q)), q] = -np.inf  # the likeliest *other* token at each position
        lp[:, [sp.mask, sp.pad, sp.null]] = -np.inf
        residuals.append(float((lp.max(axis=1) - written).max()))
    out = []
    for s, row, swapped, total, residual in zip(
        worst, rows, swaps, totals[1:], residuals[1:], strict=True
    ):
        lp = log_softmax(row)[0].astype(np.float64)
        written = ids[at[(s.start, s.end)]]
        other = lp.copy()
        other[[sp.mask, sp.pad, sp.null, written]] = -np.inf
        out.append(
            {
                "hit": s.start < bug.end and s.end > bug.start,
                "pref": preference(s),
                "masked": float(other.max() - lp[written]),
                "swapped": total - totals[0],
                "residual": residual,
                "repaired": swapped == bug.clean,
            }
        )
    return out


def replay(records: list[dict], k: int) -> dict[str, object]:
    n = len(records)
    out: dict[str, object] = {
        "n": n,
        "recall_at_k": {
            j: sum(any(c["hit"] for c in r["cands"][:j]) for r in records) / n
            for j in (1, 2, 4, 8, 16, 32)
            if j <= k
        },
    }
    kinds = sorted({r["kind"] for r in records})
    for name, key in RULES.items():
        picks = [
            (r["kind"], max(r["cands"], key=key)) if r["cands"] else (r["kind"], None)
            for r in records
        ]
        out[name] = {
            "top1_localisation": sum(bool(c and c["hit"]) for _, c in picks) / n,
            "exact_repair": sum(bool(c and c["hit"] and c["repaired"]) for _, c in picks) / n,
            "by_kind": {
                kd: sum(bool(c and c["hit"]) for k, c in picks if k == kd)
                / max(1, sum(k == kd for k, _ in picks))
                for kd in kinds
            },
        }
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    heldout_arguments(p)
    p.set_defaults(split="valid")  # a study chooses on validation; test is for reporting
    p.add_argument("--n", type=int, default=200)
    p.add_argument("--k", type=int, default=8, help="worst tokens reranked per window")
    p.add_argument("--seed", type=int, default=2, help="bug_examples seed (eval_model's)")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    files = heldout_files(p, args)
    den = load_denoiser(args.model)
    bugs = bug_examples(files, args.n, seed=args.seed)
    records = [
        {"kind": b.kind, "cands": _candidates(den, b, args.k)}
        for b in tqdm(bugs, desc="rerank", file=sys.stderr)
    ]
    figures = replay(records, args.k)
    print(f"n={figures['n']}  recall@K {figures['recall_at_k']}")
    for name in RULES:
        f = figures[name]
        print(
            f"{name:36s} top-1 {100 * f['top1_localisation']:5.1f}%  exact repair "
            f"{100 * f['exact_repair']:5.1f}%  "
            + " ".join(f"{k} {100 * v:.0f}%" for k, v in f["by_kind"].items())
        )
    write_results(
        "rerank_study",
        args.model,
        {
            "split": args.split,
            "k": args.k,
            "seconds": round(time.perf_counter() - t0, 1),
            **figures,
        },
        out=args.out,
    )


if __name__ == "__main__":
    main()
