"""The `infill` command line: its parser, and what its flags mean to the engine."""

from __future__ import annotations

import argparse
import math
import re
from typing import Any

from diffusion_infill.infill.core.checks import KINDS
from diffusion_infill.infill.core.options import (
    DEFAULT_CACHE_REFRESH,
    DEFAULT_CHECKS,
    DEFAULT_GROW_CAP,
    DEFAULT_LENGTHS,
    MAX_RUNNER_UPS,
    SamplerOptions,
)
from diffusion_infill.infill.core.spans import DEFAULT_MARKER
from diffusion_infill.infill.core.strategies import STRATEGIES
from diffusion_infill.infill.core.suspicion import DEFAULT_MIN_LIKELY, DEFAULT_MIN_SUSPICION
from diffusion_infill.infill.serve.sockets import parse_address

# Lines of a file `infill fix` checks whole: the shipped model scores ~125 lines a second
# on 2 idle cores of an AMD EPYC with AVX-512 BF16 (6,839 lines of Python in 56 s), and
# int8 on a CPU without bf16 runs at about 0.6x that, so a whole-file run of this many
# stays under a minute on either.
DEFAULT_MAX_LINES = 3000


def _add_model_args(p: argparse.ArgumentParser) -> None:
    model = p.add_argument_group("model")
    model.add_argument("--model", metavar="DIR", help="model directory (default: shipped)")
    model.add_argument("--device", help="torch device, e.g. cpu or cuda (default: auto)")
    model.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="allow a model directory's own Python code to run (LLaDA, Dream)",
    )
    model.add_argument(
        "--worker",
        metavar="ADDRESS",
        help="run through a running worker (unix:PATH, PATH or tcp:HOST:PORT; token from "
        "$INFILL_WORKER_TOKEN), or 'spawn' to start one with --model/--device (default: "
        "the worker on the default socket when one listens there and neither --model, "
        "--device nor --trace is given; INFILL_WORKER=off: never)",
    )


def _add_sampler_args(p: argparse.ArgumentParser) -> None:
    s = p.add_argument_group("sampler")
    s.add_argument("--order", default="confidence", help=f"one of: {', '.join(STRATEGIES)}")
    s.add_argument("--threshold", type=float, help="commit threshold of the order")
    s.add_argument("--tokens-per-step", type=int, help="commit exactly K tokens per step")
    s.add_argument("--steps", type=int, help="most denoising steps (default: until done)")
    s.add_argument("--temperature", type=float, default=0.0, help="0: argmax (default)")
    s.add_argument("--seed", type=int, help="seed for sampling at temperature > 0")
    s.add_argument("--remask-threshold", type=float, help="remask tokens whose p fell below")
    s.add_argument("--remask-budget", type=int, help="most remasks per file")
    s.add_argument("--span-tokens", type=int, default=16, help="tokens per hole without hint")
    s.add_argument("--max-span-tokens", type=int, default=256, help="most tokens per span")
    s.add_argument("--grow", type=int, default=16, help="tokens added to a span that filled up")
    s.add_argument(
        "--grow-cap",
        type=int,
        default=DEFAULT_GROW_CAP,
        help=f"most tokens a hole grows to; a longer hint is kept (default {DEFAULT_GROW_CAP})",
    )
    s.add_argument("--exact-length", action="store_true", help="hints are exact lengths")
    s.add_argument("--window-tokens", type=int, help="canvas size (default: model's maximum)")
    s.add_argument(
        "--cache-refresh",
        type=int,
        default=DEFAULT_CACHE_REFRESH,
        metavar="K",
        help="reuse the context's keys/values between passes, a full pass every K steps "
        f"(default {DEFAULT_CACHE_REFRESH}; 0: every pass exact)",
    )
    _add_check_args(p)


