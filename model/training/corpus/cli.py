"""`python -m diffusion_infill.model.training.corpus`: build the corpus, write the data card,
print the sizes."""

from __future__ import annotations

import argparse
from pathlib import Path

from diffusion_infill.model.training.corpus.card import write_card
from diffusion_infill.model.training.corpus.debian_packages import DEBIAN_PACKAGES
from diffusion_infill.model.training.corpus.pipeline import build

DESCRIPTION = (
    "Build the training corpus: Python sources from the standard library, "
    "pinned PyPI packages and pinned Debian python3-* packages."
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m diffusion_infill.model.training.corpus", description=DESCRIPTION
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("data/corpus_v2"),
        help="output folder for the jsonl splits",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path("data/sources"),
        help="where downloaded archives are kept between builds",
    )
    parser.add_argument(
        "--card", type=Path, default=Path("docs/DATA_CARD.md"), help="where to write the data card"
    )
    parser.add_argument(
        "--no-debian",
        action="store_true",
        help="leave the Debian packages out (no apt-get download)",
    )
    args = parser.parse_args(argv)
    summary = build(args.out, args.cache, debian=None if args.no_debian else DEBIAN_PACKAGES)
    write_card(args.out, args.card, summary)
    for split in ("train", "valid", "test"):
        s = summary[split]
        print(
            f"{split:6s} {s['files']:6d} files {s['chars'] / 1e6:8.1f} M chars "
            f"({s['test_chars'] / 1e6:.1f} M in tests)"
        )
