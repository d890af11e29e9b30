"""How far each checkpoint is from writing the truth: the model's own score of the truth
and of its fill, per token, against the tokens it has seen (multi-line exact match
stayed at 0% at every checkpoint; this is the curve behind it).

    python -m benchmarks.gap_curve [--results benchmarks/results] [--png docs/img/gap_curve.png]

Reads every `search_study*.json` under `--results` (benchmarks/search_error.py, one
checkpoint each: the held-out holes decoded at their true length, the truth and the greedy
fill scored by the model's left-to-right chain rule), groups the files that scored the same
holes (kind, split, seed, n) with models of the same depth (a grown model is a curve of its
own) and, per checkpoint, takes the mean log-probability per token of the truth and of the
fill, the share of holes where the truth scores higher, and greedy exact match. A greedy
decoder writes the truth only where the model scores it above everything else, so the
truth's score has to reach the fill's.

Per group, a least-squares line through the gap (truth minus fill, nats per token) against
log2(tokens seen) gives the nats the truth gains per doubling of tokens and, at that rate,
the doublings until the gap is closed: a crude extrapolation from a few points of one model
size, meant to tell "more tokens will do" from "a bigger model is needed", nothing finer.

Beside it, greedy exact match by hole length (tokens) at each checkpoint that every group of
its depth scored, their holes pooled: whether long holes, single-line or multi-line, start to
come right as the model sees more tokens.

Prints a table per group, writes benchmarks/results/gap_curve.json (`--out`) and draws
docs/img/gap_curve.png (`--png`): a panel per group and one for the lengths.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.results_file import RESULTS
from benchmarks.search_records import summarise

ROOT = Path(__file__).resolve().parent.parent
PNG = ROOT / "docs" / "img" / "gap_curve.png"
LENGTHS = ((1, 2), (3, 4), (5, 8), (9, 16), (17, 32), (33, 64), (65, 10**9))


def _label(lo: int, hi: int) -> str:
    return f"{lo}-{hi}" if hi < 10**9 else f"{lo}+"


class CurveError(Exception):
    """A results file the curve cannot use (the message names it and says why)."""


def point(path: Path) -> tuple[tuple, dict]:
    """(group key, checkpoint point) of one search-study results file."""
    try:
        data = json.loads(path.read_text())
        records = data["records"]
        key = (data["kind"], data["split"], data["seed"], len(records), data.get("layers"))
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise CurveError(f"{path}: not a benchmarks.search_error results file ({e!r})") from e
    tokens = data.get("tokens_total")
    if not isinstance(tokens, int) or tokens <= 0:
        raise CurveError(
            f"{path}: no tokens_total (the model's tokens seen): rerun "
            "python -m benchmarks.search_error, which records it, or add it "
            "from the model's training.json"
        )
    if not isinstance(key[-1], int) or key[-1] < 1:
        raise CurveError(
            f"{path}: no layers (the model's depth; each size is a curve of its "
            "own): rerun python -m benchmarks.search_error, which records it, or "
            "add num_hidden_layers from the model's config.json"
        )
    if not records:
        raise CurveError(f"{path}: no holes scored")
    try:
        summary = summarise(records)
    except (KeyError, TypeError) as e:
        raise CurveError(f"{path}: a record without the study's scores ({e!r})") from e
    return key, {
        "file": path.name,
        "tokens_total": tokens,
        "truth_per_token": summary["mean_l2r_per_token_truth"],
        "fill_per_token": summary["mean_l2r_per_token_greedy"],
        "gap_per_token": summary["mean_l2r_per_token_truth_minus_greedy"],
        "truth_beats_fill": summary["truth_beats_greedy_l2r"],
        "greedy_exact_match": summary["greedy_exact_match"],
        "by_length": by_length(records),
    }


def by_length(records: list[dict]) -> list[dict]:
    """Greedy exact match per bucket of hole length in tokens (empty buckets left out)."""
    out = []
    for lo, hi in LENGTHS:
        hits = [r["greedy_hit"] for r in records if lo <= r["length"] <= hi]
        if hits:
            out.append({"tokens": _label(lo, hi), "n": len(hits), "hits": sum(hits)})
    return out


def by_length_curves(groups: list[dict]) -> list[dict]:
    """Greedy exact match by hole length for each checkpoint (model size, tokens) that every
    group of its size scored, those groups' holes pooled (single-line and multi-line holes
    on one length axis): does a longer hole start to come right as the model sees more
    tokens, or grows?"""
    curves = []
    for layers in sorted({g["layers"] for g in groups}):
        mine = [g for g in groups if g["layers"] == layers]
        common = set.intersection(*({p["tokens_total"] for p in g["points"]} for g in mine))
        curves += [pooled_at(mine, layers, tokens) for tokens in sorted(common)]
    return curves


def pooled_at(groups: list[dict], layers: int, tokens: int) -> dict:
    """The by-length counts of `groups`' points at `tokens`, summed."""
    pooled: dict[str, list[int]] = {}
    for g in groups:
        point = next(p for p in g["points"] if p["tokens_total"] == tokens)
        for b in point["by_length"]:
            n_hits = pooled.setdefault(b["tokens"], [0, 0])
            n_hits[0] += b["n"]
            n_hits[1] += b["hits"]
    return {
        "layers": layers,
        "tokens_total": tokens,
        "buckets": [
            {
                "tokens": t,
                "n": pooled[t][0],
                "hits": pooled[t][1],
                "exact_match": round(pooled[t][1] / pooled[t][0], 3),
            }
            for t in (_label(lo, hi) for lo, hi in LENGTHS)
            if t in pooled
        ],
    }


