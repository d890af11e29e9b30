"""What travels with a fill about the user's repository: `Snippet`s of other files, and
the `Source` of the text itself.

A client (the `infill` command, the language server) reads the repository and retrieves
the windows of other files most like the code around each hole (infill/context/); each
travels with the request as a `Snippet`, its path and its text, so that a remote worker
never reads the user's disk. The engine only reads them (infill/core/cross_copies.py);
`check_context` bounds what one request may carry.

A `Source` says where the text lives: its file, the repository's root and the Python
environment the user runs it with. jedi reads them to resolve the text's imports (the
`member` check, infill/core/checks.py): a sibling module, the package's own classes, the
environment's libraries. A worker on another machine cannot see them, and jedi then judges
what it can without them. Pure Python: the language server imports this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from diffusion_infill.infill.core.errors import InputError, LimitError

MAX_SNIPPETS = 32  # snippets one request may carry
MAX_SNIPPET_CHARS = 8_000  # characters of one snippet's text
MAX_PATH_CHARS = 1_000  # characters of one snippet's path


@dataclass(frozen=True)
class Source:
    """Where a text lives, each part optional: the file's path, the repository's root (its
    imports resolve from there; default: the file's folder, else the working directory),
    and the Python interpreter or virtual environment of the user's code (default: the
    active virtual environment, else the interpreter running the engine)."""

    path: str | None = None
    root: str | None = None
    python: str | None = None


@dataclass(frozen=True)
class Snippet:
    """A window of another file: its path (relative to the repository's root, as shown to
    people) and its text (whole lines)."""

    path: str
    text: str


def check_context(context: Sequence[Snippet]) -> list[Snippet]:
    """`context` as a list, or an InputError / LimitError naming what is wrong: not
    snippets, a text with NUL characters or lone surrogates, over the limits above."""
    if isinstance(context, str | bytes) or not isinstance(context, Sequence):
        raise InputError(f"context must be a sequence of Snippet, got {type(context).__name__}")
    out = list(context)
    if len(out) > MAX_SNIPPETS:
        raise LimitError(f"{len(out)} context snippets; the limit is {MAX_SNIPPETS}")
    for k, s in enumerate(out):
        if not isinstance(s, Snippet) or not isinstance(s.path, str) or not isinstance(s.text, str):
            raise InputError(f"context snippet {k} is not a Snippet(path: str, text: str)")
        if len(s.text) > MAX_SNIPPET_CHARS or len(s.path) > MAX_PATH_CHARS:
            raise LimitError(
                f"context snippet {k} ({s.path[:80]!r}) is over {MAX_SNIPPET_CHARS} characters"
                f" of text or {MAX_PATH_CHARS} of path"
            )
        if "\x00" in s.text or "\x00" in s.path:
            raise InputError(f"context snippet {k} ({s.path[:80]!r}) holds a NUL character")
        try:
            s.text.encode("utf-8")
            s.path.encode("utf-8")
        except UnicodeEncodeError:
            raise InputError(f"context snippet {k} is not valid Unicode (lone surrogate)") from None
    return out


def check_source(source: Source | None) -> Source | None:
    """`source`, or an InputError naming what is wrong: not a Source, a part that is not a
    string or holds a NUL character, over MAX_PATH_CHARS."""
    if source is None:
        return None
    if not isinstance(source, Source):
        raise InputError(f"source must be a Source, got {type(source).__name__}")
    for name in ("path", "root", "python"):
        part = getattr(source, name)
        if part is None:
            continue
        if not isinstance(part, str):
            raise InputError(f"source {name} must be a string, got {type(part).__name__}")
        if len(part) > MAX_PATH_CHARS or "\x00" in part:
            raise InputError(
                f"source {name} is over {MAX_PATH_CHARS} characters or holds a NUL character"
            )
    return source
