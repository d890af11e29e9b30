"""A search study's records and their summary: the figures benchmarks/search_error.py prints
and benchmarks/gap_curve.py draws, computed in one place (numpy only: the curve reads
results files without loading a model).

Each record is one hole decoded at its true length: `length` (tokens), `greedy_hit`, the
l2r and best-first scores of the truth and of the greedy fill (`truth_l2r`,
`greedy_l2r`, `truth_best_first`, `greedy_best_first`), and, where they ran, the beam's
and the samples' figures.
"""

from __future__ import annotations

import numpy as np


def summarise(records: list[dict]) -> dict[str, object]:
    n = len(records)

    def share(key: str) -> float | None:
        vals = [r[key] for r in records if key in r]
        return round(sum(vals) / len(vals), 3) if vals else None

    def truth_beats(score: str) -> float:
        """Share of all holes where the greedy fill missed and the truth scores higher."""
        return round(
            sum(r[f"truth_{score}"] > r[f"greedy_{score}"] for r in records if not r["greedy_hit"])
            / n,
            3,
        )

    out: dict[str, object] = {
        "n": n,
        "mean_length": round(float(np.mean([r["length"] for r in records])), 1),
        "greedy_exact_match": share("greedy_hit"),
        "truth_beats_greedy_l2r": truth_beats("l2r"),
        "truth_beats_greedy_best_first": truth_beats("best_first"),
        "mean_l2r_per_token_truth_minus_greedy": round(
            float(np.mean([(r["truth_l2r"] - r["greedy_l2r"]) / r["length"] for r in records])), 3
        ),
        "mean_l2r_per_token_truth": round(
            float(np.mean([r["truth_l2r"] / r["length"] for r in records])), 3
        ),
        "mean_l2r_per_token_greedy": round(
            float(np.mean([r["greedy_l2r"] / r["length"] for r in records])), 3
        ),
        "beam_exact_match": share("beam_hit"),
        "beam_truth_in_final_beam": share("beam_any"),
        "beam_beats_greedy_l2r": share("beam_beats_greedy"),
        "samples_reranked_exact_match": share("samples_hit"),
        "samples_any_exact": share("samples_any"),
    }
    return out