def trend(points: list[dict]) -> dict[str, float | None]:
    """The gap's slope per doubling of tokens and the doublings left to close it at that
    rate (None with fewer than two checkpoints, or where the gap is not closing)."""
    if len({p["tokens_total"] for p in points}) < 2:
        return {"gap_per_doubling": None, "doublings_to_close": None}
    x = [math.log2(p["tokens_total"]) for p in points]
    slope = float(np.polyfit(x, [p["gap_per_token"] for p in points], 1)[0])
    last = points[-1]["gap_per_token"]
    left = round(-last / slope, 1) if slope > 0 and last < 0 else None
    return {"gap_per_doubling": round(slope, 3), "doublings_to_close": left}


def collect(results: Path) -> list[dict]:
    """The groups of `results`' search studies, each with its points in token order."""
    files = sorted(results.glob("search_study*.json"))
    if not files:
        raise CurveError(
            f"no search_study*.json under {results}: run python -m benchmarks.search_error first"
        )
    groups: dict[tuple, list[dict]] = {}
    for path in files:
        key, p = point(path)
        twin = next(
            (q for q in groups.get(key, []) if q["tokens_total"] == p["tokens_total"]), None
        )
        if twin is not None:
            raise CurveError(
                f"{twin['file']} and {path.name} scored the same holes with the "
                "same checkpoint: keep one of them under --results"
            )
        groups.setdefault(key, []).append(p)
    out = []
    for (kind, split, seed, n, layers), points in sorted(groups.items()):
        points.sort(key=lambda p: p["tokens_total"])
        out.append(
            {
                "kind": kind,
                "split": split,
                "seed": seed,
                "n": n,
                "layers": layers,
                "points": points,
                **trend(points),
            }
        )
    return out


