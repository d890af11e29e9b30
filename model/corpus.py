"""Build the training corpus: Python sources from the standard library and pinned PyPI packages.

Reproducible: the package list and versions are pinned below, archives (wheels, or source
distributions where only those ship the tests) are fetched with `pip download` (the only
network use, at build time, never at run time), and the split is by *unit* (a PyPI
distribution, or one top-level standard-library module), so no evaluated file shares a
package with a trained one. Test folders are included; vendored copies of other projects
are not, and a training file that duplicates or nearly duplicates a held-out file is dropped.

    python -m model.corpus --out data/corpus_v2 --cache data/sources

writes train/valid/test.jsonl ({"unit", "path", "text"} per line), split.json,
licences.json and stats.json, and prints a summary. docs/DATA_CARD.md describes the result.
"""

from __future__ import annotations

import argparse
import email.parser
import hashlib
import json
import re
import resource
import subprocess
import sys
import sysconfig
import tarfile
import time
import zipfile
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

# Mostly pure-Python distributions, pinned for reproducibility. The licence is read from
# each archive's metadata at build time; copyleft ones are listed on purpose so that the
# data card records them as dropped.
PACKAGES: dict[str, str] = {
    # v1 (2024-10): held-out units and the original training packages
    "requests": "2.32.3",
    "urllib3": "2.2.3",
    "idna": "3.10",
    "click": "8.1.7",
    "flask": "3.0.3",
    "werkzeug": "3.0.6",
    "jinja2": "3.1.4",
    "itsdangerous": "2.2.0",
    "attrs": "24.2.0",
    "packaging": "24.1",
    "pyparsing": "3.1.4",
    "python-dateutil": "2.9.0.post0",
    "six": "1.16.0",
    "pygments": "2.18.0",
    "rich": "13.9.2",
    "typer": "0.12.5",
    "httpx": "0.27.2",
    "httpcore": "1.0.6",
    "anyio": "4.6.2.post1",
    "h11": "0.14.0",
    "toolz": "1.0.0",
    "more-itertools": "10.5.0",
    "boltons": "24.0.0",
    "setuptools": "75.1.0",
    "wheel": "0.44.0",
    "isort": "5.13.2",
    "pyflakes": "3.2.0",
    "pycodestyle": "2.12.1",
    "jedi": "0.19.1",
    "parso": "0.8.4",
    "django": "5.1.2",
    "sphinx": "8.0.2",
    "babel": "2.16.0",
    "networkx": "3.4.2",
    "sympy": "1.13.3",
    "pytest": "8.3.3",
    "pluggy": "1.5.0",
    "marshmallow": "3.23.0",
    "arrow": "1.3.0",
    "tomlkit": "0.13.2",
    "cachetools": "5.5.0",
    "tenacity": "9.0.0",
    "bottle": "0.13.2",
    "fsspec": "2024.10.0",
    "starlette": "0.41.0",
    "fastapi": "0.115.2",
    "decorator": "5.1.1",
    "pexpect": "4.9.0",
    "prompt-toolkit": "3.0.48",
    "traitlets": "5.14.3",
    "numpy": "2.1.2",
    "pandas": "2.2.3",
    "sqlalchemy": "2.0.35",
    "pydantic": "2.9.2",
    "tornado": "6.4.1",
    "twisted": "24.7.0",
    "scikit-learn": "1.5.2",
    "matplotlib": "3.9.2",
    "alembic": "1.13.3",
    "mypy": "1.13.0",
    "celery": "5.4.0",
    "kombu": "5.4.2",
    "scrapy": "2.11.2",
    "nltk": "3.9.1",
    "aiohttp": "3.10.10",
    # v2: scientific stack
    "scipy": "1.14.1",
    "statsmodels": "0.14.4",
    "astropy": "6.1.4",
    "xarray": "2024.10.0",
    "dask": "2024.10.0",
    "distributed": "2024.10.0",
    "bokeh": "3.6.0",
    "scikit-image": "0.24.0",
    "pyarrow": "17.0.0",
    "numba": "0.60.0",
    "pyomo": "6.8.0",
    # v2: machine learning
    "transformers": "4.46.1",
    "datasets": "3.0.2",
    "accelerate": "1.0.1",
    "jax": "0.4.35",
    "flax": "0.10.0",
    "optax": "0.2.3",
    "keras": "3.6.0",
    "mlflow": "2.17.1",
    # v2: web, network, services
    "gunicorn": "23.0.0",
    "uvicorn": "0.32.0",
    "websockets": "13.1",
    "aiofiles": "24.1.0",
    "trio": "0.27.0",
    "pyramid": "2.0.2",
    "falcon": "3.1.3",
    "sanic": "24.6.0",
    "djangorestframework": "3.15.2",
    "wagtail": "6.2.2",
    "graphene": "3.3",
    "zope-interface": "7.1.1",
    "google-auth": "2.35.0",
    "oauthlib": "3.2.2",
    "pyjwt": "2.9.0",
    "redis": "5.2.0",
    "pymongo": "4.10.1",
    "peewee": "3.17.7",
    "sqlparse": "0.5.1",
    "sqlglot": "25.27.0",
    "beautifulsoup4": "4.12.3",
    "html5lib": "1.1",
    "botocore": "1.35.50",
    "boto3": "1.35.50",
    "s3transfer": "0.10.3",
    "moto": "5.0.18",
    "docker": "7.1.0",
    "sentry-sdk": "2.17.0",
    "cryptography": "43.0.3",
    "pyyaml": "6.0.2",
    "jsonschema": "4.23.0",
    "markdown": "3.7",
    "mkdocs": "1.6.1",
    "pendulum": "3.0.0",
    "pillow": "11.0.0",
    "openpyxl": "3.1.5",
    "xlsxwriter": "3.2.0",
    "psutil": "6.1.0",
    # v2: tooling, packaging, testing
    "pip": "24.2",
    "poetry-core": "1.9.1",
    "black": "24.10.0",
    "coverage": "7.6.4",
    "tox": "4.23.2",
    "virtualenv": "20.27.0",
    "nox": "2024.10.9",
    "invoke": "2.2.0",
    "fabric": "3.2.2",
    "cython": "3.0.11",
    "typing-extensions": "4.12.2",
    "factory-boy": "3.3.1",
    "pytest-asyncio": "0.24.0",
    "pytest-mock": "3.14.0",
    "pytest-xdist": "3.6.1",
    # v2: notebooks and applications
    "ipython": "8.28.0",
    "ipykernel": "6.29.5",
    "ipywidgets": "8.1.5",
    "jupyter-client": "8.6.3",
    "jupyter-core": "5.7.2",
    "jupyter-server": "2.14.2",
    "nbformat": "5.10.4",
    "nbconvert": "7.16.4",
    "luigi": "3.5.2",
    "apache-airflow": "2.10.2",
    "prefect": "3.0.10",
    "dvc": "3.56.0",
    # copyleft or weak copyleft: fetched so the card records them, then dropped
    "tqdm": "4.66.5",
    "hypothesis": "6.115.5",
    "certifi": "2024.8.30",
    "paramiko": "3.5.0",
    "pylint": "3.3.1",
    "docutils": "0.21.2",
    "psycopg": "3.2.3",
}

