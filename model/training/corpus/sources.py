"""Getting the sources: pinned archives fetched with `pip download` into a cache (the only
network use), their .py files and metadata read, and the standard library's files."""

from __future__ import annotations

import re
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from diffusion_infill.model.training.corpus.exclusions import benchmark_named
from diffusion_infill.model.training.corpus.licences import licence_of
from diffusion_infill.model.training.corpus.packages import (
    PACKAGES,
    SDISTS,
    SKIP_DIRS,
    STDLIB_SKIP,
    TEST_UNITS,
    VALID_UNITS,
    canonical,
)
from diffusion_infill.model.training.corpus.records import Source, SourceFile, is_test_path

# --- fetching -----------------------------------------------------------------------------


def archive_in(
    cache: Path, name: str, version: str, sdists: frozenset[str] = SDISTS
) -> Path | None:
    """The cached archive of `name`==`version` in the form `sdists` asks for, if any: that
    version exactly (1.1 is not 1.1.1 or 1.1.post1)."""
    want_sdist = name in sdists
    for path in sorted(cache.iterdir()):
        is_wheel = path.name.endswith(".whl")
        is_sdist = path.name.endswith((".tar.gz", ".zip", ".tar.bz2"))
        if (want_sdist and not is_sdist) or (not want_sdist and not is_wheel):
            continue
        if name_version(path.name) == (canonical(name), canonical(version)):
            return path
    return None


def name_version(filename: str) -> tuple[str, str] | None:
    """(name, version) of an archive's file name, both canonical: a wheel's name holds no
    `-` (name-version-[build-]python-abi-platform), an sdist's version follows its last."""
    stem = re.sub(r"\.(tar\.gz|tar\.bz2|zip|whl)$", "", filename)
    if filename.endswith(".whl"):
        parts = stem.split("-")
        return (canonical(parts[0]), canonical(parts[1])) if len(parts) >= 5 else None
    name, dash, version = stem.rpartition("-")
    return (canonical(name), canonical(version)) if dash else None


def _pip_download(cache: Path, specs: list[str], *options: str, check: bool = True) -> None:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--no-deps",
        "--dest",
        str(cache),
        *options,
        *specs,
    ]
    subprocess.run(cmd, check=check)


def _download_wheels(cache: Path, specs: list[str]) -> None:
    """All in one pip call; if that fails, one at a time, so that the missing ones are known."""
    try:
        _pip_download(cache, specs, "--only-binary=:all:")
    except subprocess.CalledProcessError:
        for spec in specs:
            _pip_download(cache, [spec], "--only-binary=:all:", check=False)


def _download_sdist(cache: Path, name: str, version: str) -> None:
    # One at a time: --no-binary also reaches the build environment, where it must not
    # force other packages of this list (packaging, pluggy, ...) to source.
    _pip_download(cache, [f"{name}=={version}"], "--no-binary", name, check=False)


def fetch(
    cache: Path, packages: Mapping[str, str] | None = None, sdists: frozenset[str] = SDISTS
) -> dict[str, Path]:
    """Download every pinned archive into `cache` (skipping those already there)."""
    packages = PACKAGES if packages is None else packages
    cache.mkdir(parents=True, exist_ok=True)
    missing = [n for n, v in packages.items() if archive_in(cache, n, v, sdists) is None]
    wheels = [f"{n}=={packages[n]}" for n in missing if n not in sdists]
    if wheels:
        _download_wheels(cache, wheels)
    for name in (n for n in missing if n in sdists):
        _download_sdist(cache, name, packages[name])
    found = {n: archive_in(cache, n, v, sdists) for n, v in packages.items()}
    absent = sorted(n for n, p in found.items() if p is None)
    if absent:
        raise SystemExit(f"could not fetch: {', '.join(absent)}")
    return {n: p for n, p in found.items() if p is not None}


# --- reading ------------------------------------------------------------------------------


def _members(archive: Path) -> Iterator[tuple[str, bytes]]:
    """(path, bytes) of every file in a wheel, zip or tarball; the bytes of .py and
    metadata files only (b"" for the others, whose names are checked for benchmarks)."""
    if archive.name.endswith((".whl", ".zip")):
        with zipfile.ZipFile(archive) as zf:
            for name in zf.namelist():
                wanted = name.endswith((".py", "METADATA", "PKG-INFO"))
                yield name, zf.read(name) if wanted else b""
    else:
        with tarfile.open(archive) as tf:
            for member in tf:
                if not member.isfile():
                    continue
                handle = (
                    tf.extractfile(member) if member.name.endswith((".py", "PKG-INFO")) else None
                )
                yield member.name, handle.read() if handle is not None else b""


def _is_metadata(kind: str, parts: list[str]) -> bool:
    """The wheel's .dist-info/METADATA or the sdist's top-level PKG-INFO."""
    if kind == "sdist":
        return parts == ["PKG-INFO"]
    return len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] == "METADATA"


def archive_files(archive: Path, unit: str, version: str) -> tuple[Source, list[tuple[str, str]]]:
    """The unit's Source record and its (path, text) .py files, vendored folders skipped.

    Sdist paths lose their top folder ("name-1.0/"). The licence comes from the wheel's
    .dist-info/METADATA or the sdist's top-level PKG-INFO."""
    kind = "wheel" if archive.name.endswith(".whl") else "sdist"
    metadata, files, bundles = "", [], ""
    for name, data in _members(archive):
        parts = name.split("/")
        if kind == "sdist":
            parts = parts[1:]
        benchmark = None if bundles else benchmark_named("/".join(parts))
        if benchmark:
            bundles = f"{benchmark}: {'/'.join(parts)}"
        if _is_metadata(kind, parts):
            metadata = data.decode("utf-8", "replace")
            continue
        if not parts or not parts[-1].endswith(".py") or SKIP_DIRS.intersection(parts[:-1]):
            continue
        try:
            files.append(("/".join(parts), data.decode("utf-8")))
        except UnicodeDecodeError:
            continue
    source = Source(
        unit, version, licence_of(metadata) if metadata else "unknown", kind, bundles=bundles
    )
    source.files = len(files)
    source.tests = sum(is_test_path(p) for p, _ in files)
    return source, files


def stdlib_test_skipped(rel: tuple[str, ...]) -> bool:
    """Lib/test parts that test a held-out module: test_json/, test_email/, test_csv.py, ..."""
    held = [u.split("/", 1)[1] for u in TEST_UNITS | VALID_UNITS if u.startswith("stdlib/")]
    return (
        len(rel) > 1
        and rel[0] == "test"
        and any(
            rel[1] == f"test_{m}" or rel[1] == f"test_{m}.py" or rel[1].startswith(f"test_{m}_")
            for m in held
        )
    )


def stdlib_files(root: Path | None = None) -> Iterator[SourceFile]:
    """The standard library's .py files, one unit per top-level module (`root`: its folder,
    by default the building interpreter's)."""
    root = Path(sysconfig.get_paths()["stdlib"]) if root is None else root
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).parts
        if rel[0] in STDLIB_SKIP or rel[0].startswith("config-") or stdlib_test_skipped(rel):
            continue
        unit = "stdlib/" + (rel[0][:-3] if len(rel) == 1 else rel[0])
        try:
            yield SourceFile(unit, "/".join(rel), path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, OSError):
            continue
