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
from dataclasses import asdict, dataclass, field
from pathlib import Path

from diffusion_infill.model.training.corpus.debian import deb_files, dep5_allowed, fetch_debs
from diffusion_infill.model.training.corpus.dedupe import deduplicate, leak_audit
from diffusion_infill.model.training.corpus.exclusions import (
    benchmark_named,
    copies_eval_module,
    eval_packages,
    excluded_project,
    import_names,
)
from diffusion_infill.model.training.corpus.filters import holds_held_out_copy, keep, normalise
from diffusion_infill.model.training.corpus.licences import licence_allowed
from diffusion_infill.model.training.corpus.packages import (
    HELD_OUT_PACKAGES,
    PACKAGES,
    SDISTS,
    SPLITS,
    TEST_UNITS,
    VALID_UNITS,
    canonical,
    split_of,
)
from diffusion_infill.model.training.corpus.records import Source, SourceFile, is_test_path
from diffusion_infill.model.training.corpus.sources import archive_files, fetch, stdlib_files

Summary = dict[str, dict[str, int]]  # split -> files, chars, test_chars
# The stats.json reason under which a whole excluded unit's files are counted.
EXCLUDED_COUNT = {
    "licence": "licence",
    "held": "held-out or evaluation package",
    "bundles": "bundles a public benchmark",
}

# Drop reasons listed in stats.json (and so in the card) even when nothing was dropped.
ALWAYS_COUNTED = (
    "copy of a held-out package",
    "exact duplicate (train of test)",
    "exact duplicate (train of valid)",
    "near duplicate (train of test)",
    "near duplicate (train of valid)",
)


@dataclass
class Exclusions:
    """What a training unit may not hold: the excluded projects (held-out units, their
    import names, the evaluation packages) and the evaluation packages' import names; the
    training files dropped for naming a public benchmark are listed in `named`."""

    projects: frozenset[str] = frozenset()
    imports: frozenset[str] = frozenset()
    named: list[str] = field(default_factory=list)

    @classmethod
    def current(cls) -> Exclusions:
        evaluation = eval_packages()
        held = {u for u in TEST_UNITS | VALID_UNITS if "/" not in u}
        return cls(frozenset(evaluation | held | HELD_OUT_PACKAGES), import_names(evaluation))


def filtered(
    unit: str,
    path: str,
    text: str,
    packages: set[str],
    counts: Counter,
    exclusions: Exclusions | None = None,
) -> SourceFile | None:
    """The file, normalised, if it passes the cheap filters; else None, the reason counted.

    `packages`: the unit's folders that hold an __init__.py (see holds_held_out_copy).
    `exclusions`: a training file that copies an evaluation package or names a public
    benchmark is dropped (held-out units are never touched)."""
    if holds_held_out_copy(unit, path, packages):
        counts["copy of a held-out package"] += 1
        return None
    train = split_of(unit) == "train" and exclusions is not None
    if train and copies_eval_module(path, packages, exclusions.imports):
        counts["copy of an evaluation package (by module or folder name)"] += 1
        return None
    text = normalise(text)
    if not keep(text, path):
        counts["size / long line / generated"] += 1
        return None
    benchmark = benchmark_named(text) if train else None
    if benchmark is not None:
        counts[f"names a public benchmark ({benchmark})"] += 1
        exclusions.named.append(f"{unit}:{path} ({benchmark})")
        return None
    return SourceFile(unit, path, text)


def unit_excluded(source: Source, names: list[str], exclusions: Exclusions) -> str | None:
    """Why a unit is not read at all (an evaluation package under any of its names, a
    bundled public benchmark, its licence), or None. Held-out units are always read."""
    if split_of(source.unit) != "train":
        return None
    project = excluded_project(names, exclusions.projects)
    if project is not None:
        return f"no (held out: {project})"
    if source.bundles:
        return f"no (bundles {source.bundles.split(':')[0]})"
    allowed = dep5_allowed if source.kind == "deb" else licence_allowed
    return None if allowed(source.licence) else "no (licence)"


def _archive_kept(
    source: Source,
    contents: list[tuple[str, str]],
    counts: Counter,
    names: list[str],
    exclusions: Exclusions,
) -> list[SourceFile]:
    """An archive's files that pass the exclusions, the licence check and the filters."""
    reason = unit_excluded(source, names, exclusions)
    if reason is not None:
        source.kept = reason
        counts[EXCLUDED_COUNT[reason.split()[1].strip("():")]] += len(contents)
        return []
    packages = {p.rpartition("/")[0] for p, _ in contents if p.endswith("/__init__.py")}
    kept = (
        filtered(source.unit, path, text, packages, counts, exclusions) for path, text in contents
    )
    return [f for f in kept if f is not None]


