"""A repository's context for fills: find it, index it (bounded, cached), retrieve snippets.

    repo = RepoContext.build(Path("pkg/mod.py"))          # the file's repository, indexed
    snippets = repo.snippets("pkg/mod.py", text, [(start, end)])   # -> list[Snippet]

`build` never raises on what it finds on disk: a file it cannot use is skipped and
counted by reason (`skipped`), a bound it reaches stops it with what it has, and each is
a line in `notes` (also logged) that says why; a repository with nothing to index gives
no snippets. `update` re-indexes one file (an editor's unsaved text wins over the disk).
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from diffusion_infill.infill.context.cache import cache_path, content_hash, load, save
from diffusion_infill.infill.context.discover import (
    find_root,
    git_files,
    inside,
    read_source,
    walk_files,
)
from diffusion_infill.infill.context.index import RepoIndex
from diffusion_infill.infill.context.settings import SUFFIXES, ContextSettings, cache_dir
from diffusion_infill.infill.core.snippets import MAX_SNIPPET_CHARS, Snippet

log = logging.getLogger("diffusion_infill.context")


def _around(text: str, start: int, end: int, before: int, after: int) -> str:
    """The `before` lines above `start` (and its own line up to it) and the `after` lines
    below `end` (and its own line from it), without splitting the whole text."""
    a = start
    for _ in range(before + 1):
        a = text.rfind("\n", 0, a)
        if a < 0:
            break
    b = end - 1
    for _ in range(after + 1):
        b = text.find("\n", b + 1)
        if b < 0:
            b = len(text)
            break
    return text[a + 1 : start] + "\n" + text[end:b]


class RepoContext:
    """The indexed files of one repository (`root`), and what indexing skipped."""

    def __init__(self, root: Path, kind: str, settings: ContextSettings) -> None:
        self.root = root
        self.kind = kind  # "git", "project" or "directory"
        self.settings = settings
        self.index = RepoIndex(settings.window_lines, settings.stride_lines)
        self.skipped: Counter[str] = Counter()
        self.notes: list[str] = []
        self.seconds = 0.0
        self._bytes = 0

    def note(self, line: str) -> None:
        """Say why something was left out (kept in `notes` and logged)."""
        self.notes.append(line)
        log.info("repository context: %s", line)

    @classmethod
    def build(
        cls,
        path: Path,
        settings: ContextSettings | None = None,
        *,
        root: Path | None = None,
        cache: Path | None = None,
        language: str = "python",
    ) -> RepoContext:
        """Index the repository of `path` (or `root`, given), its files of `language`, in
        the bounds of `settings`; the tokens cached under `cache` (default: the user's
        cache directory; a missing or read-only one is only noted)."""
        settings = settings or ContextSettings()
        found, kind = find_root(path) if root is None else (Path(os.path.abspath(root)), "")
        kind = kind or ("git" if (found / ".git").exists() else "given")
        self = cls(found, kind, settings)
        started = time.monotonic()
        names = self._names(language, started + settings.max_seconds)
        where = cache_path(
            cache or cache_dir(), found, settings.window_lines, settings.stride_lines
        )
        known = load(where)
        used = self._index(names, known, started + settings.max_seconds)
        if used.keys() != known.keys():
            why = save(where, used)
            if why:
                self.note(f"its index is not cached ({why})")
        self.seconds = time.monotonic() - started
        if not self.index.files:
            self.note(f"no {language} files indexed under {found}")
        if self.skipped:
            counts = ", ".join(f"{n} {why}" for why, n in sorted(self.skipped.items()))
            self.note(f"files skipped: {counts}")
        return self

    def _names(self, language: str, deadline: float) -> list[str]:
        """The files of `language` under the root, in path order, at most max_files."""
        s, suffixes = self.settings, SUFFIXES.get(language, ())
        names = git_files(self.root, s.git_seconds) if self.kind == "git" else None
        if names is None:
            if self.kind == "git":
                self.note("git ls-files failed; the folder is walked instead")
            deep = self.kind != "directory"  # a lone file's folder: its files only
            names = walk_files(self.root, 50 * s.max_files, deadline, deep)
        out = [n for n in names if n.endswith(suffixes)]
        if len(out) > s.max_files:
            self.note(f"{len(out)} files; the first {s.max_files} indexed (max_files)")
            out = out[: s.max_files]
        return sorted(out)

    def _index(self, names: list[str], known: dict, deadline: float) -> dict[str, list[str]]:
        """Index `names` (tokens from `known` by content hash); the hashes used."""
        s, used = self.settings, {}
        for k, rel in enumerate(names):
            if time.monotonic() > deadline:
                self.note(f"stopped after {k} of {len(names)} files (max_seconds {s.max_seconds})")
                break
            if not inside(self.root, rel):
                self.skipped["a link out of the repository, a loop or gone"] += 1
                continue
            text, why = read_source(self.root / rel, s.max_file_bytes)
            if text is None:
                self.skipped[why] += 1
                continue
            if self._bytes + len(text) > s.max_bytes or self.index.live >= s.max_windows:
                self.note(f"stopped after {k} of {len(names)} files (max_bytes / max_windows)")
                break
            self._bytes += len(text)
            key = content_hash(text)
            blocks = known.get(key)
            used[key] = self.index.put(rel, text, blocks if isinstance(blocks, list) else None)
        return used

    def relative(self, path: str | Path | None) -> str | None:
        """`path` relative to the root (POSIX), or None outside it."""
        if path is None:
            return None
        try:
            return Path(os.path.abspath(path)).relative_to(self.root).as_posix()
        except ValueError:
            return None

    def update(self, path: str | Path, text: str | None) -> None:
        """Index `path` again as `text` (an open document), or as on disk (None); a file
        that is gone, or not readable source, is dropped."""
        rel = self.relative(path)
        if rel is None or not rel.endswith(SUFFIXES["python"]):
            return
        if text is None:
            text, _ = read_source(self.root / rel, self.settings.max_file_bytes)
        if text is None or "\x00" in text or len(text) > self.settings.max_file_bytes:
            self.index.drop(rel)
            return
        self.index.put(rel, text)
        if self.index.windows() > 2 * self.index.live + 1000:
            self.index.compact()

    def snippets(
        self, path: str | Path | None, text: str, holes: Sequence[tuple[int, int]]
    ) -> list[Snippet]:
        """The windows of other files most like the code around each hole of `text` (the
        file at `path`), taken in turn across the holes, at most max_snippets."""
        s, own = self.settings, self.relative(path)
        found: list[list[tuple[str, int, float]]] = []
        for start, end in holes:
            query = _around(text, start, end, s.query_before, s.query_after)
            found.append(self.index.search(query, s.per_hole, exclude=own))
        out: list[Snippet] = []
        seen: set[tuple[str, int]] = set()
        for rank in range(s.per_hole):
            for hits in found:
                if rank < len(hits) and hits[rank][:2] not in seen and len(out) < s.max_snippets:
                    seen.add(hits[rank][:2])
                    window = self.index.window_text(*hits[rank][:2])
                    out.append(Snippet(hits[rank][0], window[:MAX_SNIPPET_CHARS]))
        return out
