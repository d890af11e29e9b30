"""`infill fill --repo auto|DIR|off`: the snippets of the user's repository for a file,
and where the file lives (`Source`: its path, its repository's root, `--python`).

`auto` (the default) indexes the repository of each file (infill/context: its git work
tree, else its project, else its folder), `DIR` that folder, `off` nothing. One index per
repository per run, cached by content hash under the user's cache directory. Whatever
goes wrong reading the repository, the fill goes on without context and a line on stderr
says why; so does a bound that stopped the index short. A file with no other Python
files beside it, or a cache directory that cannot be written, is not worth a line.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from diffusion_infill.infill.context import RepoContext
from diffusion_infill.infill.context.discover import find_root
from diffusion_infill.infill.core.snippets import Snippet, Source
from diffusion_infill.infill.core.spans import Span

OFF, AUTO = "off", "auto"
# notes worth a line on stderr: a bound or a failed git stopped the index short. Nothing
# to index (a file alone) and a cache that cannot be written change no fill's outcome.
_SAID = ("stopped", "git ls-files")


class RepoSnippets:
    """The repositories indexed in this run, by root, and the snippets of a file."""

    def __init__(self, repo: str) -> None:
        self.repo = repo
        self._repos: dict[Path, RepoContext] = {}

    def _context(self, path: Path) -> RepoContext:
        root = None if self.repo == AUTO else Path(self.repo)
        if root is not None and not root.is_dir():
            raise OSError(f"--repo {self.repo}: not a directory")
        for known in self._repos.values():
            if known.relative(path) is not None and (root is None or known.root == root):
                return known
        repo = RepoContext.build(path, root=root)
        for line in repo.notes:
            if line.startswith(_SAID):
                print(f"infill: repository context ({repo.root}): {line}", file=sys.stderr)
        self._repos[repo.root] = repo
        return repo

    def snippets(self, path: str, text: str, spans: list[Span]) -> list[Snippet]:
        """The windows of other files like the code around `spans` of `text` (the file
        at `path`); none with `--repo off`, or with a line on stderr where the repository
        could not be read."""
        if self.repo == OFF or not spans:
            return []
        try:
            repo = self._context(Path(path))
            return repo.snippets(Path(path), text, [(s.start, s.end) for s in spans])
        except (OSError, ValueError, RuntimeError) as exc:
            print(f"infill: {path}: no repository context: {exc}", file=sys.stderr)
            return []

    def source(self, path: str, python: str | None) -> Source:
        """`file_source`, the `--repo` folder as the root where one is given."""
        given = self.repo not in (AUTO, OFF) and Path(self.repo).is_dir()
        return file_source(path, python, Path(self.repo) if given else None)


def file_source(path: str, python: str | None, root: Path | None = None) -> Source:
    """Where the file at `path` lives: its absolute path, its repository's root (`root`,
    else the one `--repo auto` finds, whether or not it is indexed) and the user's Python
    (`--python`)."""
    where = Path(os.path.abspath(path))
    top = Path(os.path.abspath(root)) if root is not None else find_root(where)[0]
    return Source(str(where), str(top), python)
