"""What a fill may not contain: the characters each span's tokens must avoid.

The sampler sets the logits of a span's `forbidden` ids to -inf (infill/core/sampler.py),
so a fill cannot close the string literal it sits in.
"""

from __future__ import annotations

from contextlib import suppress
from functools import lru_cache

from diffusion_infill.infill.core.scopes import PythonScopes
from diffusion_infill.infill.core.spans import Span
from diffusion_infill.model.denoiser import Denoiser


@lru_cache(maxsize=16)
def token_texts(denoiser: Denoiser) -> tuple[str | None, ...]:
    """Per id of the vocabulary, its text; None for the special ids and ids with no
    text of their own. One decode per id, once per denoiser."""
    sp = denoiser.special
    special = {sp.mask, sp.null, sp.pad}
    out: list[str | None] = []
    for t in range(denoiser.vocab_size):
        piece = None
        # an id with no text of its own raises: None
        with suppress(ValueError, KeyError, IndexError):
            piece = None if t in special else denoiser.decode([t])
        out.append(piece)
    return tuple(out)


@lru_cache(maxsize=16)
def ids_with(denoiser: Denoiser, chars: str) -> tuple[int, ...]:
    """The ids whose text holds any of `chars` (special ids never do), once per
    denoiser and set of characters."""
    return tuple(
        t
        for t, piece in enumerate(token_texts(denoiser))
        if piece is not None and any(c in piece for c in chars)
    )


def fill_limits(spans: list[Span], scopes: PythonScopes | None) -> list[str]:
    """Per span, the characters its fill may not contain: inside a string literal, the
    literal's quote character (and newlines, in a one-line literal), so that a fill cannot
    close the string or break its line; "" elsewhere.

    Not newlines in a hole with code after it on its line: forbidden there, the shipped
    model wrote `)):        return 1.` where it meant a line break, and grew to the
    256-token cap (docs/log/architecture.md, "Length")."""
    if scopes is None:
        return [""] * len(spans)
    out = []
    for s in spans:
        quote = scopes.string_quote(s.start, s.end)
        out.append("" if quote is None else quote[0] + ("" if len(quote) == 3 else "\n\r"))
    return out