# Fetched as source distributions: their wheels leave the tests out, the sdists ship them.
# Held-out units stay on their wheels, so valid/test hold the same code as in v1.
SDISTS = frozenset({
    "urllib3", "idna", "flask", "werkzeug", "jinja2", "packaging", "pyparsing", "six",
    "pygments", "typer", "httpx", "httpcore", "anyio", "boltons", "wheel", "isort",
    "pycodestyle", "django", "sphinx", "babel", "pytest", "pluggy", "marshmallow", "arrow",
    "tomlkit", "cachetools", "tenacity", "bottle", "starlette", "fastapi", "decorator",
    "pexpect", "prompt-toolkit", "sqlalchemy", "pydantic", "alembic", "celery", "kombu",
    "scrapy", "aiohttp",
    "gunicorn", "uvicorn", "websockets", "pyramid", "falcon", "sanic", "djangorestframework",
    "google-auth", "oauthlib", "redis", "pymongo", "peewee", "sqlparse", "sqlglot",
    "markdown", "pillow", "coverage", "tox", "virtualenv", "nox", "invoke", "fabric",
    "typing-extensions", "factory-boy", "pytest-asyncio", "pytest-mock", "pytest-xdist",
    "luigi",
})

# Held-out units. Everything else is training data.
TEST_UNITS = frozenset(
    {"click", "attrs", "more-itertools", "requests", "stdlib/json", "stdlib/email"}
)
VALID_UNITS = frozenset({"itsdangerous", "h11", "toolz", "stdlib/csv", "stdlib/argparse"})
# Import names of the held-out distributions: a folder of that name inside another unit is
# a copy of held-out code (vendored under a name SKIP_DIRS does not know) and is dropped.
HELD_OUT_PACKAGES = frozenset(
    {"click", "attr", "attrs", "more_itertools", "requests", "itsdangerous", "h11", "toolz",
     "tlz"}
)

