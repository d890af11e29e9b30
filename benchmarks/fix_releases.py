"""The releases the real-fix set is cut from, fetched and diffed (benchmarks/real_fixes.py).

PINS: consecutive releases (oldest first) of small pure-Python packages that neither
data/corpus_v2/split.json nor model/training/corpus/packages.py names (licences MIT / BSD /
Apache-2.0 / PSF / ISC). Each version is fetched as a wheel, else as an sdist; the newest
one's sdist is fetched as well for its changelog.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from benchmarks.real_files import digest, mostly_in_training, training_lines
from diffusion_infill.model.training.corpus.release_diffs import changelog, package_records
from diffusion_infill.model.training.corpus.releases import fetch

_P = {
    "wcwidth": "0.3.3 0.3.4 0.3.5 0.4.0 0.5.0 0.5.2 0.5.3 0.6.0 0.7.0 0.8.0 0.8.1 0.8.2 0.8.3 "
    "0.8.4 0.8.5 0.9.0 0.9.1 0.9.2 0.9.3 0.9.4",
    "rsa": "4.3 4.4.1 4.5 4.6 4.7 4.7.1 4.7.2 4.8 4.9 4.9.1",
    "xmltodict": "0.11.0 0.12.0 0.13.0 0.14.1 0.14.2 0.15.0 0.15.1 1.0.0 1.0.1 1.0.2 1.0.3 1.0.4",
    "sortedcontainers": "1.5.2 1.5.3 1.5.4 1.5.5 1.5.6 1.5.7 1.5.9 1.5.10 2.0.0 2.0.1 2.0.2 2.0.3 "
    "2.0.4 2.0.5 2.1.0 2.2.0 2.2.1 2.2.2 2.3.0 2.4.0",
    "tabulate": "0.8.7 0.8.8 0.8.9 0.8.10 0.9.0 0.10.0",
    "semver": "2.8.0 2.8.1 2.9.0 2.9.1 2.10.0 2.10.1 2.10.2 2.11.0 2.12.0 2.13.0 3.0.0 3.0.1 3.0.2 "
    "3.0.4 3.1.0 3.1.1 3.1.2",
    "humanize": "4.2.2 4.2.3 4.3.0 4.4.0 4.5.0 4.6.0 4.7.0 4.8.0 4.9.0 4.10.0 4.11.0 4.12.0 4.12.1 "
    "4.12.2 4.12.3 4.13.0 4.14.0 4.15.0 4.16.0 4.17.0",
    "inflection": "0.4.0 0.5.0 0.5.1",
    "bidict": "0.19.0 0.20.0 0.21.0 0.21.2 0.21.3 0.21.4 0.22.0 0.22.1 0.23.0 0.23.1 0.24.0 0.24.1",
    "jmespath": "0.7.1 0.8.0 0.9.0 0.9.1 0.9.2 0.9.3 0.9.4 0.9.5 0.10.0 1.0.0 1.0.1 1.1.0",
    "isodate": "0.6.0 0.6.1 0.7.2",
    "termcolor": "2.0.0 2.0.1 2.1.0 2.1.1 2.2.0 2.3.0 2.4.0 2.5.0 3.0.0 3.0.1 3.1.0 3.2.0 3.3.0",
    "colorama": "0.3.5 0.3.6 0.3.7 0.3.8 0.3.9 0.4.0 0.4.1 0.4.3 0.4.4 0.4.5 0.4.6",
    "filelock": "4.0.10 4.0.11 4.0.12 4.1.0 4.1.1 4.1.2 4.2.0 4.2.1 4.2.2 4.2.3 4.2.4 4.2.5 4.2.6 "
    "4.2.7 4.2.8 4.2.9 4.2.10 4.2.11 4.2.12 4.3.1",
    "iniconfig": "1.1.1 2.0.0 2.1.0 2.2.0 2.3.0 2.3.1",
    "pyasn1": "0.3.4 0.3.5 0.3.6 0.3.7 0.4.1 0.4.2 0.4.3 0.4.4 0.4.5 0.4.6 0.4.7 0.4.8 0.5.0 0.5.1 "
    "0.6.0 0.6.1 0.6.2 0.6.3 0.6.4 0.6.5",
    "chardet": "3.0.2 3.0.3 3.0.4 4.0.0 5.0.0 5.1.0 5.2.0 6.0.0 7.0.0 7.0.1 7.1.0 7.2.0 7.3.0 "
    "7.4.1 7.4.2 7.4.3 7.5.0 7.5.1 7.6.0 7.7.0",
    "simplejson": "3.18.1 3.18.2 3.18.3 3.18.4 3.19.1 3.19.2 3.19.3 3.20.1 3.20.2 4.0.0 4.0.1 "
    "4.1.0 4.1.1 4.1.2 4.2.0 4.3.0",
    "markdown2": "2.4.0 2.4.1 2.4.2 2.4.3 2.4.4 2.4.5 2.4.6 2.4.7 2.4.8 2.4.9 2.4.10 2.4.11 2.4.12 "
    "2.4.13 2.5.0 2.5.1 2.5.2 2.5.3 2.5.4 2.5.5",
    "natsort": "5.3.3 5.4.0 5.4.1 5.5.0 6.0.0 6.1.0 6.2.0 6.2.1 7.0.0 7.0.1 7.1.0 7.1.1 8.0.0 "
    "8.0.1 8.0.2 8.1.0 8.2.0 8.3.0 8.3.1 8.4.0",
    "parse": "1.19.0 1.19.1 1.20.0 1.20.1 1.20.2 1.21.0 1.21.1 1.22.0 1.22.1 1.22.2 1.22.3 1.22.4",
    "tinycss2": "0.6.0 0.6.1 1.0.0 1.0.1 1.0.2 1.1.0 1.1.1 1.2.0 1.2.1 1.3.0 1.4.0 1.5.0 1.5.1",
    "cssselect": "0.9.2 1.0.0 1.0.1 1.0.3 1.1.0 1.2.0 1.3.0 1.4.0 1.5.0 1.6.0",
    "jsonpointer": "2.0 2.1 2.2 2.3 2.4 3.0.0 3.1.0 3.1.1 3.2.0 3.2.1 3.3 3.4 3.5 3.6 3.7 3.8 3.9 "
    "3.10 3.11 3.12",
    "pathspec": "0.7.0 0.8.0 0.8.1 0.9.0 0.10.1 0.10.2 0.10.3 0.11.0 0.11.1 0.11.2 0.12.0 0.12.1 "
    "1.0.0 1.0.1 1.0.2 1.0.3 1.0.4 1.1.0 1.1.1",
    "platformdirs": "4.12.1 4.12.2 4.12.3 4.12.4 4.13.0 4.13.1 4.13.2 4.13.3 4.13.4 4.13.5 4.13.6 "
    "4.13.7 4.14.0 4.14.2 4.14.3 4.14.4 4.14.5 4.14.6 4.14.7 4.14.8",
    "distro": "1.0.1 1.0.2 1.0.3 1.0.4 1.1.0 1.2.0 1.3.0 1.4.0 1.5.0 1.6.0 1.7.0 1.8.0 1.9.0",
    "backoff": "1.7.0 1.7.1 1.8.0 1.8.1 1.9.0 1.9.1 1.9.2 1.10.0 1.11.0 1.11.1 2.0.0 2.0.1 2.1.0 "
    "2.1.1 2.1.2 2.2.0 2.2.1",
    "tzlocal": "2.0.0 2.1 3.0 4.0 4.0.1 4.0.2 4.1 4.2 4.3 4.3.1 5.0 5.0.1 5.1 5.2 5.3 5.3.1 5.4 "
    "5.4.3 5.4.4 5.4.5",
    "croniter": "2.0.3 2.0.4 2.0.5 2.0.6 2.0.7 3.0.0 3.0.1 3.0.2 3.0.3 3.0.4 4.0.0 5.0.1 6.0.0 "
    "6.1.0 6.2.0 6.2.1 6.2.2 6.2.3 6.2.4 7.0.0",
    "texttable": "1.6.2 1.6.3 1.6.4 1.6.5 1.6.6 1.6.7 1.7.0 1.7.1 1.7.2",
    "prettytable": "3.3.0 3.4.0 3.4.1 3.5.0 3.6.0 3.7.0 3.8.0 3.9.0 3.10.0 3.10.1 3.10.2 3.11.0 "
    "3.12.0 3.13.0 3.14.0 3.15.0 3.15.1 3.16.0 3.17.0 3.18.0",
    "configobj": "5.0.8 5.0.9",
    "asttokens": "1.1.13 1.1.14 1.1.15 2.0.0 2.0.1 2.0.2 2.0.3 2.0.4 2.0.5 2.0.7 2.0.8 2.1.0 2.2.0 "
    "2.2.1 2.3.0 2.4.0 2.4.1 3.0.0 3.0.1 3.0.2",
    "executing": "0.5.3 0.5.4 0.6.0 0.7.0 0.8.0 0.8.1 0.8.2 0.8.3 0.9.0 0.9.1 0.10.0 1.0.0 1.1.0 "
    "1.1.1 1.2.0 2.0.1 2.1.0 2.2.0 2.2.1 2.3.0",
    "mccabe": "0.3 0.3.1 0.4.0 0.5.0 0.5.1 0.5.2 0.5.3 0.6.0 0.6.1 0.7.0",
    "tomli": "1.0.1 1.0.2 1.0.3 1.0.4 1.1.0 1.2.0 1.2.1 1.2.2 1.2.3 2.0.0 2.0.1 2.0.2 2.1.0 2.2.1 "
    "2.3.0 2.3.1 2.3.2 2.4.0 2.4.1 2.5.0",
    "toml": "0.9.6 0.10.0 0.10.1 0.10.2",
    "rfc3986": "0.3.0 0.3.1 0.4.0 0.4.1 1.0.0 1.1.0 1.2.0 1.3.0 1.3.1 1.3.2 1.4.0 1.5.0 2.0.0",
    "uritemplate": "3.0.0 3.0.1 4.0.0 4.1.1 4.2.0",
    "munch": "2.4.0 2.5.0 3.0.0 4.0.0",
    "validators": "0.22.0 0.23.0 0.23.1 0.23.2 0.24.0 0.25.0 0.26.0 0.27.0 0.28.0 0.28.1 0.28.2 "
    "0.28.3 0.29.0 0.30.0 0.31.0 0.32.0 0.33.0 0.34.0 0.35.0 0.36.0",
    "voluptuous": "0.15.2 0.16.0",
    "schema": "0.6.0 0.6.1 0.6.2 0.6.3 0.6.4 0.6.5 0.6.6 0.6.7 0.6.8 0.7.0 0.7.1 0.7.2 0.7.4 0.7.5 "
    "0.7.7 0.7.8",
    "cerberus": "1.3.5 1.3.6 1.3.7 1.3.8",
    "mistune": "2.0.3 2.0.4 2.0.5 2.1.0 3.0.0 3.0.1 3.0.2 3.1.0 3.1.1 3.1.2 3.1.3 3.1.4 3.2.0 "
    "3.2.1 3.3.0 3.3.1 3.3.2 3.3.3 3.3.4 3.4.0",
    "python-slugify": "5.0.0 5.0.1 5.0.2 6.0.0 6.0.1 6.1.0 6.1.1 6.1.2 7.0.0 8.0.0 8.0.1 8.0.2 "
    "8.0.3 8.0.4 9.0.0 9.1.0 9.1.1 9.1.2 9.1.3 9.2.0",
}
PINS: dict[str, list[str]] = {name: versions.split() for name, versions in _P.items()}


# --- the set ------------------------------------------------------------------------------


def _unseen(records: list[dict], corpus: Path, reasons: Counter) -> list[dict]:
    """Records whose window is not mostly lines of the training split, one per (buggy
    line, fixed line)."""
    seen = training_lines(corpus)
    out, keys = [], set()
    for r in records:
        if mostly_in_training(r["window"], seen):
            reasons["in the corpus"] += 1
            continue
        key = (r["buggy_line"].strip(), r["fixed_line"].strip())
        if key in keys:
            reasons["duplicate"] += 1
            continue
        keys.add(key)
        out.append(r)
    return out


def build_set(
    out: Path, cache: Path, corpus: Path | None, pins: dict[str, list[str]], manifest: Path
) -> list[dict]:
    """Fetch, diff and filter (benchmarks/real_fixes.py); write the set to `out`: the
    changes `manifest` pins, or with `corpus` those chosen again against its training
    split (`manifest` rewritten)."""
    archives = fetch(cache, pins)
    records: list[dict] = []
    reasons: Counter = Counter()
    for name, versions in pins.items():
        notes = changelog(archives.get((name, "notes")))
        got = package_records(name, versions, archives, notes, reasons)
        if got is None:
            print(f"{name}: ships a public benchmark, dropped", file=sys.stderr)
            continue
        records += got
    if corpus is None:
        kept = pinned(records, json.loads(manifest.read_text())["changes"])
    else:
        kept = _unseen(records, corpus, reasons)
        changes = [{**_key(r), "sha256": digest(r["window"])} for r in kept]
        manifest.write_text(json.dumps({"changes": changes}, indent=1) + "\n")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r) + "\n" for r in kept))
    by_package = Counter(r["package"] for r in kept)
    print(f"{len(kept)} one-line fixes of {len(by_package)} packages -> {out}", file=sys.stderr)
    print("  " + ", ".join(f"{p} {n}" for p, n in sorted(by_package.items())), file=sys.stderr)
    print("  dropped: " + ", ".join(f"{k} {n}" for k, n in reasons.most_common()), file=sys.stderr)
    return kept


def pinned(records: list[dict], changes: list[dict]) -> list[dict]:
    """The records `changes` pins, in its order; SystemExit naming those not found (or
    whose window differs)."""
    by_key = {tuple(_key(r).values()): r for r in records}
    kept, missing = [], []
    for change in changes:
        r = by_key.get(tuple(change[k] for k in _KEY))
        if r is None or digest(r["window"]) != change["sha256"]:
            missing.append(
                f"{change['package']} {change['new_version']} {change['path']}:{change['line']}"
            )
        else:
            kept.append(r)
    if missing:
        raise SystemExit(f"{len(missing)} pinned changes not found: " + ", ".join(missing[:5]))
    return kept


_KEY = ("package", "old_version", "new_version", "path", "line")


def _key(r: dict) -> dict:
    return {k: r[k] for k in _KEY}
