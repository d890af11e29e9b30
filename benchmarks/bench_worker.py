"""Worker throughput and latency, with and without step batching.

    python -m benchmarks.bench_worker [--model DIR] [--corpus data/corpus_v2] [--requests 64]
                                      [--clients 1,4,16] [--device cuda]

For each mode (`batched`: the steps of concurrent requests share forward passes;
`unbatched`: `infill-worker --no-batching`, one request per pass) a worker is spawned with
the model, warmed up with one request, and then `--requests` fills are sent by 1, 4 and 16
concurrent clients (one connection each, each sending its next request when the previous
one is answered). Requests are one-line holes cut from held-out test files
(benchmarks/heldout.py), or the holes of examples/holes.py when the corpus is absent.

Reported per mode and client count: requests/s and generated tokens/s (wall clock),
latency p50/p95 (ms, as the client sees it), and canvases per forward pass (from the
worker's counters: how much batching happened). Prints a table and writes
benchmarks/results/worker_<model>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

from tqdm import tqdm

from benchmarks.heldout import infill_examples, load_test_files
from benchmarks.results_file import write_results
from diffusion_infill.infill.core.errors import InfillError
from diffusion_infill.infill.core.spans import find_holes
from diffusion_infill.infill.serve.client import WorkerClient, WorkerError

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "holes.py"
MODES = {"batched": [], "unbatched": ["--no-batching"]}


def load_requests(corpus: Path, n: int, seed: int) -> tuple[list[str], str]:
    """`n` texts with one hole each (the corpus), or examples/holes.py; and their source."""
    if (corpus / "test.jsonl").is_file():
        texts = []
        for ex in infill_examples(load_test_files(corpus), "single-line", n * 2, seed=seed):
            text = ex.text[: ex.start] + "<mask>" + ex.text[ex.end :]
            try:
                if len(find_holes(text)) == 1:  # the code itself may spell a marker
                    texts.append(text)
            except InfillError:
                continue
        if texts:
            return (texts * n)[:n], f"{corpus / 'test.jsonl'} (single-line holes)"
    return [EXAMPLE.read_text()] * n, str(EXAMPLE.relative_to(ROOT))


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]


async def run_clients(
    address: str, texts: list[str], clients: int, deadline: float, bar: tqdm
) -> dict[str, float]:
    """Send `texts` from `clients` concurrent connections; latency and throughput."""
    todo = iter(texts)
    latencies: list[float] = []
    tokens = errors = 0

    async def loop(client: WorkerClient) -> None:
        nonlocal tokens, errors
        for text in todo:  # the iterator is shared: each client takes the next text
            t0 = time.perf_counter()
            try:
                result = await client.fill(text, deadline=deadline)
                tokens += result.stats.tokens if result.stats else 0
            except WorkerError as exc:
                errors += 1
                tqdm.write(f"request failed: {exc.code}: {exc.message}", file=sys.stderr)
            latencies.append((time.perf_counter() - t0) * 1000)
            bar.update()

    conns = [WorkerClient(address) for _ in range(clients)]
    for c in conns:
        await c.connect()
    try:
        t0 = time.perf_counter()
        await asyncio.gather(*(loop(c) for c in conns))
        wall = time.perf_counter() - t0
    finally:
        for c in conns:
            await c.close()
    return {
        "requests": len(latencies),
        "errors": errors,
        "seconds": wall,
        "requests_per_s": len(latencies) / wall,
        "tokens_per_s": tokens / wall,
        "tokens": tokens,
        "ms_p50": statistics.median(latencies),
        "ms_p95": _p(latencies, 0.95),
    }


async def run_mode(
    args: argparse.Namespace, extra: list[str], texts: list[str], bar: tqdm
) -> tuple[dict[str, dict[str, float]], dict[str, str]]:
    owner = WorkerClient.spawned(
        model=args.model, device=args.device, args=extra, connect_timeout=args.connect_timeout
    )
    try:
        await owner.fill(texts[0])  # warm-up: the first pass allocates and loads kernels
        info = await owner.info()
        out: dict[str, dict[str, float]] = {}
        for n in args.clients:
            before = (await owner.info()).counters
            row = await run_clients(str(owner.address), texts, n, args.deadline, bar)
            after = (await owner.info()).counters
            passes = max(1, after.passes - before.passes)
            row["canvases_per_pass"] = (after.canvases - before.canvases) / passes
            out[str(n)] = row
        return out, {"model": info.model, "device": info.device}
    finally:
        await owner.close()


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.requests < 1 or min(args.clients) < 1:
        parser.error("--requests and --clients must be positive")

    texts, source = load_requests(args.corpus, args.requests, args.seed)
    results: dict = {
        "model_dir": str(args.model or "shipped"),
        "examples": source,
        "requests": args.requests,
        "modes": {},
    }
    bar = tqdm(
        total=len(MODES) * len(args.clients) * len(texts),
        file=sys.stderr,
        desc="bench_worker",
        unit="req",
    )
    try:
        for mode, extra in MODES.items():
            rows, meta = asyncio.run(run_mode(args, extra, texts, bar))
            results["modes"][mode] = rows
            results.update(meta)
    except WorkerError as exc:
        bar.close()
        sys.exit(f"bench_worker: {exc.message}")
    bar.close()

    print(
        f"model {results['model']} on {results['device']}, {args.requests} requests "
        f"per row ({source})"
    )
    print(
        f"{'mode':10s} {'clients':>7s} {'req/s':>8s} {'tok/s':>8s} {'p50 ms':>8s} "
        f"{'p95 ms':>8s} {'canv/pass':>9s} {'errors':>6s}"
    )
    for mode, rows in results["modes"].items():
        for n, r in rows.items():
            print(
                f"{mode:10s} {n:>7s} {r['requests_per_s']:8.2f} {r['tokens_per_s']:8.1f} "
                f"{r['ms_p50']:8.1f} {r['ms_p95']:8.1f} {r['canvases_per_pass']:9.2f} "
                f"{r['errors']:6d}"
            )
    write_results("worker", args.model, results, args.out)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model", type=Path, default=None, help="model directory (default: the shipped model)"
    )
    parser.add_argument("--device", help="torch device for the worker (default: auto)")
    parser.add_argument(
        "--corpus",
        type=Path,
        default=ROOT / "data" / "corpus",
        help="corpus folder with test.jsonl",
    )
    parser.add_argument(
        "--requests", type=int, default=64, help="requests per mode and client count"
    )
    parser.add_argument(
        "--clients",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[1, 4, 16],
        help="comma-separated client counts",
    )
    parser.add_argument(
        "--deadline",
        type=float,
        default=300.0,
        help="per-request deadline in seconds (the worker's maximum)",
    )
    parser.add_argument("--seed", type=int, default=20, help="example selection seed")
    parser.add_argument(
        "--connect-timeout",
        type=float,
        default=120.0,
        help="seconds a worker may take to load the model",
    )
    parser.add_argument("--out", type=Path, default=None, help="results JSON path")
    return parser


if __name__ == "__main__":
    main()
