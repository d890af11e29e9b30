"""Held-out exact match by hole shape: the table the README's quality figure comes from.

    python -m benchmarks.eval_shapes [--shapes cursor,whole-line,part-of-line,block,real]
                                     [--n 200] [--window-chars 700] [--split test]

Each shape (benchmarks/shapes.py) is filled twice, with the length left to the engine and
with the true length given, with the command's defaults (`infill fill`: checks, raced
lengths, context reuse) unless `--engine-only`. `real` is one line per file of packages
outside the corpus (`python -m benchmarks.real_files` builds data/real_files.jsonl, the
files benchmarks/real_files.json pins), filled as whole-line holes; `real-cursor` the
same lines as cursor holes. `line-marker` and `real-marker` are the whole-line holes of the
test split and of the real files written as a user writes a line hole, a `<mask>` alone on
its line, and filled as `infill fill` fills it (infill/core/line_holes.py);
`line-marker-next` writes them as fill-in-the-middle tasks cut them, the marker followed
by the next line. These are scored on the whole filled text against the original (the
engine's length only). Every row also counts the returned fills with which a text that
Python parsed with the truth no longer parses (`python_unparseable` of `python_judged`).

Exact match: a cursor or part-of-line fill against the truth, both stripped; a whole-line
or block fill line by line with its indentation (trailing spaces aside) and the same
number of line breaks. `--no-line-holes` leaves a whole-line span's indentation and line
break to the model (the ablation of infill/core/lines.py); `--no-selection-lines` lets a
selection of k lines end before k lines. `--rewrite-length` starts the engine's length from
the span's own token count, as the server's "rewrite selection" does.

`--editor-excerpt` gives each hole what the language server sends instead of a window:
its excerpt of the file (lsp/excerpt.py: 12,000 characters each side by default, whole
lines, cut where a definition starts, so never inside a docstring); the holes are the same.

Writes benchmarks/results/shapes_<tokens seen>[_window<N>|_editor][_no_...]_<split>.json
(or --out).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.heldout import (
    EDITOR_WINDOW,
    HELDOUT_WINDOW_CHARS,
    heldout_arguments,
    heldout_files,
    load_test_files,
)
from benchmarks.infill_scores import infill_scores, same_code
from benchmarks.real_files import load as load_real
from benchmarks.results_file import write_results
from benchmarks.shapes import SHAPES, holding, real_file_examples, shape_examples
from diffusion_infill import infill
from diffusion_infill.infill.core.lines import framed_code, is_whole_lines
from diffusion_infill.infill.core.options import (
    DEFAULT_CACHE_REFRESH,
    DEFAULT_CHECKS,
    DEFAULT_LENGTHS,
)
from diffusion_infill.infill.core.spans import Span
from diffusion_infill.model.loading import default_model_dir, load_denoiser

# whole-line holes written as a line-start marker (benchmarks/infill_scores.py marker_text):
# alone on the hole's line, or followed by the next line as fill-in-the-middle tasks cut it
MARKERS = {"line-marker": "alone", "line-marker-next": "next", "real-marker": "alone"}
ALL = (*SHAPES, "real", "real-cursor", *MARKERS)
LINE_SHAPES = {"whole-line", "block", "real"}  # indentation and line break in the hole


def truth_token_count(den, ex, options: infill.SamplerOptions) -> int:  # noqa: ANN001
    """What the model writes of a hole's truth, in tokens: its code alone where the engine
    frames a span of whole lines (its indentation and line break are the engine's)."""
    framed = options.line_holes and is_whole_lines(ex.text, Span(ex.start, ex.end))
    return len(den.encode(framed_code(ex.truth) if framed else ex.truth))


def same_lines(fill: str, truth: str) -> bool:
    """Exact match of a hole that holds its indentation and line breaks."""
    return [ln.rstrip() for ln in fill.split("\n")] == [ln.rstrip() for ln in truth.split("\n")]


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    shapes = args.shapes.split(",")
    if set(shapes) - set(ALL):
        parser.error(f"unknown shape(s): {', '.join(sorted(set(shapes) - set(ALL)))}")
    if args.n < 1 or args.window_chars < 1 or args.default_span_tokens < 1:
        parser.error("--n, --window-chars and --default-span-tokens must be >= 1")
    if args.editor_excerpt:
        args.window_chars = EDITOR_WINDOW
    cli, options = _options(parser, args)
    files = heldout_files(parser, args)
    if any(s.startswith("real") for s in shapes) and not args.real_files.is_file():
        parser.error(f"{args.real_files} not found: python -m benchmarks.real_files")
    den = load_denoiser(args.model)

    def truth_tokens(ex) -> int:  # noqa: ANN001
        return truth_token_count(den, ex, options)

    command = ["python -m benchmarks.eval_shapes", *(sys.argv[1:] if argv is None else argv)]
    results: dict = {
        "command": " ".join(command),
        "model": str(args.model or default_model_dir()),
        "split": args.split,
        "n": args.n,
        "window_chars": args.window_chars,
        "seed": args.seed,
        "options": cli or "engine",
        "line_holes": options.line_holes,
        "statement_ends": options.statement_ends,
        "indent_pass": options.indent_pass,
        "selection_lines": options.selection_lines,
        "context_copies": options.context_copies,
        "rewrite_length": args.rewrite_length,
        "default_span_tokens": options.default_span_tokens,
        "remask_threshold": options.remask_threshold,
        "holes_containing": args.holes_containing,
        "shapes": {},
    }
    t0 = time.perf_counter()
    for shape in shapes:
        examples = _examples(files, shape, args)
        examples = holding(examples, args.holes_containing)
        if not examples and args.holes_containing is not None:
            parser.error(f"no {shape} hole of the {args.n} drawn holds {args.holes_containing!r}")
        row = _shape_row(den, examples, shape, options, truth_tokens, args)
        results["shapes"][shape] = row
        _print_row(shape, row)
    results["seconds"] = round(time.perf_counter() - t0, 1)
    write_results("shapes", args.model, results, args.out or _out_path(args, results["model"]))


def _options(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> tuple[dict, infill.SamplerOptions]:
    """The command's options (none with --engine-only) and the sampler options they make;
    a usage error for options the engine refuses."""
    cli = (
        {}
        if args.engine_only
        else {
            "checks": args.checks,
            "lengths": DEFAULT_LENGTHS,
            "cache_refresh": DEFAULT_CACHE_REFRESH,
        }
    )
    try:
        return cli, infill.SamplerOptions(
            line_holes=not args.no_line_holes,
            statement_ends=not args.no_statement_ends,
            indent_pass=not args.no_indent_pass,
            selection_lines=not args.no_selection_lines,
            context_copies=not args.no_context_copies,
            default_span_tokens=args.default_span_tokens,
            remask_threshold=args.remask_threshold,
            **cli,
        )
    except infill.OptionError as e:
        parser.error(str(e))


def _out_path(args: argparse.Namespace, model: str) -> Path:
    """benchmarks/results/shapes_<tokens seen>[_window<N>|_editor][_no_...]_<split>.json"""
    suffix = (
        "_editor"
        if args.editor_excerpt
        else ""
        if args.window_chars == HELDOUT_WINDOW_CHARS
        else f"_window{args.window_chars}"
    )
    ablation = (
        ("_no_line_holes" if args.no_line_holes else "")
        + ("_no_statement_ends" if args.no_statement_ends else "")
        + ("_no_indent_pass" if args.no_indent_pass else "")
        + ("_no_selection_lines" if args.no_selection_lines else "")
        + ("_no_context_copies" if args.no_context_copies else "")
        + ("_rewrite_length" if args.rewrite_length else "")
        + (f"_remask{args.remask_threshold:g}" if args.remask_threshold is not None else "")
        + (f"_checks_{args.checks.replace(',', '_')}" if args.checks != DEFAULT_CHECKS else "")
        + (
            f"_span{args.default_span_tokens}"
            if args.default_span_tokens != infill.SamplerOptions().default_span_tokens
            else ""
        )
    )
    name = f"shapes_{checkpoint(Path(model))}{suffix}{ablation}_{args.split}.json"
    return Path("benchmarks/results") / name


def _examples(files: list[str], shape: str, args: argparse.Namespace) -> list:
    """The holes of `shape`: drawn from the held-out `files`, or for "real" and
    "real-cursor", from the real files of --real-files."""
    if shape.startswith("real"):
        kind = "cursor" if shape == "real-cursor" else "whole-line"
        return real_file_examples(
            load_real(args.real_files), kind, seed=args.seed, window_chars=args.window_chars
        )
    shape = "whole-line" if shape in MARKERS else shape
    return shape_examples(files, shape, args.n, seed=args.seed, window_chars=args.window_chars)


def _shape_row(
    den,
    examples: list,
    shape: str,
    options: infill.SamplerOptions,
    truth_tokens: Callable,
    args: argparse.Namespace,
) -> dict:
    """A shape's scores with the engine's length and with the true length (or the one of
    --lengths-only)."""
    same = same_lines if shape in LINE_SHAPES else same_code
    row = {}
    for true_length in (False, True):
        key = "true_length" if true_length else "engine_length"
        if args.lengths_only and not key.startswith(args.lengths_only):
            continue
        if true_length and shape in MARKERS:  # a marker's length is the engine's
            continue
        row[key] = infill_scores(
            den,
            examples,
            true_length=true_length,
            desc=f"{shape} {key}",
            options=options,
            same=same,
            truth_tokens=truth_tokens,
            rewrite_length=args.rewrite_length,
            marker=MARKERS.get(shape),
        )
    return row


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    heldout_arguments(parser)
    parser.add_argument(
        "--shapes", default=",".join(ALL), help=f"comma-separated, of: {', '.join(ALL)}"
    )
    parser.add_argument("--n", type=int, default=200, help="holes per shape")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--window-chars",
        type=int,
        default=HELDOUT_WINDOW_CHARS,
        help="characters of the file around each hole (the same holes)",
    )
    parser.add_argument(
        "--editor-excerpt",
        action="store_true",
        help="the text around each hole as the language server sends it "
        "(its excerpt, 12,000 characters each side; the same holes)",
    )
    parser.add_argument("--real-files", type=Path, default=Path("data/real_files.jsonl"))
    parser.add_argument(
        "--checks",
        default=DEFAULT_CHECKS,
        help=f"the checks a fill must pass (default {DEFAULT_CHECKS}; not with --engine-only)",
    )
    parser.add_argument(
        "--default-span-tokens",
        type=int,
        default=infill.SamplerOptions().default_span_tokens,
        help="tokens allocated to a hole before the model ends or grows it",
    )
    parser.add_argument(
        "--engine-only",
        action="store_true",
        help="no checks, one length, exact passes (the engine's defaults)",
    )
    _engine_rules(parser)
    parser.add_argument(
        "--remask-threshold",
        type=float,
        default=None,
        help="mask again committed tokens whose probability fell below this (self-correction)",
    )
    parser.add_argument(
        "--lengths-only",
        choices=("engine", "true"),
        default=None,
        help="only the engine's length or only the true length",
    )
    parser.add_argument(
        "--holes-containing",
        default=None,
        metavar="TEXT",
        help="only the drawn holes whose truth holds TEXT (the same draw: replays a few holes)",
    )
    parser.add_argument("--out", type=Path, default=None)
    return parser


_RULES_OFF = {  # the engine's rules an ablation turns off: flag -> what it leaves
    "--no-line-holes": "leave a whole-line span's indentation and line break to the model",
    "--no-selection-lines": "let a selection of k lines end before its k lines "
    "(one line, as the model would)",
    "--no-indent-pass": "a whole-line span's depth from the code around it alone, no model pass",
    "--no-statement-ends": "do not end a hole at a line's end with its statement",
    "--no-context-copies": "never replace an in-line hole's fill by a copy of the code around it",
}


def _engine_rules(parser: argparse.ArgumentParser) -> None:
    """The ablations (`--no-...`) and the length a rewrite starts from."""
    for flag, help_text in _RULES_OFF.items():
        parser.add_argument(flag, action="store_true", help=help_text)
    parser.add_argument(
        "--rewrite-length",
        action="store_true",
        help="the engine's length starts from the span's own token count, as the server's "
        "rewrite selection does, not from a hole's default",
    )


def checkpoint(model: Path) -> str:
    """A model's name in a results file: the tokens it has seen (training.json), else its
    folder's name."""
    training = model / "training.json"
    if training.is_file():
        info = json.loads(training.read_text())
        tokens = info.get("tokens_total", info.get("tokens"))
        if tokens:
            return f"{round(tokens / 1e6)}Mtok"
    return model.name


def replay_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of a study that replays an `eval_shapes` results file's holes."""
    parser.add_argument("records", type=Path, help="an eval_shapes results file of these holes")
    parser.add_argument("--split", default="valid")
    parser.add_argument("--window-chars", type=int, default=HELDOUT_WINDOW_CHARS)
    parser.add_argument("--corpus", type=Path, default=Path("data/corpus_v2"))
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None)


