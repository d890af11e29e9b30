"""Fills copied from the code around a hole: what follows the same code elsewhere.

Code repeats itself. A hole inside a line (an expression, a call's arguments, a
condition) is often filled by text that follows the same code elsewhere in the buffer:
`self._cache[` before the hole, and `key]` after another `self._cache[` further up. On
validation part-of-line holes the truth is among these copies (at most `LIMIT`, about two
a hole) for one hole in six, and for one in nine where the network's own fill is wrong.

So, with the checks on, an in-line hole whose length is a guess gets its copies
(`context_copies`: the text after the longest tail of the hole's line before it that
occurs elsewhere, up to where the text after the hole on its line starts again). Once the
candidates have chosen, one more pass reads the hole's chosen fill and each copy, each
written as that many masks in place of the hole on its window's canvas, and scores each
by the mean log-probability the model gives its tokens there (`CopyRound`). The best
copy that scores above the fill and passes the checks replaces it
(infill/core/candidates.py); a tie keeps the fill (docs/log/architecture.md, "Copies of
the code around a hole"). One
canvas per fill and copy; no decode.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Sequence

import numpy as np

from diffusion_infill.infill.core.alternatives import kept, shorter
from diffusion_infill.infill.core.canvas import Canvas
from diffusion_infill.infill.core.copy_texts import context_copies
from diffusion_infill.infill.core.lines import Frame
from diffusion_infill.infill.core.scoring import log_softmax
from diffusion_infill.infill.core.spans import Span
from diffusion_infill.infill.core.steps import LogitsRequest
from diffusion_infill.model.denoiser import CacheHint

_SERIALS = itertools.count()  # CopyRound's cache keys: unique in this process


def copy_probes(
    text: str,
    ranges: Sequence[tuple[int, int]],
    holes: set[int],
    encode: Callable[[str], list[int]],
) -> dict[int, list[list[int]]]:
    """The copies (as ids) of each hole of `holes` (indices of `ranges` in `text`, its
    holes neutralised) that has any."""
    out = {}
    for i in sorted(holes):
        copies = context_copies(text, *ranges[i])
        if copies:
            out[i] = [encode(c) for c in copies]
    return out


PREFIX_ROOM = 128  # tokens of a canvas's left context other files' code may displace


def _prefixed(
    prefix: list[int], out: list[int], at: int, canvas: Canvas, source: Hashable | None
) -> tuple[list[int], int, Hashable | None]:
    """`out` (a copy of `canvas`, its hole at `at`) read after `prefix` (its end, as much
    as the budget holds, displacing at most PREFIX_ROOM tokens of the left context); the
    canvas, the hole's position and the cache source (None: computed whole)."""
    if not prefix:
        return out, at, source
    room = canvas.budget - len(out) + min(PREFIX_ROOM, len(canvas.left))
    keep = prefix[len(prefix) - min(len(prefix), max(room, 0)) :]
    if not keep:
        return out, at, source
    cut = max(0, len(keep) + len(out) - canvas.budget)  # left context displaced
    return keep + out[cut:], at + len(keep) - cut, None


