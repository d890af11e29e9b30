"""Releases of packages fetched from the package index for the training fix pairs
(model/training/fix_pairs.py) and the real-fix sets (benchmarks/fix_releases.py):
each release's archive (a pure-Python wheel, else any wheel, else the sdist), read from
the index's simple API and downloaded without pip, so that a release costs one HTTP
request and no build."""

from __future__ import annotations

import json
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from diffusion_infill.model.training.corpus.packages import canonical
from diffusion_infill.model.training.corpus.sources import archive_in, name_version


def _wheel(cache: Path, name: str, version: str) -> Path | None:
    return archive_in(cache, name, version, frozenset())


def _sdist(cache: Path, name: str, version: str) -> Path | None:
    return archive_in(cache, name, version, frozenset({name}))


INDEX = "https://pypi.org/simple"  # the package index's simple API (PEP 691, JSON)


def index_page(name: str) -> dict:
    """The package's page of the index: {"versions": [...], "files": [...]}."""
    request = urllib.request.Request(
        f"{INDEX}/{canonical(name)}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    with urllib.request.urlopen(request, timeout=120) as answer:
        return json.load(answer)


def release_file(files: list[dict], version: str) -> dict | None:
    """The file a release is read from: a pure-Python wheel, else any wheel, else the sdist."""
    mine = []
    for f in files:
        parsed = name_version(f["filename"])
        if parsed is not None and parsed[1] == canonical(version) and not f.get("yanked"):
            mine.append(f)
    rank = lambda f: (  # noqa: E731
        not f["filename"].endswith("-none-any.whl"),
        not f["filename"].endswith(".whl"),
        not f["filename"].endswith(".tar.gz"),
    )
    return min(mine, key=rank, default=None)


def fetch_releases(cache: Path, pins: dict[str, list[str]]) -> dict[tuple[str, str], Path]:
    """Every pinned release's archive (`release_file`), downloaded into `cache` unless a
    wheel or sdist of it is there, eight at a time."""
    cache.mkdir(parents=True, exist_ok=True)
    found = {}
    for n, versions in pins.items():
        for v in versions:
            path = _wheel(cache, n, v) or _sdist(cache, n, v)
            if path is not None:
                found[n, v] = path
    missing = sorted({n for n, versions in pins.items() for v in versions if (n, v) not in found})

    def get(name: str) -> dict[tuple[str, str], Path]:
        try:
            files = index_page(name)["files"]
        except OSError:
            return {}
        out = {}
        for v in pins[name]:
            f = release_file(files, v)
            if (name, v) not in found and f is not None:
                out[name, v] = _download(cache, f)
        return out

    with ThreadPoolExecutor(8) as pool:
        for got in pool.map(get, missing):
            found.update(got)
    return found


def _download(cache: Path, file: dict) -> Path:
    """An index file (`release_file`'s) in `cache`, downloaded unless it is there."""
    path = cache / file["filename"]
    if not path.is_file():
        with urllib.request.urlopen(file["url"], timeout=300) as answer:
            path.write_bytes(answer.read())
    return path


def _notes_sdist(cache: Path, name: str, version: str) -> None:
    try:
        files = index_page(name)["files"]
    except OSError:
        return
    sdists = (f for f in files if not f["filename"].endswith(".whl"))
    sdist = next((f for f in sdists if release_file([f], version)), None)
    if sdist is not None:
        _download(cache, sdist)


def fetch(cache: Path, pins: dict[str, list[str]]) -> dict[tuple[str, str], Path]:
    """`fetch_releases`, and the newest release's sdist of each package for its release
    notes (key: (name, "notes")); a package whose sdist was not found is not asked again
    (notes-unavailable.txt)."""
    found = fetch_releases(cache, pins)
    failed = cache / "notes-unavailable.txt"
    skip = set(failed.read_text().split()) if failed.is_file() else set()
    notes = [n for n, v in pins.items() if _sdist(cache, n, v[-1]) is None and n not in skip]
    if notes:
        print(f"fetching {len(notes)} sdists for their release notes", file=sys.stderr, flush=True)
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda n: _notes_sdist(cache, n, pins[n][-1]), notes))
        failed.write_text(
            "".join(f"{n}\n" for n, v in pins.items() if _sdist(cache, n, v[-1]) is None)
        )
    for name, versions in pins.items():
        sdist = _sdist(cache, name, versions[-1])
        if sdist is not None:
            found[name, "notes"] = sdist
    return found