def recorded_holes(
    parser: argparse.ArgumentParser, args: argparse.Namespace, shape: str
) -> tuple[list, list[dict]]:
    """The holes of the `shape` row (the engine's length) of `args.records` (an
    `eval_shapes` results file; `replay_arguments`) drawn again (`args.corpus`'s
    `args.split`, seed 0, `args.window_chars`, the first n), and its records; a usage
    error naming what is wrong."""
    records = args.records
    if not records.is_file():
        parser.error(f"{records} not found: python -m benchmarks.eval_shapes --shapes {shape} ...")
    row = json.loads(records.read_text()).get("shapes", {}).get(shape, {})
    recs = row.get("engine_length", {}).get("records")
    if not recs:
        parser.error(f"{records} holds no engine-length records of {shape} holes")
    files = load_test_files(args.corpus, args.split)
    holes = shape_examples(files, shape, len(recs), seed=0, window_chars=args.window_chars)
    if [h.truth for h in holes] != [r["truth"] for r in recs]:
        parser.error(f"{records}: its holes are not {args.split}'s {shape} holes, seed 0")
    return holes, recs


def _print_row(shape: str, row: dict) -> None:
    cells = []
    for key, r in row.items():
        cells.append(
            f"{key}: exact {r['exact_match']:.1%} of {r['n']}, broken "
            f"{r['broken']:.1%}, left {r['rejected']:.1%}, p50 {r['ms_p50']:.0f} ms, "
            f"{r['nfe_per_token']:.2f} passes/token"
        )
    print(f"{shape:14s} " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
