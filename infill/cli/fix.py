"""`infill fix FILE...`: score every token of each file (or of `--lines A:B`, or of each
region changed since git's HEAD with `--changed`) and repair the most suspicious ones by
what the model expects there; the diff of what changed on stdout, a summary line per file
(the most suspicious token, where) on stderr. A file of more than `--max-lines` lines is
refused whole before any model runs (a usage error that names the ways to check part of
it): scoring it would take minutes."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from diffusion_infill.infill.cli.backends import Backend, backend_for
from diffusion_infill.infill.cli.changes import changed_lines, merged
from diffusion_infill.infill.cli.files import Source, language_for, line_range, read_source
from diffusion_infill.infill.cli.parser import (
    check_output_args,
    check_worker_args,
    lines_spec,
    sampler_options,
)
from diffusion_infill.infill.cli.repo import file_source
from diffusion_infill.infill.cli.runs import (
    EXIT_USAGE,
    each_file,
    file_progress,
    report_left,
    summary,
    write_file,
)
from diffusion_infill.infill.core.engine import check_text
from diffusion_infill.infill.core.errors import InfillError, line_col
from diffusion_infill.infill.core.options import SamplerOptions
from diffusion_infill.infill.core.results import FillResult, TokenScore
from diffusion_infill.infill.core.suspect_lines import code_lines, is_sure
from diffusion_infill.infill.core.suspicion import worst_first


def _fix_file(
    path: str, args: argparse.Namespace, options: SamplerOptions, backend: Backend
) -> tuple[Source, FillResult | None, list[TokenScore]]:
    """(the file, the repair or None, every token's score). With --changed, each changed
    region is repaired on its own, from the bottom of the file up (the regions above keep
    their offsets); an unchanged file is not scored (no scores)."""
    source = read_source(Path(path))
    text = source.text
    check_text(text)
    if args.changed:
        n_lines = text.count("\n") + (not text.endswith("\n") and bool(text))
        ranges = [line_range(text, a, b) for a, b in changed_lines(Path(path), n_lines, args.base)]
    else:
        ranges = [line_range(text, *lines_spec(args.lines)) if args.lines else (0, len(text))]
    parts: list[FillResult] = []
    scores: list[TokenScore] = []
    current = text
    where = file_source(path, args.python)  # where the file lives, for jedi: every range's
    for start, end in reversed(ranges):
        with file_progress(args, path, "scoring", "windows") as progress:
            result, found = backend.fix(
                current,
                start=start,
                end=end,
                max_fixes=args.max_fixes,
                min_suspicion=args.min_suspicion,
                min_likely=args.min_likely,
                language=language_for(args, path),
                options=options,
                progress=progress,
                source=where,
            )
        scores = found + scores
        if result is not None:
            parts.append(result)
            current = result.text
    return source, merged(text, parts), scores


def _fix_summary(
    path: str,
    text: str,
    result: FillResult | None,
    scores: list[TokenScore],
    args: argparse.Namespace,
) -> str:
    worst = next(iter(worst_first(scores)), None)
    if worst is None:
        return (
            f"{path}: no changes since {args.base}" if args.changed else f"{path}: nothing to score"
        )
    where = line_col(text, worst.start)
    head = f"most suspicious {worst.text.strip()!r} at {where} ({worst.suspicion:.2f})"
    if result is None:  # no token passed the rule (docs/ARCHITECTURE.md, "Fixer calibration")
        return (
            f"{path}: nothing suspicious (worst token {worst.text.strip()!r} at "
            f"{where}, suspicion {worst.suspicion:.2f})"
        )
    lines = code_lines(text, scores)
    rewritten = [
        f for f in result.fills for x in lines if (f.span.start, f.span.end) == (x.start, x.end)
    ]
    if rewritten and not is_sure(lines):  # the lines read masked, ranked with the line prior
        line = text.count("\n", 0, rewritten[0].span.start) + 1
        head = f"no token is a sure swap: line {line}, the likeliest wrong line, re-denoised"
    if not result.edits:
        return f"{path}: no change; {head}"
    return f"{summary(path, result)}; {head}"


def _report_fix(
    path: str,
    args: argparse.Namespace,
    source: Source,
    result: FillResult | None,
    scores: list[TokenScore],
) -> bool:
    original = source.text
    changed = result is not None and result.text != original
    if args.in_place and changed and not write_file(path, args, source, result.text):
        return False
    if args.json:
        obj: dict[str, Any] = {
            "path": path,
            "changed": changed,
            "scores": [asdict(s) for s in scores],
        }
        if result is not None:
            obj.update(result.to_dict())
        print(json.dumps(obj, ensure_ascii=False), flush=True)
        if result is not None:
            report_left(path, result, args.min_confidence, checks=False)
        return True
    if changed and not args.in_place:
        sys.stdout.write(result.diff(path))
        sys.stdout.flush()
    print(_fix_summary(path, original, result, scores, args), file=sys.stderr)
    if result is not None:
        report_left(path, result, args.min_confidence, checks=False)
    return True


def _too_long(args: argparse.Namespace) -> list[str]:
    """Why each file to be fixed whole is too long for it (more than --max-lines lines);
    a file that cannot be read is left to the run, which reports it."""
    if args.lines is not None or args.changed or not args.max_lines:
        return []
    out = []
    for path in args.files:
        try:
            text = read_source(Path(path)).text
        except (InfillError, OSError):
            continue
        n = text.count("\n") + (not text.endswith("\n") and bool(text))
        if n > args.max_lines:
            out.append(
                f"{path} has {n} lines, more than --max-lines {args.max_lines}: fixing it "
                "whole would take minutes; check part of it with --lines A:B or --changed, "
                "or raise --max-lines (0: no limit)"
            )
    return out


def cmd_fix(args: argparse.Namespace) -> int:
    try:
        options = sampler_options(args)
        check_worker_args(args)
        check_output_args(args)
        if args.max_fixes < 1:
            raise ValueError(f"--max-fixes must be >= 1, got {args.max_fixes}")
        for flag, value in (
            ("--min-suspicion", args.min_suspicion),
            ("--min-likely", args.min_likely),
        ):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{flag} must be in 0..1, got {value}")
        if args.lines is not None:
            lines_spec(args.lines)
        if args.base != "HEAD" and not args.changed:
            raise ValueError("--base applies to --changed")
        if args.max_lines < 0:
            raise ValueError(f"--max-lines must be >= 0 (0: no limit), got {args.max_lines}")
        too_long = _too_long(args)
    except (InfillError, ValueError) as exc:
        print(f"infill: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if too_long:
        for message in too_long:
            print(f"infill: error: {message}", file=sys.stderr)
        return EXIT_USAGE
    backend = backend_for(args)
    return each_file(
        args,
        backend,
        lambda path: _fix_file(path, args, options, backend),
        lambda path, done: _report_fix(path, args, *done),
    )