def _add_check_args(p: argparse.ArgumentParser) -> None:
    s = p.add_argument_group("checks and lengths")
    s.add_argument(
        "--checks",
        default=DEFAULT_CHECKS,
        metavar="LIST",
        help="a fill must pass these checks, comma-separated, of: "
        f"{', '.join(KINDS)} (default: {DEFAULT_CHECKS}); a failing fill loses "
        "to the next candidate, and with none passing its hole is left as it was",
    )
    s.add_argument(
        "--no-checks",
        dest="checks",
        action="store_const",
        const="",
        help="no checks: write the model's first decode whatever it is",
    )
    s.add_argument(
        "--candidates",
        type=int,
        default=2,
        metavar="N",
        help="with checks: the first decode and N-1 alternatives (default 2)",
    )
    s.add_argument(
        "--lengths",
        type=int,
        default=DEFAULT_LENGTHS,
        metavar="N",
        help="a hole without a fixed length whose fill fails its checks races "
        "N-1 shorter allocations (..., 4, 2, 1: the model's score picks; default "
        f"{DEFAULT_LENGTHS}, 1: none)",
    )
    s.add_argument(
        "--no-context-copies",
        dest="context_copies",
        action="store_false",
        help="with checks: never replace an in-line hole's fill by text that follows the "
        "same code elsewhere in the file (one pass less)",
    )
    s.add_argument(
        "--min-confidence",
        type=probability("--min-confidence"),
        default=None,
        metavar="P",
        help="leave a span as it was, with a line on stderr, where the fill's confidence "
        "(the calibrated probability that it is right, 0..1) is below P; needs a model "
        "with confidence weights (the shipped one has them)",
    )


