"""Scores of the network rather than of the engine's fills (benchmarks.eval_model's
"masked" and "bugs" parts): masked-token accuracy by mask rate in one forward pass, and
top-1 localisation and exact repair of injected bugs."""

from __future__ import annotations

import random
import sys

import numpy as np
from tqdm import tqdm

from diffusion_infill.infill.core.repair import fix_text, score_text
from diffusion_infill.infill.core.suspect_lines import line_instead
from diffusion_infill.infill.core.suspicion import preference, worst_first


def masked_accuracy(
    den, files: list[str], rates: list[float], n: int, seed: int
) -> dict[str, float]:
    rng = random.Random(seed)
    out = {}
    windows = []
    for _ in range(n):
        text = rng.choice(files)
        ids = den.encode(text)
        if len(ids) < 32:
            continue
        start = rng.randrange(0, max(1, len(ids) - den.max_length))
        windows.append(ids[start : start + den.max_length])
    for rate in rates:
        correct = total = 0
        for ids in windows:
            pos = [i for i in range(len(ids)) if rng.random() < rate] or [0]
            canvas = [den.special.mask if i in set(pos) else t for i, t in enumerate(ids)]
            (logits,) = den.logits([canvas], [pos])
            pred = logits.argmax(-1)
            correct += int((pred == np.array([ids[i] for i in pos])).sum())
            total += len(pos)
        out[f"{rate:.2f}"] = correct / total
    return out


def bug_scores(
    den, bugs, desc: str, repair: bool = True, order: str = "preference"
) -> dict[str, object]:
    """Top-1 localisation and (with `repair`) exact repair of injected bugs; the worst
    token by `order`: the fixer's `preference`, or `suspicion` (its order before the
    793.1M-token swap fine-tune; the repair always follows the fixer)."""
    key = preference if order == "preference" else (lambda s: s.suspicion)
    by_kind: dict[str, list[tuple[bool, bool]]] = {}
    records = []
    for bug in tqdm(bugs, desc=desc, file=sys.stderr, leave=False):
        repaired = False
        if repair:  # the fix's own scoring pass serves the localisation too
            result, scores = fix_text(bug.buggy, denoiser=den, min_suspicion=0.0, min_likely=0.0)
            repaired = result is not None and result.text == bug.clean
        else:
            scores = score_text(bug.buggy, denoiser=den)
        worst = next(iter(worst_first(scores, key)), None)  # None: every token is prose
        # what the fixer names first: the worst token, or (sure of no swap) a line
        fixer = worst is not None and key is preference
        line = line_instead(bug.buggy, scores, worst, denoiser=den) if fixer else None
        named = (line.start, line.end) if line else (worst.start, worst.end) if worst else None
        located = named is not None and named[0] < bug.end and named[1] > bug.start
        by_kind.setdefault(bug.kind, []).append((located, repaired))
        records.append(
            {
                "kind": bug.kind,
                "injected": bug.buggy[bug.start : bug.end],
                "worst": worst.text if worst else None,
                "likely": worst.likely if worst else None,
                "named": "line" if line else "token",
                "located": located,
                "repaired": repaired if repair else None,
            }
        )
    flat = [x for v in by_kind.values() for x in v]
    rate = (lambda v: sum(b for _, b in v) / len(v)) if repair else (lambda v: None)
    return {
        "top1_localisation": sum(a for a, _ in flat) / len(flat),
        "exact_repair": rate(flat),
        "n": len(flat),
        "by_kind": {
            k: {
                "top1_localisation": sum(a for a, _ in v) / len(v),
                "exact_repair": rate(v),
                "n": len(v),
            }
            for k, v in sorted(by_kind.items())
        },
        "records": records,
    }
