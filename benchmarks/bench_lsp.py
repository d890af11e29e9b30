"""Language server round-trip latency: what an editor user waits for.

    python -m benchmarks.bench_lsp [--model DIR | --worker ADDRESS] [--requests 20]

Starts `python -m diffusion_infill.lsp.server` over stdio (the server spawns its own worker with
`--model`, default the shipped checkpoint, or uses a running worker), opens held-out test files
(from data/corpus, packages never trained on; the standard library's textwrap when there is no
corpus) and times, from request sent to response received:

- inline completion: a line cut at a word boundary near its middle and the rest of it
  deleted, the cursor at the cut (typing a line);
- inline completion (empty line): a line's whole content deleted (a multi-line
  completion on a blank line);
- inline completion (typing): from the first case's cut, the next `--keystrokes`
  characters of the line typed one at a time (`didChange`), a completion asked after each,
  as an editor does (the document's first completion, at the cut, is not timed); for the
  three, also reported: exact match of the offered text with the rest of the line, the
  share of requests answered with no completion, and every offered text (so that two runs
  that differ in a setting, e.g. `completionReuse`, can be compared keystroke by keystroke);
- code action list: `textDocument/codeAction` (no model; the cost of listing);
- fill holes: a line's content replaced by `<mask>`, the action resolved;
- rewrite selection: a line's content selected and rewritten;
- rewrite selection (lines): 2-8 lines selected from the first one's code to the last
  one's end and rewritten (the fill holds as many lines: docs/ARCHITECTURE.md, "A
  selection of k lines");
- insert docstring: a function without a docstring, the action resolved;
- fix selection: a line with one injected bug (operator, comparison, variable,
  off-by-one) selected and fixed.

`--repo-set SPLIT` takes the inline cases' lines from the files of the repository set's
packages of that split (benchmarks/repo_set.py) instead, each opened as its file, the
packages the server's workspace folders: repository context as a user's workspace gives it.

`--busy N` runs N CPU-bound processes beside the server while the cases are timed (as a
build or a test run beside the editor would): what a user waits for on a machine that is
not idle (the worker's passes then run on fewer threads: model/threads.py).

`--vs KEY=JSON` compares two configurations of the inline cases in one run of the server: each
line's cases run with and without those settings in turn (the order alternating; the
server told by `workspace/didChangeConfiguration`), so that a machine whose speed drifts
slows both alike; the cases with them are named `... [vs]`, and the ratio of the p50s
is printed and kept (`vs_over_base_p50`).

One warm-up fill (the model load) is not counted. Prints p50/p95/mean per case and
writes benchmarks/results/lsp_<model>.json. The client that times the requests is
benchmarks/lsp_bench_client.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import platform
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from benchmarks.busy import busy_processes
from benchmarks.heldout import bug_examples, infill_examples, load_test_files, mid_line_cut
from benchmarks.lsp_bench_client import Bench, capabilities, exact_offers, summary
from benchmarks.repo_set import DATA, PACKAGES, SPLITS, repo_holes
from benchmarks.results_file import write_results
from diffusion_infill.lsp.docstring import missing_docstrings
from diffusion_infill.model.training.provenance import described_cpu

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "data" / "corpus_v2"
WINDOW_CHARS = 3000  # characters of each test document


def documents(n: int, seed: int) -> dict[str, list[Any]]:
    """The test documents of each case."""
    if (CORPUS / "test.jsonl").exists():
        files = load_test_files(CORPUS)
    else:
        files = [Path(textwrap.__file__).read_text()]
    lines = infill_examples(files, "single-line", n, seed=seed, window_chars=WINDOW_CHARS)
    blocks = infill_examples(files, "multi-line", n, seed=seed + 1, window_chars=WINDOW_CHARS)
    bugs = bug_examples(files, n, seed=seed, window_chars=WINDOW_CHARS)
    docstrings = []  # whole files: the server decides what to send
    for text in files:
        slots = [s for s in missing_docstrings(text) if s.kind == "function"]
        if slots:
            docstrings.append((text, slots[len(slots) // 2].start))
        if len(docstrings) >= n:
            break
    return {"lines": lines, "blocks": blocks, "bugs": bugs, "docstrings": docstrings}


INLINE = ["inline completion", "inline completion (empty line)", "inline completion (typing)"]
VS = " [vs]"  # the name suffix of a case run with --vs's settings
CASES = [
    *INLINE,
    "code action list",
    "fill holes",
    "rewrite selection",
    "rewrite selection (lines)",
    "insert docstring",
    "fix selection",
]


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    docs = documents(args.requests, args.seed)
    folders: list[Path] = []
    if args.repo_set:
        docs["lines"], folders = repo_lines(args.repo_set, args.requests, args.seed, DATA)
    client = await _started(args, folders)
    b = Bench(client)
    inline = INLINE + [c + VS for c in INLINE] if args.vs else INLINE
    cases = inline + CASES[len(INLINE) :]
    try:
        with busy_processes(args.busy):
            await _run_cases(b, docs, args)
        info = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="infill.workerInfo")
        )
    finally:
        await client.shutdown_async(None)
        client.exit(None)
        await client.stop()
    found = {c: summary(b.times.get(c, []), b.errors.get(c, 0)) for c in cases}
    return {
        "model": str(args.model or args.worker or "shipped"),
        "worker": info if isinstance(info, dict) else None,
        "requests": args.requests,
        "machine": {
            "cpu": described_cpu(),  # the worker's where it runs here (not with --worker)
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "settings": args.setting,
        "repo_set": args.repo_set,
        "busy_processes": args.busy,
        "vs_settings": args.vs or None,
        "cases": found,
        "completion quality": {c: b.completion_quality(c) for c in inline},
        "vs_over_base_p50": paired(found) if args.vs else None,
        "vs_exact_won_lost": won_lost(b) if args.vs else None,
    }


async def _started(args: argparse.Namespace, folders: list[Path]) -> LanguageClient:
    """The server over stdio, initialized with --setting's settings, its worker (one it
    spawns, with --model and --device, or --worker's) and `folders` as its workspace."""
    client = LanguageClient("bench-lsp", "1")
    await client.start_io(sys.executable, "-m", "diffusion_infill.lsp.server", cwd=str(ROOT))
    settings: dict[str, Any] = {"progressDelay": 60_000, **args.setting}
    if args.worker:
        settings["workerAddress"] = args.worker
    if args.model:
        settings["modelDir"] = str(args.model)
    if args.device:
        settings["device"] = args.device
    workspace = [types.WorkspaceFolder(uri=f.as_uri(), name=f.name) for f in folders]
    await client.initialize_async(
        types.InitializeParams(
            capabilities=capabilities(),
            initialization_options=settings,
            workspace_folders=workspace or None,
        )
    )
    client.initialized(types.InitializedParams())
    return client