def probability(flag: str) -> Any:
    """An argparse type: a number from 0 to 1, else a usage error naming `flag`."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not 0 <= value <= 1:  # nan too
            raise argparse.ArgumentTypeError(f"{flag} must be a number from 0 to 1, got {text!r}")
        return value

    return parse


def _add_output_args(p: argparse.ArgumentParser, verb: str) -> argparse._ArgumentGroup:
    out = p.add_argument_group("output")
    out.add_argument(
        "--in-place",
        action="store_true",
        help=f"write the {verb} files, atomically; a read-only file (no write "
        "bit for its owner, even for root), an immutable one or one in a "
        "read-only directory is an error and stays as it was",
    )
    out.add_argument(
        "--force",
        action="store_true",
        help="with --in-place: write a file of yours that is read-only by its "
        "permission bits (its mode is kept); never an immutable file or one in "
        "a read-only directory",
    )
    out.add_argument("--json", action="store_true", help="one JSON object per file on stdout")
    out.add_argument(
        "--progress",
        action="store_true",
        help="show progress on stderr (default: when stderr is a terminal)",
    )
    return out


def _add_python_arg(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--python",
        metavar="PATH",
        help="the Python interpreter or virtual environment of your code, whose libraries "
        "the member check reads (default: the active virtual environment, else infill's)",
    )


def _add_language_arg(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--language", help="'python' for scope-aware windows (default: from the file suffix)"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="infill", description="Fill masked code regions with a diffusion language model."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_fill_command(commands)
    _add_fix_command(commands)
    return parser


def _add_fill_command(commands: Any) -> None:
    fill = commands.add_parser(
        "fill",
        help="fill the hole markers of files",
        description="Fill every hole marker (<mask>, or <mask:N> for a hint of N tokens) of "
        "each FILE; print a unified diff (stdout) and a summary line (stderr) per file.",
    )
    fill.add_argument("files", nargs="+", metavar="FILE")
    out = _add_output_args(fill, "filled")
    out.add_argument("--trace", action="store_true", help="print every denoising step")
    out.add_argument(
        "--runner-ups",
        type=int,
        default=0,
        metavar="N",
        help=f"with --json: up to N other fills per hole, surest first (0..{MAX_RUNNER_UPS})",
    )
    _add_model_args(fill)
    text = fill.add_argument_group("text")
    text.add_argument("--marker", default=DEFAULT_MARKER, help="hole marker (default: <mask>)")
    _add_language_arg(text)
    text.add_argument(
        "--repo",
        default="auto",
        metavar="auto|DIR|off",
        help="read the rest of the repository: copies from its other files compete with "
        "the model's fills (auto: the file's git work tree, else its project; default auto)",
    )
    _add_python_arg(text)
    _add_sampler_args(fill)


def _add_fix_command(commands: Any) -> None:
    fix = commands.add_parser(
        "fix",
        help="find improbable tokens and repair them",
        description="Score every token of each FILE (or of --lines A:B) in one forward pass, "
        "replace the most suspicious ones by what the model expects there; print the diff of "
        "what changed.",
    )
    fix.add_argument("files", nargs="+", metavar="FILE")
    _add_output_args(fix, "repaired")
    what = fix.add_argument_group("what to fix")
    where = what.add_mutually_exclusive_group()
    where.add_argument("--lines", metavar="A:B", help="only lines A to B (1-based, inclusive)")
    where.add_argument(
        "--changed",
        action="store_true",
        help="only the lines changed since git's HEAD (or --base), each changed "
        "region on its own (--max-fixes per region); an untracked file is all "
        "new; an unchanged one is skipped without loading the model",
    )
    what.add_argument(
        "--max-lines",
        type=int,
        default=DEFAULT_MAX_LINES,
        metavar="N",
        help="a file of more lines is not checked whole but with --lines or --changed "
        "(a whole-file fix scores ~75-125 lines a second on 2 CPU cores; default "
        f"{DEFAULT_MAX_LINES}: under a minute; 0: no limit)",
    )
    what.add_argument(
        "--base",
        default="HEAD",
        metavar="REV",
        help="with --changed: the revision to compare with (default HEAD)",
    )
    what.add_argument("--max-fixes", type=int, default=1, help="most tokens repaired (default 1)")
    what.add_argument(
        "--min-suspicion",
        type=float,
        default=DEFAULT_MIN_SUSPICION,
        help="repair only tokens at least this suspicious (1 - p(token)), 0..1 "
        f"(default {DEFAULT_MIN_SUSPICION}, calibrated: docs/ARCHITECTURE.md)",
    )
    what.add_argument(
        "--min-likely",
        type=float,
        default=DEFAULT_MIN_LIKELY,
        help="repair only where the model's likeliest replacement has at least "
        f"this probability, 0..1 (default {DEFAULT_MIN_LIKELY})",
    )
    _add_language_arg(what)
    _add_python_arg(what)
    _add_model_args(fix)
    _add_sampler_args(fix)


def sampler_options(args: argparse.Namespace) -> SamplerOptions:
    """The flags' SamplerOptions (OptionError when out of range or illegal together)."""
    return SamplerOptions(
        order=args.order,
        threshold=args.threshold,
        tokens_per_step=args.tokens_per_step,
        max_steps=args.steps,
        temperature=args.temperature,
        seed=args.seed,
        remask_threshold=args.remask_threshold,
        remask_budget=args.remask_budget,
        default_span_tokens=args.span_tokens,
        max_span_tokens=args.max_span_tokens,
        grow=args.grow,
        grow_cap=args.grow_cap,
        exact_length=args.exact_length,
        window_tokens=args.window_tokens,
        cache_refresh=args.cache_refresh,
        checks=args.checks,
        candidates=args.candidates,
        lengths=args.lengths,
        context_copies=args.context_copies,
        min_confidence=args.min_confidence,
        runner_ups=getattr(args, "runner_ups", 0),
    )


def check_worker_args(args: argparse.Namespace) -> None:
    """ValueError for flags that do not go with --worker."""
    if args.worker is None:
        return
    if getattr(args, "trace", False):
        raise ValueError("--trace is not available with --worker")
    if args.worker != "spawn":
        parse_address(args.worker)
        if args.model or args.device:
            raise ValueError(
                "--model and --device go to the worker (infill-worker --model), "
                "or use --worker spawn"
            )


def check_output_args(args: argparse.Namespace) -> None:
    """ValueError for output flags that do not go together."""
    if args.force and not args.in_place:
        raise ValueError("--force applies to --in-place")


def lines_spec(spec: str) -> tuple[int, int]:
    """(A, B) of a `--lines A:B` value, 1-based and inclusive; ValueError if malformed."""
    m = re.fullmatch(r"(\d+):(\d+)", spec)
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise ValueError(f"--lines must be A:B with 1 <= A <= B, got {spec!r}")
    return int(m.group(1)), int(m.group(2))
