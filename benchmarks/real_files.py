"""Real files: source files of pinned PyPI packages the corpus does not hold.

    python -m benchmarks.real_files     # -> data/real_files.jsonl (once per machine)

The held-out test split is a few packages cut from the same pinned set as the training
data; these are other packages, drawn by a user's eye (small pure-Python libraries in
wide use), fetched as wheels with `pip download` into data/real_files_cache. A file is
kept when it has at least 40 lines and at most a fifth of its distinctive lines (over 40
characters) appear in the corpus's training split (not a vendored copy, say), checked by
line hashes; at most PER_PACKAGE files of a package. One record per file: {"package",
"path", "text"}.
"""

from __future__ import annotations

import argparse
import json
import sys
import zipfile
from pathlib import Path

from diffusion_infill.model.training.corpus.sources import _download_wheels

# pinned: name -> version (licences: MIT / BSD / Apache-2.0 / PSF)
PACKAGES = {
    "wcwidth": "0.2.13",
    "rsa": "4.9",
    "xmltodict": "0.13.0",
    "sortedcontainers": "2.4.0",
    "tabulate": "0.9.0",
    "docopt": "0.6.2",
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


def build(out: Path, cache: Path, corpus: Path) -> list[dict[str, str]]:
    cache.mkdir(parents=True, exist_ok=True)
    _download_wheels(cache, [f"{n}=={v}" for n, v in PACKAGES.items()])
    seen = training_lines(corpus)
    records = []
    for wheel in sorted(cache.glob("*.whl")):
        package = wheel.name.split("-")[0].lower()
        with zipfile.ZipFile(wheel) as zf:
            for name in sorted(zf.namelist()):
                if not name.endswith(".py") or "/tests/" in f"/{name}":
                    continue
                text = zf.read(name).decode("utf-8", errors="replace")
                if (
                    text.count("\n") < 40
                    or mostly_in_training(text, seen)
                    or sum(r["package"] == package for r in records) >= PER_PACKAGE
                ):
                    continue
                records.append({"package": package, "path": name, "text": text})
    out.write_text("".join(json.dumps(r) + "\n" for r in records))
    print(
        f"{len(records)} files of {len({r['package'] for r in records})} packages -> {out}",
        file=sys.stderr,
    )
    return records


def load(path: Path) -> list[str]:
    with path.open() as fh:
        return [json.loads(line)["text"] for line in fh]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("data/real_files.jsonl"))
    parser.add_argument("--cache", type=Path, default=Path("data/real_files_cache"))
    parser.add_argument("--corpus", type=Path, default=Path("data/corpus_v2"))
    args = parser.parse_args(argv)
    if not (args.corpus / "train.jsonl").is_file():
        parser.error(
            f"{args.corpus}/train.jsonl not found: python -m diffusion_infill.model.training.corpus"
        )
    build(args.out, args.cache, args.corpus)


if __name__ == "__main__":
    main()
