"""Command line: `infill fill FILE...` fills the hole markers of each file;
`infill fix FILE...` repairs the tokens the model finds most improbable.

    infill fill a.py b.py         # unified diff on stdout, a summary line per file on stderr
    infill fill a.py --in-place   # write the files; summary lines only
    infill fill a.py --json       # one JSON object per file (one per line) on stdout
    infill fill a.py --trace      # every denoising step on stderr
    infill fill a.py --worker unix:/run/user/1000/infill/worker.sock   # a running worker
    infill fix a.py --lines 10:20 # score lines 10-20, re-denoise the most suspicious token

The diff goes to stdout alone so that it can be piped to `patch -p1` or `git apply`;
summaries, traces and errors go to stderr. The model is loaded once, on the first file that
has holes (infill/cli/backends.py). A bad file gets a one-line error and the others are
still filled.

Exit status: 0 all files filled, 1 some file or the model could not be used, 2 usage
(unknown flag, option out of range).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

from infill.cli.backends import Backend, Repair, backend_for
from infill.cli.files import language_for, line_range, read_text
from infill.cli.parser import build_parser, check_worker_args, lines_spec, sampler_options
from infill.core.engine import check_text
from infill.core.errors import InfillError, line_col
from infill.core.options import SamplerOptions
from infill.core.results import FillResult, TokenScore
from infill.core.spans import check_marker, find_holes
from infill.serve.client import WorkerError
from model.denoiser import ModelLoadError

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
T = TypeVar("T")


def _error(where: str, message: str) -> None:
    sep = ":" if re.match(r"\d+:\d+: ", message) else ": "
    print(f"infill: {where}{sep}{message}", file=sys.stderr)


def summary(path: str, result: FillResult) -> str:
    s = result.stats
    return (
        f"{path}: {s.spans} spans, {s.tokens} tokens, {s.nfe} forward passes "
        f"({s.nfe_per_token:.2f}/token), {s.steps} steps, {s.ms:.0f} ms"
    )


def _each_file(args: argparse.Namespace, backend: Backend,
               work: Callable[[str], T], report: Callable[[str, T], bool]) -> int:
    """`work` on each file, then `report` (False: the file failed). A model or worker
    failure ends the run (every other file would fail the same way); a file's own error is
    reported and the next file is done."""
    status = EXIT_OK
    try:
        for path in args.files:
            try:
                done = work(path)
            except ModelLoadError as exc:
                print(f"infill: cannot load the model: {exc}", file=sys.stderr)
                return EXIT_ERROR
            except WorkerError as exc:
                print(f"infill: worker: {exc}", file=sys.stderr)
                return EXIT_ERROR
            except InfillError as exc:
                _error(path, str(exc))
                status = EXIT_ERROR
                continue
            if not report(path, done):
                status = EXIT_ERROR
    finally:
        backend.close()
    return status


def _write(path: str, text: str) -> bool:
    try:
        Path(path).write_bytes(text.encode("utf-8"))
    except OSError as exc:
        _error(path, f"cannot write: {exc.strerror or exc}")
        return False
    return True


# -- infill fill ------------------------------------------------------------------------


def _fill_file(path: str, args: argparse.Namespace, options: SamplerOptions,
               backend: Backend) -> FillResult:
    text = read_text(Path(path))
    check_text(text)
    find_holes(text, args.marker)  # no holes, bad markers: an error before any model work
    return backend.fill(text, marker=args.marker, language=language_for(args, path),
                        options=options)


def _report_fill(path: str, args: argparse.Namespace, result: FillResult) -> bool:
    if args.in_place and result.text != result.original and not _write(path, result.text):
        return False
    if args.json:
        obj: dict[str, Any] = {"path": path, **result.to_dict()}
        if args.trace:
            obj["trace"] = [asdict(step) for step in result.trace]
        print(json.dumps(obj, ensure_ascii=False), flush=True)
        return True
    if args.trace:
        print(f"{path}: trace\n{result.trace_text()}", file=sys.stderr)
    if not args.in_place:
        sys.stdout.write(result.diff(path))
        sys.stdout.flush()
    print(summary(path, result), file=sys.stderr)
    return True


def cmd_fill(args: argparse.Namespace) -> int:
    try:
        options = sampler_options(args)
        check_marker(args.marker)
        check_worker_args(args)
    except (InfillError, ValueError) as exc:
        print(f"infill: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    backend = backend_for(args)
    return _each_file(args, backend, lambda path: _fill_file(path, args, options, backend),
                      lambda path, result: _report_fill(path, args, result))


# -- infill fix -------------------------------------------------------------------------


def _fix_file(path: str, args: argparse.Namespace, options: SamplerOptions,
              backend: Backend) -> tuple[str, FillResult | None, list[TokenScore]]:
    """(the file's text, the repair or None, every token's score)."""
    text = read_text(Path(path))
    check_text(text)
    start, end = line_range(text, *lines_spec(args.lines)) if args.lines else (0, len(text))
    repair: Repair = backend.fix(text, start=start, end=end, max_fixes=args.max_fixes,
                                 min_suspicion=args.min_suspicion,
                                 language=language_for(args, path), options=options)
    return (text, *repair)


def _fix_summary(path: str, text: str, result: FillResult | None,
                 scores: list[TokenScore]) -> str:
    worst = max(scores, key=lambda s: s.suspicion, default=None)
    if worst is None:
        return f"{path}: nothing to score"
    where = line_col(text, worst.start)
    head = f"most suspicious {worst.text.strip()!r} at {where} ({worst.suspicion:.2f})"
    if result is None or not result.edits:
        return f"{path}: no change; {head}"
    return f"{summary(path, result)}; {head}"


def _report_fix(path: str, args: argparse.Namespace, original: str,
                result: FillResult | None, scores: list[TokenScore]) -> bool:
    changed = result is not None and result.text != original
    if args.in_place and changed and not _write(path, result.text):
        return False
    if args.json:
        obj: dict[str, Any] = {"path": path, "changed": changed,
                               "scores": [asdict(s) for s in scores]}
        if result is not None:
            obj.update(result.to_dict())
        print(json.dumps(obj, ensure_ascii=False), flush=True)
        return True
    if changed and not args.in_place:
        sys.stdout.write(result.diff(path))
        sys.stdout.flush()
    print(_fix_summary(path, original, result, scores), file=sys.stderr)
    return True


def cmd_fix(args: argparse.Namespace) -> int:
    try:
        options = sampler_options(args)
        check_worker_args(args)
        if args.max_fixes < 1:
            raise ValueError(f"--max-fixes must be >= 1, got {args.max_fixes}")
        if not 0.0 <= args.min_suspicion <= 1.0:
            raise ValueError(f"--min-suspicion must be in 0..1, got {args.min_suspicion}")
        if args.lines is not None:
            lines_spec(args.lines)
    except (InfillError, ValueError) as exc:
        print(f"infill: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    backend = backend_for(args)
    return _each_file(args, backend, lambda path: _fix_file(path, args, options, backend),
                      lambda path, done: _report_fix(path, args, *done))


COMMANDS = {"fill": cmd_fill, "fix": cmd_fix}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    return COMMANDS[args.command](args)
