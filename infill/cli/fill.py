"""`infill fill FILE...`: fill the hole markers of each file; a unified diff on stdout (or
the files written in place, or a JSON object per file) and a summary line per file on
stderr. A span whose every candidate failed the checks is left as it was, and a line on
stderr says why."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from diffusion_infill.infill.cli.backends import Backend, backend_for
from diffusion_infill.infill.cli.files import Source, check_writable, language_for, read_source
from diffusion_infill.infill.cli.parser import check_output_args, check_worker_args, sampler_options
from diffusion_infill.infill.cli.repo import RepoSnippets
from diffusion_infill.infill.cli.runs import (
    EXIT_USAGE,
    each_file,
    file_progress,
    report_left,
    summary,
    write_file,
)
from diffusion_infill.infill.core.engine import check_text
from diffusion_infill.infill.core.errors import InfillError
from diffusion_infill.infill.core.options import SamplerOptions
from diffusion_infill.infill.core.results import FillResult
from diffusion_infill.infill.core.spans import check_marker, find_holes


def _fill_file(
    path: str, args: argparse.Namespace, options: SamplerOptions, backend: Backend
) -> tuple[Source, FillResult]:
    source = read_source(Path(path))
    check_text(source.text)
    find_holes(source.text, args.marker)  # no holes, bad markers: an error before any model
    if args.in_place:  # a file with holes is to be written: refused before the model runs
        check_writable(Path(path), force=args.force)
    context = args.repo_snippets.snippets(path, source.text, find_holes(source.text, args.marker))
    with file_progress(args, path, "filling", "slots") as progress:
        return source, backend.fill(
            source.text,
            marker=args.marker,
            language=language_for(args, path),
            options=options,
            progress=progress,
            context=context,
            source=args.repo_snippets.source(path, args.python),
        )


def _report_fill(path: str, args: argparse.Namespace, source: Source, result: FillResult) -> bool:
    if (
        args.in_place
        and result.text != result.original
        and not write_file(path, args, source, result.text)
    ):
        return False
    if args.json:
        obj: dict[str, Any] = {"path": path, **result.to_dict()}
        if args.trace:
            obj["trace"] = [asdict(step) for step in result.trace]
        print(json.dumps(obj, ensure_ascii=False), flush=True)
        report_left(path, result, args.min_confidence)
        return True
    if args.trace:
        print(f"{path}: trace\n{result.trace_text()}", file=sys.stderr)
    if not args.in_place:
        sys.stdout.write(result.diff(path))
        sys.stdout.flush()
    print(summary(path, result), file=sys.stderr)
    report_left(path, result, args.min_confidence)
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
    args.repo_snippets = RepoSnippets(args.repo)
    return each_file(
        args,
        backend,
        lambda path: _fill_file(path, args, options, backend),
        lambda path, done: _report_fill(path, args, *done),
    )
