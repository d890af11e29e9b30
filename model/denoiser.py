"""The Denoiser interface: what the engine may ask of a network, and nothing more.

The engine (infill/) works on token ids and text. A denoiser owns a tokenizer and a network
and answers one question: given canvases of token ids (some of them the mask id), what are
the logits at these positions? Everything else (which positions to commit, when to stop,
how long a span is) is decided in the engine, so the engine is testable with a small fake.

This module is the contract between the two, so it lives with the networks that fulfil it
and imports neither torch nor the engine: `model.hf.HFDenoiser` implements it, the engine
and the tests' fakes use it. `ModelLoadError` is the model layer's one error type; the
programs that load a model (the worker, the `infill` command) report it.

Contract with the engine (see docs/ARCHITECTURE.md, "Length contract"):
- `special.mask` marks a position to be denoised.
- `special.null` is "no token here". A span allocation that the model fills only partly
  ends in null tokens; the engine drops them. The model was trained so that nulls fill the
  *tail* of an allocation. A span whose allocation is entirely filled with code tokens may
  be too short: the engine grows it by appending mask positions at its end.
- `encode` / `decode` round-trip exactly, and text that happens to spell a special token
  (`<mask>` inside a string literal, say) is encoded as ordinary text.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class SpecialIds:
    mask: int  # position to be denoised
    null: int  # "no token": dropped from a fill; marks the unused tail of an allocation
    pad: int  # batch padding, never attended to


@dataclass(frozen=True)
class CacheHint:
    """Lets a denoiser reuse the context's keys/values between the steps of one canvas.

    A denoiser may ignore hints (the fakes do); one that honours them recomputes only the
    `active` positions unless `refresh` is set or it holds nothing for `key` yet. The
    result is then an approximation (the context's cached entries were computed against
    older span tokens), so the sampler refreshes every few steps.
    """

    key: Hashable  # the same object for one canvas across the steps of one request
    active: tuple[int, ...]  # canvas positions that may differ from the cached canvas
    refresh: bool  # recompute the whole canvas and replace the cached entries
    # With `refresh`: the name of entries an earlier request left (e.g. the last
    # keystroke's completion of this document). The denoiser may build this canvas's
    # entries from them, carrying over what the two canvases share and recomputing the
    # rest and `active`; the new entries are kept under that name too, for the next request.
    carry: Hashable | None = None
    # With `refresh`: the key of another canvas's entries (a canvas of the same request
    # this one was copied from, e.g. the length contest's copies of a window). Built from
    # them as from `carry`, but nothing is kept under that key: it stays the other's.
    source: Hashable | None = None
    # For denoisers whose noise is uniform random tokens (model/diffusion_gemma.py): the
    # seed of the noise this canvas's masked slots get (the same seed, the same noise), and
    # the temperature the sampler divides this pass's logits by; a self-conditioning
    # denoiser feeds logits / temperature back into the canvas's next pass. Others ignore
    # both.
    seed: int | None = None
    temperature: float | None = None

    @property
    def origin(self) -> Hashable | None:
        """The entries a refresh may be built from: `carry`'s, else `source`'s."""
        return self.carry if self.carry is not None else self.source


@runtime_checkable
class Denoiser(Protocol):
    """A masked-diffusion network behind a tokenizer. Implementations: model.hf.HFDenoiser
    (the shipped model or any AutoModelForMaskedLM) and the tests' fakes.

    A denoiser may also have `forget(key)`: the engine calls it with a CacheHint key once
    that canvas is done, so cached entries can be dropped."""

    name: str  # shown in stats and `info`
    special: SpecialIds
    vocab_size: int
    max_length: int  # the longest canvas, in tokens, one forward pass accepts

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`; decode(encode(text)) == text for every str."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """Text of `ids` (special ids must not be passed)."""
        ...

    def logits(
        self,
        canvases: Sequence[Sequence[int]],
        positions: Sequence[Sequence[int]],
        hints: Sequence[CacheHint | None] | None = None,
    ) -> list[np.ndarray]:
        """One forward pass over a batch of canvases (of any lengths <= max_length).

        Returns, for canvas i, a float32 array (len(positions[i]), vocab_size) of logits at
        those positions only. One call is one forward pass (NFE) per canvas. `hints`
        (optional, one per canvas) allow reuse of cached context keys/values; positions
        must then lie among the hint's active positions.
        """
        ...


class ModelLoadError(Exception):
    """The model directory is missing, incomplete or corrupt (or torch is not installed).
    The message is for people and names the directory."""
