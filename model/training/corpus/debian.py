"""Debian python3-* packages as a source: pinned binary packages fetched with
`apt-get download` at build time (the only network use besides pip), their
/usr/lib/python3/dist-packages/ .py files read, and their licence taken from the package's
debian/copyright, which must be machine-readable (DEP-5) with every stanza that covers
upstream files under a permissive licence."""

from __future__ import annotations

import io
import re
import subprocess
import tarfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from diffusion_infill.model.training.corpus.exclusions import benchmark_named
from diffusion_infill.model.training.corpus.licences import licence_allowed
from diffusion_infill.model.training.corpus.packages import SKIP_DIRS
from diffusion_infill.model.training.corpus.records import Source, is_test_path

DEP5_FORMAT = re.compile(
    r"^Format:\s*https?://(www\.)?debian\.org/doc/packaging-manuals/"
    r"copyright-format/1\.0/?\s*$",
    re.MULTILINE,
)
PYTHON_ROOTS = ("usr/lib/python3/dist-packages/",)
# Debian's short licence names that the licence policy (licences.py) spells otherwise.
DEBIAN_NAMES = {
    "expat": "MIT",
    "mit/expat": "MIT",
    "public-domain": "Public Domain",
    "psf-2": "PSF-2.0",
    "python": "PSF",
    "apache": "Apache",
}


@dataclass
class Copyright:
    """A parsed DEP-5 debian/copyright: the header's Upstream-Name and the licence of
    every Files stanza (by its patterns)."""

    upstream: str = ""
    stanzas: list[tuple[list[str], str]] = field(default_factory=list)

    def upstream_licences(self) -> list[str]:
        """The licences of the stanzas that cover upstream files (not only debian/*)."""
        return [
            lic
            for files, lic in self.stanzas
            if not all(f == "debian" or f.startswith("debian/") for f in files)
        ]


def _paragraphs(text: str) -> Iterator[dict[str, str]]:
    """RFC 822-style paragraphs: field -> value (first line; continuation lines dropped,
    which in DEP-5 hold only Files patterns and licence texts)."""
    for block in re.split(r"\n\s*\n", text.strip()):
        fields: dict[str, str] = {}
        last = ""
        for line in block.splitlines():
            if line.startswith(("#",)):
                continue
            if line[:1] in (" ", "\t"):
                if last == "files":
                    fields["files"] += " " + line.strip()
                continue
            key, _, value = line.partition(":")
            last = key.strip().lower()
            fields[last] = value.strip()
        if fields:
            yield fields


def parse_dep5(text: str) -> Copyright | None:
    """The copyright file parsed, or None if it is not machine-readable (DEP-5)."""
    if not DEP5_FORMAT.search(text.split("\n\n", 1)[0]):
        return None
    paragraphs = list(_paragraphs(text))
    parsed = Copyright(upstream=paragraphs[0].get("upstream-name", ""))
    for para in paragraphs[1:]:
        if "files" in para:
            parsed.stanzas.append((para["files"].split(), para.get("license", "")))
    return parsed


def spdx_like(licence: str) -> str:
    """A Debian licence expression in the words licences.py knows: Expat as MIT, `or` as
    OR, `and` as AND ("Expat or GPL-2+" -> "MIT OR GPL-2+")."""
    words = []
    for word in licence.split():
        low = word.lower().rstrip(",")
        words.append(
            "OR" if low == "or" else "AND" if low == "and" else DEBIAN_NAMES.get(low, word)
        )
    return " ".join(words)


def dep5_licence(text: str) -> str:
    """The package's licence for the record: "; "-joined upstream stanza licences, or
    "not DEP-5" / "unknown" when it cannot be read."""
    parsed = parse_dep5(text) if text else None
    if parsed is None:
        return "not DEP-5" if text else "unknown"
    names = list(dict.fromkeys(spdx_like(lic) for lic in parsed.upstream_licences()))
    return "; ".join(names) or "unknown"


