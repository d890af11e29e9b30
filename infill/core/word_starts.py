"""A hole right after the start of a word: the model writes the word whole.

A user who has typed `self._lookup_layer.loa` and waits for the rest gives the model a
context whose last token is `loa`, a piece the tokenizer makes only where a word is cut:
it writes `load` as one token, so the model has rarely seen what follows `loa`, and
continuing it wrote `___storestore._store...` where `load_own_variables(store)` was meant.
Here the span starts where that last token starts instead: the typed piece (the word's
head) moves from the context into the span, and the span's first slot may take only the
tokens whose text starts with it (`load`, `loaded`, `loader`, ...), so the model writes
the word as it has seen words written. The fill of the span as asked is the fill's text
after the head (infill/core/prepared.py); a fill that does not start with it (a copy of
other code) is held back.

Only an insertion point or a hole marker right after a word character, not in a span of
whole lines or one whose tokens are given, and only where some token other than the head
itself starts with it.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache

from diffusion_infill.infill.core.jedi_known import word_start
from diffusion_infill.infill.core.limits import token_texts
from diffusion_infill.infill.core.spans import Span
from diffusion_infill.model.denoiser import Denoiser

MAX_HEAD_TOKENS = 4  # a word's head is at most this many of its tokens
LINE_TAIL = 80  # characters of the line before a span read for its head


def word_heads(
    text: str,
    spans: Sequence[Span],
    denoiser: Denoiser,
    *,
    rewrite: bool,
    decided: Sequence[list[int] | None],
) -> list[str]:
    """Per span, the word's head its fill takes over ("" for none): the text of the last
    tokens of its line before it that are pieces of the word being typed (at most
    `MAX_HEAD_TOKENS`), as many as some other token starts with (`pe` of `ap`+`pe` where
    no token starts with `appe`). A span of text being rewritten is never moved, nor one
    whose tokens are given."""
    out = []
    for s, given in zip(spans, decided, strict=True):
        inserted = s.start == s.end or not rewrite
        out.append(_head(text, s.start, denoiser) if inserted and given is None else "")
    return out


def _head(text: str, at: int, denoiser: Denoiser) -> str:
    """The longest run of the line's last word tokens before `at` that another token
    starts with ("" for none)."""
    if word_start(text, at) == at:  # not right after a word character
        return ""
    # the line's last characters are enough for its last tokens (a minified line is long)
    line = text[max(text.rfind("\n", 0, at) + 1, at - LINE_TAIL) : at]
    pieces = [denoiser.decode([t]) for t in denoiser.encode(line)]
    run = 0  # the last tokens that are a word's pieces (the first may start with a space)
    while run < len(pieces) and _word_piece(pieces[-1 - run]):
        run += 1
    for k in range(min(run, MAX_HEAD_TOKENS), 0, -1):
        head = "".join(pieces[-k:])
        if line.endswith(head) and len(continuing(denoiser, head)) > 1:
            return head
    return ""


def _word_piece(piece: str) -> bool:
    core = piece[1:] if piece.startswith(" ") else piece
    return bool(core) and word_start(core, len(core)) == 0


@lru_cache(maxsize=4096)
def continuing(denoiser: Denoiser, head: str) -> tuple[int, ...]:
    """The ids whose text starts with `head` (special ids never do), once per denoiser and
    head: a range of the vocabulary's texts in sorted order."""
    texts, ids = _sorted_texts(denoiser)
    found = []
    for k in range(bisect_left(texts, head), len(texts)):
        if not texts[k].startswith(head):
            break
        found.append(ids[k])
    return tuple(sorted(found))


@lru_cache(maxsize=16)
def _sorted_texts(denoiser: Denoiser) -> tuple[list[str], list[int]]:
    pairs = sorted((piece, t) for t, piece in enumerate(token_texts(denoiser)) if piece is not None)
    return [p for p, _ in pairs], [t for _, t in pairs]


def widened(span: Span, head: str, default_tokens: int, max_tokens: int) -> Span:
    """`span` from the start of `head` before it, with one more slot for its token (at
    most `max_tokens`)."""
    if not head:
        return span
    tokens = span.length if span.length is not None else default_tokens
    return replace(span, start=span.start - len(head), length=min(tokens + 1, max_tokens))


def given_text(fill: str, head: str) -> str | None:
    """The fill of the span as asked: `fill` after `head`; None where it does not start
    with it (it would rewrite what the user typed)."""
    return fill[len(head) :] if fill.startswith(head) else None