async def _run_cases(b: Bench, docs: dict[str, list[Any]], args: argparse.Namespace) -> None:
    """One warm-up fill (the model load, not counted), then every case on its documents
    (with --only-completion, the inline completion cases alone)."""
    print("warming up (model load) ...", file=sys.stderr)
    warm = docs["lines"][0]
    await b.action(
        "warm-up",
        warm.text[: warm.start] + "<mask>" + warm.text[warm.end :],
        warm.start,
        warm.start,
        "refactor.rewrite.infill.fillHoles",
    )
    b.times.clear()
    for k, ex in enumerate(docs["lines"]):
        runs = [("", {}), (VS, args.vs)] if args.vs else [("", {})]
        for suffix, settings in runs if k % 2 == 0 else runs[::-1]:
            if args.vs:  # the configuration this run's requests get, overlaid on --setting
                b.client.workspace_did_change_configuration(
                    types.DidChangeConfigurationParams(settings={"infill": settings})
                )
            await _inline_cases(b, ex, args.keystrokes, suffix)
        if args.only_completion:
            continue
        await b.action(
            "fill holes",
            ex.text[: ex.start] + "<mask>" + ex.text[ex.end :],
            ex.start,
            ex.start,
            "refactor.rewrite.infill.fillHoles",
        )
        await b.action(
            "rewrite selection",
            ex.text,
            ex.start,
            ex.end,
            "refactor.rewrite.infill.rewriteSelection",
        )
    for ex in [] if args.only_completion else docs["blocks"]:
        rewrite = "refactor.rewrite.infill.rewriteSelection"
        await b.action("rewrite selection (lines)", ex.text, ex.start, ex.end, rewrite)
    for text, at in [] if args.only_completion else docs["docstrings"]:
        await b.action("insert docstring", text, at, at, "refactor.rewrite.infill.insertDocstring")
    for bug in [] if args.only_completion else docs["bugs"]:
        line_start = bug.buggy.rfind("\n", 0, bug.start) + 1
        line_end = bug.buggy.find("\n", bug.end)
        await b.action(
            "fix selection",
            bug.buggy,
            line_start,
            len(bug.buggy) if line_end < 0 else line_end,
            "refactor.rewrite.infill.fixSelection",
        )


