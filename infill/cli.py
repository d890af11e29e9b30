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
has holes. A bad file gets a one-line error and the others are still filled.

Exit status: 0 all files filled, 1 some file or the model could not be used, 2 usage
(unknown flag, option out of range).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

from infill.core.engine import PYTHON, FillResult, check_text, fill_text
from infill.core.errors import InfillError, InputError, line_col
from infill.core.options import SamplerOptions
from infill.core.repair import TokenScore, fix_text
from infill.core.spans import DEFAULT_MARKER, check_marker, find_holes
from infill.core.strategies import STRATEGIES
from infill.serve.client import SyncWorkerClient, WorkerError
from infill.serve.protocol import DEADLINE, INPUT, TOO_LARGE, parse_address
from model import loading
from model.denoiser import Denoiser, ModelLoadError

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
T = TypeVar("T")
PYTHON_SUFFIXES = {".py", ".pyi", ".pyw"}


def _add_model_args(p: argparse.ArgumentParser) -> None:
    model = p.add_argument_group("model")
    model.add_argument("--model", metavar="DIR", help="model directory (default: shipped)")
    model.add_argument("--device", help="torch device, e.g. cpu or cuda (default: auto)")
    model.add_argument("--trust-remote-code", action="store_true",
                       help="allow a model directory's own Python code to run (LLaDA, Dream)")
    model.add_argument(
        "--worker",
        metavar="ADDRESS",
        help="run through a running worker (unix:PATH, PATH or tcp:HOST:PORT; token from "
        "$INFILL_WORKER_TOKEN), or 'spawn' to start one with --model/--device",
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
    s.add_argument("--exact-length", action="store_true", help="hints are exact lengths")
    s.add_argument("--window-tokens", type=int, help="canvas size (default: model's maximum)")
    s.add_argument(
        "--cache-refresh",
        type=int,
        default=0,
        metavar="K",
        help="reuse context keys/values, full pass every K steps (default 0: off)",
    )


def _add_output_args(p: argparse.ArgumentParser, verb: str) -> argparse._ArgumentGroup:
    out = p.add_argument_group("output")
    out.add_argument("--in-place", action="store_true", help=f"write the {verb} files")
    out.add_argument("--json", action="store_true", help="one JSON object per file on stdout")
    return out


def _add_language_arg(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--language", help="'python' for scope-aware windows (default: from the file suffix)"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="infill", description="Fill masked code regions with a diffusion language model."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    fill = commands.add_parser(
        "fill",
        help="fill the hole markers of files",
        description="Fill every hole marker (<mask>, or <mask:N> for a hint of N tokens) of "
        "each FILE; print a unified diff (stdout) and a summary line (stderr) per file.",
    )
    fill.add_argument("files", nargs="+", metavar="FILE")
    out = _add_output_args(fill, "filled")
    out.add_argument("--trace", action="store_true", help="print every denoising step")
    _add_model_args(fill)
    text = fill.add_argument_group("text")
    text.add_argument("--marker", default=DEFAULT_MARKER, help="hole marker (default: <mask>)")
    _add_language_arg(text)
    _add_sampler_args(fill)

    fix = commands.add_parser(
        "fix",
        help="find improbable tokens and repair them",
        description="Score every token of each FILE (or of --lines A:B) in one forward pass, "
        "mask the most suspicious ones and re-denoise them; print the diff of what changed.",
    )
    fix.add_argument("files", nargs="+", metavar="FILE")
    _add_output_args(fix, "repaired")
    what = fix.add_argument_group("what to fix")
    what.add_argument("--lines", metavar="A:B", help="only lines A to B (1-based, inclusive)")
    what.add_argument("--max-fixes", type=int, default=1, help="most tokens repaired (default 1)")
    what.add_argument("--min-suspicion", type=float, default=0.5,
                      help="repair only tokens at least this suspicious, 0..1 (default 0.5)")
    _add_language_arg(what)
    _add_model_args(fix)
    _add_sampler_args(fix)
    return parser


def _options(args: argparse.Namespace) -> SamplerOptions:
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
        exact_length=args.exact_length,
        window_tokens=args.window_tokens,
        cache_refresh=args.cache_refresh,
    )


