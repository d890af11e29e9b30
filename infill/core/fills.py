"""A span's tokens as text: valid UTF-8, cut where the fill echoes the code after it.

Byte-level tokens can spell an invalid UTF-8 sequence (`valid_text`); an in-line hole's fill
runs on into the code after it (`decoded_fill`, infill/core/echo.py).
"""

from __future__ import annotations

from collections.abc import Callable

from diffusion_infill.infill.core.echo import end_fill, unspaced
from diffusion_infill.infill.core.errors import DenoiserError

REPLACEMENT = "\ufffd"  # what a byte-level decode puts where the bytes are not UTF-8


def valid_text(
    ids: list[int], decode: Callable[[list[int]], str], allowed: bool, index: int
) -> tuple[str, int]:
    """A span's tokens as text, and how many were used. Byte-level tokens can spell an
    invalid UTF-8 sequence, which decodes to U+FFFD: text the model never meant. A fill
    that ends inside a character loses its trailing partial tokens; one whose invalid bytes
    sit elsewhere is declined (DenoiserError), never written into the user's text. When the
    text already holds a U+FFFD (`allowed`), the model may have copied it: kept."""
    text = decode(ids) if ids else ""
    if REPLACEMENT not in text or allowed:
        return text, len(ids)
    while ids and REPLACEMENT in decode(ids[-1:]) and REPLACEMENT in text:
        ids = ids[:-1]
        text = decode(ids) if ids else ""
    if REPLACEMENT in text:
        raise DenoiserError(
            f"the model's tokens for span {index + 1} are not valid UTF-8; nothing was changed"
        )
    return text, len(ids)


def decoded_fill(
    ids: list[int],
    decode: Callable[[list[int]], str],
    allowed: bool,
    index: int,
    key: str | None,
    spaced: bool = False,
) -> tuple[str, int]:
    """`valid_text`, cut where the fill writes `key` (the code after its span on the
    span's line) or its own last line again (infill/core/echo.py `end_fill`; never for a
    span of exact length, `key` None), without its leading spaces when its span starts
    after one (`spaced`: echo.py `after_space`); the count is of the tokens kept."""
    text, n = valid_text(ids, decode, allowed, index)
    cut = end_fill(text, key)
    if cut != text:
        n = next(k for k in range(n + 1) if len(decode(ids[:k]) if k else "") >= len(cut))
    return (unspaced(cut) if spaced else cut), n