async def _inline_cases(b: Bench, ex: Any, keystrokes: int, suffix: str) -> None:
    """The three inline completion cases of one held-out line, each case named + suffix
    (a line of --repo-set in its file, as that file's document)."""
    uri = getattr(ex, "uri", None)
    cut = ex.start + mid_line_cut(ex.truth)
    rest = ex.text[:cut] + ex.text[ex.end :]
    await b.inline(f"inline completion{suffix}", rest, cut, ex.text[cut : ex.end], uri)
    empty = ex.text[: ex.start] + ex.text[ex.end :]
    await b.inline(f"inline completion (empty line){suffix}", empty, ex.start, ex.truth, uri)
    truth = ex.text[cut : ex.end]
    await b.typing(f"inline completion (typing){suffix}", rest, cut, truth, keystrokes, uri)


@dataclass(frozen=True)
class RepoLine:
    """A held-out line in its whole file, a file of a package of the repository set."""

    text: str
    start: int
    end: int
    truth: str
    uri: str


def repo_lines(split: str, n: int, seed: int, data: Path) -> tuple[list[RepoLine], list[Path]]:
    """`n` lines of the files of the repository set's `split` packages
    (benchmarks/repo_set.py), each in its whole file, and the packages' folders: the
    workspace folders the server indexes (`repositoryContext`)."""
    data = data.resolve()
    folders = [data / k for k, v in PACKAGES.items() if v[2] == split]
    if any(not f.is_dir() for f in folders):
        sys.exit(f"{data} lacks the packages: python -m benchmarks.repo_set")
    out = []
    for hole in repo_holes(split, "cursor", 2 * n, seed, data):
        path = data / hole.package / hole.path
        full, ex = path.read_text(), hole.example
        at = full.find(ex.text)
        if at >= 0 and full.find(ex.text, at + 1) < 0:
            out.append(RepoLine(full, at + ex.start, at + ex.end, ex.truth, path.as_uri()))
    return out[:n], folders


