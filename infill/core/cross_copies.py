"""Copies from other files of the repository: what follows code like the hole's elsewhere.

A package repeats itself across its files (a method's first line after the same
signature, the same `raise` after the same check, the same call's arguments). The model
reads one window of one file; the client sends the windows of other files most like the
code around the holes (`Snippet`, infill/core/snippets.py). Each hole that holds one line
of code (or part of one) gets copies from them, which the pass of infill/core/copy_fills.py
(`CopyRound`) scores beside the fill the model chose: the best copy the model scores
higher per token that passes the checks replaces the fill. Without snippets nothing
changes.

- A hole inside a line (code before it on its line): the text after the longest tail of
  its line before it (at least MIN_TAIL characters, infill/core/copy_texts.py) found in a
  snippet, cut where the text after the hole on its line starts again, within that line (as
  in-file copies are cut).
  Such a copy carries INLINE_BONUS: the same code goes on this way in another file of the
  package, which the model, reading only the evidence lines around it, underrates (chosen
  on validation part-of-line holes; docs/ARCHITECTURE.md, "Repository context").
- A hole that holds a line's code (a cursor at a line's indentation, a whole line): the
  code of the snippet lines whose neighbours are most like the hole's (`similarity`: the
  token-set Jaccard of the non-blank lines before and after, nearest weighing most), at
  least MIN_SIMILARITY alike, the most alike only (LINE_LIMIT). Such a copy carries its
  similarity as a bonus: the copies' pass takes it when its mean log-probability plus
  SIMILARITY_WEIGHT times the similarity beats the fill's (the model alone prefers its own
  fill to the true line of another file most of the time). Chosen on validation cursor
  holes; docs/ARCHITECTURE.md, "Repository context".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence

from diffusion_infill.infill.core.candidates import CandidateJob
from diffusion_infill.infill.core.copy_fills import CopyRound
from diffusion_infill.infill.core.copy_texts import context_copies, inline_copies
from diffusion_infill.infill.core.lines import Frame
from diffusion_infill.infill.core.options import SamplerOptions
from diffusion_infill.infill.core.snippets import Snippet, check_context
from diffusion_infill.infill.core.spans import Span
from diffusion_infill.model.denoiser import Denoiser

LIMIT = 4  # copies from other files per in-line hole at most
LINE_LIMIT = 1  # per hole of a line's code: the most alike line (more won no more holes)
DEPTH = 3  # neighbouring lines compared on each side
MIN_SIMILARITY = 1.0  # a line copy's neighbours at least this alike (of 2 x (1 + 1/2 + 1/3))
SIMILARITY_WEIGHT = 1.0  # nats per token a line copy's similarity adds to its score
INLINE_BONUS = 1.0  # nats per token an in-line copy from another file adds to its score
_TOKEN = re.compile(r"\w+|[^\w\s]")


def repo_copies(
    text: str, start: int, end: int, context: Sequence[Snippet], limit: int = LIMIT
) -> list[tuple[str, float]]:
    """The copies of the hole [start, end) of `text` (holes neutralised) found in
    `context`, each with the bonus its score gets in the copies' pass: for a hole inside
    a line, the text after its line's tail (`inline_copies`; INLINE_BONUS); for a hole of one
    line's code, the code of lines with neighbours like its own (`line_copies`; their
    similarity times SIMILARITY_WEIGHT). None for a hole over several lines."""
    if not context or "\n" in text[start:end].rstrip("\r\n"):
        return []
    line_start = text.rfind("\n", 0, start) + 1
    if text[line_start:start].strip():
        return [(c, INLINE_BONUS) for c in inline_copies(text, start, end, context, limit)]
    found = line_copies(text, start, end, context, min(limit, LINE_LIMIT))
    return [(c, SIMILARITY_WEIGHT * sim) for c, sim in found]


def _neighbours(text: str, start: int, end: int) -> tuple[list[str], list[str]]:
    """The stripped non-blank lines before the hole's line and after it, nearest first
    (DEPTH of each)."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end if not text[start:end].endswith("\n") else end - 1)
    above = [ln.strip() for ln in text[:line_start].split("\n")]
    below = [ln.strip() for ln in text[line_end + 1 :].split("\n")] if line_end >= 0 else []
    return (
        [ln for ln in reversed(above) if ln][:DEPTH],
        [ln for ln in below if ln][:DEPTH],
    )


