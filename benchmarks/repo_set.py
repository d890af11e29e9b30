"""The repository-level held-out set: whole packages outside the corpus, holes with the
rest of the package present.

    python -m benchmarks.repo_set        # -> data/repo_context/<package>/ (once per machine)

Pinned pure-Python packages of several modules that the training corpus, its held-out
units and every other evaluation set leave out (model/training/corpus/packages.py,
packages_v3.py, debian_packages.py, exclusions.py; benchmarks/real_files.py), chosen by a
user's eye before any fill was measured: libraries in wide use, permissive licences. Their
wheels are fetched with `pip download --no-deps` into data/repo_context_cache at build
time (never at run time) and unpacked into data/repo_context/<package>/, one folder per
package: its .py files outside tests and vendored folders, as a user's checkout holds
them. `validation` chooses rules; `test` reports.

Holes (`repo_holes`) are drawn in non-test files of a split's packages with the cutters
of benchmarks/shapes.py, at most PER_FILE per file and shape, then shuffled together.
"""

from __future__ import annotations

import argparse
import random
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks.heldout import HELDOUT_WINDOW_CHARS, Example
from benchmarks.shapes import shape_examples

# name -> (version, licence as its metadata states it, split)
PACKAGES = {
    "gitpython": ("3.1.43", "BSD-3-Clause", "validation"),
    "h2": ("4.1.0", "MIT", "validation"),
    "tinydb": ("4.8.0", "MIT", "validation"),
    "mistletoe": ("1.4.0", "MIT", "validation"),
    "diskcache": ("5.6.3", "Apache-2.0", "validation"),
    "wsproto": ("1.2.0", "MIT", "test"),
    "jsonpickle": ("3.3.0", "BSD-3-Clause", "test"),
    "cookiecutter": ("2.6.0", "BSD-3-Clause", "test"),
    "wcmatch": ("8.5.2", "MIT", "test"),
    "bigtree": ("0.19.4", "MIT", "test"),
    "towncrier": ("23.11.0", "MIT", "test"),
}
SPLITS = ("validation", "test")
PER_FILE = 6  # holes of a shape drawn from one file at most
DATA = Path("data/repo_context")
WHEELS = Path("data/repo_context_cache")
_SKIP_PARTS = ("tests", "test", "testing", "_vendor", "vendor", "vendored")


@dataclass(frozen=True)
class RepoHole:
    """A hole in a file of a package: the package's folder, the file (relative), the
    hole (a window of the file, as benchmarks/shapes.py cuts it)."""

    package: str
    path: str
    example: Example


def _source_files(wheel: Path) -> dict[str, str]:
    """The .py files of a wheel outside tests and vendored folders: path -> text."""
    out = {}
    with zipfile.ZipFile(wheel) as zf:
        for name in sorted(zf.namelist()):
            parts = name.split("/")
            if not name.endswith(".py") or any(p in _SKIP_PARTS for p in parts[:-1]):
                continue
            if parts[-1].startswith("test_") or ".dist-info/" in name:
                continue
            out[name] = zf.read(name).decode("utf-8", errors="replace")
    return out


def build(data: Path = DATA, wheels: Path = WHEELS) -> dict[str, Path]:
    """Fetch the pinned wheels (those missing) and unpack each package's sources into
    data/<package>/; the folders by package."""
    from diffusion_infill.model.training.corpus.sources import _download_wheels, archive_in

    wheels.mkdir(parents=True, exist_ok=True)
    missing = [f"{n}=={v}" for n, (v, _, _) in PACKAGES.items() if not archive_in(wheels, n, v)]
    if missing:
        _download_wheels(wheels, missing)
    out = {}
    for name, (version, _, _) in PACKAGES.items():
        wheel = archive_in(wheels, name, version)
        if wheel is None:
            raise SystemExit(f"{name}=={version}: no wheel in {wheels} (pip download failed)")
        folder = data / name
        for rel, text in _source_files(wheel).items():
            target = folder / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.is_file() or target.read_text(errors="replace") != text:
                target.write_text(text)
        out[name] = folder
    return out


def package_files(folder: Path) -> dict[str, str]:
    """The .py files of an unpacked package: path relative to its folder -> text."""
    return {
        p.relative_to(folder).as_posix(): p.read_text(errors="replace")
        for p in sorted(folder.rglob("*.py"))
    }


def repo_holes(
    split: str,
    shape: str,
    n: int,
    seed: int = 0,
    data: Path = DATA,
    window_chars: int = HELDOUT_WINDOW_CHARS,
) -> list[RepoHole]:
    """`n` holes of `shape` in the files of `split`'s packages (at most PER_FILE a file),
    shuffled by `seed`."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; one of {', '.join(SPLITS)}")
    pool: list[RepoHole] = []
    for name, (_, _, where) in PACKAGES.items():
        if where != split:
            continue
        for k, (rel, text) in enumerate(package_files(data / name).items()):
            if text.count("\n") < 20 or rel.endswith("__init__.py") and text.count("\n") < 60:
                continue
            found = shape_examples(
                [text], shape, PER_FILE, seed=seed + k, window_chars=window_chars
            )
            unique = {(e.start, e.end, e.text): e for e in found}
            pool += [RepoHole(name, rel, e) for e in unique.values()]
    random.Random(seed).shuffle(pool)
    return pool[:n]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--wheels", type=Path, default=WHEELS)
    args = parser.parse_args(argv)
    folders = build(args.data, args.wheels)
    for name, folder in folders.items():
        files = package_files(folder)
        lines = sum(t.count("\n") for t in files.values())
        version, licence, split = PACKAGES[name]
        print(f"{name}=={version} ({licence}, {split}): {len(files)} files, {lines} lines")
    print(f"-> {args.data}", file=sys.stderr)


if __name__ == "__main__":
    main()