def read_unit(
    unit: str, version: str, archive: Path
) -> tuple[Source, list[tuple[str, str]], list[str]]:
    """A wheel, sdist or .deb read: its record, (path, text) files and project names."""
    if archive.name.endswith(".deb"):
        return deb_files(archive, unit, version)
    source, contents = archive_files(archive, unit, version)
    return source, contents, [unit]


def collect(
    archives: Iterable[tuple[str, str, Path]],
    stdlib: Iterable[SourceFile],
    counts: Counter,
    exclusions: Exclusions | None = None,
) -> tuple[list[Source], list[SourceFile]]:
    """Every unit's record, and its files after the exclusions, the licence check and the
    cheap filters (`exclusions`: by default those of this checkout, Exclusions.current)."""
    exclusions = Exclusions.current() if exclusions is None else exclusions
    stdlib_source = Source("stdlib", sys.version.split()[0], "PSF-2.0", "stdlib")
    sources = [stdlib_source]
    files: list[SourceFile] = []
    for f in stdlib:
        stdlib_source.files += 1
        stdlib_source.tests += is_test_path(f.path)
        kept = filtered(f.unit, f.path, f.text, set(), counts, exclusions)
        if kept is not None:
            files.append(kept)
    for unit, version, archive in archives:
        source, contents, names = read_unit(unit, version, archive)
        sources.append(source)
        files += _archive_kept(source, contents, counts, names, exclusions)
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
        handles = {name: stack.enter_context((out / f"{name}.jsonl").open("w")) for name in SPLITS}
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
    (out / "split.json").write_text(json.dumps({k: sorted(v) for k, v in units.items()}, indent=1))
    return summary, per_unit


def write_licences(out: Path, sources: list[Source]) -> None:
    """licences.json: every unit's record (version, licence, kind, kept, files, tests)."""
    licences = {s.unit: {k: v for k, v in asdict(s).items() if k != "unit"} for s in sources}
    (out / "licences.json").write_text(json.dumps(licences, indent=1, sort_keys=True))


def write_stats(
    out: Path,
    sources: list[Source],
    counts: Counter,
    summary: Summary,
    audit: dict[str, object],
    per_unit: Counter,
    watch: Stopwatch,
    extra: dict[str, object] | None = None,
) -> None:
    """stats.json: files read, kept and dropped (by reason), the leak audit, chars per unit,
    seconds per step and peak memory; `extra`: more entries (the exclusions' record)."""
    stats = {
        **(extra or {}),
        "read": sum(s.files for s in sources),
        "dropped": dict(sorted(counts.items())),
        "kept": sum(s["files"] for s in summary.values()),
        "leak_audit": audit,
        "chars_per_unit": dict(per_unit.most_common()),
        "seconds": watch.laps,
        "build_s": watch.total(),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
    }
    (out / "stats.json").write_text(json.dumps(stats, indent=1))


def _units(
    cache: Path, packages: Mapping[str, str], sdists: frozenset[str], debian: Mapping[str, str]
) -> tuple[list[tuple[str, str, Path]], list[str]]:
    """Every pinned archive fetched: (unit, version, path), PyPI then Debian; and the Debian
    packages that could not be fetched."""
    archives = fetch(cache, packages, sdists)
    debs = fetch_debs(cache / "debian", debian) if debian else {}
    units = [(canonical(n), packages[n], archives[n]) for n in sorted(archives)]
    units += [(f"debian/{n}", debian[n], debs[n]) for n in sorted(debs)]
    return units, sorted(set(debian) - set(debs))


def build(
    out: Path,
    cache: Path,
    stdlib: Path | None = None,
    packages: Mapping[str, str] = PACKAGES,
    sdists: frozenset[str] = SDISTS,
    debian: Mapping[str, str] | None = None,
) -> Summary:
    """Fetch, read, filter, deduplicate and write the corpus; `stdlib`: its root folder;
    `packages` / `sdists`: the pinned distributions and those read from source; `debian`:
    pinned Debian packages (name -> version), fetched into `cache`/debian (none by
    default; the command line passes DEBIAN_PACKAGES)."""
    watch = Stopwatch()
    out.mkdir(parents=True, exist_ok=True)
    counts: Counter = Counter({k: 0 for k in ALWAYS_COUNTED})
    units, missing = _units(cache, packages, sdists, debian or {})
    watch.lap("fetch")
    exclusions = Exclusions.current()
    sources, files = collect(units, stdlib_files(stdlib), counts, exclusions)
    watch.lap("read")
    files = deduplicate(files, counts)
    watch.lap("deduplicate")
    audit = leak_audit(files)
    watch.lap("audit")
    summary, per_unit = write_splits(out, files)
    write_licences(out, sources)
    watch.lap("write")
    extra = {
        "evaluation_packages": sorted(exclusions.projects),
        "benchmark_mentions": exclusions.named,
        "debian_not_fetched": missing,
    }
    write_stats(out, sources, counts, summary, audit, per_unit, watch, extra)
    return summary