class CopyRound:
    """The pass that scores each probed hole's chosen fill (k 0) against its copies (k
    1..): `ask` once the candidates have chosen, `requests` for the pass, then `ranked`
    with its logits. Each fill is written as that many masks in place of the hole on a
    copy of its window's canvas (the window's other spans as decoded); with context reuse
    the copy starts from the window's entries (CacheHint `source`), so only the hole and a
    margin around it are computed. A fill is scored as its text encodes, as its copies
    are, not as the model spelt it."""

    def __init__(
        self,
        copies: dict[int, list[list[int]]],
        encode: Callable[[str], list[int]],
        mask: int,
        frames: Sequence[Frame | None] = (),
        prefixes: dict[int, list[int]] | None = None,
        bonus: dict[int, list[float]] | None = None,
    ) -> None:
        self.copies = copies
        # by hole and copy: what is added to the copy's mean log-probability (a line copy
        # from another file: its neighbours' similarity, infill/core/cross_copies.py)
        self._bonus = {
            (i, tuple(ids)): b
            for i, found in (bonus or {}).items()
            for ids, b in zip(copies.get(i, []), found, strict=False)
        }
        # by hole: code of other files its fill and copies are read after (cross_copies.py)
        self._prefixes = prefixes or {}
        self._frames = frames  # by hole: a whole-line hole's frame (its fill read without it)
        self._encode = encode
        self._mask = mask
        self.requests: list[LogitsRequest] = []
        self._rows: list[tuple[int, int, list[int]]] = []  # per request: hole, k, its ids
        self._serial = next(_SERIALS)

    def keys(self) -> list[Hashable]:
        """The CacheHint keys of the requests (`ask`), for the driver to drop."""
        return [r.hint.key for r in self.requests if r.hint is not None]

    def ask(
        self,
        chosen: dict[int, str],
        windows: Sequence[Canvas],
        sources: Sequence[Hashable] | None,
    ) -> bool:
        """Build the pass for the probed holes whose chosen fill (`chosen`: text by hole)
        is not blank and has a copy other than itself, each on its window's canvas
        (`windows`; `sources`: their cache keys, None without context reuse); whether
        there is one."""
        self.requests, self._rows = [], []
        for w, canvas in enumerate(windows):
            for s in canvas.spans:
                text = self._code(s.index, chosen.get(s.index, ""))
                own = self._encode(text) if text.strip() else []
                # a copy of the fill's own text scores the same: not asked
                copies = [c for c in self.copies.get(s.index, []) if c != own]
                asked = [
                    (k, ids, self._request(canvas, s.index, k, ids, sources and sources[w]))
                    for k, ids in enumerate([own, *copies] if own and copies else [])
                ]
                asked = [(k, ids, r) for k, ids, r in asked if r is not None]
                if len(asked) > 1 and asked[0][0] == 0:  # the fill and a copy or more
                    self.requests += [r for _, _, r in asked]
                    self._rows += [(s.index, k, ids) for k, ids, _ in asked]
        return bool(self.requests)

    def _code(self, span: int, text: str) -> str:
        """A chosen fill's text as the model wrote it: a whole-line hole's without its
        frame's indentation and line break."""
        frame = self._frames[span] if span < len(self._frames) else None
        if frame is None or not text.startswith(frame.head) or not text.endswith(frame.tail):
            return text
        return text[len(frame.head) : len(text) - len(frame.tail)]

    def _request(
        self, canvas: Canvas, span: int, k: int, ids: list[int], source: Hashable | None
    ) -> LogitsRequest | None:
        """`ids` as masks in place of `span` on a copy of `canvas`; None past its budget."""
        spans = [
            shorter(s, len(ids), exact=True, mask=self._mask) if s.index == span else kept(s)
            for s in canvas.spans
        ]
        copy = canvas.with_spans(spans)
        out = copy.ids()
        if len(out) > canvas.budget:
            return None
        at = copy.offsets()[[s.index for s in spans].index(span)]
        out, at, source = _prefixed(self._prefixes.get(span, []), out, at, canvas, source)
        positions = list(range(at, at + len(ids)))
        key = ("infill-copy", self._serial, span, k)
        hint = CacheHint(key, tuple(positions), True, source=source) if source else None
        return LogitsRequest(out, positions, hint)

    def ranked(self, logits: Sequence[np.ndarray]) -> dict[int, list[list[int]]]:
        """Per hole scored, the copies (ids) whose mean log-probability (plus its bonus)
        is above its own fill's, best first (a tie: the copy found first)."""
        if len(logits) != len(self._rows):
            raise ValueError(f"{len(logits)} logit arrays for {len(self._rows)} fills scored")
        scores: dict[int, list[tuple[float, int, list[int]]]] = {}
        for (i, k, ids), rows in zip(self._rows, logits, strict=True):
            logp = log_softmax(np.asarray(rows))[np.arange(len(ids)), ids]
            bonus = self._bonus.get((i, tuple(ids)), 0.0) if k else 0.0
            scores.setdefault(i, []).append((float(logp.mean()) + bonus, k, ids))
        out = {}
        for i, entries in scores.items():
            own = next((e[0] for e in entries if e[1] == 0), None)
            if own is not None:
                better = [e for e in entries if e[1] and e[0] > own]
                out[i] = [ids for _, _, ids in sorted(better, key=lambda e: (-e[0], e[1]))]
        return out


def inline_holes(text: str, spans: Sequence[Span]) -> frozenset[int]:
    """The indices of `spans` that start after code on their line (not only indentation):
    the holes whose fills meet copies of the code around them."""
    return frozenset(
        i for i, s in enumerate(spans) if text[text.rfind("\n", 0, s.start) + 1 : s.start].strip()
    )
