"""Engine speed: forward passes per generated token and milliseconds per request.

    python -m benchmarks.bench_engine [--model DIR] [--corpus data/corpus_v2] [--repeats 20]

Cases, cut from held-out test files: a one-line hole, a five-line hole, three one-line
holes at once, and 64- and 128-token spans. Each is filled with the default sampler
(threshold-parallel confidence decoding), with the previous engine's default (no
`eager_ends`), with the default plus context key/value reuse (`cache_refresh=4`), and
with one token per step left to right, in the same run, on the same examples
(`--samplers` picks some). Exact match against the
original text is reported beside the speed so that speed is never bought with quality
unseen. Prints a table and writes benchmarks/results/engine_<model>.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from tqdm import tqdm

from benchmarks.heldout import Example, infill_examples, load_test_files
from benchmarks.results_file import write_results
from diffusion_infill import infill
from diffusion_infill.infill import SamplerOptions
from diffusion_infill.model.loading import load_denoiser

SAMPLERS = {
    "default": {},
    # the engine before `eager_ends` (a pass could commit nulls alone, and a span whose
    # slots all predicted null took one more pass to close)
    "previous": {"eager_ends": False},
    "kv-reuse": {"cache_refresh": 4},  # context keys/values reused, full pass every 4 steps
    # what a latency-bound caller on a CPU can ask for: a 128-token window (inline
    # completion's) and key/value reuse; run with INFILL_DTYPE=int8 for int8 weights
    "fast-cpu": {"window_tokens": 128, "cache_refresh": 4},
    "one-per-step": {"order": "left-to-right"},
}


def _lines_example(files: list[str], n_lines: int, count: int, seed: int) -> list[Example]:
    """Examples whose span is `n_lines` consecutive non-blank lines."""
    out = []
    for ex in infill_examples(files, "multi-line", count * 20, seed=seed):
        if ex.truth.count("\n") == n_lines - 1 and all(ln.strip() for ln in ex.truth.split("\n")):
            out.append(ex)
        if len(out) == count:
            break
    return out


def _token_span_examples(
    den, files: list[str], tokens: int, count: int, seed: int
) -> list[Example]:
    """Examples whose span is about `tokens` tokens of whole lines."""
    out = []
    for ex in infill_examples(files, "multi-line", count * 40, seed=seed, window_chars=900):
        text, s = ex.text, ex.start
        lines_end = s
        while lines_end < len(text) and len(den.encode(text[s:lines_end])) < tokens:
            nl = text.find("\n", lines_end + 1)
            lines_end = len(text) if nl < 0 else nl
        n = len(den.encode(text[s:lines_end]))
        if tokens <= n <= tokens * 1.25 and len(den.encode(text)) < den.max_length - 16:
            out.append(Example(text, s, lines_end, f"{tokens}-token"))
        if len(out) == count:
            break
    return out


Request = tuple[str, list[infill.Span]]  # a text and the spans to fill in it


def span_requests(den, examples: list[Example], exact_length: bool) -> list[Request]:
    """One span per example. Without the exact length, a span gets what a hole marker gets
    (the default allocation, nulls, growth); a rewrite span would get the old text's length."""
    out = []
    for ex in examples:
        length = len(den.encode(ex.truth)) if exact_length else SamplerOptions().default_span_tokens
        out.append((ex.text, [infill.Span(ex.start, ex.end, length=length, exact=exact_length)]))
    return out


