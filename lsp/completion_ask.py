"""What a completion at a cursor asks the worker for, and how its fill is offered.

The hole is an empty span at the cursor, in the document's excerpt (lsp/excerpt.py). On a
line with code the completion is one line, on a small canvas in a few passes; on an empty
(or whitespace-only) line, lines, in a few more on the usual window, unless one line is
enough (lsp/offers.py `one_line_enough`). The budgets follow the worker's machine
(lsp/budgets.py). No completion belongs in the middle of an identifier or before code on
the same line (`wants_completion`).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from diffusion_infill.infill.core.options import SamplerOptions
from diffusion_infill.infill.core.spans import Span
from diffusion_infill.lsp.budgets import UNKNOWN, Machine, completion_steps, completion_window
from diffusion_infill.lsp.excerpt import Excerpt, excerpt
from diffusion_infill.lsp.offers import shape
from diffusion_infill.lsp.settings import Settings

# what may follow the cursor on its line for a completion to make sense: closing
# brackets and quotes, separators, a comment (nothing a fill would duplicate)
_CLOSERS = re.compile(r"""[\s)\]}"':;,]*(#.*)?""")


def wants_completion(line_rest: str) -> bool:
    """Whether a one-line completion belongs before `line_rest` (the text after the cursor
    on its line): not in the middle of an identifier, not before code."""
    if line_rest[:1].isalnum() or line_rest[:1] == "_":
        return False
    return _CLOSERS.fullmatch(line_rest) is not None


@dataclass(frozen=True)
class CompletionAsk:
    """What a completion at a cursor asks the worker for, and how its fill is offered."""

    excerpt: Excerpt
    span: Span  # the empty span at the cursor, in the excerpt's offsets
    options: SamplerOptions
    multiline: bool  # on an empty (or whitespace-only) line
    at_line_end: bool
    one_line: bool = False  # an empty line's fill decoded as one line (`one_line_enough`)

    @property
    def lines(self) -> bool:
        """Whether the fill is decoded, and offered, as lines."""
        return self.multiline and not self.one_line

    def offer(self, fill: str) -> str:
        """The fill as offered (`shape`); "" for nothing."""
        return shape(fill, multiline=self.lines, at_line_end=self.at_line_end)


def completion_ask(
    text: str,
    at: int,
    line: tuple[int, int],
    s: Settings,
    uri: str = "",
    *,
    machine: Machine = UNKNOWN,
    typing: bool = False,
    one_line: bool = False,
) -> CompletionAsk | None:
    """The completion at offset `at` of `text`, whose line's content is text[line[0]:
    line[1]], in at most `completion_steps` passes on `completion_window` tokens for the
    worker's `machine` (not known yet: `Machine()`) and whether the user is `typing` on a
    line whose completion was asked before, an empty line's as lines unless `one_line`;
    None where no completion belongs (`wants_completion`)."""
    multiline = not text[line[0] : line[1]].strip()
    if not multiline and not wants_completion(text[at : line[1]]):
        return None
    lines = multiline and not one_line
    ex = excerpt(text, at, at, context=s.context_chars)
    steps = completion_steps(s, machine, multiline=lines, typing=typing)
    window = completion_window(s, machine)
    return CompletionAsk(
        ex,
        Span(at - ex.offset, at - ex.offset),
        completion_options(s, lines, uri, steps=steps, window=window),
        multiline,
        at == line[1],
        multiline and one_line,
    )


def completion_options(
    s: Settings,
    multiline: bool,
    uri: str = "",
    *,
    steps: int | None = None,
    window: int | None = None,
) -> SamplerOptions:
    """The sampler options of a completion in at most `steps` passes, a one-line one on a
    canvas of `window` tokens (None: as `completion_steps` and `completion_window` for a
    machine not known): a one-line one on a small canvas in a few passes, a multi-line one
    on the usual window in a few more; both compute the context's keys/values in their
    first pass and reuse them (again after the hole grows) and, with
    `completionReuse`, from the document's last completion (keystroke to keystroke)."""
    kind = "multi" if multiline else "line"
    more = s.completion_items - 1  # the runner-ups that may be items too
    digest = hashlib.blake2b(uri.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()
    carry = f"completion:{kind}:{digest}" if s.completion_reuse else ""
    budget = steps or completion_steps(s, UNKNOWN, multiline)
    steps = min(budget, s.steps or budget)  # the general `steps` setting caps it too
    if multiline:
        tokens = s.multiline_tokens
        return s.sampler_options(
            default_span_tokens=tokens,
            max_span_tokens=max(s.max_tokens, tokens),
            grow_cap=max(s.grow_cap, tokens),
            window_tokens=s.multiline_window,
            max_steps=steps,
            cache_refresh=steps,  # one full pass, then the context's keys/values reused
            carry_key=carry,
            runner_ups=more,
        )
    return s.sampler_options(
        default_span_tokens=s.completion_tokens,
        max_span_tokens=s.completion_tokens,
        window_tokens=window or completion_window(s, UNKNOWN),
        max_steps=steps,
        cache_refresh=steps,
        carry_key=carry,
        runner_ups=more,
    )
