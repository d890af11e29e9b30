"""A package's consecutive releases diffed into records of one-line fixes: the rows of the
real-fix sets (benchmarks/fix_releases.py) and of the training fix pairs
(model/training/fix_pairs.py). A record holds the old release's window around the line, the
line before and after, and whether the newer release's notes say it fixes something."""

from __future__ import annotations

import ast
import re
import tarfile
import zipfile
from collections import Counter
from pathlib import Path

from diffusion_infill.model.training.corpus.line_changes import Change, one_line_changes

PER_FILE = 3  # one-line fixes kept from one file of one release pair at most
# paths not read: tests, documentation, packaging, version files, benchmarks
SKIP_PATH = re.compile(
    r"(^|/)(tests?|testing|docs?|examples?|benchmarks?)/|(^|/)test_[^/]*$"
    r"|_test\.py$|(^|/)(setup|conftest|conf|noxfile|_?version)\.py$"
)
PUBLIC_BENCHMARK = re.compile(r"human_?eval|mbpp|quixbugs|safim|cruxeval", re.IGNORECASE)
CHANGELOG = re.compile(
    r"(^|/)(changes|changelog|history|news|release[-_ ]?notes)[^/]*$", re.IGNORECASE
)


# --- reading ------------------------------------------------------------------------------


def _members(archive: Path) -> list[tuple[str, bytes]]:
    """(path, bytes) of every file of a wheel, zip or tarball."""
    if archive.name.endswith((".whl", ".zip")):
        with zipfile.ZipFile(archive) as zf:
            return [(n, zf.read(n)) for n in zf.namelist() if not n.endswith("/")]
    with tarfile.open(archive) as tf:
        return [
            (m.name, tf.extractfile(m).read())
            for m in tf  # type: ignore[union-attr]
            if m.isfile()
        ]


def read_sources(archive: Path) -> dict[str, str]:
    """The .py files of an archive by their path in the installed package: an sdist's top
    folder and a leading src/ dropped, a wheel's .dist-info / .data left out."""
    out = {}
    for name, data in _members(archive):
        if not name.endswith(".py"):
            continue
        if not archive.name.endswith(".whl"):
            name = name.split("/", 1)[-1]
        name = name.removeprefix("src/")
        if ".dist-info/" in name or ".data/" in name:
            continue
        out[name] = data.decode("utf-8", errors="replace").replace("\r\n", "\n")
    return out


def changelog(archive: Path | None) -> str:
    """The release notes an sdist ships (CHANGES, CHANGELOG, HISTORY, NEWS ...), joined."""
    if archive is None:
        return ""
    return "\n".join(
        data.decode("utf-8", errors="replace")
        for name, data in sorted(_members(archive))
        if CHANGELOG.search(name)
    )


def ships_benchmark(archive: Path) -> bool:
    return any(PUBLIC_BENCHMARK.search(name) for name, _ in _members(archive))


# --- release notes ------------------------------------------------------------------------


def notes_section(notes: str, old: str, new: str) -> str:
    """The lines of `notes` from the first that names version `new` to the next that names
    `old` (the newer release's entry); "" when `new` is not named."""
    named = lambda v, line: re.search(rf"(?<![\w.]){re.escape(v)}(?![\w]|\.\d)", line)  # noqa: E731
    lines = notes.split("\n")
    for i, line in enumerate(lines):
        if named(new, line):
            end = next(
                (j for j in range(i + 1, min(len(lines), i + 300)) if named(old, lines[j])),
                min(len(lines), i + 300),
            )
            return "\n".join(lines[i:end])
    return ""


def _enclosing(text: str, line: int) -> str | None:
    """The name of the innermost function or class around 0-based `line` of `text`."""
    best = None
    for node in ast.walk(ast.parse(text)):
        if (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and node.lineno <= line + 1 <= (node.end_lineno or 0)
            and (best is None or node.lineno > best.lineno)
        ):
            best = node
    return best.name if best is not None else None


def notes_mention(section: str, change: Change, old_text: str) -> str | None:
    """The line of `section` that says "fix" and names the function the change is in or a
    word (4 characters or more) that the change removes or adds."""
    a, b = set(re.findall(r"\w{4,}", change.old_line)), set(re.findall(r"\w{4,}", change.new_line))
    names = (a ^ b) | {_enclosing(old_text, change.line) or ""}
    names.discard("")
    for line in section.split("\n"):
        if "fix" in line.lower() and any(re.search(rf"\b{re.escape(n)}\b", line) for n in names):
            return line.strip()
    return None


# --- records ------------------------------------------------------------------------------


def pair_records(
    name: str,
    old: str,
    new: str,
    before: dict[str, str],
    after: dict[str, str],
    notes: str,
    reasons: Counter,
) -> list[dict]:
    """The one-line fixes of release `old` -> `new` of package `name` (files by path)."""
    section = notes_section(notes, old, new)
    out = []
    for path in sorted(set(before) & set(after)):
        if SKIP_PATH.search(path) or before[path] == after[path]:
            continue
        changes = one_line_changes(before[path], after[path], seed=f"{name}:{old}:{path}")
        reasons.update(why for _, why in changes if why is not None)
        kept = [c for c, why in changes if why is None]
        if len(kept) > PER_FILE:
            reasons["sweep"] += len(kept)
            continue
        for c in kept:
            notes_line = notes_mention(section, c, before[path])
            out.append(record(name, old, new, path, c, "fix" in section.lower(), notes_line))
    return out


def record(
    name: str,
    old: str,
    new: str,
    path: str,
    change: Change,
    notes_fix: bool = False,
    notes_line: str | None = None,
) -> dict:
    """The record of one one-line fix (a row of the real-fix sets and the fix pairs)."""
    return {
        "package": name,
        "old_version": old,
        "new_version": new,
        "path": path,
        "line": change.line + 1,
        "buggy_line": change.old_line,
        "fixed_line": change.new_line,
        "window": change.window,
        "fixed_window": change.fixed_window,
        "window_line": change.window_line,
        "words_changed": change.words_changed,
        "notes_fix": notes_fix,
        "notes_line": notes_line,
    }


def package_records(
    name: str,
    versions: list[str],
    archives: dict[tuple[str, str], Path],
    notes: str,
    reasons: Counter,
    max_file_bytes: int | None = None,
) -> list[dict] | None:
    """The one-line fixes between the package's consecutive fetched releases (None when a
    release ships a public benchmark); files over `max_file_bytes` are not diffed (each
    counted in `reasons` as "large file")."""
    have = [v for v in versions if (name, v) in archives]
    if any(ships_benchmark(archives[name, v]) for v in have):
        return None
    sources = {}
    for v in have:
        files = read_sources(archives[name, v])
        if max_file_bytes is not None:
            kept = {p: t for p, t in files.items() if len(t) <= max_file_bytes}
            reasons["large file"] += len(files) - len(kept)
            files = kept
        sources[v] = files
    records: list[dict] = []
    for old, new in zip(have, have[1:], strict=False):
        records += pair_records(name, old, new, sources[old], sources[new], notes, reasons)
    return records