def three_hole_requests(examples: list[Example]) -> list[Request]:
    """Three one-line holes per window (a quarter, half and three quarters down)."""
    out = []
    for ex in examples:
        lines = [i for i, c in enumerate(ex.text) if c == "\n"]
        spans = []
        for k in (len(lines) // 4, len(lines) // 2, 3 * len(lines) // 4):
            a = lines[k - 1] + 1 if k > 0 else 0
            b = lines[k]
            indent = len(ex.text[a:b]) - len(ex.text[a:b].lstrip())
            if b - a - indent > 0:
                spans.append(
                    infill.Span(a + indent, b, length=SamplerOptions().default_span_tokens)
                )
        out.append((ex.text, spans))
    return out


def run_case(den, requests: list[Request], sampler: dict) -> dict[str, float]:
    ms, nfe, tokens, hits = [], 0, 0, 0
    for text, spans in requests:
        t0 = time.perf_counter()
        result = infill.fill_spans(text, spans, denoiser=den, **sampler)
        ms.append((time.perf_counter() - t0) * 1000)
        nfe += result.stats.nfe
        tokens += max(1, result.stats.tokens)
        hits += result.text == text
    return {
        "n": len(requests),
        "ms_p50": statistics.median(ms),
        "ms_p95": sorted(ms)[int(0.95 * (len(ms) - 1))],
        "nfe_per_token": nfe / tokens,
        "exact_match": hits / len(requests),
    }


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    samplers = {k: SAMPLERS[k] for k in args.samplers.split(",")}

    den = load_denoiser(args.model)
    files = load_test_files(args.corpus)
    n = args.repeats
    cases = {
        "one-line hole": span_requests(
            den, infill_examples(files, "single-line", n, seed=10), False
        ),
        "five-line hole": span_requests(den, _lines_example(files, 5, n, seed=11), False),
        "64-token span": span_requests(den, _token_span_examples(den, files, 64, n, seed=12), True),
        "128-token span": span_requests(
            den, _token_span_examples(den, files, 128, n, seed=13), True
        ),
        # Three one-line holes at once, filled jointly in one canvas.
        "three one-line holes": three_hole_requests(
            infill_examples(files, "single-line", n * 3, seed=14, window_chars=900)[:n]
        ),
    }
    if args.cases:
        cases = {k: cases[k] for k in args.cases.split(",")}
    results: dict[str, dict] = {"model": str(args.model or "shipped"), "cases": {}}
    bar = tqdm(total=len(cases) * len(samplers), file=sys.stderr, desc="bench")
    for name, requests in cases.items():
        for sname, sampler in samplers.items():
            results["cases"].setdefault(name, {})[sname] = run_case(den, requests, sampler)
            bar.update()
    bar.close()

    print(
        f"{'case':22s} {'sampler':13s} {'NFE/token':>9s} {'p50 ms':>8s} {'p95 ms':>8s} {'EM':>6s}"
    )
    for name, by_sampler in results["cases"].items():
        for sname, r in by_sampler.items():
            print(
                f"{name:22s} {sname:13s} {r['nfe_per_token']:9.3f} {r['ms_p50']:8.1f} "
                f"{r['ms_p95']:8.1f} {100 * r['exact_match']:5.1f}%"
            )
    for name in [
        c
        for c in ("64-token span", "128-token span")
        if c in results["cases"] and "one-per-step" in samplers
    ]:
        d, o = results["cases"][name]["default"], results["cases"][name]["one-per-step"]
        print(
            f"{name}: speed-up {o['ms_p50'] / d['ms_p50']:.1f}x wall-clock, "
            f"{o['nfe_per_token'] / d['nfe_per_token']:.1f}x fewer passes"
        )
    write_results("engine", args.model, results, args.out)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=None, help="model directory")
    parser.add_argument(
        "--corpus", type=Path, default=Path("data/corpus_v2"), help="corpus folder with test.jsonl"
    )
    parser.add_argument("--repeats", type=int, default=20, help="examples per case")
    parser.add_argument("--out", type=Path, default=None, help="results JSON path")
    parser.add_argument(
        "--samplers", default=",".join(SAMPLERS), help=f"comma-separated, of: {', '.join(SAMPLERS)}"
    )
    parser.add_argument("--cases", default=None, help="comma-separated case names (default: all)")
    return parser


if __name__ == "__main__":
    main()
