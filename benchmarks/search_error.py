"""Search error or model error? Held-out holes decoded at their true length, the truth
and the engine's fill scored by the model, and wider searches tried (multi-line
exact match is 0% at every checkpoint).

    python -m benchmarks.search_error [--kind multi-line] [--split valid] [--n 50]
                                      [--beam 4] [--samples 4] [--temperature 0.7]

A fill can miss the truth because the model prefers something else (model error: only a
better model helps) or because the decoder did not find what the model prefers (search
error: a wider search helps). For every hole, decoded with exactly the truth's number of
tokens, this records:

- `greedy`: the engine's own fill (default sampler, exact length);
- the model's score of the truth and of the greedy fill, two ways:
  `l2r`, the left-to-right chain rule (log p of slot i with slots < i written and the rest
  masked; a canvas per slot, 16 to a batch), and `best_first`, the chain rule in the order
  a confidence decoder would write that candidate (each pass reveals the candidate's token
  the model is surest of; the score the default sampler maximises greedily);
- `beam`: a left-to-right beam search of width `--beam` under the l2r score (the beam's
  best, and whether the truth is anywhere in the final beam);
- `samples`: `--samples` decodes at `--temperature` (seeded), reranked with the greedy fill
  by the l2r score (and whether any of them is right).

It prints, per method, exact match and how often the truth outscores the greedy fill, and
writes benchmarks/results/search_study_<kind>.json (or `--out`). If the truth rarely
outscores the fill, the miss is the model's; if it often does, a wider search can win
holes the greedy decoder loses.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from benchmarks.heldout import (
    HELDOUT_WINDOW_CHARS,
    Example,
    heldout_arguments,
    heldout_files,
    infill_examples,
    prepare_hole,
)
from benchmarks.results_file import write_results
from benchmarks.search_records import summarise
from diffusion_infill import infill
from diffusion_infill.infill.core.canvas import fill_ids
from diffusion_infill.infill.core.engine import PreparedFill
from diffusion_infill.infill.core.sampler import denoise
from diffusion_infill.infill.core.scoring import log_softmax
from diffusion_infill.model.denoiser import Denoiser
from diffusion_infill.model.loading import default_model_dir, load_denoiser
from diffusion_infill.model.training.train import init_record

BATCH = 16  # canvases per forward pass when scoring a candidate left to right


def _prepared(
    den: Denoiser, ex: Example, length: int, options: infill.SamplerOptions
) -> PreparedFill:
    """The engine's request for `ex` with its hole as exactly `length` masks."""
    span = infill.Span(ex.start, ex.end, length=length, exact=True)
    return prepare_hole(den, ex.text, span, options)


def masked_canvas(
    den: Denoiser, ex: Example, length: int, options: infill.SamplerOptions
) -> tuple[list[int], int]:
    """The engine's canvas for `ex` with its hole as `length` masks, and the first slot."""
    canvas = _prepared(den, ex, length, options).job.canvases[0]
    return canvas.ids(), canvas.offsets()[0]


def l2r_score(den: Denoiser, ids: list[int], first: int, tokens: list[int]) -> float:
    """Left-to-right chain rule: sum_i log p(tokens[i] | tokens[:i], masks after)."""
    rows = []
    for i in range(len(tokens)):
        c = list(ids)
        c[first : first + i] = tokens[:i]
        rows.append(c)
    total = 0.0
    for b in range(0, len(rows), BATCH):
        chunk = rows[b : b + BATCH]
        out = den.logits(chunk, [[first + b + k] for k in range(len(chunk))])
        for k, arr in enumerate(out):
            total += float(log_softmax(arr)[0, tokens[b + k]])
    return total


def best_first_score(den: Denoiser, ids: list[int], first: int, tokens: list[int]) -> float:
    """Chain rule in the order a confidence decoder would write `tokens`: each pass
    reveals the still-masked token the model gives the highest log-probability."""
    c = list(ids)
    left = list(range(len(tokens)))
    total = 0.0
    while left:
        (arr,) = den.logits([c], [[first + i for i in left]])
        lp = log_softmax(arr)[np.arange(len(left)), [tokens[i] for i in left]]
        k = int(np.argmax(lp))
        total += float(lp[k])
        c[first + left[k]] = tokens[left[k]]
        del left[k]
    return total


def beam_search(
    den: Denoiser, ids: list[int], first: int, length: int, width: int, banned: list[int]
) -> list[tuple[list[int], float]]:
    """Left-to-right beam search over `length` slots; the final beam, best first."""
    beams: list[tuple[list[int], float]] = [([], 0.0)]
    for i in range(length):
        rows = []
        for toks, _ in beams:
            c = list(ids)
            c[first : first + i] = toks
            rows.append(c)
        out = den.logits(rows, [[first + i]] * len(rows))
        grown: list[tuple[list[int], float]] = []
        for (toks, score), arr in zip(beams, out, strict=True):
            lp = log_softmax(arr)[0]
            lp[banned] = -np.inf
            for t in np.argsort(-lp)[:width]:
                grown.append((toks + [int(t)], score + float(lp[t])))
        grown.sort(key=lambda b: -b[1])
        beams = grown[:width]
    return beams


