"""How should the engine choose a hole's length? A study on held-out single-line holes.

    python -m benchmarks.length_study [--split valid] [--n 100] [--lengths 1,2,...,16]
                                      [--shape single-line|part-of-line]

For every example it records:
- the engine's own fill (the default allocation, nulls and growth) and its length;
- the fill decoded with exactly L tokens, for every L in `--lengths` (and the true length),
  each scored in one more pass with the whole canvas visible: the log-probability of each
  fill token (sum and mean);
- the first pass over the default allocation: the probability that each slot is `<null>`,
  which gives a length distribution log P(L) = sum_{i<L} log(1 - p_i) + log p_L.

Then it replays length-choice rules over the records (no more forward passes): pick the L
with the best mean or sum log-probability, the best first-pass length prior, mixtures,
the oracle (some candidate is right), and "own unless": the engine's own fill kept unless
an exact candidate's mean log-probability beats the own fill's by a margin. Exact match of
each rule against the engine's own choice and the true length is printed and written to
benchmarks/results/length_study.json. The rule the engine adopts is the one that wins on
the validation split; the test split is for reporting it (benchmarks/eval_model.py).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from benchmarks.heldout import (
    HELDOUT_WINDOW_CHARS,
    heldout_arguments,
    heldout_files,
    heldout_holes,
)
from benchmarks.length_rules import head_top, replay
from benchmarks.results_file import write_results
from benchmarks.shapes import shape_examples
from diffusion_infill import infill
from diffusion_infill.infill.core.engine import prepare_fill
from diffusion_infill.infill.core.scoring import log_softmax
from diffusion_infill.infill.core.spans import neutralise
from diffusion_infill.model.loading import default_model_dir, load_denoiser


def first_canvas(den, text: str, span: infill.Span, options) -> tuple[list[int], list[int]]:
    """The canvas of the first pass over one span's allocation, and the span's slots."""
    fill = prepare_fill(
        text,
        [span],
        denoiser=den,
        options=options,
        rewrite=True,
        parse_text=neutralise(text, [span]),
    )
    canvas = fill.job.canvases[0]
    first = canvas.offsets()[0]
    return canvas.ids(), list(range(first, first + len(canvas.spans[0].ids)))


def first_profiles(
    den, text: str, span: infill.Span, options
) -> tuple[list[float], list[float] | None]:
    """From one first pass over the default allocation: log p(<null>) of each slot, and
    for a model with a length head (model/length_head.py) log P(length = 0..15, 16 or
    more) by it (None for a model without one)."""
    ids, slots = first_canvas(den, text, span, options)
    head = None
    if getattr(den, "length_slots", 0):
        (logits,), (rows,) = den.first_pass([ids], [slots], None, [[slots]])
        head = [float(v) for v in rows[0]]
    else:
        (logits,) = den.logits([ids], [slots])
    return [float(v) for v in log_softmax(logits)[:, den.special.null]], head


def null_profile(den, text: str, span: infill.Span, options) -> list[float]:
    """log p(<null>) of each slot in the first pass over the default allocation."""
    return first_profiles(den, text, span, options)[0]


def _decode(den, text: str, span: infill.Span, options) -> dict[str, object]:
    """Decode one span; its text and length, the log-prob of each token when it was
    committed (masked then), and (one more pass) its tokens' log-probs all visible."""
    fill = prepare_fill(
        text,
        [span],
        denoiser=den,
        options=options,
        rewrite=True,
        parse_text=neutralise(text, [span]),
    )
    job, mask = fill.job, den.special.mask
    committed: list[float] = []
    while not job.done:
        reqs = job.requests()
        assert len(reqs) == 1, "one span, one canvas"
        before = list(reqs[0].canvas)
        logits = den.logits([r.canvas for r in reqs], [r.positions for r in reqs])
        job.advance(logits)
        after = job.canvases[0].ids()
        if len(after) != len(before):  # grown: positions moved; score by row anyway
            after = after[: len(before)]
        lp = log_softmax(logits[0])
        for row, pos in enumerate(reqs[0].positions):
            if before[pos] == mask and after[pos] not in (mask, den.special.null):
                committed.append(float(lp[row, after[pos]]))
    result = fill.result()
    canvas = job.canvases[0]
    first = canvas.offsets()[0]
    ids = canvas.spans[0].ids
    keep = [first + i for i, t in enumerate(ids) if t not in (den.special.null, mask)]
    visible: list[float] = []
    if keep:
        all_ids = canvas.ids()
        (logits,) = den.logits([all_ids], [keep])
        rows = log_softmax(logits)[np.arange(len(keep)), [all_ids[p] for p in keep]]
        visible = [float(v) for v in rows]
    return {
        "text": result.fills[0].text,
        "tokens": len(keep),
        "logp": visible,
        "commit": committed,
        "nfe": result.stats.nfe,
    }


def length_prior(null_lp: list[float], length: int) -> float:
    """log P(fill length = L) from the first pass's null probabilities."""
    not_null = [math.log1p(-min(math.exp(v), 1 - 1e-9)) for v in null_lp]
    if length > len(null_lp):
        return sum(not_null)
    end = null_lp[length] if length < len(null_lp) else 0.0
    return sum(not_null[:length]) + end


