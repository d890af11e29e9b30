"""Which results files are current: those the reference docs cite.

current = cited(RESULTS)     # the results files README, docs/ (not its log), the
                             # model card and benchmarks/README.md name, and the
                             # headline runs
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.results_file import RESULTS

ROOT = RESULTS.parent.parent
DOCS = ("README.md", "docs/*.md", "model/weights/MODEL_CARD.md", "benchmarks/README.md")


def cited(results: Path, root: Path = ROOT) -> set[Path]:
    """The results files under `results` that the reference docs under `root` name (by
    path under results/, by file name, or by their folder) or that a headline run wrote."""
    text = "\n".join(
        p.read_text(errors="replace")
        for pattern in DOCS
        for p in sorted(root.glob(pattern))
        if p.name != "RESULTS.md"
    )
    out: set[Path] = set()
    for path in sorted(results.rglob("*.json")):
        rel = path.relative_to(results)
        folder = f"results/{rel.parts[0]}/" if len(rel.parts) > 1 else None
        if (
            rel.parts[0] == "headline"
            or rel.as_posix() in text
            or f"`{rel.name}`" in text
            or f"[{rel.name}]" in text
            or (folder is not None and folder in text)
        ):
            out.add(path)
    return out
