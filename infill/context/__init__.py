"""Repository context: the rest of the user's repository, read for a fill.

`RepoContext.build(path)` finds a file's repository (infill/context/discover.py), indexes
its source files into windows (infill/context/index.py, cached by content hash under the
user's cache directory: infill/context/cache.py) within `ContextSettings`' bounds, and
`snippets(...)` retrieves the windows of other files most like the code around each hole:
the `Snippet`s a fill request carries (infill/core/snippets.py). Reads the disk, never
writes the repository; no torch, no numpy (the language server uses it).
"""

from __future__ import annotations

from diffusion_infill.infill.context.provider import RepoContext
from diffusion_infill.infill.context.settings import ContextSettings, cache_dir

__all__ = ["ContextSettings", "RepoContext", "cache_dir"]
