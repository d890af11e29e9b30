"""Build the training corpus: Python sources from the standard library, pinned PyPI packages
and pinned Debian python3-* packages.

Reproducible: the package lists and versions are pinned (packages.py, packages_v3.py,
debian_packages.py), archives (wheels, or source distributions where only those ship the
tests; Debian binary packages) are fetched with `pip download` and `apt-get download` (the
only network use, at build time, never at run time), and the split is by *unit* (a PyPI
distribution, a Debian package, or one top-level standard-library module), so no evaluated
file shares a package with a trained one. Test folders are included; vendored copies of
other projects are not, and a training file that duplicates or nearly duplicates a
held-out file is dropped. The packages of the evaluation sets kept outside the corpus and
public code benchmarks never enter training (exclusions.py).

    python -m diffusion_infill.model.training.corpus --out data/corpus_v2 --cache data/sources

writes train/valid/test.jsonl ({"unit", "path", "text"} per line), split.json,
licences.json and stats.json, and prints a summary. docs/DATA_CARD.md describes the result.

Modules: packages (what is pinned, what is held out; packages_v3 and debian_packages: the v3
additions), records (the file and archive records), sources (fetching archives, reading
them and the standard library), debian (Debian packages and their DEP-5 copyright),
exclusions (evaluation packages, public benchmarks), licences, filters,
dedupe (exact and MinHash near duplicates, the leak audit), pipeline (the build and its
output files), card (the data card), cli (the command line, run by __main__).
"""

from diffusion_infill.model.training.corpus.card import write_card
from diffusion_infill.model.training.corpus.cli import main
from diffusion_infill.model.training.corpus.debian import (
    deb_files,
    dep5_allowed,
    dep5_licence,
    fetch_debs,
    parse_dep5,
)
from diffusion_infill.model.training.corpus.debian_packages import DEBIAN_PACKAGES
from diffusion_infill.model.training.corpus.dedupe import (
    CROSS_SPLIT_JACCARD,
    LSH_BANDS,
    LSH_ROWS,
    MAX_TRAIN_CANDIDATES,
    NEAR_DUP_JACCARD,
    deduplicate,
    jaccard,
    leak_audit,
    line_hashes,
    minhash,
)
from diffusion_infill.model.training.corpus.exclusions import (
    EVAL_PACKAGES,
    benchmark_named,
    copies_eval_module,
    eval_packages,
    excluded_project,
)
from diffusion_infill.model.training.corpus.filters import (
    GENERATED,
    GENERATED_NAMES,
    MAX_CHARS,
    MAX_LINE,
    MIN_CHARS,
    holds_held_out_copy,
    keep,
    normalise,
)
from diffusion_infill.model.training.corpus.licences import (
    COPYLEFT,
    PERMISSIVE,
    licence_allowed,
    licence_of,
)
from diffusion_infill.model.training.corpus.packages import (
    HELD_OUT_PACKAGES,
    PACKAGES,
    SDISTS,
    SKIP_DIRS,
    SPLITS,
    STDLIB_SKIP,
    TEST_UNITS,
    VALID_UNITS,
    canonical,
    split_of,
)
from diffusion_infill.model.training.corpus.packages_v3 import V3_PACKAGES
from diffusion_infill.model.training.corpus.pipeline import Exclusions, build, collect
from diffusion_infill.model.training.corpus.records import Source, SourceFile, is_test_path
from diffusion_infill.model.training.corpus.sources import (
    archive_files,
    archive_in,
    fetch,
    stdlib_files,
    stdlib_test_skipped,
)

__all__ = [
    "DEBIAN_PACKAGES",
    "EVAL_PACKAGES",
    "Exclusions",
    "V3_PACKAGES",
    "benchmark_named",
    "copies_eval_module",
    "deb_files",
    "dep5_allowed",
    "dep5_licence",
    "eval_packages",
    "excluded_project",
    "fetch_debs",
    "parse_dep5",
    "COPYLEFT",
    "CROSS_SPLIT_JACCARD",
    "GENERATED",
    "GENERATED_NAMES",
    "HELD_OUT_PACKAGES",
    "LSH_BANDS",
    "LSH_ROWS",
    "MAX_CHARS",
    "MAX_LINE",
    "MAX_TRAIN_CANDIDATES",
    "MIN_CHARS",
    "NEAR_DUP_JACCARD",
    "PACKAGES",
    "PERMISSIVE",
    "SDISTS",
    "SKIP_DIRS",
    "SPLITS",
    "STDLIB_SKIP",
    "TEST_UNITS",
    "VALID_UNITS",
    "Source",
    "SourceFile",
    "archive_files",
    "archive_in",
    "build",
    "canonical",
    "collect",
    "deduplicate",
    "fetch",
    "holds_held_out_copy",
    "is_test_path",
    "jaccard",
    "keep",
    "leak_audit",
    "licence_allowed",
    "licence_of",
    "line_hashes",
    "main",
    "minhash",
    "normalise",
    "split_of",
    "stdlib_files",
    "stdlib_test_skipped",
    "write_card",
]
