"""The data card (docs/DATA_CARD.md), written from a built corpus folder: one function per
section (introduction, sizes, sources and licences, filters, leakage rules, build).

Notes written by hand below the `NOTES` line of an existing card (what a training run took
of the corpus, say) are kept when the card is rebuilt."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from diffusion_infill.model.training.cards import hand_written
from diffusion_infill.model.training.corpus.dedupe import (
    CROSS_SPLIT_JACCARD,
    LSH_BANDS,
    LSH_ROWS,
    NEAR_DUP_JACCARD,
)
from diffusion_infill.model.training.corpus.filters import MAX_CHARS, MAX_LINE, MIN_CHARS
from diffusion_infill.model.training.corpus.packages import (
    HELD_OUT_PACKAGES,
    SKIP_DIRS,
    STDLIB_SKIP,
    TEST_UNITS,
    VALID_UNITS,
    split_of,
)

Json = dict[str, Any]
NOTES = "<!-- hand-written notes below this line are kept when the card is rebuilt -->"


def introduction(licences: Json, dropped_units: list[str]) -> str:
    pypi = [u for u in licences if u != "stdlib" and not u.startswith("debian/")]
    debs = [u for u in licences if u.startswith("debian/")]
    kept_debs = sum(licences[u]["kept"] == "yes" for u in debs)
    return f"""# Data card: the training corpus (v3)

Built by `python -m diffusion_infill.model.training.corpus --out data/corpus_v2 --cache
data/sources` (reproducible: pinned archives from PyPI, fetched with `pip download`, and
pinned Debian 12 python3-* packages, fetched with `apt-get download`, at build time only; the
Python {licences["stdlib"]["version"]} standard library of the building interpreter).
The corpus itself is not committed; this card is. The folder keeps its v2 name so that
every default path to the held-out splits stays valid: v3 adds training units only, and
valid.jsonl and test.jsonl are byte-identical to v2's.

v3 against v2: {len(pypi)} pinned PyPI distributions instead of 156
({len(pypi) - len([u for u in dropped_units if u in pypi])} kept; the new ones are read
from their wheels), and {len(debs)} Debian packages ({kept_debs} kept: a machine-readable
permissive debian/copyright); the evaluation packages kept outside the corpus and public
code benchmarks are excluded from training (below). v2 against v1: test folders are
included; explicit rules against leakage of held-out code into training (below).
"""


def sizes_section(summary: dict[str, dict[str, int]], split: Json) -> str:
    sizes = "\n".join(
        f"| {k} | {summary[k]['files']:,} | {summary[k]['chars'] / 1e6:.1f} M | "
        f"{summary[k]['test_chars'] / 1e6:.1f} M | {len(split[k])} |"
        for k in ("train", "valid", "test")
    )
    return f"""## Sizes

| split | files | characters | of which in tests | units |
|---|---|---|---|---|
{sizes}

"In tests": files under a `test/`, `tests/`, `testing/`, `testsuite/` or `t/` folder, or
named `test_*.py` / `*_test.py`.
"""


def unit_row(unit: str, info: Json, chars: dict[str, int]) -> str:
    """One row of the sources table: chars in M after filters, the split (or why none)."""
    if unit == "stdlib":
        unit_chars = sum(v for k, v in chars.items() if k.startswith("stdlib/")) / 1e6
        split = "by module"
    else:
        unit_chars = chars.get(unit, 0) / 1e6
        split = split_of(unit) if info["kept"] == "yes" else "-"
    return (
        f"| {unit} | {info['version']} | {info['kind']} | {info['licence']} | "
        f"{info['kept']} | {info['files']} ({info['tests']}) | {unit_chars:.1f} | "
        f"{split} |"
    )


def sources_section(licences: Json, chars: dict[str, int], dropped_units: list[str]) -> str:
    rows = "\n".join(unit_row(unit, info, chars) for unit, info in sorted(licences.items()))
    held_std = ", ".join(sorted(u for u in TEST_UNITS | VALID_UNITS if u.startswith("stdlib/")))
    by_licence = [u for u in dropped_units if licences[u]["kept"] == "no (licence)"]
    return f"""## Sources and licences

Only permissive licences are kept (MIT, BSD, Apache-2.0, PSF, ISC, HPND, ZPL and the like).
A distribution whose metadata names a copyleft licence, weak copyleft included (GPL, LGPL,
AGPL, MPL, EPL, CDDL, ...), or none that is recognised, is dropped. An SPDX choice
("MPL-2.0 OR MIT") is kept for its permissive alternative; a conjunction ("MPL-2.0 AND MIT")
is dropped. Dropped by licence: {", ".join(by_licence) or "none"}.

