"""What the `infill` commands share: running over the files one by one (a file's error is
reported and the next file is done; a model or worker failure ends the run), writing a
file in place, the progress line of a file's work, the summary line and exit statuses."""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from diffusion_infill.infill.cli.backends import Backend
from diffusion_infill.infill.cli.files import Source, encode, write_atomic
from diffusion_infill.infill.cli.progress import ProgressLine, ProgressLog
from diffusion_infill.infill.cli.progress import wanted as progress_wanted
from diffusion_infill.infill.core.errors import InfillError, line_col
from diffusion_infill.infill.core.results import FillResult
from diffusion_infill.infill.serve.client import WorkerError
from diffusion_infill.model.denoiser import ModelLoadError

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
EXIT_SIGINT, EXIT_SIGPIPE, EXIT_SIGTERM = 130, 141, 143  # 128 + the signal, as shells report
T = TypeVar("T")


def error(where: str, message: str) -> None:
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


def report_left(path: str, result: FillResult, floor: float | None, *, checks: bool = True) -> None:
    """One line on stderr per span left as it was: its fill's confidence is below `floor`
    (--min-confidence), or (with `checks`) every candidate failed the checks. Not an
    error: the file was filled as well as it could be."""
    for f in result.fills:
        if f.rejected is None:
            continue
        where = line_col(result.original, f.span.start)
        if floor is not None and f.confidence is not None and f.confidence < floor:
            error(
                path,
                f"{where}: left as it was: its confidence {f.confidence:.2f} "
                f"is below --min-confidence {floor:g}",
            )
        elif checks:
            why = f"every candidate failed the checks ({f.rejected})"
            error(path, f"{where}: left as it was: {why}")


def each_file(
    args: argparse.Namespace,
    backend: Backend,
    work: Callable[[str], T],
    report: Callable[[str, T], bool],
) -> int:
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
                error(path, str(exc))
                status = EXIT_ERROR
                continue
            if not report(path, done):
                status = EXIT_ERROR
    finally:
        backend.close()
    return status


def write_file(path: str, args: argparse.Namespace, source: Source, text: str) -> bool:
    """Write `text` over the file, atomically, in the file's own encoding; False (and a
    one-line error) when it cannot be or must not be (read-only without --force), and then
    the file is as it was."""
    try:
        write_atomic(Path(path), encode(text, source.encoding), force=args.force)
    except InfillError as exc:
        error(path, str(exc))
        return False
    except OSError as exc:
        error(path, f"cannot write: {exc.strerror or exc}; the file is unchanged")
        return False
    return True


@contextlib.contextmanager
def file_progress(
    args: argparse.Namespace, path: str, verb: str, unit: str
) -> Iterator[ProgressLine | ProgressLog]:
    """The progress of one file's work: a line rewritten in place on a terminal (or with
    --progress), else a plain line every few seconds once the work has run a while; ended
    however the work ends, so that the summary or error starts on a line of its own."""
    label = f"{path}: {verb}"
    line = ProgressLine(label, unit) if progress_wanted(args.progress) else ProgressLog(label, unit)
    try:
        yield line
    finally:
        line.close()