def _tokens(line: str) -> frozenset[str]:
    return frozenset(_TOKEN.findall(line))


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def similarity(
    lines: Sequence[frozenset[str]],
    j: int,
    above: Sequence[frozenset[str]],
    below: Sequence[frozenset[str]],
) -> float:
    """How alike the non-blank neighbours of line j of `lines` (token sets; blank lines
    empty) are to the hole's (`above`, `below`: nearest first): the Jaccard of each pair
    at distance d, weighed 1 / d, summed over both sides."""
    total = 0.0
    for side, want in ((-1, above), (1, below)):
        k, d = j + side, 0
        while d < len(want) and 0 <= k < len(lines):
            if lines[k]:
                total += _jaccard(lines[k], want[d]) / (d + 1)
                d += 1
            k += side
    return total


def line_copies(
    text: str, start: int, end: int, context: Sequence[Snippet], limit: int = LIMIT
) -> list[tuple[str, float]]:
    """The code of the snippet lines whose neighbours are most like the hole's
    (`similarity`, at least MIN_SIMILARITY), with it: most alike first, then in snippet
    order; each code once (at its best), not blank, at most `limit`."""
    above, below = _neighbours(text, start, end)
    if not above and not below:
        return []
    want_above, want_below = [_tokens(x) for x in above], [_tokens(x) for x in below]
    best: dict[str, float] = {}
    for s in context:
        codes = [ln.strip() for ln in s.text.split("\n")]
        sets = [_tokens(c) if c else frozenset() for c in codes]
        for j, code in enumerate(codes):
            if not code:
                continue
            sim = similarity(sets, j, want_above, want_below)
            if sim >= MIN_SIMILARITY and sim > best.get(code, -1.0):
                best[code] = sim
    ranked = sorted(best, key=lambda c: -best[c])  # stable: snippet order breaks ties
    return [(c, best[c]) for c in ranked[:limit]]


def evidence(copies: Sequence[str], context: Sequence[Snippet], lines: int = DEPTH) -> str:
    """The snippet lines each copy comes from, `lines` each side (the first snippet line
    that holds it), each region once, in copy order, a blank line after each: what the
    copies' pass reads before the hole's window."""
    regions: list[str] = []
    for copy in copies:
        for s in context:
            at = s.text.find(copy)
            if at < 0:
                continue
            rows = s.text.split("\n")
            j = s.text.count("\n", 0, at)
            region = "\n".join(rows[max(0, j - lines) : j + lines + 1]).strip("\n")
            if region not in regions:
                regions.append(region)
            break
    return "".join(f"{r}\n\n" for r in regions)


def copy_round(
    job: object,
    before: str,
    spans: list[Span],
    holes: tuple[Collection[int], Collection[int]],
    frames: Sequence[Frame | None],
    denoiser: Denoiser,
    options: SamplerOptions,
    context: Sequence[Snippet] = (),
    *,
    heads: Sequence[str] = (),
) -> None:
    """The pass that scores copies against the chosen fills (infill/core/copy_fills.py),
    for the holes whose length is a guess (`holes`: the in-line holes, and the spans
    whose length the plan guessed): an in-line hole's copies of the code around it in
    `before` (holes neutralised), and a one-line hole's copies from `context` (validated here:
    `check_context`). With the checks on only, as raced lengths without them make a
    CandidateJob too. A span that took over a word's head (`heads`, word_starts.py) gets
    the copies of the span as asked, each written after the head."""
    context = check_context(context)
    on = options.context_copies and options.check_kinds
    if not (on and isinstance(job, CandidateJob)):
        return
    inline, guessed = holes
    encode: Callable[[str], list[int]] = denoiser.encode
    copies: dict[int, list[list[int]]] = {}
    bonus: dict[int, list[float]] = {}
    prefixes: dict[int, list[int]] = {}
    for i in sorted(guessed):
        head = heads[i] if heads else ""
        start, end = spans[i].start + len(head), spans[i].end
        found = context_copies(before, start, end) if i in inline else []
        repo = [(c, b) for c, b in repo_copies(before, start, end, context) if c not in found]
        if repo:
            prefixes[i] = encode(evidence([c for c, _ in repo], context))
        if found or repo:
            copies[i] = [encode(head + c) for c in [*found, *(c for c, _ in repo)]]
            bonus[i] = [0.0] * len(found) + [b for _, b in repo]
    if copies:
        job.copy_round(
            CopyRound(
                copies, encode, denoiser.special.mask, frames=frames, prefixes=prefixes, bonus=bonus
            )
        )
