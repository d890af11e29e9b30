"""Fake denoisers for engine tests: a char-level vocabulary and scripted logits.

Vocabulary: 0 pad, 1 mask, 2 null, then two ids per character. `encode` maps a character
to its *context* id; the fake predicts *fill* ids for the same characters. Both decode to
the character (like two BPE spellings of one text), and on a canvas the fake can tell span
slots (mask, null, fill ids) from context, which is how it finds spans without any help
from the engine.

`TargetDenoiser(targets)` knows what each span should become and predicts it: at slot j of
a span the right character (or null past the end of the target) with probability
`confidence` (a number, or a function of (span, slot, call)). `script` overrides single
predictions, e.g. a wrong token early on to exercise remasking.

Spans on a canvas are numbered left to right. With `targets` as a list, span k of every
canvas gets targets[k] (one canvas). With a dict, a span gets the target whose key ends
the text just before it (for requests split over several canvases).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from diffusion_infill.model.denoiser import CacheHint, SpecialIds

PAD, MASK, NULL = 0, 1, 2
CAPACITY = 400  # distinct characters the fake can hold
CTX_BASE = 3
FILL_BASE = CTX_BASE + CAPACITY
VOCAB = FILL_BASE + CAPACITY

Prob = float | Callable[[int, int, int], float]  # (span, slot, call) -> p
Script = Callable[[int, int, int], "tuple[str | None, float] | None"]


class CharTokenizer:
    """One id per character; ids are handed out as characters are first seen."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._chars: list[str] = []

    def index(self, ch: str) -> int:
        if ch not in self._ids:
            if len(self._chars) >= CAPACITY:
                raise ValueError("fake vocabulary is full")
            self._ids[ch] = len(self._chars)
            self._chars.append(ch)
        return self._ids[ch]

    def encode(self, text: str) -> list[int]:
        return [CTX_BASE + self.index(ch) for ch in text]

    def fill_id(self, ch: str) -> int:
        return FILL_BASE + self.index(ch)

    def decode(self, ids: Sequence[int]) -> str:
        out = []
        for t in ids:
            if t < CTX_BASE or t >= VOCAB:
                raise ValueError(f"decode() got special or unknown id {t}")
            i = (t - CTX_BASE) % CAPACITY
            # A character never seen (a sampled id): a private-use character, stable.
            out.append(self._chars[i] if i < len(self._chars) else chr(0xE000 + i))
        return "".join(out)


def is_slot(t: int) -> bool:
    return t in (MASK, NULL) or t >= FILL_BASE


class TargetDenoiser:
    """A denoiser that knows the answer; see the module docstring."""

    special = SpecialIds(mask=MASK, null=NULL, pad=PAD)
    vocab_size = VOCAB

    def __init__(
        self,
        targets: Sequence[str] | Mapping[str, str],
        *,
        confidence: Prob = 0.95,
        script: Script | None = None,
        max_length: int = 512,
        name: str = "fake",
    ) -> None:
        self.targets = targets
        self.confidence = confidence
        self.script = script
        self.max_length = max_length
        self.name = name
        self.tok = CharTokenizer()
        self.calls: list[tuple[list[list[int]], list[list[int]]]] = []
        self.hints: list[Sequence[CacheHint | None] | None] = []  # per call, as passed
        self.forgotten: list[object] = []

    def forget(self, key: object) -> None:
        self.forgotten.append(key)

    # -- tokenizer ------------------------------------------------------------------
    def encode(self, text: str) -> list[int]:
        return self.tok.encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        return self.tok.decode(ids)

    # -- counters -------------------------------------------------------------------
    @property
    def nfe(self) -> int:
        return sum(len(canvases) for canvases, _ in self.calls)

    # -- network --------------------------------------------------------------------
    def spans_of(self, canvas: Sequence[int]) -> list[tuple[int, int]]:
        """[start, end) of each run of slot ids on the canvas."""
        runs, i = [], 0
        while i < len(canvas):
            if is_slot(canvas[i]):
                j = i
                while j < len(canvas) and is_slot(canvas[j]):
                    j += 1
                runs.append((i, j))
                i = j
            else:
                i += 1
        return runs

    def _target(self, canvas: Sequence[int], k: int, start: int) -> tuple[int, str]:
        if isinstance(self.targets, Mapping):
            before = self.decode([t for t in canvas[:start] if t >= CTX_BASE])
            for n, (key, value) in enumerate(self.targets.items()):
                if before.endswith(key):
                    return n, value
            raise AssertionError(f"no target for the span after {before[-20:]!r}")
        return k, self.targets[k]

    def _p(self, span: int, slot: int, call: int) -> float:
        c = self.confidence
        return c(span, slot, call) if callable(c) else c

    def logits(
        self,
        canvases: Sequence[Sequence[int]],
        positions: Sequence[Sequence[int]],
        hints: Sequence[CacheHint | None] | None = None,
    ) -> list[np.ndarray]:
        assert len(canvases) == len(positions)
        self.calls.append(([list(c) for c in canvases], [list(p) for p in positions]))
        self.hints.append(hints)
        call = len(self.calls)
        out = []
        for canvas, pos in zip(canvases, positions, strict=True):
            assert len(canvas) <= self.max_length, "canvas longer than max_length"
            rows = np.full((len(pos), VOCAB), -30.0, dtype=np.float32)
            runs = self.spans_of(canvas)
            for r, p in enumerate(pos):
                hit = [(k, s) for k, (s, e) in enumerate(runs) if s <= p < e]
                if not hit:
                    continue  # a context position: flat logits
                k, start = hit[0]
                span, target = self._target(canvas, k, start)
                slot = p - start
                want: str | None = target[slot] if slot < len(target) else None
                prob = self._p(span, slot, call)
                if self.script is not None:
                    override = self.script(span, slot, call)
                    if override is not None:
                        want, prob = override
                token = NULL if want is None else self.tok.fill_id(want)
                rest = max((1.0 - prob) / CAPACITY, 1e-12)
                rows[r, FILL_BASE:] = math.log(rest)  # context ids stay at -30
                rows[r, token] = math.log(max(prob, 1e-12))
            out.append(rows)
        return out


class FixedDenoiser(TargetDenoiser):
    """Returns the same given logits row at every position (for sampler edge cases)."""

    def __init__(self, row: np.ndarray, **kw: object) -> None:
        super().__init__([], **kw)  # type: ignore[arg-type]
        self.row = np.asarray(row, dtype=np.float32)

    def logits(
        self,
        canvases: Sequence[Sequence[int]],
        positions: Sequence[Sequence[int]],
        hints: Sequence[CacheHint | None] | None = None,
    ) -> list[np.ndarray]:
        self.calls.append(([list(c) for c in canvases], [list(p) for p in positions]))
        return [np.tile(self.row, (len(p), 1)) for p in positions]
