"""jedi's Script of a text where it lives (its path, the project's root, the user's Python),
kept for the last few texts; and which texts are too deep to hand to jedi at all
(infill/core/jedi_names.py asks it). The caller holds jedi_names' lock around every call."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from pathlib import Path
from typing import Any

MAX_DEPTH = 60  # brackets / indentation levels deeper than this: not handed to jedi
SCRIPTS = 8  # parsed texts kept

Where = tuple[str | None, str | None, str | None]  # path, root, environment: cache keys
_scripts: OrderedDict[tuple[str, Where], Any] = OrderedDict()
_environments: dict[str, Any] = {}  # jedi's environments by the path they were named by


def digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def too_deep(text: str, limit: int = MAX_DEPTH) -> bool:
    """Brackets nested, or lines indented, deeper than `limit` (jedi's parser and inference
    recurse on both)."""
    depth = 0
    for ch in text:
        if ch in "([{":
            depth += 1
            if depth > limit:
                return True
        elif ch in ")]}":
            depth = max(0, depth - 1)
    return any(
        len(line) - len(line.lstrip(" ")) > 4 * limit for line in text.split("\n") if line.strip()
    )


def _project(path: str | None, root: str | None) -> Any:
    import jedi

    where = Path(root) if root else Path(path).parent if path else Path.cwd()
    return jedi.Project(where, load_unsafe_extensions=False)


def _environment(python: str) -> Any:
    """jedi's environment of the interpreter or virtual environment at `python`, kept (each
    starts a subprocess of that interpreter when it lists compiled modules)."""
    import jedi

    found = _environments.get(python)
    if found is None:
        found = _environments[python] = jedi.create_environment(python, safe=True)
    return found


def script_for(text: str, path: str | None, root: str | None, environment: str | None) -> Any:
    """jedi's Script of `text`, kept for SCRIPTS texts (by hash)."""
    key = (digest(text), (path, root, environment))
    found = _scripts.get(key)
    if found is not None:
        _scripts.move_to_end(key)
        return found
    import jedi

    env = _environment(environment) if environment else None
    script = jedi.Script(text, path=path, project=_project(path, root), environment=env)
    _scripts[key] = script
    while len(_scripts) > SCRIPTS:
        _scripts.popitem(last=False)
    return script


def forget_scripts() -> None:
    """Forget the kept Scripts (their parses); the environments stay."""
    _scripts.clear()
