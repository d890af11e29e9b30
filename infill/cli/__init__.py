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

The commands are infill/cli/fill.py and infill/cli/fix.py; what they share (the run over
the files, in-place writes, progress, exit statuses) is infill/cli/runs.py.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import NoReturn

from diffusion_infill.infill.cli.fill import cmd_fill
from diffusion_infill.infill.cli.fix import cmd_fix
from diffusion_infill.infill.cli.parser import build_parser
from diffusion_infill.infill.cli.runs import (
    EXIT_SIGINT,
    EXIT_SIGPIPE,
    EXIT_SIGTERM,
    EXIT_USAGE,
)
from diffusion_infill.model.openmp import serving_spin

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


def run() -> NoReturn:
    """The `infill` console script: `main`, then exit without tearing the interpreter down.
    Freeing a loaded model and its thread pools at exit took 0.3-0.4 s of a 1.6 s fill of
    examples/holes.py; once `main` has returned, its files are written and closed and a
    worker it spawned is stopped, so there is nothing left to clean up."""
    serving_spin()  # before torch loads: this process's passes are governed
    code = main()
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away after the last write
        code = _stdout_closed()
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    os._exit(code)