def plot(groups: list[dict], lengths: list[dict], path: Path) -> None:
    """A panel per group (truth and fill per token against tokens), and one of greedy exact
    match by hole length (`by_length_curves`), the last curve's counts written on it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        1, len(groups) + 1, figsize=(5 * (len(groups) + 1), 4.4), squeeze=False
    )
    scores = [
        p[k] for g in groups for p in g["points"] for k in ("truth_per_token", "fill_per_token")
    ]
    low, high = min(scores) - 0.2, max(scores) + 0.2  # the same scale in every panel
    for ax, g in zip(axes[0], groups, strict=False):
        _group_panel(ax, g, low, high)
    _length_panel(axes[0][-1], lengths)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _group_panel(ax: Any, g: dict, low: float, high: float) -> None:
    """A group's panel: the truth's and the fill's log-probability per token against the
    tokens seen, greedy exact match written at each point, on the shared scale."""
    x = [p["tokens_total"] / 1e6 for p in g["points"]]
    ax.plot(x, [p["truth_per_token"] for p in g["points"]], "o-", label="the truth")
    ax.plot(x, [p["fill_per_token"] for p in g["points"]], "s--", label="the model's own fill")
    for xi, p in zip(x, g["points"], strict=True):
        ax.annotate(
            f"EM {100 * p['greedy_exact_match']:.0f}%",
            (xi, p["fill_per_token"]),
            textcoords="offset points",
            xytext=(0, 6),
            ha="center",
            fontsize=7,
        )
    rate = (
        f"\ngap {g['gap_per_doubling']:+.2f} nats/token per doubling of tokens"
        if g["gap_per_doubling"] is not None
        else ""
    )
    ax.set_title(
        f"{g['kind']} holes ({g['split']}, n = {g['n']}), {g['layers']} layers{rate}",
        fontsize=9,
    )
    ax.set_xscale("log", base=2)
    ax.set_xticks(x, [f"{xi:,.0f}" for xi in x], fontsize=8)
    ax.minorticks_off()
    ax.set_ylim(low, high)
    ax.set_xlabel("tokens seen (M, log scale)")
    ax.set_ylabel("model's log-probability per token (nats, l2r)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)


def _length_panel(ax: Any, lengths: list[dict]) -> None:
    """Greedy exact match by hole length, a curve per checkpoint; the last curve's counts
    written on it."""
    labels = [_label(lo, hi) for lo, hi in LENGTHS]
    for curve in lengths:
        at = {b["tokens"]: b for b in curve["buckets"]}
        xs = [i for i, t in enumerate(labels) if t in at]
        ax.plot(
            xs,
            [100 * at[labels[i]]["exact_match"] for i in xs],
            "o-",
            label=f"{curve['tokens_total'] / 1e6:,.0f}M tokens, {curve['layers']} layers",
        )
    if lengths:
        last = {b["tokens"]: b for b in lengths[-1]["buckets"]}
        for i, t in enumerate(labels):
            if t in last:
                ax.annotate(
                    f"{last[t]['hits']}/{last[t]['n']}",
                    (i, 100 * last[t]["exact_match"]),
                    textcoords="offset points",
                    xytext=(0, 5),
                    ha="center",
                    fontsize=7,
                )
        ax.legend(fontsize=8)
    ax.set_xticks(range(len(labels)), labels)
    ax.set_title("exact match by hole length, all holes (counts: the last curve)", fontsize=9)
    ax.set_xlabel("hole length (tokens)")
    ax.set_ylabel("exact match, true length (%)")
    ax.grid(alpha=0.3)


def table(g: dict) -> str:
    lines = [
        f"{g['kind']} ({g['split']}, seed {g['seed']}, n = {g['n']}), {g['layers']} layers",
        "tokens (M) | truth/token | fill/token | gap | truth beats fill | greedy EM",
    ]
    for p in g["points"]:
        lines.append(
            f"{p['tokens_total'] / 1e6:10.1f} | {p['truth_per_token']:11.3f} | "
            f"{p['fill_per_token']:10.3f} | {p['gap_per_token']:+.3f} | "
            f"{100 * p['truth_beats_fill']:15.1f}% | "
            f"{100 * p['greedy_exact_match']:8.1f}%"
        )
    if g["gap_per_doubling"] is not None:
        left = g["doublings_to_close"]
        lines.append(
            f"gap per doubling of tokens: {g['gap_per_doubling']:+.3f} nats/token; "
            + (
                f"closed after ~{left} more doublings at that rate"
                if left is not None
                else "not closing at that rate"
            )
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--results",
        type=Path,
        default=RESULTS,
        help="folder of benchmarks.search_error results files",
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="JSON (default: gap_curve.json in --results)"
    )
    parser.add_argument("--png", type=Path, default=PNG)
    args = parser.parse_args(argv)
    try:
        groups = collect(args.results)
    except CurveError as e:
        parser.error(str(e))
    lengths = by_length_curves(groups)
    for g in groups:
        print(table(g), end="\n\n")
    for curve in lengths:
        counts = ", ".join(f"{b['tokens']}: {b['hits']}/{b['n']}" for b in curve["buckets"])
        print(
            f"greedy exact match by hole length at {curve['tokens_total'] / 1e6:,.1f}M "
            f"tokens, {curve['layers']} layers: {counts}"
        )
    out = args.out or args.results / "gap_curve.json"
    out.write_text(
        json.dumps(
            {"command": "python -m benchmarks.gap_curve", "groups": groups, "by_length": lengths},
            indent=1,
        )
        + "\n"
    )
    plot(groups, lengths, args.png)
    print(f"wrote {out} and {args.png}")


if __name__ == "__main__":
    main()
