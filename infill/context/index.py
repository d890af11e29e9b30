"""The windows of a repository's files and their retrieval by token-set Jaccard.

Each file is cut into windows of `window_lines` lines every `stride_lines` lines
(RepoCoder's 20 and 10), each window the set of its identifiers (`tokens`). An inverted
index maps a token to the windows that hold it (compact arrays of window numbers), so a
query costs the postings of its tokens, not the windows of the repository; tokens held by
more than COMMON of the windows (`self`, `return`) say little and are not counted.
Retrieval counts the shared tokens of the windows that hold the query's rarest tokens
(at most MAX_POSTINGS window numbers), then ranks the SHORTLIST that share the most by
|q & w| / |q | w|, the windows of one file kept apart by a
stride, the query's own file left out.

Re-indexing a file (`put`) retires its windows and appends the new ones: the postings of
a retired window stay until the next `compact`, skipped when counted. Pure Python: the
language server imports it.
"""

from __future__ import annotations

import re
from array import array
from collections import Counter
from dataclasses import dataclass, field

_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
COMMON = 0.05  # a token in more than this share of the windows is not counted
MIN_COMMON = 2_000  # ... and in more than this many
MAX_POSTINGS = 10_000  # window numbers counted for one query at most (its rarest tokens')
SHORTLIST = 50  # windows sharing the most tokens ranked by Jaccard, per window asked


def tokens(text: str) -> frozenset[str]:
    """The identifiers (and keywords) of `text`."""
    return frozenset(_TOKEN.findall(text))


def block_tokens(lines: list[str], stride: int) -> list[str]:
    """The tokens of each block of `stride` lines, each block's as one space-separated
    string (what the cache keeps)."""
    return [
        " ".join(sorted(tokens("\n".join(lines[b : b + stride]))))
        for b in range(0, max(len(lines), 1), stride)
    ]


@dataclass
class _File:
    windows: list[int]  # its window numbers
    text: str  # what was indexed
    starts: array  # where each window's first line starts in `text`


@dataclass
class RepoIndex:
    """Windows of files by path (relative, POSIX), their postings and text."""

    window_lines: int = 20
    stride_lines: int = 10
    files: dict[str, _File] = field(default_factory=dict)
    _owner: list[str | None] = field(default_factory=list)  # window -> path (None: retired)
    _start: array = field(default_factory=lambda: array("I"))  # window -> first line
    _size: array = field(default_factory=lambda: array("I"))  # window -> tokens
    _postings: dict[str, array] = field(default_factory=dict)
    live: int = 0  # windows not retired

    def put(self, path: str, text: str, blocks: list[str] | None = None) -> list[str]:
        """Index `path` as `text` (its windows retired first, if any); `blocks`: its
        `block_tokens`, if known (from the cache). Returns the blocks."""
        self.drop(path)
        lines = text.split("\n")
        blocks = blocks if blocks is not None else block_tokens(lines, self.stride_lines)
        sets = [set(b.split()) for b in blocks]
        per = max(1, self.window_lines // self.stride_lines)
        starts = range(0, max(1, len(sets) - per + 1))
        numbers = []
        for b in starts:
            window = set().union(*sets[b : b + per])
            w = len(self._owner)
            self._owner.append(path)
            self._start.append(b * self.stride_lines)
            self._size.append(len(window))
            for t in window:
                posting = self._postings.get(t)
                if posting is None:
                    posting = self._postings[t] = array("I")
                posting.append(w)
            numbers.append(w)
        at, starts = 0, array("I")
        for k, line in enumerate(lines):
            if k % self.stride_lines == 0:
                starts.append(at)
            at += len(line) + 1
        self.files[path] = _File(numbers, text, starts)
        self.live += len(numbers)
        return blocks

    def drop(self, path: str) -> None:
        """Retire the windows of `path` (nothing if it is not indexed)."""
        old = self.files.pop(path, None)
        if old is not None:
            for w in old.windows:
                self._owner[w] = None
            self.live -= len(old.windows)

    def windows(self) -> int:
        """Windows numbered so far, retired ones included."""
        return len(self._owner)

    def compact(self) -> None:
        """Index the live files again from their texts, dropping retired postings."""
        files = {p: f.text for p, f in self.files.items()}
        self.files, self._owner, self._postings, self.live = {}, [], {}, 0
        self._start, self._size = array("I"), array("I")
        for path, text in files.items():
            self.put(path, text)

    def search(
        self, query: str, k: int, exclude: str | None = None
    ) -> list[tuple[str, int, float]]:
        """The `k` windows most like `query` (Jaccard of their token sets, the common
        tokens aside), as (path, first line, score), best first; at most one of
        overlapping windows of a file, none of `exclude`, none that shares no token."""
        q = tokens(query)
        if not q or not self.live:
            return []
        common = max(MIN_COMMON, COMMON * self.live)
        postings = sorted(
            (p for p in map(self._postings.get, q) if p is not None and len(p) <= common),
            key=len,
        )
        counts: Counter[int] = Counter()
        budget = MAX_POSTINGS
        for posting in postings:  # the rarest tokens first, within the budget
            budget -= len(posting)
            if budget < 0:
                break
            counts.update(posting)
        shared = sorted(counts.values(), reverse=True)
        least = shared[min(len(shared), SHORTLIST * k) - 1] if shared else 1
        scored = [
            (n / (len(q) + self._size[w] - n), w)
            for w, n in counts.items()
            if n >= least and self._owner[w]
        ]
        scored.sort(reverse=True)
        out: list[tuple[str, int, float]] = []
        taken: dict[str, list[int]] = {}
        for score, w in scored:
            path, start = self._owner[w], self._start[w]
            if path is None or path == exclude:
                continue
            if any(abs(start - s) < self.window_lines for s in taken.get(path, [])):
                continue
            taken.setdefault(path, []).append(start)
            out.append((path, start, score))
            if len(out) == k:
                break
        return out

    def window_text(self, path: str, start: int) -> str:
        """The lines of the window of `path` that starts at line `start`."""
        f = self.files[path]
        block = start // self.stride_lines
        per = self.window_lines // self.stride_lines
        begin = f.starts[block]
        end = f.starts[block + per] - 1 if block + per < len(f.starts) else len(f.text)
        return f.text[begin:end]
