"""Held-out evaluation of a model with the engine's default sampler.

    python -m benchmarks.eval_model [--model DIR] [--corpus data/corpus_v2] [--n 200]

On the test split (packages never trained on, see docs/DATA_CARD.md):
- single-line and multi-line (2-8 lines) infill exact match, with the length left to the
  model and with the true length given;
- masked-token accuracy by mask rate (one forward pass);
- bug finding and repair on injected bugs: top-1 localisation and exact repair;
- forward passes per token and milliseconds per infill on this machine;
- the fills' checks (infill/core/checks.py): the share of fills that add no syntax error
  (parse rate), that pass every check, that were rejected (every candidate failed), and
  how often the true text itself would fail the checks (false alarms).
`--checks` / `--candidates` set the engine's checks (docs/ARCHITECTURE.md, "Checks");
`--parts` runs only some of the measures. `--jobs N` runs the parts in N processes side by
side (one CPU thread each unless INFILL_THREADS says otherwise) and writes one merged
result: the held-out evaluation a training run ends with takes ~16 minutes on two cores
instead of ~28 on one.

Prints a table and writes JSON to benchmarks/results/eval_<model>.json.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from benchmarks.heldout import (
    HELDOUT_WINDOW_CHARS,
    Example,
    bug_examples,
    heldout_arguments,
    infill_examples,
    load_test_files,
    random_content_line,
)
from benchmarks.results_file import write_results
from diffusion_infill import infill
from diffusion_infill.infill.core.checks import KINDS, check_fills, splice
from diffusion_infill.infill.core.engine import prepare_fill
from diffusion_infill.infill.core.repair import fix_text, score_text
from diffusion_infill.infill.core.sampler import denoise
from diffusion_infill.infill.core.spans import neutralise
from diffusion_infill.infill.core.suspicion import preference, worst_first
from diffusion_infill.model.loading import default_model_dir, load_denoiser

# "bugs_top1": localisation only, without the repairs (an untrained model never ends one)
# "arguments": holes inside a line (a call's arguments), with code after them on the line
PARTS = ("single_line", "single_line_true_length", "multi_line", "multi_line_true_length",
         "arguments", "masked", "bugs", "bugs_top1")
# what model/training/release.py needs, the default: "arguments" (200 more holes, ~45 minutes on one
# CPU thread) only when asked for
SHIP_PARTS = ("single_line", "single_line_true_length", "multi_line", "multi_line_true_length",
              "masked", "bugs")
# Seconds each part took on one CPU thread with the defaults (the base model, fp32):
# how `--jobs` balances the parts between its processes.
PART_SECONDS = {"single_line": 340, "single_line_true_length": 195, "multi_line": 130,
                "multi_line_true_length": 550, "arguments": 200, "masked": 60, "bugs": 110,
                "bugs_top1": 60}


def closeness(fill: str, truth: str) -> dict[str, float | bool]:
    """How near a fill that is not exact came (exact match is flat at 0 for multi-line
    holes, so these are what moves): `similarity`, difflib's ratio of the two texts;
    `lines_in_place`, the share of the truth's lines that the fill has at the same line
    (indentation aside); `repeats`, whether the fill writes one non-blank line three
    times or more (the model's loop, docs/ARCHITECTURE.md "Multi-line holes")."""
    fill_lines = [line.strip() for line in fill.strip().split("\n")]
    truth_lines = [line.strip() for line in truth.strip().split("\n")]
    written = [line for line in fill_lines if line]
    return {"similarity": difflib.SequenceMatcher(None, fill.strip(), truth.strip()).ratio(),
            "lines_in_place": sum(a == b for a, b in zip(fill_lines, truth_lines, strict=False))
            / len(truth_lines),
            "repeats": any(written.count(line) >= 3 for line in set(written))}


def _problems(ex, before: str, fill: str, kinds=KINDS) -> set[str]:
    """The kinds of check the text with `fill` in the example's span fails."""
    after, filled = splice(ex.text, [(ex.start, ex.end)], [fill])
    return {p.kind for p in check_fills(before, after, [(ex.start, ex.end)], filled,
                                        kinds=kinds)}


def same_code(fill: str, truth: str) -> bool:
    """Exact match of a hole whose indentation is given: the texts stripped."""
    return fill.strip() == truth.strip()


def infill_scores(den, examples, *, true_length: bool, desc: str,
                  options: infill.SamplerOptions, same=same_code,
                  truth_tokens=None) -> dict[str, float]:
    """Exact match and cost of filling each example's span, and what the checks say of
    the fills. The span is filled as a hole: the checks see the text with the span
    neutralised, never the truth; a rejected fill is a miss. `same(fill, truth)` decides
    a match; `truth_tokens(ex)` is the true length given (default: the truth's tokens)."""
    hits, nfe, tokens, ms = 0, 0, 0, []
    parse_ok = clean = rejected = candidates = 0
    length_errors: list[int] = []  # |tokens of the fill - tokens of the truth|, per fill
    truth_fails: dict[str, int] = dict.fromkeys(KINDS, 0)
    records: list[dict[str, object]] = []  # one per example, for reading the tail
    near = {"similarity": 0.0, "lines_in_place": 0.0, "repeats": 0}  # sums; rejected: 0
    for ex in tqdm(examples, desc=desc, file=sys.stderr, leave=False):
        if true_length:
            n_true = (truth_tokens(ex) if truth_tokens is not None
                      else len(den.encode(ex.truth)))
            span = infill.Span(ex.start, ex.end, length=n_true, exact=True)
        else:  # what a hole marker gets: the default allocation, nulls and growth
            span = infill.Span(ex.start, ex.end, length=options.default_span_tokens)
        before = neutralise(ex.text, [span])
        t0 = time.perf_counter()
        fill = prepare_fill(ex.text, [span], denoiser=den, options=options, rewrite=True,
                            parse_text=before)
        denoise(fill.job, den)
        result = fill.result()
        ms.append((time.perf_counter() - t0) * 1000)
        (f,) = result.fills
        nfe += result.stats.nfe
        tokens += max(1, result.stats.tokens)
        candidates += result.stats.candidates
        for kind in _problems(ex, before, ex.truth):
            truth_fails[kind] += 1
        exact = f.rejected is None and same(f.text, ex.truth)
        records.append({"truth": ex.truth, "fill": f.text, "rejected": f.rejected,
                        "exact": exact,
                        "ms": round(ms[-1], 1), "nfe": result.stats.nfe,
                        "tokens": result.stats.tokens, "candidates": result.stats.candidates,
                        "remasks": result.stats.remasks})
        if f.rejected is not None:
            rejected += 1
            continue
        hits += exact
        for key, value in closeness(f.text, ex.truth).items():
            near[key] += value
        length_errors.append(abs(len(den.encode(f.text.strip())) -
                                 len(den.encode(ex.truth.strip()))))
        problems = _problems(ex, before, f.text)
        parse_ok += "parse" not in problems
        clean += not problems
    n = len(examples)
    return {"exact_match": hits / n, "n": n,
            "nfe_per_token": nfe / tokens, "ms_p50": statistics.median(ms),
            "ms_mean": statistics.fmean(ms),
            "parse_rate": parse_ok / max(1, n - rejected),  # of the fills returned
            "broken": (n - rejected - parse_ok) / n,  # fills returned that add a syntax error
            "clean": clean / n,  # fills returned that pass every check
            "rejected": rejected / n, "candidates_per_fill": candidates / n,
            # where fills end (meaningful with the engine's length): mean token-count error
            # and the share of fills within one token of the truth's length
            "length_error_tokens": statistics.fmean(length_errors) if length_errors else None,
            # the mean is pulled by a few fills that grow to hundreds of tokens
            "length_error_median": (statistics.median(length_errors) if length_errors
                                    else None),
            "ends_within_1": sum(e <= 1 for e in length_errors) / n,
            # how near the fills came (`closeness`; a rejected fill counts as nothing)
            "similarity": near["similarity"] / n, "lines_in_place": near["lines_in_place"] / n,
            "repeated_line_fills": near["repeats"] / n,
            "truth_fails": {k: v / n for k, v in truth_fails.items()},
            "records": records}


def argument_examples(files: list[str], n: int, seed: int, window_chars: int = HELDOUT_WINDOW_CHARS
                      ) -> list[Example]:
    """Holes inside a line: a single-line example's call arguments, between its first `(`
    and its last `)`, so that there is code after the hole on its line (what a fill can
    comment out) and a call around it (where it can repeat a keyword)."""
    out = []
    for ex in infill_examples(files, "single-line", 4 * n, seed=seed,
                              window_chars=window_chars, draw_chars=HELDOUT_WINDOW_CHARS):
        i, j = ex.truth.find("("), ex.truth.rfind(")")
        if 0 <= i < j - 1 and ex.truth[i + 1:j].strip():
            out.append(Example(ex.text, ex.start + i + 1, ex.start + j, "arguments"))
    return out[:n]


def _fill_ids(den, canvas) -> list[int]:
    return [t for t in canvas.spans[0].ids if t not in (den.special.null, den.special.mask)]


def _drive(fill, den) -> float:
    """Denoise a CandidateJob; the seconds its primary round took (checks included)."""
    t0 = time.perf_counter()
    primary = None
    while not fill.job.done:
        batch = fill.job.requests()
        fill.job.advance(den.logits([r.canvas for r in batch], [r.positions for r in batch]))
        if primary is None and (fill.job.primary.done):
            primary = time.perf_counter() - t0
    return primary if primary is not None else time.perf_counter() - t0


def _ablation_row(records: list[dict], kinds: set[str]) -> dict[str, float]:
    """What the engine returns with only `kinds` checked (candidates as recorded): the
    primary when it passes them, else the alternative when it passes, else nothing."""
    hits = parse_ok = clean = rejected = nfe = tokens = 0
    ms = []
    for r in records:
        cost_ms, cost_nfe = r["ms_primary"], r["nfe_primary"]
        got = None
        if not r["primary_fails"] & kinds:
            got = ("primary", r["primary"], r["primary_fails"], r["tokens_primary"])
        else:
            cost_ms, cost_nfe = r["ms_all"], r["nfe_all"]
            if r["alt"] is not None and not r["alt_fails"] & kinds:
                got = ("alt", r["alt"], r["alt_fails"], r["tokens_alt"])
        ms.append(cost_ms)
        nfe += cost_nfe
        if got is None:
            rejected += 1
            tokens += 1
            continue
        _, text, fails, n_tokens = got
        tokens += max(1, n_tokens)
        hits += text.strip() == r["truth"].strip()
        parse_ok += "parse" not in fails
        clean += not fails
    n = len(records)
    return {"exact_match": hits / n, "parse_rate": parse_ok / max(1, n - rejected),
            "broken": (n - rejected - parse_ok) / n, "clean": clean / n,
            "rejected": rejected / n, "nfe_per_token": nfe / tokens, "nfe_per_fill": nfe / n,
            "ms_p50": statistics.median(ms), "ms_mean": statistics.fmean(ms), "n": n}


def truth_false_alarms(files: list[str], n: int, seed: int) -> dict[str, object]:
    """How often the checks blame the true code of a line, in its whole file (what the
    command and an editor check against), and what a check costs there: for `n` random
    non-blank lines, the line's text is the fill and the line neutralised is the text
    before. The window-level rate of `ablate_checks` is higher: a 700-character window
    can start inside a docstring or miss the imports."""
    rng = random.Random(seed)
    fails = dict.fromkeys(KINDS, 0)
    ms = []
    for _ in range(n):
        picked = random_content_line(files, rng)
        if picked is None:
            continue
        text, a, b = picked
        before = neutralise(text, [infill.Span(a, b)])
        t0 = time.perf_counter()
        found = {p.kind for p in check_fills(before, text, [(a, b)], [(a, b)])}
        ms.append((time.perf_counter() - t0) * 1000)
        for kind in found:
            fails[kind] += 1
    return {"n": len(ms), "fails": {k: v / len(ms) for k, v in fails.items()},
            "check_ms_p50": statistics.median(ms), "check_ms_max": max(ms),
            "file_chars_p50": statistics.median(len(f) for f in files)}


def ablate_checks(den, examples, *, candidates: int, desc: str) -> dict[str, object]:
    """Each check alone, all of them, and none, on the same decodes: one run with every
    check on records the primary fill, its alternative(s) and what each fails; a
    configuration's result follows exactly (decoding is deterministic and a span's
    alternatives do not depend on which check failed it)."""
    options = infill.SamplerOptions(checks=",".join(KINDS), candidates=candidates)
    records = []
    for ex in tqdm(examples, desc=desc, file=sys.stderr, leave=False):
        span = infill.Span(ex.start, ex.end, length=options.default_span_tokens)
        before = neutralise(ex.text, [span])
        t0 = time.perf_counter()
        fill = prepare_fill(ex.text, [span], denoiser=den, options=options, rewrite=True,
                            parse_text=before)
        primary_s = _drive(fill, den)
        fill.result()  # what the engine returns, in the time measured
        total_s = time.perf_counter() - t0
        job = fill.job
        p_ids = _fill_ids(den, job.primary.canvases[0])
        primary = den.decode(p_ids) if p_ids else ""
        a_ids = _fill_ids(den, job.rounds[1].canvases[0]) if len(job.rounds) > 1 else None
        alt = (den.decode(a_ids) if a_ids else "") if a_ids is not None else None
        records.append({
            "truth": ex.truth, "primary": primary, "alt": alt,
            "primary_fails": _problems(ex, before, primary),
            "alt_fails": _problems(ex, before, alt) if alt is not None else set(),
            "truth_fails": _problems(ex, before, ex.truth),
            "tokens_primary": len(p_ids), "tokens_alt": len(a_ids or []),
            "nfe_primary": job.primary.nfe, "nfe_all": job.nfe,
            "ms_primary": primary_s * 1000, "ms_all": total_s * 1000})
    rows = {"off": _ablation_row(records, set())}
    for kind in KINDS:
        rows[kind] = _ablation_row(records, {kind})
    rows["all"] = _ablation_row(records, set(KINDS))
    truth = {k: sum(k in r["truth_fails"] for r in records) / len(records) for k in KINDS}
    examples_out = [{k: sorted(v) if isinstance(v, set) else v for k, v in r.items()}
                    for r in records]
    return {"candidates": candidates, "rows": rows, "truth_fails": truth,
            "examples": examples_out}


def masked_accuracy(den, files: list[str], rates: list[float], n: int, seed: int
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
        windows.append(ids[start:start + den.max_length])
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


def bug_scores(den, bugs, desc: str, repair: bool = True, order: str = "preference"
               ) -> dict[str, object]:
    """Top-1 localisation and (with `repair`) exact repair of injected bugs; the worst
    token by `order`: the fixer's `preference`, or `suspicion` (its order before the
    793.1M-token swap fine-tune; the repair always follows the fixer)."""
    key = preference if order == "preference" else (lambda s: s.suspicion)
    by_kind: dict[str, list[tuple[bool, bool]]] = {}
    records = []
    for bug in tqdm(bugs, desc=desc, file=sys.stderr, leave=False):
        scores = score_text(bug.buggy, denoiser=den)
        worst = worst_first(scores, key)[0]
        located = worst.start < bug.end and worst.end > bug.start
        repaired = False
        if repair:
            result, _ = fix_text(bug.buggy, denoiser=den, min_suspicion=0.0, min_likely=0.0)
            repaired = result is not None and result.text == bug.clean
        by_kind.setdefault(bug.kind, []).append((located, repaired))
        records.append({"kind": bug.kind, "injected": bug.buggy[bug.start:bug.end],
                        "worst": worst.text, "likely": worst.likely, "located": located,
                        "repaired": repaired if repair else None})
    flat = [x for v in by_kind.values() for x in v]
    rate = (lambda v: sum(b for _, b in v) / len(v)) if repair else (lambda v: None)
    return {
        "top1_localisation": sum(a for a, _ in flat) / len(flat),
        "exact_repair": rate(flat),
        "n": len(flat),
        "by_kind": {k: {"top1_localisation": sum(a for a, _ in v) / len(v),
                        "exact_repair": rate(v), "n": len(v)}
                    for k, v in sorted(by_kind.items())},
        "records": records,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    heldout_arguments(parser)
    parser.add_argument("--n", type=int, default=200, help="single-line examples")
    parser.add_argument("--n-multi", type=int, default=100, help="multi-line examples")
    parser.add_argument("--n-bugs", type=int, default=200, help="injected-bug examples")
    parser.add_argument("--seed", type=int, default=0, help="example selection seed")
    parser.add_argument("--window-chars", type=int, default=HELDOUT_WINDOW_CHARS,
                        help="characters of the test file around each infill example (the "
                        "same holes at any size; the engine cuts what exceeds the model's "
                        "context by scopes, as in the editor)")
    parser.add_argument("--out", type=Path, default=None, help="results JSON path")
    parser.add_argument("--checks", default=infill.SamplerOptions().checks,
                        help="the engine's checks, comma-separated ('' for none)")
    parser.add_argument("--candidates", type=int, default=infill.SamplerOptions().candidates,
                        help="candidates per fill when the checks are on")
    parser.add_argument("--lengths", type=int, default=infill.SamplerOptions().lengths,
                        help="allocations raced per hole (1: the engine's one allocation)")
    parser.add_argument("--cache-refresh", type=int,
                        default=infill.SamplerOptions().cache_refresh,
                        help="reuse the context's keys/values, a full pass every K steps "
                        "(0: every pass exact, the default)")
    parser.add_argument("--grow-cap", type=int, default=infill.SamplerOptions().grow_cap,
                        help="the most tokens a hole grows to (default: the engine's, "
                        f"{infill.SamplerOptions().grow_cap})")
    parser.add_argument("--order", default=infill.SamplerOptions().order,
                        help="the sampler's commit order (default: "
                        f"{infill.SamplerOptions().order})")
    parser.add_argument("--threshold", type=float, default=None,
                        help="commit threshold of the sampler's order (default: the order's)")
    parser.add_argument("--remask-threshold", type=float, default=None,
                        help="remask committed tokens whose probability fell below this "
                        "(ReMDM-style self-correction; default: off)")
    parser.add_argument("--ablate-checks", action="store_true",
                        help="only the checks' ablation on single-line, multi-line and "
                        "'arguments' holes (--parts); --out names its JSON")
    parser.add_argument("--bug-order", choices=("preference", "suspicion"),
                        default="preference",
                        help="which token top-1 localisation names: the fixer's order "
                        "(preference), or the highest suspicion")
    parser.add_argument("--parts", default=",".join(SHIP_PARTS),
                        help=f"measures to run, comma-separated, of: {', '.join(PARTS)}")
    parser.add_argument("--jobs", type=int, default=1,
                        help="processes that share out the parts (one result is written)")
    args = parser.parse_args(argv)
    parts = set(args.parts.split(","))
    if parts - set(PARTS):
        parser.error(f"unknown part(s): {', '.join(sorted(parts - set(PARTS)))}")
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    if args.window_chars < 1:
        parser.error(f"--window-chars must be at least 1, got {args.window_chars}")
    if args.jobs > 1 and args.ablate_checks:
        parser.error("--jobs does not apply to --ablate-checks")
    if args.jobs > 1:
        argv = sys.argv[1:] if argv is None else list(argv)
        results = run_jobs(_without(argv, "--jobs", "--parts", "--out"), split_parts(
            parts, args.jobs))
        _print(results)
        write_results("eval", args.model, results, args.out)
        return
    options = infill.SamplerOptions(checks=args.checks, candidates=args.candidates,
                                    lengths=args.lengths, cache_refresh=args.cache_refresh,
                                    grow_cap=args.grow_cap, order=args.order,
                                    threshold=args.threshold,
                                    remask_threshold=args.remask_threshold)

    den = load_denoiser(args.model)
    files = load_test_files(args.corpus, args.split)
    single = infill_examples(files, "single-line", args.n, seed=args.seed,
                             window_chars=args.window_chars, draw_chars=HELDOUT_WINDOW_CHARS)
    multi = infill_examples(files, "multi-line", args.n_multi, seed=args.seed + 1,
                            window_chars=args.window_chars, draw_chars=HELDOUT_WINDOW_CHARS)
    bugs = bug_examples(files, args.n_bugs, seed=args.seed + 2)
    args_ex = (argument_examples(files, args.n, seed=args.seed + 3,
                                 window_chars=args.window_chars, draw_chars=HELDOUT_WINDOW_CHARS)
               if "arguments" in parts else [])
    t0 = time.perf_counter()
    if args.ablate_checks:
        _ablate_main(args, den, files, single, multi, args_ex, parts, t0)
        return
    results: dict = {"model": str(args.model or default_model_dir()), "split": args.split,
                     "checks": args.checks, "candidates": args.candidates,
                     "lengths": args.lengths, "cache_refresh": args.cache_refresh,
                     "window_chars": args.window_chars,
                     "grow_cap": args.grow_cap, "order": args.order,
                     "threshold": args.threshold, "remask_threshold": args.remask_threshold}
    for key, examples in (("single_line", single), ("multi_line", multi),
                          ("arguments", args_ex)):
        for true_length in (False, True):
            name = key + ("_true_length" if true_length else "")
            if name in parts:
                results[name] = infill_scores(den, examples, true_length=true_length,
                                              desc=name.replace("_", " "), options=options)
    if "masked" in parts:
        results["masked_token_accuracy"] = masked_accuracy(
            den, files, [0.15, 0.3, 0.5, 0.7, 0.9], n=100, seed=args.seed)
    if parts & {"bugs", "bugs_top1"}:
        results["bugs"] = bug_scores(den, bugs, desc="bugs", repair="bugs" in parts,
                                     order=args.bug_order)
        results["bug_order"] = args.bug_order
    results["seconds"] = round(time.perf_counter() - t0, 1)
    training = (Path(results["model"]) / "training.json")
    if training.exists():
        results["training"] = json.loads(training.read_text())

    _print(results)
    write_results("eval", args.model, results, args.out)


def split_parts(parts: set[str], jobs: int) -> list[list[str]]:
    """`parts` shared out among at most `jobs` groups of similar time (longest first, each
    to the group with the least so far); the parts of a group keep PARTS' order."""
    groups: list[list[str]] = [[] for _ in range(min(jobs, len(parts)))]
    load = [0] * len(groups)
    for part in sorted(parts, key=lambda p: (-PART_SECONDS[p], PARTS.index(p))):
        i = load.index(min(load))
        groups[i].append(part)
        load[i] += PART_SECONDS[part]
    return [sorted(g, key=PARTS.index) for g in groups]


def _without(argv: list[str], *options: str) -> list[str]:
    """`argv` less each of `options` and its value (`--x v` or `--x=v`)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in options:
            skip = True
        elif not a.startswith(tuple(o + "=" for o in options)):
            out.append(a)
    return out


def merge_results(parts: list[dict], seconds: float) -> dict:
    """One result from the results of processes that ran disjoint parts: each part's
    figures as its process wrote them, `seconds` the wall time of them all and
    `seconds_summed` their sum."""
    merged: dict = {}
    for r in parts:
        for key, value in r.items():
            merged.setdefault(key, value)
    merged["seconds"] = round(seconds, 1)
    merged["seconds_summed"] = round(sum(r["seconds"] for r in parts), 1)
    return merged


def run_jobs(argv: list[str], groups: list[list[str]]) -> dict:
    """Run `python -m benchmarks.eval_model ARGV --parts GROUP` once per group, side by
    side, and merge what they write. Each process gets cores / processes threads unless
    INFILL_THREADS is set."""
    env = dict(os.environ)
    threads = env.get("INFILL_THREADS") or str(max(1, (os.cpu_count() or 1) // len(groups)))
    env.update(INFILL_THREADS=threads, OMP_NUM_THREADS=threads)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        outs = [Path(tmp) / f"part{i}.json" for i in range(len(groups))]
        procs = [subprocess.Popen([sys.executable, "-m", "benchmarks.eval_model", *argv,
                                   "--parts", ",".join(g), "--out", str(o)],
                                  env=env, stdout=subprocess.DEVNULL)
                 for g, o in zip(groups, outs, strict=True)]
        failed = [p.args for p in procs if p.wait() != 0]
        if failed:
            raise SystemExit(f"an evaluation process failed: {' '.join(failed[0])}")
        results = [json.loads(o.read_text()) for o in outs]
    return merge_results(results, time.perf_counter() - t0)


def _ablate_main(args, den, files, single, multi, args_ex, parts, t0) -> None:
    out: dict = {"model": str(args.model or default_model_dir()), "split": args.split,
                 "command": "python -m benchmarks.eval_model " + " ".join(sys.argv[1:])}
    out["truth_in_whole_files"] = truth_false_alarms(files, n=500, seed=args.seed)
    print("truth in whole files: " + json.dumps(out["truth_in_whole_files"]))
    for key, examples in (("single_line", single), ("multi_line", multi),
                          ("arguments", args_ex)):
        if key in parts:
            out[key] = ablate_checks(den, examples, candidates=args.candidates, desc=key)
            print(f"{key}: truth fails " + ", ".join(
                f"{k} {100 * v:.1f}%" for k, v in out[key]["truth_fails"].items()))
            for name, r in out[key]["rows"].items():
                print(f"  {name:8s} EM {100 * r['exact_match']:5.1f}%  parse "
                      f"{100 * r['parse_rate']:5.1f}%  broken {100 * r['broken']:5.1f}%  "
                      f"clean {100 * r['clean']:5.1f}%  rejected {100 * r['rejected']:5.1f}%  "
                      f"NFE/token {r['nfe_per_token']:.2f}  p50 {r['ms_p50']:.0f} ms")
    out["seconds"] = round(time.perf_counter() - t0, 1)
    write_results("checks_ablation", args.model, out, args.out)


def _print(results: dict) -> None:
    for key in PARTS[:5]:
        if key not in results:
            continue
        r = results[key]
        print(f"{key:26s} EM {100 * r['exact_match']:5.1f}%  n={r['n']}  "
              f"NFE/token {r['nfe_per_token']:.2f}  p50 {r['ms_p50']:.0f} ms  "
              f"parse {100 * r['parse_rate']:.1f}%  clean {100 * r['clean']:.1f}%  "
              f"rejected {100 * r['rejected']:.1f}%  similarity {r['similarity']:.3f}  "
              f"lines in place {100 * r['lines_in_place']:.1f}%  "
              f"loops {100 * r['repeated_line_fills']:.0f}%")
    if "masked_token_accuracy" in results:
        acc = results["masked_token_accuracy"]
        print("masked-token accuracy     " + "  ".join(f"{k}: {100 * v:.1f}%"
                                                      for k, v in acc.items()))
    if "bugs" not in results:
        return
    b = results["bugs"]
    pct = lambda x: "-" if x is None else f"{100 * x:5.1f}%"  # noqa: E731 (no repair run)
    print(f"bugs                       top-1 localisation {100 * b['top1_localisation']:.1f}%"
          f"  exact repair {pct(b['exact_repair'])}  n={b['n']}")
    for kind, v in b["by_kind"].items():
        print(f"  {kind:24s} top-1 {100 * v['top1_localisation']:5.1f}%  "
              f"repair {pct(v['exact_repair'])}  n={v['n']}")


if __name__ == "__main__":
    main()