# Standard-library folders that are not hand-written library code worth learning from.
# Lib/test is included (as the unit "stdlib/test"), less the tests of held-out modules.
STDLIB_SKIP = frozenset(
    {"encodings", "pydoc_data", "site-packages", "lib-dynload", "idlelib",
     "turtledemo", "__pycache__", "ensurepip", "lib2to3", "tkinter"}
)

# Folders holding vendored copies of other projects, skipped anywhere in an archive (they
# would also leak a held-out package into training through the package that vendors it).
SKIP_DIRS = frozenset({"_vendor", "vendor", "_vendored", "vendored", "extern", "_extern",
                       "externals", "third_party", "_third_party", "thirdparty",
                       "node_modules", "site-packages", "__pycache__"})

PERMISSIVE = re.compile(
    r"\b(MIT|BSD|0BSD|Apache|PSF|Python Software Foundation|Python-2\.0|ISC|Unlicense|Zlib|"
    r"Public Domain|HPND|Historical Permission|ZPL|Zope Public License|Repoze|BSL-1\.0|"
    r"Boost Software License|CC0)\b",
    re.IGNORECASE,
)
# Copyleft, weak copyleft included: MPL, EPL, CDDL and the GPL family are not kept.
COPYLEFT = re.compile(
    r"(\b(A?GPL|LGPL|SSPL|EUPL|CC-BY-SA|MPL|EPL|CDDL|OSL)|\bGNU\b|General Public License|"
    r"Mozilla Public|Eclipse Public|Commons Clause|Server Side Public)",
    re.IGNORECASE,
)
GENERATED = re.compile(
    r"(generated by|auto-?generated|do not edit|automatically generated|code generator)",
    re.IGNORECASE,
)
GENERATED_NAMES = re.compile(r"_pb2(_grpc)?\.py$")

MIN_CHARS = 200  # shorter files are mostly empty __init__.py
MAX_CHARS = 300_000  # larger ones are data tables
MAX_LINE = 1_000  # a line this long means minified or generated content
NEAR_DUP_JACCARD = 0.85  # line-set similarity above which two files count as one
# Stricter for leakage: a training file this close to a held-out file is dropped.
CROSS_SPLIT_JACCARD = 0.7
LSH_BANDS, LSH_ROWS = 16, 4  # 64 MinHash values; P(candidate | J=0.7) = 0.99
MAX_TRAIN_CANDIDATES = 64  # train-vs-train comparisons per file (held-out: all)
SPLITS = ("test", "valid", "train")  # processing order: held-out files win dedupe


@dataclass(frozen=True)
class SourceFile:
    unit: str  # split unit: a distribution name or "stdlib/<module>"
    path: str  # path inside the unit, for the record
    text: str


@dataclass
class Source:
    """One unit's archive (or the standard library) as read: what the card records."""

    unit: str
    version: str
    licence: str
    kind: str  # "wheel", "sdist" or "stdlib"
    kept: str = "yes"
    files: int = 0  # .py files read (before filters)
    tests: int = 0  # of which under a test folder or named test_*.py / *_test.py


def canonical(name: str) -> str:
    """PEP 503 name: lower case, runs of -_. as one -."""
    return re.sub(r"[-_.]+", "-", name).lower()


def split_of(unit: str) -> str:
    if unit in TEST_UNITS:
        return "test"
    if unit in VALID_UNITS:
        return "valid"
    return "train"


def licence_of(metadata: str) -> str:
    """The licence named in METADATA / PKG-INFO: License-Expression, classifiers, License."""
    headers = email.parser.HeaderParser().parsestr(metadata)
    found = [headers.get("License-Expression", "")]
    found += [c.split("::")[-1].strip() for c in headers.get_all("Classifier", [])
              if c.startswith("License ::")]
    licence_field = (headers.get("License") or "").strip()
    if licence_field and licence_field.upper() != "UNKNOWN":
        found.append(licence_field.splitlines()[0][:120])
    return "; ".join(dict.fromkeys(f for f in found if f)) or "unknown"


def _permissive(text: str) -> bool:
    return bool(PERMISSIVE.search(text)) and not COPYLEFT.search(text)


def licence_allowed(licence: str) -> bool:
    """Permissive and nothing copyleft named; or an SPDX `A OR B` with a permissive choice.

    "MPL-2.0 AND MIT" (both apply) is dropped; "MPL-2.0 OR MIT" is kept, since the MIT
    alternative may be chosen. Classifiers cannot say AND or OR, so a classifier naming a
    copyleft licence drops the package unless one field is such an SPDX choice."""
    if _permissive(licence):
        return True
    for part in licence.split("; "):
        alternatives = re.split(r"\s+OR\s+", part.strip("() "))
        if len(alternatives) > 1 and any(_permissive(a) for a in alternatives):
            return True
    return False


