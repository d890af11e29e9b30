"""The build: fetch, read, filter, deduplicate, audit, then write the splits
(train/valid/test.jsonl), split.json, licences.json and stats.json."""

from __future__ import annotations

import json
import resource
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from contextlib import ExitStack
from dataclasses import asdict
from pathlib import Path

from model.corpus.dedupe import deduplicate, leak_audit
from model.corpus.filters import holds_held_out_copy, keep, normalise
from model.corpus.licences import licence_allowed
from model.corpus.packages import PACKAGES, SDISTS, SPLITS, canonical, split_of
from model.corpus.records import Source, SourceFile, is_test_path
from model.corpus.sources import archive_files, fetch, stdlib_files

Summary = dict[str, dict[str, int]]  # split -> files, chars, test_chars

# Drop reasons listed in stats.json (and so in the card) even when nothing was dropped.
ALWAYS_COUNTED = (
    "copy of a held-out package", "exact duplicate (train of test)",
    "exact duplicate (train of valid)", "near duplicate (train of test)",
    "near duplicate (train of valid)")


def filtered(unit: str, path: str, text: str, packages: set[str],
             counts: Counter) -> SourceFile | None:
    """The file, normalised, if it passes the cheap filters; else None, the reason counted.

    `packages`: the unit's folders that hold an __init__.py (see holds_held_out_copy)."""
    if holds_held_out_copy(unit, path, packages):
        counts["copy of a held-out package"] += 1
        return None
    text = normalise(text)
    if not keep(text, path):
        counts["size / long line / generated"] += 1
        return None
    return SourceFile(unit, path, text)


def _archive_kept(source: Source, contents: list[tuple[str, str]],
                  counts: Counter) -> list[SourceFile]:
    """An archive's files that pass the licence check and the filters."""
    if not licence_allowed(source.licence):
        source.kept = "no (licence)"
        counts["licence"] += len(contents)
        return []
    packages = {p.rpartition("/")[0] for p, _ in contents if p.endswith("/__init__.py")}
    kept = (filtered(source.unit, path, text, packages, counts) for path, text in contents)
    return [f for f in kept if f is not None]


def collect(archives: Iterable[tuple[str, str, Path]], stdlib: Iterable[SourceFile],
            counts: Counter) -> tuple[list[Source], list[SourceFile]]:
    """Every unit's record, and its files after the cheap filters and the licence check."""
    stdlib_source = Source("stdlib", sys.version.split()[0], "PSF-2.0", "stdlib")
    sources = [stdlib_source]
    files: list[SourceFile] = []
    for f in stdlib:
        stdlib_source.files += 1
        stdlib_source.tests += is_test_path(f.path)
        kept = filtered(f.unit, f.path, f.text, set(), counts)
        if kept is not None:
            files.append(kept)
    for unit, version, archive in archives:
        source, contents = archive_files(archive, unit, version)
        sources.append(source)
        files += _archive_kept(source, contents, counts)
    return sources, files


class Stopwatch:
    """Seconds per build step, and since the start."""

    def __init__(self) -> None:
        self.start = self.clock = time.monotonic()
        self.laps: dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.laps[name] = round(now - self.clock, 1)
        self.clock = now

    def total(self) -> float:
        return round(time.monotonic() - self.start, 1)


def write_splits(out: Path, files: list[SourceFile]) -> tuple[Summary, Counter]:
    """train/valid/test.jsonl and split.json; the summary per split, and chars per unit."""
    summary: Summary = {s: {"files": 0, "chars": 0} for s in SPLITS}
    per_unit: Counter = Counter()
    units: dict[str, list[str]] = {name: [] for name in SPLITS}
    tests = Counter()
    with ExitStack() as stack:
        handles = {name: stack.enter_context((out / f"{name}.jsonl").open("w"))
                   for name in SPLITS}
        for f in files:
            split = split_of(f.unit)
            handles[split].write(json.dumps(asdict(f)) + "\n")
            summary[split]["files"] += 1
            summary[split]["chars"] += len(f.text)
            per_unit[f.unit] += len(f.text)
            tests[split] += len(f.text) if is_test_path(f.path) else 0
            if f.unit not in units[split]:
                units[split].append(f.unit)
    for split in SPLITS:
        summary[split]["test_chars"] = tests[split]
    (out / "split.json").write_text(json.dumps({k: sorted(v) for k, v in units.items()},
                                               indent=1))
    return summary, per_unit


def write_licences(out: Path, sources: list[Source]) -> None:
    """licences.json: every unit's record (version, licence, kind, kept, files, tests)."""
    licences = {s.unit: {k: v for k, v in asdict(s).items() if k != "unit"} for s in sources}
    (out / "licences.json").write_text(json.dumps(licences, indent=1, sort_keys=True))


def write_stats(out: Path, sources: list[Source], counts: Counter, summary: Summary,
                audit: dict[str, object], per_unit: Counter, watch: Stopwatch) -> None:
    """stats.json: files read, kept and dropped (by reason), the leak audit, chars per unit,
    seconds per step and peak memory."""
    stats = {
        "read": sum(s.files for s in sources), "dropped": dict(sorted(counts.items())),
        "kept": sum(s["files"] for s in summary.values()), "leak_audit": audit,
        "chars_per_unit": dict(per_unit.most_common()),
        "seconds": watch.laps, "build_s": watch.total(),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
    }
    (out / "stats.json").write_text(json.dumps(stats, indent=1))


def build(out: Path, cache: Path, stdlib: Path | None = None,
          packages: Mapping[str, str] = PACKAGES, sdists: frozenset[str] = SDISTS) -> Summary:
    """Fetch, read, filter, deduplicate and write the corpus; `stdlib`: its root folder;
    `packages` / `sdists`: the pinned distributions and those read from source."""
    watch = Stopwatch()
    out.mkdir(parents=True, exist_ok=True)
    counts: Counter = Counter({k: 0 for k in ALWAYS_COUNTED})
    archives = fetch(cache, packages, sdists)
    watch.lap("fetch")
    sources, files = collect(
        ((canonical(n), packages[n], archives[n]) for n in sorted(archives)),
        stdlib_files(stdlib), counts)
    watch.lap("read")
    files = deduplicate(files, counts)
    watch.lap("deduplicate")
    audit = leak_audit(files)
    watch.lap("audit")
    summary, per_unit = write_splits(out, files)
    write_licences(out, sources)
    watch.lap("write")
    write_stats(out, sources, counts, summary, audit, per_unit, watch)
    return summary