Kind: `wheel` (the pinned wheel for CPython 3.11 on Linux x86-64, or the pure-Python one),
`sdist` (the source distribution, taken where the wheel leaves out the tests; its top
folder is stripped from the paths) or `deb` (a Debian 12 binary package: the files under
/usr/lib/python3/dist-packages; its licence is that of debian/copyright, which must be
machine-readable (DEP-5), every stanza covering upstream files with a licence kept by the
rule above, Expat read as MIT; `not DEP-5` marks one that is not). Files: `.py` files
read, before filters (of which tests). Chars: characters in the corpus after filters and
deduplication, in M. Held-out units are read from their wheels, as in v1, so valid and
test hold the v1 files plus the test folders that a held-out wheel itself ships (h11's
and toolz's), in the unit's split.

| unit | version | kind | licence (from the metadata or DEP-5 copyright) | kept \
| files (tests) | chars (M) | split |
|---|---|---|---|---|---|---|---|
{rows}

Standard-library modules are split one top-level module per unit; held out: {held_std}.
Skipped standard-library folders: {", ".join(sorted(STDLIB_SKIP))}. The standard-library
test suite `Lib/test` is included as the training unit `stdlib/test`, except the tests of
the held-out modules (`test_<module>` files and folders: test_json/, test_email/,
test_csv.py, test_argparse.py), which are left out of every split.
"""


def filters_section() -> str:
    return f"""## Filters

- `.py` files only, UTF-8 only; line endings normalised to `\\n`.
- Vendored copies of other projects skipped anywhere in an archive: folders named
  {", ".join(f"`{d}/`" for d in sorted(SKIP_DIRS))}.
- Size {MIN_CHARS} to {MAX_CHARS:,} characters; no line longer than {MAX_LINE} characters;
  no "generated" / "do not edit" / "code generator" marker in the first ten lines; no
  protobuf modules (`*_pb2.py`, `*_pb2_grpc.py`).
- Exact duplicates (SHA-256) removed, then near duplicates: MinHash LSH ({LSH_BANDS} bands
  of {LSH_ROWS}) over the set of stripped lines, Jaccard >= {NEAR_DUP_JACCARD} within a split.
"""


def leakage_rules() -> str:
    return f"""## Held-out leakage rules

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
"""


def exclusions_section(licences: Json, stats: Json) -> str:
    """Evaluation packages, public benchmarks: what was excluded from training and why."""
    held = sorted(
        f"{u} ({i['kept'][len('no (held out: ') : -1]})"
        for u, i in licences.items()
        if i["kept"].startswith("no (held out")
    )
    bundles = sorted(f"{u} ({i['bundles']})" for u, i in licences.items() if i["bundles"])
    named = stats.get("benchmark_mentions", [])
    return f"""## Excluded from training

Evaluation sets kept outside the corpus are cut from these packages, read at build time
from benchmarks/real_files.py, benchmarks/real_fixes.py and benchmarks/fix_releases.py
(model/training/corpus/exclusions.py): {", ".join(stats.get("evaluation_packages", []))}.
Held-out units and their import names are on the same list. A training unit is dropped
when any of its names is on it (the distribution name; for a Debian package also its name
without `python3-`, its Upstream-Name and the .dist-info / .egg-info and top-level names it
installs), and a training file is dropped when it is a module named after an evaluation
package (`tabulate.py`) or sits in a Python package folder named after one (`ply/`).
Units dropped so: {", ".join(held) or "none"}.

Public code benchmarks (HumanEval and its infilling sets, MBPP, QuixBugs, SAFIM, CRUXEval,
APPS, DS-1000, EvalPlus, MultiPL-E, LiveCodeBench, BigCodeBench, CodeContests) never enter
the corpus: a training unit any of whose file names names one is dropped (units: {
        ", ".join(bundles) or "none"
    }), and a training file whose text names one is dropped
({len(named)} files: {", ".join(named) or "none"}).
"""


def leak_audit_section(audit: Json) -> str:
    long_lines, sharing = audit["held_out_long_lines"], audit["train_files_sharing"]
    most = max(audit["most_shared"].values(), default=0)
    shared = ", ".join(f"{k}: {v}" for k, v in audit["most_shared"].items())
    return f"""What is left is below the file level: of the {long_lines:,} distinct long
lines (50+ characters, not comments) of held-out files, some also occur in
{sharing} training files, at most {most} lines in any one ({shared}):
a copied helper or shared idiom, not a copy of a file.
"""


def drops_section(stats: Json) -> str:
    drops = "\n".join(f"| {k} | {v:,} |" for k, v in stats["dropped"].items())
    return f"""Of {stats["read"]:,} `.py` files read (vendored folders and the held-out modules'
standard-library tests are not read at all), {stats["kept"]:,} are in the corpus; the others
were dropped, by reason (the licence row counts the files of dropped distributions):

| reason | files |
|---|---|
{drops}
"""


def build_section(stats: Json) -> str:
    seconds = ", ".join(f"{k} {v:.0f}" for k, v in stats["seconds"].items())
    return f"""Build: {stats["build_s"] / 60:.1f} min with the archives cached (seconds per step:
{seconds}); fetching them into an
empty cache took about 14 min more for v2's 156 archives, mostly pip preparing the metadata
of each sdist, and a few minutes more for v3's wheels and Debian packages.
Peak memory {stats["peak_rss_mb"] / 1024:.1f} GiB.
"""


def write_card(out: Path, card: Path, summary: dict[str, dict[str, int]]) -> None:
    """The data card: sources, licences, filters, split, sizes, leakage rules."""
    licences = json.loads((out / "licences.json").read_text())
    split = json.loads((out / "split.json").read_text())
    stats = json.loads((out / "stats.json").read_text())
    dropped_units = sorted(u for u, i in licences.items() if i["kept"] != "yes")
    sections = [
        introduction(licences, dropped_units),
        sizes_section(summary, split),
        sources_section(licences, stats["chars_per_unit"], dropped_units),
        filters_section(),
        leakage_rules(),
        exclusions_section(licences, stats),
        leak_audit_section(stats["leak_audit"]),
        drops_section(stats),
        build_section(stats),
    ]
    card.write_text("\n".join([*sections, hand_written(card, NOTES)]))