def read_text(path: Path) -> str:
    """The file's text, exactly (no newline translation); InputError when unusable."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError("no such file") from None
    except IsADirectoryError:
        raise InputError("is a directory") from None
    except PermissionError:
        raise InputError("permission denied") from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}") from None
    if b"\x00" in data:
        raise InputError("binary file (contains NUL bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not valid UTF-8 (byte {exc.start})") from None


def _error(where: str, message: str) -> None:
    sep = ":" if re.match(r"\d+:\d+: ", message) else ": "
    print(f"infill: {where}{sep}{message}", file=sys.stderr)


def summary(path: str, result: FillResult) -> str:
    s = result.stats
    return (
        f"{path}: {s.spans} spans, {s.tokens} tokens, {s.nfe} forward passes "
        f"({s.nfe_per_token:.2f}/token), {s.steps} steps, {s.ms:.0f} ms"
    )


def _json(path: str, result: FillResult, trace: bool) -> str:
    obj: dict[str, Any] = {"path": path, **result.to_dict()}
    if trace:
        obj["trace"] = [asdict(step) for step in result.trace]
    return json.dumps(obj, ensure_ascii=False)


class _Model:
    """Loads the denoiser on first use, once."""

    def __init__(self, model_dir: str | None, device: str | None,
                 trust_remote_code: bool = False) -> None:
        self.model_dir, self.device = model_dir, device
        self.trust_remote_code = trust_remote_code
        self._denoiser: Denoiser | None = None

    def get(self) -> Denoiser:
        if self._denoiser is None:
            self._denoiser = loading.load_denoiser(
                self.model_dir, device=self.device, trust_remote_code=self.trust_remote_code)
        return self._denoiser


class _Remote:
    """Fills through a worker (`--worker`), connected on first use."""

    PER_FILE = {INPUT, TOO_LARGE, DEADLINE}  # worker errors that concern one file only

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self._client: SyncWorkerClient | None = None

    def _connected(self) -> SyncWorkerClient:
        a = self.args
        if self._client is None:
            if a.worker == "spawn":
                extra = ("--trust-remote-code",) if a.trust_remote_code else ()
                self._client = SyncWorkerClient.spawned(model=a.model, device=a.device,
                                                        args=extra)
            else:
                self._client = SyncWorkerClient(
                    a.worker, token=os.environ.get("INFILL_WORKER_TOKEN") or None
                )
        return self._client

    def fill(self, text: str, language: str | None, options: SamplerOptions) -> FillResult:
        try:
            reply = self._connected().fill(text, marker=self.args.marker, language=language,
                                           options=options)
        except WorkerError as exc:
            if exc.code in self.PER_FILE:
                raise InfillError(exc.message) from None
            raise
        return reply.to_fill_result(text)

    def fix(self, text: str, start: int, end: int, language: str | None,
            options: SamplerOptions) -> tuple[FillResult | None, list[TokenScore]]:
        a = self.args
        try:
            reply = self._connected().fix(text, start=start, end=end, max_fixes=a.max_fixes,
                                          min_suspicion=a.min_suspicion, language=language,
                                          options=options)
        except WorkerError as exc:
            if exc.code in self.PER_FILE:
                raise InfillError(exc.message) from None
            raise
        if not reply.fills:
            return None, list(reply.scores or [])
        return reply.to_fill_result(text), list(reply.scores or [])

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


def _fill_file(
    path: str, args: argparse.Namespace, options: SamplerOptions, model: _Model | _Remote
) -> FillResult:
    text = read_text(Path(path))
    check_text(text)
    find_holes(text, args.marker)  # no holes, bad markers: an error before any model work
    language = _language(args, path)
    if isinstance(model, _Remote):
        return model.fill(text, language, options)
    return fill_text(text, denoiser=model.get(), marker=args.marker, language=language,
                     options=options)


def cmd_fill(args: argparse.Namespace) -> int:
    try:
        options = _options(args)
        check_marker(args.marker)
        _check_worker_args(args)
    except (InfillError, ValueError) as exc:
        print(f"infill: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    model = _model(args)
    return _each_file(args, model, lambda path: _fill_file(path, args, options, model),
                      lambda path, result: _report_fill(path, args, result))


def _model(args: argparse.Namespace) -> _Model | _Remote:
    if args.worker is not None:
        return _Remote(args)
    return _Model(args.model, args.device, args.trust_remote_code)


def _check_worker_args(args: argparse.Namespace) -> None:
    if args.worker is None:
        return
    if getattr(args, "trace", False):
        raise ValueError("--trace is not available with --worker")
    if args.worker != "spawn":
        parse_address(args.worker)
        if args.model or args.device:
            raise ValueError("--model and --device go to the worker (infill-worker --model), "
                             "or use --worker spawn")


def _each_file(args: argparse.Namespace, model: _Model | _Remote,
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
        if isinstance(model, _Remote):
            model.close()
    return status


def _write(path: str, text: str) -> bool:
    try:
        Path(path).write_bytes(text.encode("utf-8"))
    except OSError as exc:
        _error(path, f"cannot write: {exc.strerror or exc}")
        return False
    return True


def _report_fill(path: str, args: argparse.Namespace, result: FillResult) -> bool:
    if args.in_place and result.text != result.original and not _write(path, result.text):
        return False
    if args.json:
        print(_json(path, result, args.trace), flush=True)
        return True
    if args.trace:
        print(f"{path}: trace\n{result.trace_text()}", file=sys.stderr)
    if not args.in_place:
        sys.stdout.write(result.diff(path))
        sys.stdout.flush()
    print(summary(path, result), file=sys.stderr)
    return True


def lines_spec(spec: str) -> tuple[int, int]:
    """(A, B) of a `--lines A:B` value, 1-based and inclusive; ValueError if malformed."""
    m = re.fullmatch(r"(\d+):(\d+)", spec)
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise ValueError(f"--lines must be A:B with 1 <= A <= B, got {spec!r}")
    return int(m.group(1)), int(m.group(2))


def line_range(text: str, first: int, last: int) -> tuple[int, int]:
    """Character range of lines first..last (1-based, inclusive); InputError if past the end."""
    starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]
    if text.endswith("\n"):
        starts.pop()
    if last > len(starts):
        raise InputError(f"--lines {first}:{last}: the file has {len(starts)} lines")
    return starts[first - 1], starts[last] if last < len(starts) else len(text)


def _language(args: argparse.Namespace, path: str) -> str | None:
    if args.language is not None:
        return args.language
    return PYTHON if Path(path).suffix in PYTHON_SUFFIXES else None


def _fix_file(path: str, args: argparse.Namespace, options: SamplerOptions,
              model: _Model | _Remote) -> tuple[str, FillResult | None, list[TokenScore]]:
    """(the file's text, the repair or None, every token's score)."""
    text = read_text(Path(path))
    check_text(text)
    start, end = line_range(text, *lines_spec(args.lines)) if args.lines else (0, len(text))
    language = _language(args, path)
    if isinstance(model, _Remote):
        return (text, *model.fix(text, start, end, language, options))
    result, scores = fix_text(text, denoiser=model.get(), start=start, end=end,
                              max_fixes=args.max_fixes, min_suspicion=args.min_suspicion,
                              language=language, options=options)
    return text, result, scores


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


def cmd_fix(args: argparse.Namespace) -> int:
    try:
        options = _options(args)
        _check_worker_args(args)
        if args.max_fixes < 1:
            raise ValueError(f"--max-fixes must be >= 1, got {args.max_fixes}")
        if not 0.0 <= args.min_suspicion <= 1.0:
            raise ValueError(f"--min-suspicion must be in 0..1, got {args.min_suspicion}")
        if args.lines is not None:
            lines_spec(args.lines)
    except (InfillError, ValueError) as exc:
        print(f"infill: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    model = _model(args)
    return _each_file(args, model, lambda path: _fix_file(path, args, options, model),
                      lambda path, done: _report_fix(path, args, *done))


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


COMMANDS = {"fill": cmd_fill, "fix": cmd_fix}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    return COMMANDS[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
