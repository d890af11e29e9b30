"""The length-choice rules `benchmarks.length_study` replays over its records (no forward
passes): pick the length with the best score of some kind, the length head's choices, the
length contest (infill/core/contest.py), and "own unless" an exact candidate beats the
engine's own fill."""

from __future__ import annotations

import math


def head_top(head: list[float], k: int) -> list[int]:
    """The length head's `k` likeliest lengths of 1 token or more, below "16 or more"."""
    return sorted(range(1, len(head) - 1), key=lambda n: -head[n])[:k]


RULES = {
    "commit mean log-prob": lambda c: c["cmean"],
    "commit sum log-prob": lambda c: c["csum"],
    "commit mean + 0.25 prior": lambda c: c["cmean"] + 0.25 * c["prior"],
    "commit mean + prior": lambda c: c["cmean"] + c["prior"],
    "mean log-prob": lambda c: c["mean"],
    "sum log-prob": lambda c: c["sum"],
    "first-pass length prior": lambda c: c["prior"],
    "mean + prior": lambda c: c["mean"] + c["prior"],
    "mean + 0.5 prior": lambda c: c["mean"] + 0.5 * c["prior"],
    "mean + 0.25 prior": lambda c: c["mean"] + 0.25 * c["prior"],
    "sum + prior": lambda c: c["sum"] + c["prior"],
    "commit sum + 0.1 prior": lambda c: c["csum"] + 0.1 * c["prior"],
}


def replay(records: list[dict]) -> dict[str, object]:
    n = len(records)
    out: dict[str, object] = {
        "n": n,
        "engine's own length": sum(r["own_hit"] for r in records) / n,
        "true length": sum(r["cands"][r["true_len"]]["hit"] for r in records) / n,
        "oracle over the candidate lengths": sum(
            any(c["hit"] for c in r["cands"].values() if c["in_set"]) for r in records
        )
        / n,
        "own length = true length": sum(r["own_len"] == r["true_len"] for r in records) / n,
    }
    for name, key in RULES.items():
        hits = picked_true = 0
        for r in records:
            cands = {L: c for L, c in r["cands"].items() if c["in_set"]}
            best = max(cands, key=lambda L: key(cands[L]))
            hits += cands[best]["hit"]
            picked_true += best == r["true_len"]
        out[name] = {"exact_match": hits / n, "picked_true_length": picked_true / n}
    if all("own_mean" in r for r in records):
        out.update(_own_or_better(records))
    if all("head" in r for r in records):
        out.update(_head_rules(records))
    return out


def _head_rules(records: list[dict]) -> dict[str, object]:
    """The length head's choices (records with "head"): its likeliest length, decoded
    exactly (16 or more: the engine's own fill); the same only where it is at least p
    sure, as the engine takes it (infill/core/head_lengths.py); the own fill against the
    head's two likeliest lengths by the sum of log-probabilities at commit."""
    out: dict[str, object] = {}

    def likeliest(r: dict) -> tuple[int, float]:
        best = max(range(len(r["head"])), key=r["head"].__getitem__)
        return best, math.exp(r["head"][best])

    for p in (0.0, 0.3, 0.5, 0.7):
        hits = picked = switched = 0
        for r in records:
            best, sure = likeliest(r)
            if 1 <= best < len(r["head"]) - 1 and sure >= p and best in r["cands"]:
                hits += r["cands"][best]["hit"]
                picked += best == r["true_len"]
                switched += 1
            else:
                hits += r["own_hit"]
                picked += r["own_len"] == r["true_len"]
        out[f"length head's likeliest when p >= {p}"] = {
            "exact_match": hits / len(records),
            "picked_true_length": picked / len(records),
            "switched": switched / len(records),
        }
    hits = 0
    for r in records:
        top = head_top(r["head"], 2)
        own = r["own_cmean"] * max(r["own_len"], 1)
        decoded = [L for L in top if L in r["cands"]]  # --lengths may leave both out
        best = max(decoded, key=lambda L: r["cands"][L]["csum"]) if decoded else None
        if best is not None and r["cands"][best]["csum"] > own:
            hits += r["cands"][best]["hit"]
        else:
            hits += r["own_hit"]
    out["own or the head's two likeliest, by commit sum"] = {"exact_match": hits / len(records)}
    out.update(_contest_rules(records))
    out["length head's likeliest = true length"] = sum(
        likeliest(r)[0] == min(r["true_len"], len(r["head"]) - 1) for r in records
    ) / len(records)
    return out


def _contest_rules(records: list[dict]) -> dict[str, object]:
    """The length contest (infill/core/contest.py) over records with "head": the own fill
    and the head's k likeliest lengths, the best by commit sum + w x the head's log P of
    the length (won / lost against the own fill)."""
    out: dict[str, object] = {}
    for k, w in [(k, w) for k in (1, 2, 3, 4) for w in (0.0, 0.25, 0.5, 1.0)]:
        won = lost = 0
        for r in records:
            head = r["head"]
            own = r["own_csum"] + w * head[min(r["own_len"], len(head) - 1)]
            scored = [
                (c["csum"] + w * head[n], n) for n in head_top(head, k) if (c := r["cands"].get(n))
            ]
            best = max(scored, default=None)
            hit = r["cands"][best[1]]["hit"] if best and best[0] > own else r["own_hit"]
            won, lost = won + (hit and not r["own_hit"]), lost + (r["own_hit"] and not hit)
        hits = sum(r["own_hit"] for r in records) + won - lost
        out[f"contest: own or the head's {k} likeliest, commit sum + {w} x head"] = {
            "exact_match": hits / len(records),
            "won_lost": [won, lost],
        }
    return out


def _own_or_better(records: list[dict]) -> dict[str, object]:
    """Keep the engine's own fill unless an exact candidate's mean log-probability (all
    visible) beats the own fill's by more than a margin: a race the primary wins ties of."""
    out: dict[str, object] = {}
    sets = {"halvings 1,2,4,8": {1, 2, 4, 8}, "all lengths": None}
    for set_name, allowed in sets.items():
        for margin in (0.0, 0.1, 0.25, 0.5, 1.0):
            hits = 0
            switched = 0
            for r in records:
                cands = {
                    L: c
                    for L, c in r["cands"].items()
                    if c["in_set"] and (allowed is None or L in allowed)
                }
                best = max(cands, key=lambda L: cands[L]["mean"], default=None)
                if best is not None and cands[best]["mean"] > r["own_mean"] + margin:
                    hits += cands[best]["hit"]
                    switched += 1
                else:
                    hits += r["own_hit"]
            out[f"own unless {set_name} beat it by {margin}"] = {
                "exact_match": hits / len(records),
                "switched": switched / len(records),
            }
    return out