def study(den, examples, lengths: list[int], options, top: int = 0) -> list[dict]:
    """One record per example; with `top` > 0 the lengths decoded are each hole's `top`
    likeliest by the length head (which the model must have) instead of `lengths`."""
    records = []
    for ex in tqdm(examples, desc="length study", file=sys.stderr):
        truth = ex.truth.strip()
        true_len = len(den.encode(ex.truth))
        own = _decode(
            den, ex.text, infill.Span(ex.start, ex.end, length=options.default_span_tokens), options
        )
        default = infill.Span(ex.start, ex.end, length=options.default_span_tokens)
        null_lp, head = first_profiles(den, ex.text, default, options)
        if top:
            if head is None:
                raise SystemExit("--head-top needs a model with a length head")
            lengths = head_top(head, top)
        cands = {}
        for L in sorted(set(lengths) | {true_len}):
            d = _decode(den, ex.text, infill.Span(ex.start, ex.end, length=L, exact=True), options)
            cands[L] = {
                "hit": d["text"].strip() == truth,
                "sum": float(sum(d["logp"])),
                "mean": float(np.mean(d["logp"])) if d["logp"] else -99.0,
                "csum": float(sum(d["commit"])),
                "cmean": float(np.mean(d["commit"])) if d["commit"] else -99.0,
                "prior": length_prior(null_lp, L),
                "nfe": d["nfe"],
                "in_set": L in lengths,
            }
        records.append(
            {
                "true_len": true_len,
                "own_hit": own["text"].strip() == truth,
                "own_len": own["tokens"],
                "own_nfe": own["nfe"],
                "own_mean": float(np.mean(own["logp"])) if own["logp"] else -99.0,
                "own_cmean": float(np.mean(own["commit"])) if own["commit"] else -99.0,
                "own_csum": float(sum(own["commit"])),
                "cands": cands,
                **({"head": head} if head is not None else {}),
            }
        )
    return records


def main(argv: list[str] | None = None) -> None:
    p = _parser()
    args = p.parse_args(argv)
    if args.window_chars < 1:
        p.error(f"--window-chars must be at least 1, got {args.window_chars}")
    if args.n < 1:
        p.error(f"--n must be at least 1, got {args.n}")
    try:
        lengths = [int(v) for v in args.lengths.split(",")]
    except ValueError:
        p.error(f"--lengths must be whole numbers separated by commas, got {args.lengths!r}")
    if args.head_top < 0:
        p.error(f"--head-top must be 0 or more, got {args.head_top}")
    if min(lengths) < 1:
        p.error(f"--lengths must be at least 1 each, got {args.lengths!r}")
    t0 = time.perf_counter()
    if args.records and args.records.exists():
        records = json.loads(args.records.read_text())
        for r in records:  # JSON keys are strings
            r["cands"] = {int(k): v for k, v in r["cands"].items()}
    else:
        files = heldout_files(p, args)
        den = load_denoiser(args.model or default_model_dir())
        examples = (
            shape_examples(
                files, args.shape, args.n, seed=args.seed, window_chars=args.window_chars
            )
            if args.shape != "single-line"
            else heldout_holes(
                files, "single-line", args.n, seed=args.seed, window_chars=args.window_chars
            )
        )
        # the engine's own fill is the network's ending: the length head only as a rule
        options = infill.SamplerOptions(length_head=False)
        records = study(den, examples, lengths, options, top=args.head_top)
        if args.records:
            args.records.write_text(json.dumps(records))
    figures = replay(records)
    for k, v in figures.items():
        print(f"{k:36s} {v}")
    write_results(
        "length_study",
        args.model,
        {
            "split": args.split,
            "shape": args.shape,
            "lengths": f"the length head's {args.head_top} likeliest"
            if args.head_top
            else args.lengths,
            "window_chars": args.window_chars,
            "seconds": round(time.perf_counter() - t0, 1),
            **figures,
        },
        out=args.out,
    )


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    heldout_arguments(p)
    p.set_defaults(split="valid")  # a study chooses on validation; test is for reporting
    p.add_argument("--n", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--window-chars",
        type=int,
        default=HELDOUT_WINDOW_CHARS,
        help="characters of the file around each hole (the same holes at any "
        "size, as in benchmarks.eval_model)",
    )
    p.add_argument("--lengths", default="1,2,3,4,5,6,7,8,10,12,14,16")
    p.add_argument(
        "--shape",
        choices=("single-line", "part-of-line"),
        default="single-line",
        help="one-line holes (the line's code), or part of a line (benchmarks.eval_shapes)",
    )
    p.add_argument(
        "--head-top",
        type=int,
        default=0,
        help="decode each hole's K likeliest lengths by the model's length head instead "
        "of --lengths",
    )
    p.add_argument("--records", type=Path, default=None, help="replay saved records")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/length_study.json"))
    return p


if __name__ == "__main__":
    main()
