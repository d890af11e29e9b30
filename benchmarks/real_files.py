"""Real files: source files of pinned PyPI packages the corpus does not hold.

    python -m benchmarks.real_files            # -> data/real_files.jsonl (once per machine)
    python -m benchmarks.real_files --select   # choose the files again (rewrites MANIFEST)

The held-out test split is a few packages cut from the same pinned set as the training
data; these are other packages, drawn by a user's eye (small pure-Python libraries in
wide use), fetched as wheels with `pip download` into data/real_files_cache. Which files
make the set is pinned in MANIFEST (benchmarks/real_files.json: package, path and sha256
of each), so that every machine builds the same set from the wheels alone; a wheel whose
file differs from the pinned one is an error that names it. `--select` chooses them
again against the corpus's training split: a file is kept when it has at least 40 lines
and at most a fifth of its distinctive lines (over 40 characters) appear in the training
split (not a vendored copy, say), checked by line hashes; at most PER_PACKAGE files of a
package. One record per file: {"package", "path", "text"}.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

from diffusion_infill.model.training.corpus.sources import _download_wheels, archive_in

# pinned: name -> version (licences: MIT / BSD / Apache-2.0 / PSF)
PACKAGES = {
    "wcwidth": "0.2.13",
    "rsa": "4.9",
    "xmltodict": "0.13.0",
    "sortedcontainers": "2.4.0",
    "tabulate": "0.9.0",
    "semver": "3.0.2",
    "humanize": "4.9.0",
    "inflection": "0.5.1",
    "bidict": "0.23.1",
    "jmespath": "1.0.1",
    "isodate": "0.6.1",
    "termcolor": "2.4.0",
    "colorama": "0.4.6",
    "filelock": "3.15.4",
    "iniconfig": "2.0.0",
    "pyasn1": "0.6.0",
    "ply": "3.11",
    "chardet": "5.2.0",
    "docutils": "0.21.2",
}
MANIFEST = Path(__file__).with_name("real_files.json")  # the pinned set: package, path, sha256
PER_PACKAGE = 8  # files kept from one package at most (the first in path order)
SEEN_SHARE = 0.2  # a file with more of its distinctive lines in the training split is dropped


def _distinctive(text: str) -> set[str]:
    return {ln.strip() for ln in text.split("\n") if len(ln.strip()) > 40}


def training_lines(corpus: Path) -> set[int]:
    """Hashes of the distinctive lines (over 40 characters) of the training split."""
    seen: set[int] = set()
    with (corpus / "train.jsonl").open() as fh:
        for line in fh:
            seen.update(hash(s) for s in _distinctive(json.loads(line)["text"]))
    return seen


def mostly_in_training(text: str, seen: set[int]) -> bool:
    """More than SEEN_SHARE of `text`'s distinctive lines are lines of the training split
    (`seen`, from `training_lines`): a copy of training code, not held-out code."""
    lines = _distinctive(text)
    return sum(hash(s) in seen for s in lines) > SEEN_SHARE * len(lines)


def build(out: Path, cache: Path, corpus: Path | None = None) -> list[dict[str, str]]:
    """The set, from the wheels in `cache` (fetched when missing): the files MANIFEST
    pins, or with `corpus` chosen again against its training split (MANIFEST rewritten)."""
    cache.mkdir(parents=True, exist_ok=True)
    missing = [f"{n}=={v}" for n, v in PACKAGES.items() if archive_in(cache, n, v) is None]
    if missing:
        _download_wheels(cache, missing)
    if corpus is None:
        records = _pinned(cache)
    else:
        records = _select(cache, training_lines(corpus))
        pins = [
            {"package": r["package"], "path": r["path"], "sha256": digest(r["text"])}
            for r in records
        ]
        MANIFEST.write_text(json.dumps({"files": pins}, indent=1) + "\n")
    out.write_text("".join(json.dumps(r) + "\n" for r in records))
    print(
        f"{len(records)} files of {len({r['package'] for r in records})} packages -> {out}",
        file=sys.stderr,
    )
    return records


def _select(cache: Path, seen: set[int]) -> list[dict[str, str]]:
    records: list[dict[str, str]] = []
    for package, name, text in _sources(cache):
        if (
            text.count("\n") < 40
            or mostly_in_training(text, seen)
            or sum(r["package"] == package for r in records) >= PER_PACKAGE
        ):
            continue
        records.append({"package": package, "path": name, "text": text})
    return records


def _pinned(cache: Path) -> list[dict[str, str]]:
    """MANIFEST's files, in its order; SystemExit naming a file absent or changed."""
    found = {(p, n): t for p, n, t in _sources(cache)}
    records = []
    for pin in json.loads(MANIFEST.read_text())["files"]:
        text = found.get((pin["package"], pin["path"]))
        if text is None or digest(text) != pin["sha256"]:
            why = "absent" if text is None else "not the pinned file (sha256 differs)"
            raise SystemExit(f"{pin['package']} {pin['path']}: {why} in {cache}")
        records.append({"package": pin["package"], "path": pin["path"], "text": text})
    return records


def _sources(cache: Path) -> Iterator[tuple[str, str, str]]:
    """(package, path, text) of each .py file outside tests/ of the pinned wheels."""
    for name, version in sorted(PACKAGES.items()):
        wheel = archive_in(cache, name, version)
        if wheel is None:
            continue
        with zipfile.ZipFile(wheel) as zf:
            for path in sorted(zf.namelist()):
                if path.endswith(".py") and "/tests/" not in f"/{path}":
                    yield name, path, zf.read(path).decode("utf-8", errors="replace")


def digest(text: str) -> str:
    """The sha256 of `text` (its UTF-8), as the manifests pin it."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def load(path: Path) -> list[str]:
    with path.open() as fh:
        return [json.loads(line)["text"] for line in fh]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("data/real_files.jsonl"))
    parser.add_argument("--cache", type=Path, default=Path("data/real_files_cache"))
    parser.add_argument(
        "--select",
        action="store_true",
        help=f"choose the files again against --corpus's training split (rewrites {MANIFEST})",
    )
    parser.add_argument("--corpus", type=Path, default=Path("data/corpus_v2"))
    args = parser.parse_args(argv)
    if args.select and not (args.corpus / "train.jsonl").is_file():
        parser.error(
            f"{args.corpus}/train.jsonl not found: python -m diffusion_infill.model.training.corpus"
        )
    build(args.out, args.cache, args.corpus if args.select else None)


if __name__ == "__main__":
    main()
