"""What never enters training, whatever its licence: the packages whose files make up the
evaluation sets kept outside the corpus (benchmarks/real_files.py, benchmarks/real_fixes.py
and the releases it diffs, benchmarks/fix_releases.py and fix_releases_valid.py), under any
name that ships the same upstream project (a Debian python3-* package included), and public
code benchmarks (HumanEval, MBPP, ...): a unit that bundles one is dropped, a training file
that names one is dropped."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

from diffusion_infill.model.training.corpus.packages import canonical

ROOT = Path(__file__).resolve().parents[2]
# The evaluation-set scripts read at build time, and the module-level names whose
# literal dict keys / strings are package names.
EVAL_SCRIPTS = (
    "benchmarks/real_files.py",
    "benchmarks/real_fixes.py",
    "benchmarks/fix_releases.py",
    "benchmarks/fix_releases_valid.py",
)
EVAL_NAMES = re.compile(r"(^_P$|PACKAGES|PINS)")

# The evaluation packages when this list was written (the build adds whatever the scripts
# name now): real_files.PACKAGES and fix_releases' pinned releases.
EVAL_PACKAGES = frozenset(
    {
        "wcwidth",
        "rsa",
        "xmltodict",
        "sortedcontainers",
        "tabulate",
        "docopt",
        "semver",
        "humanize",
        "inflection",
        "bidict",
        "jmespath",
        "isodate",
        "termcolor",
        "colorama",
        "filelock",
        "iniconfig",
        "pyasn1",
        "ply",
        "chardet",
        "docutils",
        "simplejson",
        "markdown2",
        "natsort",
        "parse",
        "tinycss2",
        "cssselect",
        "jsonpointer",
        "pathspec",
        "platformdirs",
        "distro",
        "backoff",
        "tzlocal",
        "croniter",
        "texttable",
        "prettytable",
        "configobj",
        "asttokens",
        "executing",
        "mccabe",
        "tomli",
        "toml",
        "rfc3986",
        "uritemplate",
        "munch",
        "voluptuous",
        "schema",
        "cerberus",
        "mistune",
        "python-slugify",
        "validators",
        # the validation real-fix set's packages (benchmarks/fix_releases_valid.py)
        "addict",
        "anytree",
        "appdirs",
        "asciitree",
        "astor",
        "astroid",
        "base58",
        "bech32",
        "blessed",
        "blinker",
        "coloredlogs",
        "colorlog",
        "commonmark",
        "configargparse",
        "cssutils",
        "darglint",
        "dataclasses-json",
        "dateparser",
        "deepdiff",
        "deprecation",
        "dictdiffer",
        "docstring-parser",
        "dpath",
        "email-validator",
        "emoji",
        "entrypoints",
        "environs",
        "first",
        "ftfy",
        "funcy",
        "furl",
        "gast",
        "glom",
        "hashids",
        "humanfriendly",
        "intervaltree",
        "jsonpath-ng",
        "lizard",
        "loguru",
        "multipledispatch",
        "numpydoc",
        "pampy",
        "plum-dispatch",
        "portion",
        "ptyprocess",
        "pydash",
        "pydispatcher",
        "pydocstyle",
        "pyee",
        "pyperclip",
        "python-box",
        "python-dotenv",
        "python-json-logger",
        "pytoml",
        "pyupgrade",
        "radon",
        "retrying",
        "schedule",
        "shortuuid",
        "structlog",
        "terminaltables",
        "text-unidecode",
        "transitions",
        "treelib",
        "unidecode",
        "untangle",
        "vulture",
        "webencodings",
        "xenon",
    }
)
# Import names that differ from the distribution's (a folder or module of this name in a
# training unit is a copy of an evaluation package).
IMPORT_NAMES = {
    "python-slugify": "slugify",
    "python-dotenv": "dotenv",
    "python-box": "box",
    "plum-dispatch": "plum",
    "python-json-logger": "pythonjsonlogger",
    "pydispatcher": "pydispatch",
}
# Evaluation import names too common to mark a folder as a copy (nltk/parse/, poetry/toml/).
GENERIC_NAMES = frozenset(
    {"parse", "schema", "toml", "distro", "backoff", "munch", "validators"}
    | {"first", "schedule", "box", "plum", "portion", "transitions", "events"}
)
# Evaluation projects that are (or were) one module, vendored as that file: a module of
# this name is a copy. Other names say nothing as a module (cryptography's rsa.py,
# torch_geometric's ply.py reader are their own code).
SINGLE_MODULES = frozenset(
    {
        "docopt",
        "xmltodict",
        "markdown2",
        "texttable",
        "tabulate",
        "configobj",
        "semver",
        "inflection",
    }
)

# Public code benchmarks, by name as they appear in file names and text. APPS is matched by
# its dataset names only (the word "apps" is everywhere).
BENCHMARKS = {
    "HumanEval": r"(?<![a-z])human[-_ ]?eval",
    "MBPP": r"\bmbpp",
    "QuixBugs": r"quix[-_ ]?bugs",
    "SAFIM": r"\bsafim\b",
    "CRUXEval": r"crux[-_ ]?eval",
    "APPS": r"(codeparrot/apps|hendrycks/apps|\bapps[-_](benchmark|dataset|eval)\b)",
    "DS-1000": r"\bds[-_ ]?1000\b",
    "EvalPlus": r"\bevalplus\b",
    "MultiPL-E": r"multipl[-_]e\b",
    "LiveCodeBench": r"livecodebench",
    "BigCodeBench": r"bigcodebench",
    "CodeContests": r"code[-_]?contests",
}
_BENCHMARK = re.compile(
    "|".join(f"(?P<b{i}>{p})" for i, p in enumerate(BENCHMARKS.values())), re.IGNORECASE
)


def _literal_names(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Dict):
        items: Iterable[ast.expr | None] = node.keys
    elif isinstance(node, (ast.Set, ast.List, ast.Tuple)):
        items = node.elts
    else:
        return []
    return [n.value for n in items if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def packages_named_in(source: str) -> set[str]:
    """Package names in a script's module-level PACKAGES / PINS / _P literals (dict keys, or
    the strings of a set, list or tuple), canonical."""
    found: set[str] = set()
    for node in ast.parse(source).body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        value = getattr(node, "value", None)
        if value is None:
            continue
        if any(isinstance(t, ast.Name) and EVAL_NAMES.search(t.id) for t in targets):
            found.update(canonical(n) for n in _literal_names(value))
    return found


def eval_packages(root: Path = ROOT) -> frozenset[str]:
    """EVAL_PACKAGES and every package the evaluation scripts under `root` name now."""
    found = {canonical(n) for n in EVAL_PACKAGES}
    for script in EVAL_SCRIPTS:
        path = root / script
        if path.exists():
            found |= packages_named_in(path.read_text())
    return frozenset(found)


def import_names(packages: Iterable[str]) -> frozenset[str]:
    """The import names of evaluation packages: the distribution name with - as _, or the
    known exception."""
    return frozenset(IMPORT_NAMES.get(p, p.replace("-", "_")) for p in packages)


def excluded_project(names: Iterable[str], excluded: frozenset[str]) -> str | None:
    """The excluded package among a unit's names (distribution, upstream or Debian name,
    top-level import names), if any: python3-click and Click both count as click."""
    for name in names:
        base = canonical(re.sub(r"^python3?-", "", name.strip()))
        for candidate in (canonical(name.strip()), base):
            if candidate in excluded:
                return candidate
    return None


def benchmark_named(text: str) -> str | None:
    """The public benchmark that `text` (a path or a file's contents) names, if any."""
    match = _BENCHMARK.search(text)
    if match is None:
        return None
    return list(BENCHMARKS)[int(match.lastgroup[1:])] if match.lastgroup else None


def copies_eval_module(path: str, packages: set[str], imports: frozenset[str]) -> bool:
    """A training file that copies an evaluation package: a module named after a
    single-module one (`somepkg/tabulate.py`, SINGLE_MODULES) or a file inside a Python
    package named after any (`pycparser/ply/lex.py`; `packages`: the unit's folders holding
    an __init__.py), generic names (parse, schema, ...) left out."""
    parts = path.split("/")
    stem = parts[-1].removesuffix(".py")
    if stem in imports and stem in SINGLE_MODULES:
        return True
    return any(
        part in imports and part not in GENERIC_NAMES and "/".join(parts[: i + 1]) in packages
        for i, part in enumerate(parts[:-1])
    )
