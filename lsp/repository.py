"""The `repositoryContext` setting: snippets of the user's repository for a fill.

The repository of a document is the workspace folder that holds it (the deepest), else
what infill/context finds from its path (git work tree, project, folder). Each is indexed
once, off the event loop (a thread), within infill/context's bounds, then kept (a fill
waits for it at most WAIT seconds, then goes on without it while it is built); before a
retrieval the open documents of that repository are indexed as the editor holds them, so
unsaved text wins over the disk. Whatever goes wrong (a deleted workspace folder, an
unreadable tree, a document that is not a file), the fill goes on without context and the
client's log says why, once per repository.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pygls.uris import to_fs_path

from diffusion_infill.infill.context import ContextSettings, RepoContext
from diffusion_infill.infill.context.discover import find_root
from diffusion_infill.infill.core.snippets import Snippet, Source

WAIT = 2.0  # seconds a fill waits for a repository's first index


def _path(uri: str) -> Path | None:
    path = to_fs_path(uri) if uri.startswith("file:") else None
    return Path(path) if path else None


class Repositories:
    """The indexed repositories of the workspace, by root."""

    def __init__(
        self,
        log: Callable[[str], None],
        folders: Callable[[], Sequence[str]],
        documents: Callable[[], Mapping[str, str]],
        settings: ContextSettings | None = None,
    ) -> None:
        self._log = log
        self._folders = folders  # the workspace folders' URIs
        self._documents = documents  # open documents: URI -> text
        self.settings = settings or ContextSettings()
        self._repos: dict[Path, asyncio.Task[RepoContext]] = {}
        self._pushed: dict[str, str] = {}  # path -> hash of the text indexed from the editor

    def _root(self, path: Path) -> Path:
        folders = [p for p in map(_path, self._folders()) if p is not None]
        holding = [f for f in folders if path.is_relative_to(f)]
        return max(holding, key=lambda f: len(f.parts)) if holding else find_root(path)[0]

    def source(self, uri: str, python: str = "") -> Source | None:
        """Where the document at `uri` lives, for jedi: its path, the workspace folder that
        holds it (else its repository's root) and the user's Python (`python`, "" for the
        worker's own); None for a document that is not a file."""
        path = _path(uri)
        if path is None:
            return None
        return Source(str(path), str(self._root(path)), python or None)

    async def _repo(self, root: Path, path: Path) -> RepoContext | None:
        """The index of `root`, started on first use; None while it is still being built
        past WAIT seconds (the fill goes on without it)."""
        task = self._repos.get(root)
        if task is None:
            task = asyncio.ensure_future(
                asyncio.to_thread(RepoContext.build, path, self.settings, root=root)
            )
            task.add_done_callback(lambda t: self._built(root, t))
            self._repos[root] = task
        try:
            return await asyncio.wait_for(asyncio.shield(task), WAIT)
        except TimeoutError:
            self._log(f"repository context ({root}): still indexing; this fill goes without")
            return None

    def _built(self, root: Path, task: asyncio.Task[RepoContext]) -> None:
        if task.cancelled():
            return
        if task.exception() is not None:
            self._log(f"no repository context for {root}: {task.exception()}")
            return
        for line in task.result().notes:
            self._log(f"repository context ({root}): {line}")

    def _push_documents(self, repo: RepoContext) -> None:
        """Index the open documents of `repo` whose text changed since last pushed."""
        for uri, text in self._documents().items():
            path = _path(uri)
            if path is None or repo.relative(path) is None:
                continue
            digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass")).hexdigest()
            if self._pushed.get(str(path)) != digest:
                self._pushed[str(path)] = digest
                repo.update(path, text)

    async def snippets(
        self, uri: str, text: str, holes: Sequence[tuple[int, int]]
    ) -> list[Snippet]:
        """The snippets for the holes of `text` (the document `uri`, or an excerpt of it:
        the lines around each hole are what is looked for); none where the document is
        not a file or its repository cannot be read (a line in the log says why)."""
        path = _path(uri)
        if path is None or not holes:
            return []
        try:
            repo = await self._repo(self._root(path), path)
            if repo is None:
                return []
            self._push_documents(repo)
            return repo.snippets(path, text, holes)
        except (OSError, ValueError, RuntimeError) as exc:
            self._log(f"no repository context for {uri}: {type(exc).__name__}: {exc}")
            return []

    def forget(self) -> None:
        """Drop every index (the workspace folders changed)."""
        self._repos.clear()
        self._pushed.clear()
