"""Every quoted section reference to a doc names a heading that the doc has.

Code, docs and results files point into the docs as `docs/ARCHITECTURE.md, "Checks"` (also
`docs/ARCHITECTURE.md "Checks"`, `docs/ARCHITECTURE.md ("Checks")`, `'Checks'`, several
titles after one file, a reference broken over comment lines) or as a link with an anchor,
`docs/ARCHITECTURE.md#int8-on-the-cpu`. A quoted title resolves when it begins a heading of
the named file (case and spacing aside): a markdown heading, or in the logs under docs/log/ an
entry's bold title (a paragraph that starts with `**Title.**`). An anchor resolves when it is
the GitHub slug of a markdown heading. The logs themselves are history, moved word for word,
and are not scanned.

Run as a script, it prints every reference that does not resolve:

    python tests/test_doc_links.py
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SCANNED = (".py", ".md", ".lua", ".json", ".toml", ".sh", ".ts", ".js")
SELF = Path(__file__).resolve()
SKIPPED_DIRS = {".git", ".venv", "node_modules", "__pycache__", "data", "runs", "log"}
# the docs a reference may name: docs/X.md, or docs/log/X.md for the logs
_DOC = r"(?:docs/)?(log/architecture|log/training|ARCHITECTURE|TRAINING)\.md"
# a title starts with a letter, digit or backtick; in double quotes it may hold an apostrophe
_TITLE = r"(?:\"([A-Za-z0-9`][^\"]{0,120}?)\"|'([A-Za-z0-9`][^']{0,120}?)')"
QUOTED = re.compile(_DOC + r"\)?\s*[,:]?\s*\(?\s*" + _TITLE)
MORE = re.compile(r"\s*(?:,|and)\s*" + _TITLE)
ANCHOR = re.compile(_DOC + r"#([A-Za-z0-9_-]+)")
COMMENT = re.compile(r"^\s*(?:#+|--|//|\*|>)?\s*")


def _files() -> list[Path]:
    out = []
    for d, dirs, names in os.walk(ROOT):
        here = Path(d)
        dirs[:] = sorted(
            n for n in dirs if n not in SKIPPED_DIRS and not (n == "log" and here == DOCS)
        )
        if here == DOCS / "log":
            continue
        out.extend(here / n for n in sorted(names) if n.endswith(SCANNED) and here / n != SELF)
    return out


def _joined(text: str) -> str:
    """The text as one line: comment markers at each line's start dropped, so that a
    reference broken over comment lines reads whole."""
    return " ".join(COMMENT.sub("", line) for line in text.splitlines())


def _norm(title: str) -> str:
    return " ".join(title.replace("`", "").split()).casefold()


def _slug(title: str) -> str:
    s = re.sub(r"[^\w\- ]", "", title.strip().lower())
    return s.replace(" ", "-")


def headings(path: Path) -> tuple[list[str], set[str]]:
    """A doc's titles (markdown headings, and in the logs entries' bold titles) and the
    anchors of its markdown headings."""
    titles: list[str] = []
    anchors: set[str] = set()
    fence = False
    lines = path.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fence = not fence
            continue
        if fence:
            continue
        m = re.match(r"#{1,6} (.+)", line)
        if m:
            titles.append(m.group(1))
            anchors.add(_slug(m.group(1)))
            continue
        starts_paragraph = i == 0 or not lines[i - 1].strip()
        if "log" in path.parts and starts_paragraph and line.startswith("**"):
            rest = " ".join(lines[i : i + 3])
            b = re.match(r"\*\*(.+?)\*\*", rest)
            if b:
                titles.append(b.group(1))
    return titles, anchors


def _doc(name: str) -> Path:
    return DOCS / f"{name}.md"


def references() -> list[tuple[str, str, str]]:
    """(file, doc, title or #anchor) for every reference found."""
    found = []
    for path in _files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if ".md" not in text:
            continue
        rel = path.relative_to(ROOT).as_posix()
        flat = _joined(text)
        for m in QUOTED.finditer(flat):
            found.append((rel, m.group(1), m.group(2) or m.group(3)))
            pos = m.end()
            while more := MORE.match(flat, pos):
                found.append((rel, m.group(1), more.group(1) or more.group(2)))
                pos = more.end()
        for m in ANCHOR.finditer(text):
            found.append((rel, m.group(1), "#" + m.group(2)))
    return found


def broken() -> list[tuple[str, str, str]]:
    cache: dict[str, tuple[list[str], set[str]]] = {}
    bad = []
    for rel, name, title in references():
        path = _doc(name)
        if not path.is_file():
            bad.append((rel, name, title))
            continue
        if name not in cache:
            cache[name] = headings(path)
        titles, anchors = cache[name]
        if title.startswith("#"):
            ok = title[1:] in anchors
        else:
            want = _norm(title)
            ok = any(_norm(t).startswith(want) for t in titles)
        if not ok:
            bad.append((rel, name, title))
    return bad


def test_references_find_their_headings() -> None:
    bad = broken()
    assert not bad, "references to headings that do not exist:\n" + "\n".join(
        f'{rel}: docs/{name}.md, "{title}"' for rel, name, title in bad
    )


def test_the_checker_reads_every_form() -> None:
    flat = _joined(
        '# see docs/ARCHITECTURE.md, "A cap on\n# growth"; docs/TRAINING.md "Checks", \'X\'\n'
        'docs/ARCHITECTURE.md: "One", "Two" and docs/log/architecture.md ("Three")'
    )
    titles = [m.group(2) or m.group(3) for m in QUOTED.finditer(flat)]
    assert titles == ["A cap on growth", "Checks", "One", "Three"]
    one = next(m for m in QUOTED.finditer(flat) if m.group(2) == "One")
    more = MORE.match(flat, one.end())
    assert more is not None and more.group(1) == "Two"
    apostrophe = QUOTED.search('docs/ARCHITECTURE.md, "The MLPs\' output layers"')
    assert apostrophe is not None and apostrophe.group(2) == "The MLPs' output layers"
    assert _slug("int8 on the CPU") == "int8-on-the-cpu"


def test_the_logs_keep_their_entries() -> None:
    for name in ("log/architecture", "log/training"):
        titles, _ = headings(_doc(name))
        assert len(titles) > 20, name


if __name__ == "__main__":
    refs = references()
    bad = broken()
    for rel, name, title in bad:
        print(f'BROKEN: {rel}: docs/{name}.md, "{title}"')
    print(f"{len(refs)} references, {len(bad)} unresolved")
    sys.exit(1 if bad else 0)
