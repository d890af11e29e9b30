"""The lines of a file changed since a git revision (`infill fix --changed`).

`git diff -U0 REV -- FILE` lists each hunk as `@@ -a,b +c,d @@`: lines c .. c+d-1 of the
file as it is now were added or rewritten. A hunk that only deletes lines (d = 0) leaves
no line of its own; the lines on each side of the cut are taken instead, since a deletion
can break the code around it. A file git does not track is new: all of it has changed.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import fields, replace
from pathlib import Path

from diffusion_infill.infill.core.errors import InputError
from diffusion_infill.infill.core.results import FillResult, FillStats

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", re.MULTILINE)
_TIMEOUT = 30  # seconds for one git command


def _git(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["git", "-C", str(folder), *args],
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=_TIMEOUT,
            check=False,
        )
    except FileNotFoundError as exc:
        raise InputError("--changed needs git, which is not installed") from exc
    except subprocess.TimeoutExpired as exc:
        raise InputError(f"--changed: git did not answer in {_TIMEOUT} s") from exc


def hunks(diff: str, n_lines: int) -> list[tuple[int, int]]:
    """1-based inclusive line ranges of the file that `diff` (unified, -U0) changed,
    merged where they touch, within 1..n_lines."""
    ranges = []
    for m in _HUNK.finditer(diff):
        start, count = int(m.group(1)), int(m.group(2) or 1)
        if count == 0:  # lines deleted after line `start`: the lines either side of the cut
            first, last = max(1, start), start + 1
        else:
            first, last = start, start + count - 1
        first, last = max(1, first), min(n_lines, last)
        if first <= last:
            ranges.append((first, last))
    merged: list[tuple[int, int]] = []
    for first, last in sorted(ranges):
        if merged and first <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last))
        else:
            merged.append((first, last))
    return merged


def changed_lines(path: Path, n_lines: int, base: str = "HEAD") -> list[tuple[int, int]]:
    """The line ranges of `path` changed since `base` (committed, staged or not); [] when
    none. InputError when the file is not in a git work tree or `base` is unknown."""
    folder = path.resolve().parent
    inside = _git(folder, "rev-parse", "--is-inside-work-tree")
    if inside.returncode != 0 or inside.stdout.strip() != "true":
        raise InputError("--changed: not in a git work tree")
    if _git(folder, "ls-files", "--error-unmatch", "--", path.name).returncode != 0:
        return [(1, n_lines)] if n_lines else []  # untracked: all of it is new
    if _git(folder, "rev-parse", "--verify", "--quiet", f"{base}^{{commit}}").returncode != 0:
        if base != "HEAD":
            raise InputError(f"--changed: unknown revision {base!r}")
        return [(1, n_lines)] if n_lines else []  # no commit yet: all of it is new
    diff = _git(folder, "diff", "--no-color", "--no-ext-diff", "-U0", base, "--", path.name)
    if diff.returncode != 0:
        raise InputError(f"--changed: git diff failed: {diff.stderr.strip()[:200]}")
    return hunks(diff.stdout, n_lines)


def merged(original: str, parts: list[FillResult]) -> FillResult | None:
    """One result for repairs made region by region from the bottom of `original` up (so
    that each part's offsets are the original's): the last part's text, every part's
    edits, fills and windows, the statistics summed."""
    if not parts:
        return None
    counts = [
        f.name
        for f in fields(FillStats)  # every count and time; not the model's name
        if isinstance(getattr(parts[0].stats, f.name), int | float) and f.name != "nfe_per_token"
    ]
    sums = {name: sum(getattr(r.stats, name) for r in parts) for name in counts}
    stats = replace(parts[-1].stats, **sums, nfe_per_token=sums["nfe"] / max(1, sums["tokens"]))
    return replace(
        parts[-1],
        original=original,
        edits=sorted((e for r in parts for e in r.edits), key=lambda e: e.start),
        fills=sorted((f for r in parts for f in r.fills), key=lambda f: f.span.start),
        windows=[w for r in reversed(parts) for w in r.windows],
        stats=stats,
        trace=[t for r in reversed(parts) for t in r.trace],
    )
