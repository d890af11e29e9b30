"""Command line: `infill fill FILE...` fills the hole markers of each file;
`infill fix FILE...` repairs the tokens the model finds most improbable.

    infill fill a.py b.py         # unified diff on stdout, a summary line per file on stderr
    infill fill a.py --in-place   # write the files; summary lines only
    infill fill a.py --in-place --force   # write a.py even if it is read-only (chmod a-w)
    infill fill a.py --json       # one JSON object per file (one per line) on stdout
    infill fill a.py --trace      # every denoising step on stderr
    infill fill a.py --worker unix:/run/user/1000/infill/worker.sock   # a running worker
                                  # (the default socket's is used unasked; INFILL_WORKER=off)
    infill fix a.py --lines 10:20 # score lines 10-20, repair the most suspicious token
    infill fix --changed *.py     # only the lines changed since git's HEAD

The diff goes to stdout alone so that it can be piped to `patch -p1` or `git apply`;
summaries, traces and errors go to stderr. The model is loaded once, on the first file that
has holes (infill/cli/backends.py). A bad file gets a one-line error and the others are
still filled.

A fill that fails the checks (`--checks`, docs/ARCHITECTURE.md "Checks") loses to the next
candidate; when every candidate fails, its hole is left as it was (never broken code) and a
line on stderr says why.

Exit status: 0 all files filled (a hole the checks left is reported, not an error), 1 some
file or the model could not be used, 2 usage
(unknown flag, option out of range), 130 / 143 interrupted (SIGINT / SIGTERM), 141 stdout
closed by its reader. `--in-place` writes are atomic (infill/cli/files.py): a file is
either its old or its new text, whatever happens. A file `--in-place` must not write is an
error (1) and stays as it was: read-only by its permission bits (no write bit for its
owner counts even for root, whom the system would let write it; `--force` writes such a
file of one's own), immutable or append-only (never written), or in a read-only directory
(`fill` checks before the model runs, `fix` when it has a repair to write).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

from diffusion_infill.infill.cli.backends import Backend, backend_for
from diffusion_infill.infill.cli.changes import changed_lines, merged
from diffusion_infill.infill.cli.files import (
    Source,
    check_writable,
    encode,
    language_for,
    line_range,
    read_source,
    write_atomic,
)
from diffusion_infill.infill.cli.parser import (
    build_parser,
    check_output_args,
    check_worker_args,
    lines_spec,
    sampler_options,
)
from diffusion_infill.infill.cli.progress import ProgressLine
from diffusion_infill.infill.cli.progress import wanted as progress_wanted
from diffusion_infill.infill.core.engine import check_text
from diffusion_infill.infill.core.errors import InfillError, line_col
from diffusion_infill.infill.core.options import SamplerOptions
from diffusion_infill.infill.core.results import FillResult, TokenScore
from diffusion_infill.infill.core.spans import check_marker, find_holes
from diffusion_infill.infill.core.suspicion import worst_first
from diffusion_infill.infill.serve.client import WorkerError
from diffusion_infill.model.denoiser import ModelLoadError

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
EXIT_SIGINT, EXIT_SIGPIPE, EXIT_SIGTERM = 130, 141, 143  # 128 + the signal, as shells report
T = TypeVar("T")


def _error(where: str, message: str) -> None:
    sep = ":" if re.match(r"\d+:\d+: ", message) else ": "
    print(f"infill: {where}{sep}{message}", file=sys.stderr)


def summary(path: str, result: FillResult) -> str:
    s = result.stats
    rejected = sum(f.rejected is not None for f in result.fills)
    return (
        f"{path}: {s.spans} spans, {s.tokens} tokens, {s.nfe} forward passes "
        f"({s.nfe_per_token:.2f}/token), {s.steps} steps, {s.ms:.0f} ms"
        + (f", {s.candidates} candidates" if s.candidates else "")
        + (f", {rejected} left as they were" if rejected else "")
    )


def _report_rejected(path: str, result: FillResult) -> None:
    """One line on stderr per span whose every candidate failed the checks (its text was
    left as it was). Not an error: the file was filled as well as it could be."""
    for f in result.fills:
        if f.rejected is not None:
            _error(path, f"{line_col(result.original, f.span.start)}: left as it was: "
                   f"every candidate failed the checks ({f.rejected})")


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


def _write(path: str, args: argparse.Namespace, source: Source, text: str) -> bool:
    """Write `text` over the file, atomically, in the file's own encoding; False (and a
    one-line error) when it cannot be or must not be (read-only without --force), and then
    the file is as it was."""
    try:
        write_atomic(Path(path), encode(text, source.encoding), force=args.force)
    except InfillError as exc:
        _error(path, str(exc))
        return False
    except OSError as exc:
        _error(path, f"cannot write: {exc.strerror or exc}; the file is unchanged")
        return False
    return True


@contextlib.contextmanager
def _progress(args: argparse.Namespace, path: str, verb: str,
              unit: str) -> Iterator[ProgressLine | None]:
    """A progress line for one file's work (None when not wanted); ended however the work
    ends, so that the summary or error starts on a line of its own."""
    if not progress_wanted(args.progress):
        yield None
        return
    line = ProgressLine(f"{path}: {verb}", unit)
    try:
        yield line
    finally:
        line.close()


# -- infill fill ------------------------------------------------------------------------


def _fill_file(path: str, args: argparse.Namespace, options: SamplerOptions,
               backend: Backend) -> tuple[Source, FillResult]:
    source = read_source(Path(path))
    check_text(source.text)
    find_holes(source.text, args.marker)  # no holes, bad markers: an error before any model
    if args.in_place:  # a file with holes is to be written: refused before the model runs
        check_writable(Path(path), force=args.force)
    with _progress(args, path, "filling", "slots") as progress:
        return source, backend.fill(source.text, marker=args.marker,
                                    language=language_for(args, path), options=options,
                                    progress=progress)


def _report_fill(path: str, args: argparse.Namespace, source: Source,
                 result: FillResult) -> bool:
    if (args.in_place and result.text != result.original
            and not _write(path, args, source, result.text)):
        return False
    if args.json:
        obj: dict[str, Any] = {"path": path, **result.to_dict()}
        if args.trace:
            obj["trace"] = [asdict(step) for step in result.trace]
        print(json.dumps(obj, ensure_ascii=False), flush=True)
        _report_rejected(path, result)
        return True
    if args.trace:
        print(f"{path}: trace\n{result.trace_text()}", file=sys.stderr)
    if not args.in_place:
        sys.stdout.write(result.diff(path))
        sys.stdout.flush()
    print(summary(path, result), file=sys.stderr)
    _report_rejected(path, result)
    return True


def cmd_fill(args: argparse.Namespace) -> int:
    try:
        options = sampler_options(args)
        check_marker(args.marker)
        check_worker_args(args)
        check_output_args(args)
    except (InfillError, ValueError) as exc:
        print(f"infill: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    backend = backend_for(args)
    return _each_file(args, backend, lambda path: _fill_file(path, args, options, backend),
                      lambda path, done: _report_fill(path, args, *done))


# -- infill fix -------------------------------------------------------------------------


def _fix_file(path: str, args: argparse.Namespace, options: SamplerOptions,
              backend: Backend) -> tuple[Source, FillResult | None, list[TokenScore]]:
    """(the file, the repair or None, every token's score). With --changed, each changed
    region is repaired on its own, from the bottom of the file up (the regions above keep
    their offsets); an unchanged file is not scored (no scores)."""
    source = read_source(Path(path))
    text = source.text
    check_text(text)
    if args.changed:
        n_lines = text.count("\n") + (not text.endswith("\n") and bool(text))
        ranges = [line_range(text, a, b)
                  for a, b in changed_lines(Path(path), n_lines, args.base)]
    else:
        ranges = [line_range(text, *lines_spec(args.lines)) if args.lines else (0, len(text))]
    parts: list[FillResult] = []
    scores: list[TokenScore] = []
    current = text
    for start, end in reversed(ranges):
        with _progress(args, path, "scoring", "windows") as progress:
            result, found = backend.fix(current, start=start, end=end,
                                        max_fixes=args.max_fixes,
                                        min_suspicion=args.min_suspicion,
                                        min_likely=args.min_likely,
                                        language=language_for(args, path), options=options,
                                        progress=progress)
        scores = found + scores
        if result is not None:
            parts.append(result)
            current = result.text
    return source, merged(text, parts), scores


def _fix_summary(path: str, text: str, result: FillResult | None,
                 scores: list[TokenScore], args: argparse.Namespace) -> str:
    worst = next(iter(worst_first(scores)), None)
    if worst is None:
        return f"{path}: no changes since {args.base}" if args.changed else \
            f"{path}: nothing to score"
    where = line_col(text, worst.start)
    head = f"most suspicious {worst.text.strip()!r} at {where} ({worst.suspicion:.2f})"
    if result is None:  # no token passed the rule (docs/ARCHITECTURE.md, "Fixer calibration")
        return (f"{path}: nothing suspicious (worst token {worst.text.strip()!r} at "
                f"{where}, suspicion {worst.suspicion:.2f})")
    if not result.edits:
        return f"{path}: no change; {head}"
    return f"{summary(path, result)}; {head}"


def _report_fix(path: str, args: argparse.Namespace, source: Source,
                result: FillResult | None, scores: list[TokenScore]) -> bool:
    original = source.text
    changed = result is not None and result.text != original
    if args.in_place and changed and not _write(path, args, source, result.text):
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
    print(_fix_summary(path, original, result, scores, args), file=sys.stderr)
    return True


def cmd_fix(args: argparse.Namespace) -> int:
    try:
        options = sampler_options(args)
        check_worker_args(args)
        check_output_args(args)
        if args.max_fixes < 1:
            raise ValueError(f"--max-fixes must be >= 1, got {args.max_fixes}")
        for flag, value in (("--min-suspicion", args.min_suspicion),
                            ("--min-likely", args.min_likely)):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{flag} must be in 0..1, got {value}")
        if args.lines is not None:
            lines_spec(args.lines)
        if args.base != "HEAD" and not args.changed:
            raise ValueError("--base applies to --changed")
    except (InfillError, ValueError) as exc:
        print(f"infill: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    backend = backend_for(args)
    return _each_file(args, backend, lambda path: _fix_file(path, args, options, backend),
                      lambda path, done: _report_fix(path, args, *done))


COMMANDS = {"fill": cmd_fill, "fix": cmd_fix}


class Terminated(BaseException):
    """SIGTERM, raised where the run is, like KeyboardInterrupt for SIGINT: files being
    written are left old or new (write_atomic removes its temporary file)."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise Terminated


def _stdout_closed() -> int:
    """The reader of stdout went away (`infill fill a.py | head`): stop quietly. stdout is
    pointed at /dev/null so that the interpreter's last flush does not complain."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return EXIT_SIGPIPE


def main(argv: list[str] | None = None) -> int:
    """The `infill` command. SIGINT and SIGTERM end the run with one line on stderr and
    status 130 / 143; a closed stdout ends it quietly with 141 (as if killed by SIGPIPE)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:
        print("infill: interrupted", file=sys.stderr)
        return EXIT_SIGINT
    except Terminated:
        print("infill: terminated", file=sys.stderr)
        return EXIT_SIGTERM
    except BrokenPipeError:
        return _stdout_closed()
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