def dep5_allowed(licence: str) -> bool:
    """Every upstream stanza's licence allowed on its own (licences.licence_allowed):
    one copyleft stanza drops the package."""
    if licence in ("not DEP-5", "unknown"):
        return False
    return all(licence_allowed(part) for part in licence.split("; "))


def _ar_members(data: bytes) -> Iterator[tuple[str, bytes]]:
    """The members of an ar archive (a .deb is one)."""
    if not data.startswith(b"!<arch>\n"):
        raise ValueError("not an ar archive")
    pos = 8
    while pos + 60 <= len(data):
        header = data[pos : pos + 60]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        yield name, data[pos + 60 : pos + 60 + size]
        pos += 60 + size + (size % 2)


def deb_members(deb: Path) -> Iterator[tuple[str, bytes]]:
    """(path without the leading ./, bytes) of every regular file in a .deb's data.tar."""
    for name, payload in _ar_members(deb.read_bytes()):
        if name.startswith("data.tar"):
            with tarfile.open(fileobj=io.BytesIO(payload)) as tf:
                for member in tf:
                    handle = tf.extractfile(member) if member.isfile() else None
                    if handle is not None:
                        yield member.name.removeprefix("./"), handle.read()


def deb_files(
    deb: Path, unit: str, version: str
) -> tuple[Source, list[tuple[str, str]], list[str]]:
    """The unit's Source record (licence from DEP-5), its (path, text) .py files under
    dist-packages (vendored folders skipped), and its project names: the Debian name, the
    Upstream-Name, the .dist-info / .egg-info names and the top-level import names."""
    package = unit.rpartition("/")[2]
    copyright_text, files, names, bundles = "", [], [package], ""
    for path, data in deb_members(deb):
        benchmark = None if bundles else benchmark_named(path)
        if benchmark:
            bundles = f"{benchmark}: {path}"
        if path == f"usr/share/doc/{package}/copyright":
            copyright_text = data.decode("utf-8", "replace")
            continue
        root = next((r for r in PYTHON_ROOTS if path.startswith(r)), None)
        if root is None:
            continue
        parts = path[len(root) :].split("/")
        top = re.sub(r"\.(dist|egg)-info$", "", re.sub(r"-\d.*$", "", parts[0]))
        names.append(top.removesuffix(".py"))
        if not parts[-1].endswith(".py") or SKIP_DIRS.intersection(parts[:-1]):
            continue
        try:
            files.append(("/".join(parts), data.decode("utf-8")))
        except UnicodeDecodeError:
            continue
    parsed = parse_dep5(copyright_text) if copyright_text else None
    if parsed is not None and parsed.upstream:
        names.append(parsed.upstream)
    source = Source(unit, version, dep5_licence(copyright_text), "deb", bundles=bundles)
    source.files = len(files)
    source.tests = sum(is_test_path(p) for p, _ in files)
    return source, files, list(dict.fromkeys(names))


def deb_in(cache: Path, name: str, version: str) -> Path | None:
    """The cached .deb of `name`=`version` (apt writes the epoch's colon as %3a)."""
    stem = f"{name}_{version.replace(':', '%3a')}_"
    return next((p for p in sorted(cache.glob(f"{name}_*.deb")) if p.name.startswith(stem)), None)


def _apt_download(cache: Path, specs: list[str]) -> bool:
    done = subprocess.run(
        ["apt-get", "download", "-qq", *specs],
        cwd=cache,
        check=False,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return done.returncode == 0


def fetch_debs(cache: Path, packages: Mapping[str, str]) -> dict[str, Path]:
    """`apt-get download name=version` for the pinned packages not yet in `cache` (all in
    one call; if that fails, one at a time); those the archive no longer has are left out
    (and reported by the caller)."""
    cache.mkdir(parents=True, exist_ok=True)
    missing = [f"{n}={v}" for n, v in packages.items() if deb_in(cache, n, v) is None]
    if missing and not _apt_download(cache, missing):
        for spec in missing:
            _apt_download(cache, [spec])
    found = {n: deb_in(cache, n, v) for n, v in packages.items()}
    return {n: p for n, p in found.items() if p is not None}
