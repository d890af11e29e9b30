"""The checks' ablation (`python -m benchmarks.eval_model --ablate-checks`): each check alone,
all of them and none, replayed on the same decodes of held-out holes, and how often the
checks blame the true code of a line in its whole file (false alarms) and what a check
costs there."""

from __future__ import annotations

import json
import random
import statistics
import sys
import time

from tqdm import tqdm

from benchmarks.heldout import random_content_line
from benchmarks.infill_scores import failed_checks
from benchmarks.results_file import write_results
from diffusion_infill import infill
from diffusion_infill.infill.core.checks import KINDS, check_fills
from diffusion_infill.infill.core.engine import prepare_fill
from diffusion_infill.infill.core.spans import neutralise
from diffusion_infill.model.loading import default_model_dir


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
    return {
        "exact_match": hits / n,
        "parse_rate": parse_ok / max(1, n - rejected),
        "broken": (n - rejected - parse_ok) / n,
        "clean": clean / n,
        "rejected": rejected / n,
        "nfe_per_token": nfe / tokens,
        "nfe_per_fill": nfe / n,
        "ms_p50": statistics.median(ms),
        "ms_mean": statistics.fmean(ms),
        "n": n,
    }


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
    return {
        "n": len(ms),
        "fails": {k: v / len(ms) for k, v in fails.items()},
        "check_ms_p50": statistics.median(ms),
        "check_ms_max": max(ms),
        "file_chars_p50": statistics.median(len(f) for f in files),
    }


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
        fill = prepare_fill(
            ex.text, [span], denoiser=den, options=options, rewrite=True, parse_text=before
        )
        primary_s = _drive(fill, den)
        fill.result()  # what the engine returns, in the time measured
        total_s = time.perf_counter() - t0
        job = fill.job
        p_ids = _fill_ids(den, job.primary.canvases[0])
        primary = den.decode(p_ids) if p_ids else ""
        a_ids = _fill_ids(den, job.rounds[1].canvases[0]) if len(job.rounds) > 1 else None
        alt = (den.decode(a_ids) if a_ids else "") if a_ids is not None else None
        records.append(
            {
                "truth": ex.truth,
                "primary": primary,
                "alt": alt,
                "primary_fails": failed_checks(ex, before, primary),
                "alt_fails": failed_checks(ex, before, alt) if alt is not None else set(),
                "truth_fails": failed_checks(ex, before, ex.truth),
                "tokens_primary": len(p_ids),
                "tokens_alt": len(a_ids or []),
                "nfe_primary": job.primary.nfe,
                "nfe_all": job.nfe,
                "ms_primary": primary_s * 1000,
                "ms_all": total_s * 1000,
            }
        )
    rows = {"off": _ablation_row(records, set())}
    for kind in KINDS:
        rows[kind] = _ablation_row(records, {kind})
    rows["all"] = _ablation_row(records, set(KINDS))
    truth = {k: sum(k in r["truth_fails"] for r in records) / len(records) for k in KINDS}
    examples_out = [
        {k: sorted(v) if isinstance(v, set) else v for k, v in r.items()} for r in records
    ]
    return {"candidates": candidates, "rows": rows, "truth_fails": truth, "examples": examples_out}


def run_ablation(args, den, files, single, multi, args_ex, parts, t0) -> None:
    """The command's ablation run: the false alarms in whole files, then the ablation on
    each kind of hole of `parts`; a table on stdout and a results file."""
    out: dict = {
        "model": str(args.model or default_model_dir()),
        "split": args.split,
        "command": "python -m benchmarks.eval_model " + " ".join(sys.argv[1:]),
    }
    out["truth_in_whole_files"] = truth_false_alarms(files, n=500, seed=args.seed)
    print("truth in whole files: " + json.dumps(out["truth_in_whole_files"]))
    for key, examples in (("single_line", single), ("multi_line", multi), ("arguments", args_ex)):
        if key in parts:
            out[key] = ablate_checks(den, examples, candidates=args.candidates, desc=key)
            print(
                f"{key}: truth fails "
                + ", ".join(f"{k} {100 * v:.1f}%" for k, v in out[key]["truth_fails"].items())
            )
            for name, r in out[key]["rows"].items():
                print(
                    f"  {name:8s} EM {100 * r['exact_match']:5.1f}%  parse "
                    f"{100 * r['parse_rate']:5.1f}%  broken {100 * r['broken']:5.1f}%  "
                    f"clean {100 * r['clean']:5.1f}%  rejected {100 * r['rejected']:5.1f}%  "
                    f"NFE/token {r['nfe_per_token']:.2f}  p50 {r['ms_p50']:.0f} ms"
                )
    out["seconds"] = round(time.perf_counter() - t0, 1)
    write_results("checks_ablation", args.model, out, args.out)