def is_test_path(path: str) -> bool:
    parts = path.split("/")
    name = parts[-1]
    return (any(p.lower() in {"test", "tests", "testing", "t", "testsuite"} for p in parts[:-1])
            or name.startswith("test_") or name.endswith("_test.py"))


# --- fetching -----------------------------------------------------------------------------

def archive_in(cache: Path, name: str, version: str) -> Path | None:
    """The cached archive of `name`==`version` in the form SDISTS asks for, if any."""
    want_sdist = name in SDISTS
    prefix = f"{canonical(name)}-{canonical(version)}-"
    for path in sorted(cache.iterdir()):
        is_wheel = path.name.endswith(".whl")
        is_sdist = path.name.endswith((".tar.gz", ".zip", ".tar.bz2"))
        if (want_sdist and not is_sdist) or (not want_sdist and not is_wheel):
            continue
        stem = re.sub(r"\.(tar\.gz|tar\.bz2|zip|whl)$", "", path.name)
        if canonical(stem + "-").startswith(prefix):
            return path
    return None


def _pip_download(cache: Path, specs: list[str], *options: str) -> None:
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--dest",
           str(cache), *options, *specs]
    subprocess.run(cmd, check=True)


def fetch(cache: Path, packages: dict[str, str] | None = None) -> dict[str, Path]:
    """Download every pinned archive into `cache` (skipping those already there)."""
    packages = PACKAGES if packages is None else packages
    cache.mkdir(parents=True, exist_ok=True)
    missing = [n for n, v in packages.items() if archive_in(cache, n, v) is None]
    wheels = [f"{n}=={packages[n]}" for n in missing if n not in SDISTS]
    if wheels:
        try:
            _pip_download(cache, wheels, "--only-binary=:all:")
        except subprocess.CalledProcessError:  # find which: one at a time
            for spec in wheels:
                subprocess.run([sys.executable, "-m", "pip", "download", "--quiet",
                                "--no-deps", "--only-binary=:all:", "--dest", str(cache),
                                spec], check=False)
    for name in (n for n in missing if n in SDISTS):
        # One at a time: --no-binary also reaches the build environment, where it must
        # not force other packages of this list (packaging, pluggy, ...) to source.
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "--no-binary", name, "--dest", str(cache),
                        f"{name}=={packages[name]}"], check=False)
    found = {n: archive_in(cache, n, v) for n, v in packages.items()}
    absent = sorted(n for n, p in found.items() if p is None)
    if absent:
        raise SystemExit(f"could not fetch: {', '.join(absent)}")
    return {n: p for n, p in found.items() if p is not None}


# --- reading ------------------------------------------------------------------------------

def _members(archive: Path) -> Iterator[tuple[str, bytes]]:
    """(path, bytes) of every .py file and metadata file in a wheel, zip or tarball."""
    if archive.name.endswith((".whl", ".zip")):
        with zipfile.ZipFile(archive) as zf:
            for name in zf.namelist():
                if name.endswith((".py", "METADATA", "PKG-INFO")):
                    yield name, zf.read(name)
    else:
        with tarfile.open(archive) as tf:
            for member in tf:
                if member.isfile() and member.name.endswith((".py", "PKG-INFO")):
                    handle = tf.extractfile(member)
                    if handle is not None:
                        yield member.name, handle.read()


def archive_files(archive: Path, unit: str, version: str
                  ) -> tuple[Source, list[tuple[str, str]]]:
    """The unit's Source record and its (path, text) .py files, vendored folders skipped.

    Sdist paths lose their top folder ("name-1.0/"). The licence comes from the wheel's
    .dist-info/METADATA or the sdist's top-level PKG-INFO."""
    kind = "wheel" if archive.name.endswith(".whl") else "sdist"
    metadata, files = "", []
    for name, data in _members(archive):
        parts = name.split("/")
        if kind == "sdist":
            parts = parts[1:]
        if (kind == "wheel" and len(parts) == 2 and parts[0].endswith(".dist-info")
                and parts[1] == "METADATA") or (kind == "sdist" and parts == ["PKG-INFO"]):
            metadata = data.decode("utf-8", "replace")
            continue
        if not parts or not parts[-1].endswith(".py") or SKIP_DIRS.intersection(parts[:-1]):
            continue
        try:
            files.append(("/".join(parts), data.decode("utf-8")))
        except UnicodeDecodeError:
            continue
    source = Source(unit, version, licence_of(metadata) if metadata else "unknown", kind)
    source.files = len(files)
    source.tests = sum(is_test_path(p) for p, _ in files)
    return source, files


