"""docs/RESULTS.md from the results files: every measured figure in one place.

    python -m benchmarks.report [--results benchmarks/results] [--out docs/RESULTS.md]

Reads every `*.json` under the results folder (subfolders too), groups the files by the
kind of measurement their name starts with (`shapes_`, `eval_`, `lsp_`, ...), and writes
one section per kind: for each file a link to it, the command recorded in it (its
"command" key; "not recorded" where it has none) and its headline figures (exact match,
latency percentiles, bug localisation, fuzzing counts, ...; the full detail stays in the
file). Only the current files get a section: those the reference docs cite (README,
docs/ but its log, the model card, benchmarks/README.md, by path or name, or their
folder) and the headline runs; the others, kept as the history the log and CHANGELOG
cite, are listed at the end, one link each with the commit that made them. A file it
cannot read, or one without a figure it recognises, is listed at the end and does not
stop the page. In a git checkout, results files git does not track yet
are left out (and named on stderr): `git add` a new results file, then run this.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.cited import cited

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
OUT = ROOT / "docs" / "RESULTS.md"

# (title, what it measures, name prefixes), in page order; the first match wins.
KINDS: list[tuple[str, str, tuple[str, ...]]] = [
    (
        "Quality by hole shape",
        "Held-out exact match by the shape of the hole "
        "(`python -m benchmarks.eval_shapes`), with the engine's length and the true length.",
        ("shapes",),
    ),
    (
        "Held-out evaluation",
        "One-line, multi-line and in-line holes, masked-token accuracy "
        "and injected bugs on held-out packages (`python -m benchmarks.eval_model`).",
        ("eval", "select"),
    ),
    (
        "Real one-line fixes",
        "One-line changes between releases of packages outside the "
        "corpus (`python -m benchmarks.real_fixes`).",
        ("real",),
    ),
    (
        "Repository context",
        "Fills with and without the rest of the package, paired "
        "(`python -m benchmarks.eval_repo_context`), and the index's costs "
        "(`python -m benchmarks.bench_repo_context`).",
        ("repo",),
    ),
    (
        "Language server latency",
        "Round trips through `infill-lsp` over stdio (`python -m benchmarks.bench_lsp`).",
        ("lsp",),
    ),
    (
        "Engine latency",
        "The engine in-process (`python -m benchmarks.bench_engine`).",
        ("engine", "dtype"),
    ),
    (
        "The command",
        "`infill fill` timed from outside on held-out one-line holes, the "
        "model loaded in the process (`python -m benchmarks.bench_cli`).",
        ("cli",),
    ),
    (
        "Worker throughput",
        "Requests per second at several clients (`python -m benchmarks.bench_worker`).",
        ("worker",),
    ),
    (
        "Inline completion and docstrings",
        "`python -m benchmarks.eval_completion`, `python -m benchmarks.eval_docstrings`.",
        ("completion", "docstrings"),
    ),
    (
        "Confidence",
        "How well a fill's confidence is calibrated (expected calibration error), what the "
        "completion gate and the runner-ups give, and what they cost "
        "(`python -m benchmarks.eval_confidence`, `benchmarks.confidence_cost`).",
        ("confidence",),
    ),
    ("Fixer calibration", "`python -m benchmarks.calibrate_fix`.", ("fix",)),
    (
        "Reliability",
        "Random LSP sessions against the server (`python -m benchmarks.fuzz_lsp`).",
        ("fuzz",),
    ),
    (
        "Training",
        "Throughput, the recipe's ablations and the learning curve (docs/log/training.md).",
        ("train", "loader", "ablation", "learning", "fit", "gap"),
    ),
]
OTHER = (
    "Decoder studies",
    "Studies of the sampler and the engine's rules (docs/log/architecture.md names each).",
)


def _words(text: str) -> set[str]:
    return set(text.split())


# Keys whose values are headline figures; a file without any falls back to every number.
HEADLINE = _words(
    """
    exact_match exact_alone exact_with_context won lost index_s_cold
    reindex_one_file_ms_max retrieval_ms_p95 index_memory_mb ms_p50 ms_p95 p50_ms p95_ms
    top1_localisation exact_repair top1_line top3_line random_top1_line requests_per_s
    tokens_per_s sessions requests answered crashes internal_errors violations
    similarity rouge_l summary_rouge_l valid_masked_ce single_line multi_line bug_top1
    bug_repair tokens_total first_line recall_at_k s_per_hole cpu_s first_fill_s ece
    valid_ece shown_at_default exact_at_default prefix_at_default
    top1_right_per_position any_of_items_right_per_position median_ms
    """
)
PERCENT = _words(
    """
    shown_at_default exact_at_default prefix_at_default top1_right_per_position
    any_of_items_right_per_position exact_match exact_alone exact_with_context
    parse_rate clean top1_localisation exact_repair top1_line top3_line random_top1_line
    single_line multi_line bug_top1 bug_repair first_line
    """
)
SKIP = _words(
    """
    records examples offered versions limits counters worker settings options machine
    note command commands model
    """
)
MAX_ROWS = 24
MAX_COLUMNS = 6
Leaf = tuple[list[str], Any]


def kind_of(rel: Path) -> tuple[str, str]:
    """The section a results file belongs in, from its name (or its folder's)."""
    stem = rel.parts[0] if len(rel.parts) > 1 else rel.stem
    prefix = stem.split("_", 1)[0]
    for title, about, prefixes in KINDS:
        if prefix in prefixes:
            return title, about
    return OTHER


def leaves(obj: Any, path: list[str] | None = None) -> list[Leaf]:
    """Every number in `obj` with the keys that lead to it (long lists skipped)."""
    path = path or []
    if isinstance(obj, bool):
        return []
    if isinstance(obj, (int, float)):
        return [(path, obj)]
    out: list[Leaf] = []
    if isinstance(obj, dict):
        for key, value in obj.items():
            if str(key) not in SKIP:
                out += leaves(value, [*path, str(key)])
    elif isinstance(obj, list) and len(obj) <= 40:
        for i, item in enumerate(obj):
            label = str(i)
            if isinstance(item, dict):
                label = str(
                    next(
                        (
                            item[k]
                            for k in ("date", "name", "where", "label")
                            if isinstance(item.get(k), (str, int))
                        ),
                        i,
                    )
                )
            out += leaves(item, [*path, label])
    return out


def figures(data: Any) -> list[Leaf]:
    """The headline numbers of a results file, in the file's order."""
    found = leaves(data)
    headline = [(p, v) for p, v in found if p and p[-1] in HEADLINE]
    return headline or found


def fmt(path: list[str], value: float) -> str:
    if path and path[-1] in PERCENT and 0 <= value <= 1:
        return f"{100 * value:.1f}%"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"


def command_of(data: Any) -> str | None:
    if not isinstance(data, dict):
        return None
    command = data.get("command") or data.get("commands")
    if isinstance(command, list):
        command = "; ".join(map(str, command))
    elif isinstance(command, dict):
        command = "; ".join(f"{k}: {v}" for k, v in command.items())
    return str(command) if command else None


def untracked(results: Path) -> set[Path]:
    """Results files git does not track (empty outside a git checkout)."""
    try:
        done = subprocess.run(
            ["git", "ls-files", "--others", "--exclude-standard", "-z", "."],
            cwd=results,
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return set()
    if done.returncode != 0:
        return set()
    return {(results / name).resolve() for name in done.stdout.split("\0") if name}


def results_files(results: Path) -> list[Path]:
    files = sorted(results.rglob("*.json"))
    left_out = untracked(results)
    for path in files:
        if path.resolve() in left_out:
            print(f"left out (not tracked by git): {path}", file=sys.stderr)
    return [p for p in files if p.resolve() not in left_out]


def table(rows: list[Leaf]) -> list[str]:
    """Numbers as a table: one row per object, one column per key (the last one)."""
    by_row: dict[str, dict[str, str]] = {}
    columns: list[str] = []
    for keys, value in rows:
        row = " / ".join(keys[:-1]) or "(file)"
        column = keys[-1] if keys else "value"
        if column not in columns:
            columns.append(column)
        by_row.setdefault(row, {})[column] = fmt(keys, value)
    columns = columns[:MAX_COLUMNS]
    lines = ["| | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for row, cells in list(by_row.items())[:MAX_ROWS]:
        line = [row, *(cells.get(c, "") for c in columns)]
        lines.append("| " + " | ".join(cell.replace("|", "/") for cell in line) + " |")
    if len(by_row) > MAX_ROWS:
        lines.append(
            f"| ... {len(by_row) - MAX_ROWS} more rows in the file |" + " |" * len(columns)
        )
    return lines


def file_section(rel: Path, link: str, data: Any) -> list[str]:
    command = command_of(data)
    lines = [f"### [{rel.as_posix()}]({link})", ""]
    lines.append(f"Command: `{command}`" if command else "Command: not recorded in the file.")
    return [*lines, "", *table(figures(data)), ""]


def _earlier(rel: Path, link: str, path: Path) -> str:
    """One line of the list of earlier results: the link and the commit it records."""
    try:
        made = json.loads(path.read_text()).get("commit")
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        made = None
    return f"- [{rel.as_posix()}]({link})" + (f" ({str(made)[:7]})" if made else "")


def render(results: Path, out: Path, current: set[Path] | None = None) -> str:
    """The page's text for the results files under `results`, links relative to `out`;
    with `current`, only those get a section and the others are listed at the end."""
    earlier: list[str] = []
    sections: dict[str, list[str]] = {title: [] for title, _, _ in KINDS}
    sections[OTHER[0]] = []
    about = {title: text for title, text, _ in KINDS} | {OTHER[0]: OTHER[1]}
    not_understood: list[str] = []
    for path in results_files(results):
        rel = path.relative_to(results)
        link = Path(os.path.relpath(path, out.parent)).as_posix()
        if current is not None and path not in current:
            earlier.append(_earlier(rel, link, path))
            continue
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, ValueError) as err:
            not_understood.append(f"- [{rel.as_posix()}]({link}): not JSON ({err})")
            continue
        if not figures(data):
            not_understood.append(f"- [{rel.as_posix()}]({link}): no figures recognised")
            continue
        sections[kind_of(rel)[0]] += file_section(rel, link, data)
    lines = [
        "# Measured results",
        "",
        "Generated by `python -m benchmarks.report` from the results files in "
        "`benchmarks/results/`; do not edit by hand. Each file records how it was measured "
        "(command, model, split, machine); the headline figures are copied here, every other "
        "figure is in the file. The README's table of current figures links to the same "
        'files. Files no reference doc cites any more are listed last, under "Earlier '
        'results"; the results of studies and of earlier code, which only the logs cite, '
        "live beside the logs, in `docs/log/results/`.",
        "",
    ]
    for title, body in sections.items():
        if body:
            lines += [f"## {title}", "", about[title], "", *body]
    if not_understood:
        lines += [
            "## Files not understood",
            "",
            "Read by the script but not shown above:",
            "",
            *not_understood,
            "",
        ]
    if earlier:
        lines += [
            "## Earlier results",
            "",
            "Files the reference docs no longer cite (docs/log/ and CHANGELOG.md may), with "
            "the commit each records:",
            "",
            *earlier,
            "",
        ]
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    results = args.results.resolve()
    current = cited(results) if results == RESULTS.resolve() else None
    args.out.write_text(render(results, args.out.resolve(), current))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
