"""Random LSP sessions against `infill-lsp` over stdio, with invariants checked on every
answer.

    python -m benchmarks.fuzz_lsp --sessions 10000 --seed 1          # the fake worker
    python -m benchmarks.fuzz_lsp --sessions 200 --worker unix:PATH  # a running worker
    python -m benchmarks.fuzz_lsp --slow-pass 0.25 --out benchmarks/results/fuzz_lsp_deadline.json

Each *server run* starts `python -m diffusion_infill.lsp.server`, initializes it with a
random position encoding (UTF-8, UTF-16 or UTF-32) and random client capabilities (resolve,
documentChanges, inline completion, applyEdit), and drives `--sessions-per-server`
sessions (benchmarks/fuzz_client.py) through it. A session opens documents (unicode, CRLF
and lone CR, form feeds, lone surrogates, hole markers good and malformed, in odd places;
percent-escaped URIs), changes them (whole and incremental), asks for code actions on
random ranges and resolves some of them (stale ones too), inline completion and completion
at random positions, cancels requests in flight, closes documents, asks about documents
never opened, and sends malformed params. Some requests are left in flight while the
session goes on.

The worker is `tests/lsp_fake_worker.py` (a fast deterministic fake model; a forward pass
over a canvas that holds `SLOW` takes `--slow-pass` seconds, so such requests stay in
flight, and a completion there runs past its deadline) unless `--worker` names one. The
server gets `completionDeadline` = `--completion-deadline`.

Invariants, on every answer:
- an answer to every request within `--deadline` seconds, never an internal error;
- an inline completion or completion answered (items, nothing, or an error) within its
  deadline (`--completion-deadline`) + 100 ms; the answer latencies are summarised;
- an edit is for the version the client had when it asked (else ContentModified), its
  ranges are valid positions of that version's text in the negotiated encoding, they do not
  overlap, and they stay inside the asked region (the selection for rewrite and fix, the
  holes for fill);
- the text after applying the edits has no U+FFFD that was not there before;
- the server process is alive at the end of each run and wrote no traceback.

Exit status 0 when nothing was violated. Figures go to stdout (and `--out` as JSON).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.fuzz_client import Session
from benchmarks.fuzz_wire import ENCODINGS, Figures, Server, capabilities
from benchmarks.results_file import write_results

ROOT = Path(__file__).resolve().parent.parent


async def server_run(
    args: argparse.Namespace, address: str, run: int, sessions: int, figures: Figures
) -> None:
    seed = args.seed * 100_003 + run
    rng = random.Random(seed)
    enc = ENCODINGS[run % len(ENCODINGS)]  # every encoding in any three runs
    caps = {k: rng.random() < 0.5 for k in ("resolve", "inline", "progress", "apply", "changes")}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "diffusion_infill.lsp.server",
        cwd=str(ROOT),
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    server = Server(proc, figures)
    figures.runs += 1
    init = Session(server, rng, enc, caps, args.deadline, figures)
    options = {
        "workerAddress": address,
        "progressDelay": 0,
        "completionDeadline": args.completion_deadline,
    }
    await init.answer(
        "initialize",
        {
            "processId": None,
            "rootUri": None,
            "capabilities": capabilities(enc, caps),
            "initializationOptions": options,
        },
    )
    server.notify("initialized", {})
    for _ in range(sessions):
        session = Session(server, rng, enc, caps, args.deadline, figures)
        await session.run(rng.randint(3, args.steps))
        figures.sessions += 1
    if proc.returncode is not None:
        figures.crashes += 1
        figures.violate(f"the server exited ({proc.returncode}) during run {seed}")
    await init.answer("shutdown", None)
    server.notify("exit", None)
    try:
        await asyncio.wait_for(proc.wait(), 10)
        await asyncio.wait_for(server.err_reader, 5)
    except TimeoutError:
        proc.kill()
        figures.violate(f"the server did not exit after shutdown/exit (run {seed})")
    if b"Traceback" in server.stderr or b"Fatal Python error" in server.stderr:
        figures.crashes += 1
        figures.violate(f"run {seed}: stderr: {server.stderr.decode(errors='replace')[-800:]}")


async def fuzz(args: argparse.Namespace) -> Figures:
    figures = Figures(completion_deadline_ms=args.completion_deadline)
    started = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="fuzz-")
    worker = None
    address = args.worker
    try:
        if address is None:
            sock = f"{tmp}/w.sock"
            worker = await asyncio.create_subprocess_exec(
                sys.executable,
                str(ROOT / "tests" / "lsp_fake_worker.py"),
                "--socket",
                sock,
                *(["--slow-pass", str(args.slow_pass)] if args.slow_pass is not None else []),
                stdin=asyncio.subprocess.DEVNULL,
            )
            while not os.path.exists(sock):
                await asyncio.sleep(0.05)
            address = f"unix:{sock}"
        runs = iter(range(-(-args.sessions // args.sessions_per_server)))

        async def lane() -> None:  # one of `--jobs` servers driven side by side
            for run in runs:
                if time.monotonic() - started > args.max_seconds:
                    return
                n = min(args.sessions_per_server, args.sessions - run * args.sessions_per_server)
                await server_run(args, address, run, n, figures)
                if args.verbose:
                    print(json.dumps(figures.summary()), flush=True)

        await asyncio.gather(*(lane() for _ in range(args.jobs)))
    finally:
        if worker is not None:
            worker.terminate()
            await worker.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    figures.seconds = round(time.monotonic() - started, 1)
    return figures


def command(argv: list[str]) -> str:
    """The command line that ran, for the results file (its --note stored apart)."""
    at = argv.index("--note") if "--note" in argv else len(argv)
    shown = [a for a in argv[:at] + argv[at + 2 :] if not a.startswith("--note=")]
    return shlex.join(["python", "-m", "benchmarks.fuzz_lsp", *shown])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=int, default=200, help="sessions in all")
    p.add_argument(
        "--sessions-per-server",
        type=int,
        default=50,
        help="sessions per server process (each run: one encoding, one client)",
    )
    p.add_argument("--steps", type=int, default=20, help="most operations per session")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--jobs", type=int, default=1, help="servers driven at once")
    p.add_argument("--deadline", type=float, default=30.0, help="seconds an answer may take")
    p.add_argument(
        "--max-seconds",
        type=float,
        default=float("inf"),
        help="stop starting server runs after this long",
    )
    p.add_argument(
        "--completion-deadline",
        type=int,
        default=600,
        metavar="MS",
        help="the server's completionDeadline; an answer later than it + 100 ms "
        "is a violation (0: no deadline, no check)",
    )
    p.add_argument("--worker", help="a running worker's address (default: the fake)")
    p.add_argument(
        "--slow-pass",
        type=float,
        metavar="S",
        help="the fake worker's seconds per forward pass over a canvas that "
        "holds SLOW (default: the fake's 0.05)",
    )
    p.add_argument("--note", help="stored with the figures (the machine, its load)")
    p.add_argument("--out", type=Path, help="write the figures here as JSON")
    p.add_argument("-v", "--verbose", action="store_true", help="figures after each run")
    args = p.parse_args(argv)
    figures = asyncio.run(fuzz(args))
    results = figures.summary()
    print(json.dumps(results, indent=1))
    if args.out is not None:
        head = {"command": command(sys.argv[1:] if argv is None else argv)}
        write_results(
            "fuzz_lsp",
            None,
            {**head, **({"note": args.note} if args.note else {}), **results},
            args.out,
        )
    return 0 if figures.violations == 0 and figures.crashes == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