def _decode(den: Denoiser, ex: Example, length: int, options: infill.SamplerOptions) -> list[int]:
    """The engine's fill of `ex` at exactly `length` tokens, as token ids."""
    job = denoise(_prepared(den, ex, length, options).job, den)
    return fill_ids(job.canvases[0].spans[0].ids, den.special)


def study(
    den: Denoiser,
    examples: list[Example],
    *,
    beam: int,
    samples: int,
    temperature: float,
    options: infill.SamplerOptions,
) -> list[dict]:
    banned = [den.special.mask, den.special.null, den.special.pad]
    records = []
    for n, ex in enumerate(tqdm(examples, desc="search study", file=sys.stderr)):
        truth_ids = den.encode(ex.truth)
        truth = ex.truth.strip()
        L = len(truth_ids)

        def hit(toks: list[int], truth: str = truth) -> bool:
            return den.decode(toks).strip() == truth

        ids, first = masked_canvas(den, ex, L, options)
        greedy = _decode(den, ex, L, options)
        rec: dict = {
            "length": L,
            "greedy_hit": hit(greedy),
            "truth_l2r": l2r_score(den, ids, first, truth_ids),
            "greedy_l2r": l2r_score(den, ids, first, greedy),
            "truth_best_first": best_first_score(den, ids, first, truth_ids),
            "greedy_best_first": best_first_score(den, ids, first, greedy),
        }
        if beam:
            final = beam_search(den, ids, first, L, beam, banned)
            rec["beam_hit"] = hit(final[0][0])
            rec["beam_any"] = any(hit(t) for t, _ in final)
            rec["beam_l2r"] = final[0][1]
            rec["beam_beats_greedy"] = final[0][1] > rec["greedy_l2r"]
        if samples:
            drawn = [
                _decode(
                    den,
                    ex,
                    L,
                    infill.SamplerOptions.build(
                        options, temperature=temperature, seed=1000 * n + k
                    ),
                )
                for k in range(samples)
            ]
            scored = [(rec["greedy_l2r"], greedy)] + [
                (l2r_score(den, ids, first, d), d) for d in drawn
            ]
            rec["samples_hit"] = hit(max(scored, key=lambda s: s[0])[1])
            rec["samples_any"] = any(hit(d) for _, d in scored)
        records.append(rec)
    return records


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    heldout_arguments(p)
    p.set_defaults(split="valid")  # a study chooses on validation; test is for reporting
    p.add_argument("--kind", choices=("single-line", "multi-line"), default="multi-line")
    p.add_argument("--n", type=int, default=50)
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="holes' seed; default as eval_model (0 single-line, 1 multi-line)",
    )
    p.add_argument("--beam", type=int, default=4, help="beam width (0: no beam search)")
    p.add_argument("--samples", type=int, default=4, help="sampled decodes (0: none)")
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    if args.n < 1:
        p.error("--n must be at least 1")
    if args.beam < 0 or args.samples < 0:
        p.error("--beam and --samples must be 0 or more")
    if args.samples and args.temperature <= 0:
        p.error("--temperature must be above 0 to sample")
    seed = args.seed if args.seed is not None else (0 if args.kind == "single-line" else 1)
    files = heldout_files(p, args)
    den = load_denoiser(args.model)
    examples = infill_examples(
        files, args.kind, args.n, seed=seed, window_chars=HELDOUT_WINDOW_CHARS
    )
    t0 = time.perf_counter()
    records = study(
        den,
        examples,
        beam=args.beam,
        samples=args.samples,
        temperature=args.temperature,
        options=infill.SamplerOptions(),
    )
    model_dir = args.model or default_model_dir()
    # the model's tokens seen and depth: where benchmarks.gap_curve puts this study
    record = init_record(model_dir)
    config = json.loads((Path(model_dir) / "config.json").read_text())
    results = {
        "model": str(model_dir),
        "tokens_total": record.get("tokens_total", record.get("tokens")),
        "layers": config.get("num_hidden_layers"),
        "split": args.split,
        "kind": args.kind,
        "beam": args.beam,
        "samples": args.samples,
        "temperature": args.temperature,
        "seed": seed,
        "summary": summarise(records),
        "seconds": round(time.perf_counter() - t0, 1),
        "records": records,
    }
    print(json.dumps(results["summary"], indent=1))
    out = args.out or Path(f"benchmarks/results/search_study_{args.kind.replace('-', '_')}.json")
    write_results("search_study", args.model, results, out)


if __name__ == "__main__":
    main()