def stdlib_test_skipped(rel: tuple[str, ...]) -> bool:
    """Lib/test parts that test a held-out module: test_json/, test_email/, test_csv.py, ..."""
    held = [u.split("/", 1)[1] for u in TEST_UNITS | VALID_UNITS if u.startswith("stdlib/")]
    return len(rel) > 1 and rel[0] == "test" and any(
        rel[1] == f"test_{m}" or rel[1] == f"test_{m}.py" or rel[1].startswith(f"test_{m}_")
        for m in held)


def stdlib_files(root: Path | None = None) -> Iterator[SourceFile]:
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


# --- filters ------------------------------------------------------------------------------

def normalise(text: str) -> str:
    """Line endings normalised to \\n; the text is otherwise kept byte for byte."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def keep(text: str, path: str = "") -> bool:
    """Drop tiny, huge, minified and generated files."""
    if not MIN_CHARS <= len(text) <= MAX_CHARS:
        return False
    if GENERATED_NAMES.search(path):
        return False
    if max(map(len, text.splitlines()), default=0) > MAX_LINE:
        return False
    head = "\n".join(text.splitlines()[:10])
    return not GENERATED.search(head)


def holds_held_out_copy(unit: str, path: str, packages: set[str]) -> bool:
    """A held-out package inside another unit: a vendored copy under another folder name.

    `packages`: the unit's folders that hold an __init__.py. Only a Python package named
    after a held-out one counts (gunicorn's tests/requests/ fixtures are not a copy)."""
    if split_of(unit) != "train":
        return False
    parts = path.split("/")[:-1]
    return any(part in HELD_OUT_PACKAGES and "/".join(parts[:i + 1]) in packages
               for i, part in enumerate(parts))


# --- deduplication ------------------------------------------------------------------------

def line_hashes(text: str) -> np.ndarray:
    """Sorted unique 64-bit hashes of the stripped non-empty lines."""
    lines = {ln.strip() for ln in text.splitlines()}
    lines.discard("")
    hashes = np.fromiter(
        (int.from_bytes(hashlib.blake2b(s.encode(), digest_size=8).digest(), "little")
         for s in lines),
        dtype=np.uint64, count=len(lines),
    )
    return np.unique(hashes)


def minhash(hashes: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """MinHash signature of a set of line hashes: (len(seeds),) uint64."""
    if hashes.size == 0:
        return np.zeros(len(seeds), dtype=np.uint64)
    mixed = (hashes[None, :] ^ seeds[:, None]) * np.uint64(0x9E3779B97F4A7C15)  # (S, N)
    return mixed.min(axis=1)


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    inter = np.intersect1d(a, b, assume_unique=True).size
    return inter / max(1, a.size + b.size - inter)


def deduplicate(files: list[SourceFile], counts: Counter | None = None) -> list[SourceFile]:
    """Remove exact duplicates, then near duplicates (MinHash LSH on the set of lines).

    Files are taken split by split, test then valid then train, so a held-out file always
    wins over a training copy of it. A training file is dropped if it is an exact copy of
    a held-out file or has line-set Jaccard >= CROSS_SPLIT_JACCARD with one (every held-out
    candidate is checked); among files of one split, >= NEAR_DUP_JACCARD drops the later."""
    counts = Counter() if counts is None else counts
    rank = {s: i for i, s in enumerate(SPLITS)}
    files = sorted(files, key=lambda f: rank[split_of(f.unit)])  # stable within a split
    seen: dict[str, str] = {}
    exact: list[SourceFile] = []
    for f in files:
        digest = hashlib.sha256(f.text.encode()).hexdigest()
        split = split_of(f.unit)
        if digest in seen:
            counts[f"exact duplicate ({split} of {seen[digest]})"] += 1
            continue
        seen[digest] = split
        exact.append(f)
    del seen
    seeds = np.random.default_rng(0).integers(1, 2**63, size=LSH_BANDS * LSH_ROWS,
                                              dtype=np.uint64)
    held: dict[bytes, list[int]] = {}  # band key -> kept held-out files
    train: dict[bytes, list[int]] = {}  # band key -> kept training files
    hashes: list[np.ndarray] = []
    kept: list[SourceFile] = []
    for f in exact:
        h = line_hashes(f.text)
        sig = minhash(h, seeds)
        keys = [bytes([b]) + sig[b * LSH_ROWS:(b + 1) * LSH_ROWS].tobytes()
                for b in range(LSH_BANDS)]
        split = split_of(f.unit)
        i = len(hashes)
        reason = None
        cands = dict.fromkeys(j for k in keys for j in held.get(k, ()))
        for j in cands:
            other = split_of(kept[j].unit)
            limit = NEAR_DUP_JACCARD if other == split else CROSS_SPLIT_JACCARD
            if jaccard(h, hashes[j]) >= limit:
                reason = f"near duplicate ({split} of {other})"
                break
        if reason is None and split == "train":
            cands = dict.fromkeys(j for k in keys for j in train.get(k, ()))
            for j in list(cands)[:MAX_TRAIN_CANDIDATES]:
                if jaccard(h, hashes[j]) >= NEAR_DUP_JACCARD:
                    reason = "near duplicate (train of train)"
                    break
        if reason is not None:
            counts[reason] += 1
            continue
        buckets = train if split == "train" else held
        for k in keys:
            buckets.setdefault(k, []).append(i)
        hashes.append(h)
        kept.append(f)
    return kept


def leak_audit(files: list[SourceFile], min_len: int = 50) -> dict[str, object]:
    """What held-out code is left in train below the file level: training files that share a
    long (>= `min_len` characters, not a comment) line with a held-out file, and the most
    such lines any one training file has (a copied function shows up here)."""
    held: dict[str, str] = {}
    for f in files:
        if split_of(f.unit) != "train":
            for ln in f.text.splitlines():
                ln = ln.strip()
                if len(ln) >= min_len and not ln.startswith(("#", '"""', "'''")):
                    held.setdefault(ln, f.unit)
    sharing: Counter = Counter()
    for f in files:
        if split_of(f.unit) == "train":
            n = sum(1 for ln in {ln.strip() for ln in f.text.splitlines()} if ln in held)
            if n:
                sharing[f"{f.unit}:{f.path}"] = n
    return {"held_out_long_lines": len(held), "train_files_sharing": len(sharing),
            "most_shared": dict(sharing.most_common(5))}


# --- build --------------------------------------------------------------------------------

def collect(archives: Iterable[tuple[str, str, Path]], stdlib: Iterable[SourceFile],
            counts: Counter) -> tuple[list[Source], list[SourceFile]]:
    """Every unit's record, and its files after the cheap filters and the licence check."""
    sources = [Source("stdlib", sys.version.split()[0], "PSF-2.0", "stdlib")]
    files: list[SourceFile] = []

    def take(unit: str, path: str, text: str, packages: set[str]) -> None:
        if holds_held_out_copy(unit, path, packages):
            counts["copy of a held-out package"] += 1
            return
        text = normalise(text)
        if not keep(text, path):
            counts["size / long line / generated"] += 1
            return
        files.append(SourceFile(unit, path, text))

    for f in stdlib:
        sources[0].files += 1
        sources[0].tests += is_test_path(f.path)
        take(f.unit, f.path, f.text, set())
    for unit, version, archive in archives:
        source, contents = archive_files(archive, unit, version)
        sources.append(source)
        if not licence_allowed(source.licence):
            source.kept = "no (licence)"
            counts["licence"] += len(contents)
            continue
        packages = {p.rpartition("/")[0] for p, _ in contents if p.endswith("/__init__.py")}
        for path, text in contents:
            take(unit, path, text, packages)
    return sources, files


def build(out: Path, cache: Path, stdlib: Path | None = None) -> dict[str, dict[str, int]]:
    """Fetch, read, filter, deduplicate and write the corpus; `stdlib`: its root folder."""
    start = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    counts: Counter = Counter({k: 0 for k in (  # listed in the card even when none
        "copy of a held-out package", "exact duplicate (train of test)",
        "exact duplicate (train of valid)", "near duplicate (train of test)",
        "near duplicate (train of valid)")})
    times: dict[str, float] = {}
    clock = start

    def lap(name: str) -> None:
        nonlocal clock
        now = time.monotonic()
        times[name] = round(now - clock, 1)
        clock = now

    archives = fetch(cache)
    lap("fetch")
    sources, files = collect(
        ((canonical(n), PACKAGES[n], archives[n]) for n in sorted(archives)),
        stdlib_files(stdlib), counts)
    lap("read")
    files = deduplicate(files, counts)
    lap("deduplicate")
    audit = leak_audit(files)
    lap("audit")

    summary: dict[str, dict[str, int]] = {s: {"files": 0, "chars": 0} for s in SPLITS}
    per_unit: Counter = Counter()
    handles = {name: (out / f"{name}.jsonl").open("w") for name in SPLITS}
    units: dict[str, list[str]] = {name: [] for name in SPLITS}
    tests = Counter()
    for f in files:
        split = split_of(f.unit)
        handles[split].write(json.dumps(asdict(f)) + "\n")
        summary[split]["files"] += 1
        summary[split]["chars"] += len(f.text)
        per_unit[f.unit] += len(f.text)
        tests[split] += len(f.text) if is_test_path(f.path) else 0
        if f.unit not in units[split]:
            units[split].append(f.unit)
    for h in handles.values():
        h.close()
    for split in SPLITS:
        summary[split]["test_chars"] = tests[split]
    (out / "split.json").write_text(json.dumps({k: sorted(v) for k, v in units.items()},
                                               indent=1))
    licences = {s.unit: {k: v for k, v in asdict(s).items() if k != "unit"} for s in sources}
    (out / "licences.json").write_text(json.dumps(licences, indent=1, sort_keys=True))
    lap("write")
    stats = {
        "read": sum(s.files for s in sources), "dropped": dict(sorted(counts.items())),
        "kept": sum(s["files"] for s in summary.values()), "leak_audit": audit,
        "chars_per_unit": dict(per_unit.most_common()),
        "seconds": times, "build_s": round(time.monotonic() - start, 1),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
    }
    (out / "stats.json").write_text(json.dumps(stats, indent=1))
    return summary


def write_card(out: Path, card: Path, summary: dict[str, dict[str, int]]) -> None:
    """The data card: sources, licences, filters, split, sizes, leakage rules."""
    licences = json.loads((out / "licences.json").read_text())
    split = json.loads((out / "split.json").read_text())
    stats = json.loads((out / "stats.json").read_text())
    chars = stats["chars_per_unit"]
    audit = stats["leak_audit"]
    most = max(audit["most_shared"].values(), default=0)
    shared = ", ".join(f"{k}: {v}" for k, v in audit["most_shared"].items())

    def unit_chars(unit: str) -> float:
        if unit == "stdlib":
            return sum(v for k, v in chars.items() if k.startswith("stdlib/")) / 1e6
        return chars.get(unit, 0) / 1e6

    rows = "\n".join(
        f"| {unit} | {info['version']} | {info['kind']} | {info['licence']} | {info['kept']} | "
        f"{info['files']} ({info['tests']}) | {unit_chars(unit):.1f} | "
        f"{'by module' if unit == 'stdlib' else split_of(unit) if info['kept'] == 'yes' else '-'} |"
        for unit, info in sorted(licences.items())
    )
    dropped_units = sorted(u for u, i in licences.items() if i["kept"] != "yes")
    sizes = "\n".join(
        f"| {k} | {summary[k]['files']:,} | {summary[k]['chars'] / 1e6:.1f} M | "
        f"{summary[k]['test_chars'] / 1e6:.1f} M | {len(split[k])} |"
        for k in ("train", "valid", "test"))
    drops = "\n".join(f"| {k} | {v:,} |" for k, v in stats["dropped"].items())
    held_std = ", ".join(sorted(u for u in TEST_UNITS | VALID_UNITS if u.startswith("stdlib/")))
    card.write_text(f"""# Data card: the training corpus (v2)

Built by `python -m model.corpus --out data/corpus_v2 --cache data/sources`
(reproducible: pinned archives from PyPI, fetched with `pip download` at build time only;
the Python {licences['stdlib']['version']} standard library of the building interpreter).
The corpus itself is not committed; this card is.

v2 against v1: test folders are included (v1 skipped every `tests/` and `test/` folder);
{len(licences) - 1} pinned distributions instead of 65 ({len(licences) - 1 - len(dropped_units)}
kept), from source distributions where the wheel leaves the tests out; explicit rules
against leakage of held-out code into training (below).

## Sizes

| split | files | characters | of which in tests | units |
|---|---|---|---|---|
{sizes}

"In tests": files under a `test/`, `tests/`, `testing/`, `testsuite/` or `t/` folder, or
named `test_*.py` / `*_test.py`.

## Sources and licences

Only permissive licences are kept (MIT, BSD, Apache-2.0, PSF, ISC, HPND, ZPL and the like).
A distribution whose metadata names a copyleft licence, weak copyleft included (GPL, LGPL,
AGPL, MPL, EPL, CDDL, ...), or none that is recognised, is dropped. An SPDX choice
("MPL-2.0 OR MIT") is kept for its permissive alternative; a conjunction ("MPL-2.0 AND MIT")
is dropped. Dropped by licence: {", ".join(dropped_units) or "none"}.

Kind: `wheel` (the pinned wheel for CPython 3.11 on Linux x86-64, or the pure-Python one) or
`sdist` (the source distribution, taken where the wheel leaves out the tests; its top
folder is stripped from the paths). Files: `.py` files read, before filters (of which
tests). Chars: characters in the corpus after filters and deduplication, in M. Held-out
units are read from their wheels, as in v1, so valid and test hold the v1 files plus the
test folders that a held-out wheel itself ships (h11's and toolz's), in the unit's split.

| unit | version | kind | licence (from the archive's metadata) | kept | files (tests) \
| chars (M) | split |
|---|---|---|---|---|---|---|---|
{rows}

Standard-library modules are split one top-level module per unit; held out: {held_std}.
Skipped standard-library folders: {", ".join(sorted(STDLIB_SKIP))}. The standard-library
test suite `Lib/test` is included as the training unit `stdlib/test`, except the tests of
the held-out modules (`test_<module>` files and folders: test_json/, test_email/,
test_csv.py, test_argparse.py), which are left out of every split.

## Filters

- `.py` files only, UTF-8 only; line endings normalised to `\\n`.
- Vendored copies of other projects skipped anywhere in an archive: folders named
  {", ".join(f"`{d}/`" for d in sorted(SKIP_DIRS))}.
- Size {MIN_CHARS} to {MAX_CHARS:,} characters; no line longer than {MAX_LINE} characters;
  no "generated" / "do not edit" / "code generator" marker in the first ten lines; no
  protobuf modules (`*_pb2.py`, `*_pb2_grpc.py`).
- Exact duplicates (SHA-256) removed, then near duplicates: MinHash LSH ({LSH_BANDS} bands
  of {LSH_ROWS}) over the set of stripped lines, Jaccard >= {NEAR_DUP_JACCARD} within a split.

## Held-out leakage rules

Test units: {", ".join(sorted(TEST_UNITS))}.
Validation units: {", ".join(sorted(VALID_UNITS))}.

1. The split is by unit: every file of a held-out unit, tests included, is in its split.
2. Vendored folders are skipped (above), so e.g. `pip/_vendor/requests` and
   `botocore/vendored/requests` are not read. Any other folder named after a held-out
   package ({", ".join(sorted(HELD_OUT_PACKAGES))}) inside a training unit is dropped too.
3. Deduplication takes the test split first, then valid, then train, so the held-out copy
   always wins. A training file that is an exact copy of a held-out file, or whose line-set
   Jaccard with one is >= {CROSS_SPLIT_JACCARD} (stricter than within a split; every LSH
   candidate among held-out files is compared), is dropped from train.
4. The standard-library tests of held-out modules are left out (above).

What is left is below the file level: of the {audit['held_out_long_lines']:,} distinct long
lines (50+ characters, not comments) of held-out files, some also occur in
{audit['train_files_sharing']} training files, at most {most} lines in any one ({shared}):
a copied helper or shared idiom, not a copy of a file.

Of {stats['read']:,} `.py` files read (vendored folders and the held-out modules'
standard-library tests are not read at all), {stats['kept']:,} are in the corpus; the others
were dropped, by reason (the licence row counts the files of dropped distributions):

| reason | files |
|---|---|
{drops}

Build: {stats['build_s'] / 60:.1f} min with the archives cached (seconds per step:
{", ".join(f"{k} {v:.0f}" for k, v in stats['seconds'].items())}); fetching them into an
empty cache took about 14 min more, mostly pip preparing the metadata of each sdist.
Peak memory {stats['peak_rss_mb'] / 1024:.1f} GiB.
""")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("data/corpus_v2"),
                        help="output folder for the jsonl splits")
    parser.add_argument("--cache", type=Path, default=Path("data/sources"),
                        help="where downloaded archives are kept between builds")
    parser.add_argument("--card", type=Path, default=Path("docs/DATA_CARD.md"),
                        help="where to write the data card")
    args = parser.parse_args(argv)
    summary = build(args.out, args.cache)
    write_card(args.out, args.card, summary)
    for split in ("train", "valid", "test"):
        s = summary[split]
        print(f"{split:6s} {s['files']:6d} files {s['chars'] / 1e6:8.1f} M chars "
              f"({s['test_chars'] / 1e6:.1f} M in tests)")


if __name__ == "__main__":
    main()