def paired(cases: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Per inline case, p50 with --vs's settings over p50 without (requests interleaved)."""
    out = {}
    for case in INLINE:
        a, b = cases.get(case, {}), cases.get(case + VS, {})
        if a.get("p50_ms") and b.get("p50_ms"):
            out[case] = round(b["p50_ms"] / a["p50_ms"], 3)
    return out


def won_lost(b: Bench) -> dict[str, list[int]]:
    """Per inline case, [offers exact with --vs's settings and not without, the reverse]
    (the same lines and keystrokes, in order)."""
    out = {}
    for case in INLINE:
        base, vs = b.completion_quality(case), b.completion_quality(case + VS)
        if base["n"] != vs["n"]:
            continue
        right = [exact_offers(q["offered"], q["truths"]) for q in (base, vs)]
        pairs = list(zip(*right, strict=True))
        out[case] = [sum(v and not a for a, v in pairs), sum(a and not v for a, v in pairs)]
    return out


def parse_setting(kv: str) -> tuple[str, Any]:
    key, sep, value = kv.partition("=")
    if not sep:
        raise SystemExit(f"--setting {kv!r}: expected KEY=VALUE")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def _print(results: dict[str, Any], vs: dict[str, Any]) -> None:
    """The table of cases, the completions' quality and, with --vs, the p50 ratios."""
    print(f"{'case':30s} {'n':>3s} {'err':>3s} {'p50 ms':>9s} {'p95 ms':>9s} {'mean ms':>9s}")
    for case, r in results["cases"].items():
        if r["n"]:
            print(
                f"{case:30s} {r['n']:3d} {r['errors']:3d} {r['p50_ms']:9.1f} "
                f"{r['p95_ms']:9.1f} {r['mean_ms']:9.1f}"
            )
        else:
            print(f"{case:30s} {0:3d} {r['errors']:3d} {'-':>9s} {'-':>9s} {'-':>9s}")
    for case, q in results["completion quality"].items():
        if q["n"]:
            print(
                f"{case}: exact match {q['exact_match']:.0%}, first line "
                f"{q['first_line_right']:.0%}, no completion "
                f"{q['no_completion']:.0%} (n={q['n']})"
                + (
                    f", last offer kept {q['offers_kept']:.0%}"
                    if q["offers_kept"] is not None
                    else ""
                )
            )
    for case, ratio in (results["vs_over_base_p50"] or {}).items():
        print(f"{case}: p50 with {vs} / without: {ratio:.3f}")
    for case, (won, lost) in (results["vs_exact_won_lost"] or {}).items():
        print(f"{case}: exact with {vs}, not without: {won}; the reverse: {lost}")
    if results.get("worker"):
        print(f"model {results['worker'].get('model')} on {results['worker'].get('device')}")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = p.add_mutually_exclusive_group()
    where.add_argument("--model", type=Path, help="model directory (default: shipped)")
    where.add_argument("--worker", help="address of a running worker (unix:PATH, tcp:...)")
    p.add_argument("--device", help="device of the spawned worker (default: cuda if present)")
    p.add_argument("--requests", type=int, default=20, help="requests per case")
    p.add_argument("--seed", type=int, default=0, help="seed of the example choice")
    p.add_argument(
        "--out", type=Path, help="results JSON (default: benchmarks/results/lsp_<model>.json)"
    )
    p.add_argument(
        "--keystrokes", type=int, default=6, help="characters typed per line in the typing case"
    )
    p.add_argument(
        "--repo-set",
        choices=SPLITS,
        help="inline completion on lines of the repository set's packages of this split, "
        "each package a workspace folder (repository context as a user gets it)",
    )
    p.add_argument(
        "--busy",
        type=int,
        default=0,
        metavar="N",
        help="N CPU-bound processes running beside the server while it is timed",
    )
    p.add_argument(
        "--only-completion",
        action="store_true",
        help="time inline completion only (faster, for tuning its settings)",
    )
    p.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="a server setting, e.g. completionSteps=8 (repeatable)",
    )
    p.add_argument(
        "--vs",
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="a second configuration for the inline cases (repeatable): each line's cases "
        "run with and without it in turn (workspace/didChangeConfiguration), the order "
        "alternating, so that the machine's drift falls on both alike",
    )
    args = p.parse_args(argv)
    if args.busy < 0:
        p.error(f"--busy must be 0 or more, not {args.busy}")
    args.setting = dict(parse_setting(kv) for kv in args.setting)
    args.vs = dict(parse_setting(kv) for kv in args.vs)
    logging.basicConfig(level=logging.ERROR)
    results = asyncio.run(bench(args))
    _print(results, args.vs)
    write_results("lsp_via_worker" if args.worker else "lsp", args.model, results, args.out)


if __name__ == "__main__":
    main()
