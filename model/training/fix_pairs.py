"""Fix pairs from the training packages' own release histories (model/training/fix_rows.py).

    python -m diffusion_infill.model.training.fix_pairs [--releases 8] [--max-archive-kb 600]

For each training package of model/training/corpus/packages.py whose pinned archive in
data/sources is small (at most --max-archive-kb), the releases up to the pinned one (the
last --releases the package index lists) are fetched into data/fix_pairs_cache and every
pair of consecutive releases is diffed as the real-fix sets are (corpus/release_diffs.py:
one line became one other line, the window around it otherwise the same, and the change
reads as a fix). Pairs whose (old line, new line) the validation or test real-fix set holds
are dropped, so that a package vendored by a training package cannot carry a held-out fix
into training; both sets must have been built (`python -m benchmarks.real_fixes build
[--split valid]`). Writes data/fix_pairs.jsonl (the real-fix sets' record fields).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import re
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from pathlib import Path

from tqdm import tqdm

from diffusion_infill.model.training.corpus.packages import PACKAGES
from diffusion_infill.model.training.corpus.release_diffs import package_records
from diffusion_infill.model.training.corpus.releases import fetch_releases, index_page
from diffusion_infill.model.training.corpus.sources import archive_in

OUT = Path("data/fix_pairs.jsonl")
CACHE = Path("data/fix_pairs_cache")
SOURCES = Path("data/sources")
HELD_OUT = (Path("data/real_fixes.jsonl"), Path("data/real_fixes_valid.jsonl"))
MAX_FILE_BYTES = 100_000  # larger files are generated tables or bundles: not diffed
_RELEASE = re.compile(r"\d+(\.\d+)*(\.post\d+)?")


def releases(name: str) -> list[str]:
    """The package's final releases on the index, oldest first ([] where none is found)."""
    try:
        versions = index_page(name).get("versions", [])
    except OSError:
        return []
    return sorted((v for v in versions if _RELEASE.fullmatch(v)), key=_version_key)


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version))


def small_training_packages(split: Path, sources: Path, max_bytes: int) -> dict[str, str]:
    """Training packages (name -> pinned version) whose pinned archive is small."""
    train = {n.lower() for n in json.loads(split.read_text())["train"]}
    out = {}
    for name, version in PACKAGES.items():
        archive = archive_in(sources, name, version) if name.lower() in train else None
        if archive is not None and archive.stat().st_size <= max_bytes:
            out[name] = version
    return out


def pins(packages: dict[str, str], last: int) -> dict[str, list[str]]:
    """The last `last` releases of each package up to its pinned one."""
    with ThreadPoolExecutor(8) as pool:
        found = dict(zip(packages, pool.map(releases, packages), strict=True))
    out = {}
    for name, versions in found.items():
        if packages[name] in versions:
            upto = versions[: versions.index(packages[name]) + 1][-last:]
            if len(upto) >= 2:
                out[name] = upto
    return out


def held_out_keys(paths: tuple[Path, ...]) -> set[tuple[str, str]]:
    keys = set()
    for path in paths:
        if path.is_file():
            for line in path.read_text().splitlines():
                r = json.loads(line)
                keys.add((r["buggy_line"].strip(), r["fixed_line"].strip()))
    return keys


def _package_records(
    name: str, versions: list[str], archives: dict[tuple[str, str], Path]
) -> tuple[list[dict], Counter]:
    """The fix records of one package's consecutive releases; files over MAX_FILE_BYTES
    (generated tables, bundles) are not diffed."""
    reasons: Counter = Counter()
    records = package_records(name, versions, archives, "", reasons, MAX_FILE_BYTES)
    if records is None:
        reasons["ships a public benchmark"] += 1
        return [], reasons
    return records, reasons


def _package_job(job: tuple[str, list[str], dict[tuple[str, str], Path]]) -> tuple:
    return _package_records(*job)


def harvest(
    pinned: dict[str, list[str]], cache: Path, processes: int = 1
) -> tuple[list[dict], Counter]:
    """Every package's fix records (`processes` packages at a time) and why hunks were
    dropped."""
    archives = fetch_releases(cache, pinned)
    print(f"{len(archives)} of {sum(map(len, pinned.values()))} releases fetched", file=sys.stderr)
    jobs = [(name, versions, archives) for name, versions in pinned.items()]
    records: list[dict] = []
    reasons: Counter = Counter()
    with multiprocessing.Pool(processes) if processes > 1 else nullcontext() as pool:
        mapped = pool.imap(_package_job, jobs) if pool else map(_package_job, jobs)
        for got, why in tqdm(mapped, total=len(jobs), desc="packages", file=sys.stderr):
            records += got
            reasons += why
    return records, reasons


def drop_held_out(records: list[dict], held: set[tuple[str, str]], reasons: Counter) -> list[dict]:
    """The records whose (old line, new line) is neither held out nor seen before."""
    kept, keys = [], set()
    for r in records:
        key = (r["buggy_line"].strip(), r["fixed_line"].strip())
        if key in held or key in keys:
            reasons["held out" if key in held else "duplicate"] += 1
            continue
        keys.add(key)
        kept.append(r)
    return kept


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m diffusion_infill.model.training.fix_pairs",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("--releases", type=int, default=8, help="releases per package")
    parser.add_argument("--max-archive-kb", type=int, default=600)
    parser.add_argument("--corpus", type=Path, default=Path("data/corpus_v2"))
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--processes", type=int, default=2, help="packages diffed at a time")
    args = parser.parse_args(argv)
    if args.releases < 2:
        parser.error(f"--releases must be at least 2, got {args.releases}")
    if not (args.corpus / "split.json").is_file() or not SOURCES.is_dir():
        parser.error(f"{args.corpus}/split.json or {SOURCES} not found: build the corpus first")
    missing = [str(p) for p in HELD_OUT if not p.is_file()]
    if missing:
        parser.error(
            f"{', '.join(missing)} not found: build the real-fix sets first, whose fixes must "
            "stay out of training (python -m benchmarks.real_fixes build [--split valid])"
        )
    packages = small_training_packages(
        args.corpus / "split.json", SOURCES, args.max_archive_kb * 1024
    )
    pinned = pins(packages, args.releases)
    print(f"{len(pinned)} packages, {sum(map(len, pinned.values()))} releases", file=sys.stderr)
    records, reasons = harvest(pinned, args.cache, args.processes)
    kept = drop_held_out(records, held_out_keys(HELD_OUT), reasons)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(r) + "\n" for r in kept))
    print(f"{len(kept)} fix pairs of {len({r['package'] for r in kept})} packages -> {args.out}")
    print("  dropped: " + ", ".join(f"{k} {n}" for k, n in reasons.most_common()))


if __name__ == "__main__":
    main()
