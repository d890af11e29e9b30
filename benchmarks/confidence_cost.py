"""What a fill's confidence, its runner-ups and the completion gate cost an inline
completion, in the engine and through the language server.

    python -m benchmarks.confidence_cost [--n 150] [--split valid]
        [--lsp without=/tmp/lsp_without.json --lsp with=/tmp/lsp_with.json ...]

In the engine: held-out lines completed as the server asks (`completion_ask`; the cases
"mid-line" and "empty line, one line" of benchmarks/eval_completion.py), each decoded
once; then the time of reading its result (`PreparedFill.result()`, the best of 5) with
the confidence weights and two runner-ups and the server's gate (lsp/completion.py
`offered`), with the confidence alone, and with neither (the model directory without
weights and no runner-ups: nothing is read), and the time the sampler spends on the
commit odds the confidence reads (`commit_odds`, in every decode). Through the server:
`--lsp LABEL=PATH` adds the inline cases of `benchmarks.bench_lsp --only-completion`
results files (run back to back, with the shipped model and with a copy of its
directory without confidence.json and `completionItems=1`), in the order given.

Prints the medians and writes benchmarks/results/confidence_cost_<model>.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks.bench_lsp import WINDOW_CHARS
from benchmarks.eval_completion import requests
from benchmarks.eval_shapes import checkpoint
from benchmarks.heldout import heldout_arguments, heldout_files, infill_examples
from benchmarks.results_file import write_results
from diffusion_infill.infill.core import sampler, steps
from diffusion_infill.infill.core.engine import prepare_fill
from diffusion_infill.infill.core.sampler import denoise
from diffusion_infill.lsp.completion_ask import completion_ask
from diffusion_infill.lsp.offers import offered
from diffusion_infill.lsp.settings import Settings
from diffusion_infill.model.loading import default_model_dir, load_denoiser

CASES = ("mid-line", "empty line, one line")
INLINE = ("inline completion", "inline completion (empty line)", "inline completion (typing)")


class OddsClock:
    """The time the sampler spends in `commit_odds` (wrapped while it is installed)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._inner = steps.commit_odds

    def __call__(self, *args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return self._inner(*args)
        finally:
            self.seconds += time.perf_counter() - t0


def read_times(den: Any, fill: Any, ask: Any, settings: Settings) -> dict[str, float]:
    """ms to read `fill`'s result three ways (the best of 5 each)."""
    calibration, options = den.calibration, ask.options

    def best(weights: Any, runner_ups: int, gate: bool) -> float:
        den.calibration = weights
        fill.job.options = replace(options, runner_ups=runner_ups)
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            result = fill.result()
            if gate:
                offered(ask.offer, result.fills[0], settings)
            times.append(time.perf_counter() - t0)
        return min(times) * 1000

    try:
        return {
            "all": best(calibration, settings.completion_items - 1, True),
            "confidence": best(calibration, 0, False),
            "none": best(None, 0, False),
        }
    finally:
        den.calibration, fill.job.options = calibration, options


def engine_times(den: Any, examples: list, settings: Settings) -> dict[str, list[float]]:
    """Per completion: the ms of each way of reading it, and of its commit odds."""
    clock = OddsClock()
    sampler.commit_odds = clock
    out: dict[str, list[float]] = {"all": [], "confidence": [], "none": [], "odds": []}
    try:
        for case in CASES:
            for text, at, _ in requests(examples, case):
                end = text.find("\n", at)
                bounds = (text.rfind("\n", 0, at) + 1, len(text) if end < 0 else end)
                ask = completion_ask(text, at, bounds, settings)
                if ask is None:
                    continue
                clock.seconds = 0.0
                fill = prepare_fill(
                    ask.excerpt.text, [ask.span], denoiser=den, options=ask.options, rewrite=True
                )
                denoise(fill.job, den)
                out["odds"].append(clock.seconds * 1000)
                for key, ms in read_times(den, fill, ask, settings).items():
                    out[key].append(ms)
    finally:
        sampler.commit_odds = clock._inner
    return out


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "median_ms": round(statistics.median(ordered), 4),
        "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 4),
        "n": len(ordered),
    }


def lsp_cases(specs: list[str], parser: argparse.ArgumentParser) -> list[dict[str, Any]]:
    """The inline cases of each `LABEL=PATH` bench_lsp results file, in order."""
    out = []
    for spec in specs:
        label, sep, path = spec.partition("=")
        if not sep or not Path(path).is_file():
            parser.error(f"--lsp {spec!r}: expected LABEL=PATH of a bench_lsp results file")
        data = json.loads(Path(path).read_text())
        cases = {c: data["cases"][c] for c in INLINE if c in data.get("cases", {})}
        out.append(
            {
                "label": label,
                "model": data.get("model"),
                "settings": data.get("settings"),
                "cases": cases,
            }
        )
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    heldout_arguments(parser)
    parser.add_argument("--n", type=int, default=150, help="lines per case")
    parser.add_argument("--lsp", action="append", default=[], metavar="LABEL=PATH")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error(f"--n must be at least 1, got {args.n}")
    lsp = lsp_cases(args.lsp, parser)
    files = heldout_files(parser, args)
    den = load_denoiser(args.model)
    if getattr(den, "calibration", None) is None:
        parser.error(
            "the model has no confidence weights: "
            "python -m diffusion_infill.model.training.fit_confidence"
        )
    examples = infill_examples(files, "single-line", args.n, seed=3, window_chars=WINDOW_CHARS)
    times = engine_times(den, examples, Settings())
    added = [a - b for a, b in zip(times["all"], times["none"], strict=True)]
    engine = {key: summary(v) for key, v in times.items()}
    engine["added_by_reading"] = summary(added)
    engine["added_with_odds"] = summary([a + o for a, o in zip(added, times["odds"], strict=True)])
    for key, s in engine.items():
        print(f"{key:18s} median {s['median_ms']:.3f} ms, p95 {s['p95_ms']:.3f} ms (n {s['n']})")
    for run in lsp:
        print(run["label"], {c: v["p50_ms"] for c, v in run["cases"].items()})
    model = Path(args.model or default_model_dir())
    results = {
        "command": " ".join(["python -m benchmarks.confidence_cost", *(argv or sys.argv[1:])]),
        "model": str(model),
        "split": args.split,
        "engine": engine,
        "lsp": lsp,
    }
    out = args.out or Path("benchmarks/results") / f"confidence_cost_{checkpoint(model)}.json"
    write_results("confidence_cost", args.model, results, out)


if __name__ == "__main__":
    main()
