"""Fill holes' confidence and runner-ups as code actions.

A fill's confidence (the calibrated probability that it is right) is known once the model
has run, when an action is resolved, not when actions are listed (no model then): it goes
into the resolved action's title and the log, and into the titles of a client that gets
its actions with their edits at once. A hole whose fill has a runner-up (another fill the
decode holds, infill/core/rated.py) is offered it:

- to a client that gets edits at once, as a second action beside Fill holes, "fill ...
  with the runner-ups" (`alternative_edits`);
- after Fill holes was applied (the document is then exactly what it made, `Filled`), as
  "use the runner-up ..." on the filled text (`runner_up_titles`), resolved without the
  model (`runner_up_edit`).
"""

from __future__ import annotations

from dataclasses import dataclass

from diffusion_infill.infill.core.diff import Edit, minimal_edits
from diffusion_infill.infill.core.results import SpanFill
from diffusion_infill.infill.serve.protocol import Result
from diffusion_infill.lsp.excerpt import Excerpt
from diffusion_infill.lsp.positions import shift

RUNNER_UP = "runnerUp"  # the operation of a "use the runner-up" action (lsp/operations.py `Op`)


def sure(confidence: float | None) -> str:
    """A confidence as a title says it."""
    return "?" if confidence is None else f"{confidence:.0%}"


def sure_title(title: str, fills: list[SpanFill]) -> str:
    """`title` with the confidence of each fill written, when the model gives one."""
    known = [f.confidence for f in fills if f.rejected is None and f.confidence is not None]
    if not known:
        return title
    return f"{title} ({', '.join(sure(c) for c in known)} sure)"


@dataclass(frozen=True)
class FilledSpan:
    """A hole as Fill holes filled it: where its fill is in the document it made."""

    start: int
    end: int
    fill: str
    confidence: float | None
    runner_up: str
    runner_up_confidence: float | None


@dataclass(frozen=True)
class Filled:
    """What Fill holes made of a document: its text, and the holes that have a runner-up."""

    text: str
    spans: tuple[FilledSpan, ...]


def filled(doc: str, result: Result, ex: Excerpt) -> Filled | None:
    """The document `doc` as Fill holes leaves it with `result` (of excerpt `ex`), and its
    holes that have a runner-up; None when none has."""
    spans: list[FilledSpan] = []
    moved = 0  # how far the fills before shifted the text
    for f in sorted(result.fills, key=lambda f: f.span.start):
        start = ex.offset + f.span.start + moved
        if f.rejected is None and f.runner_ups:
            up = f.runner_ups[0]
            spans.append(
                FilledSpan(start, start + len(f.text), f.text, f.confidence, up.text, up.confidence)
            )
        if f.rejected is None:
            moved += len(f.text) - (f.span.end - f.span.start)
    if not spans:
        return None
    return Filled(doc[: ex.offset] + result.text + doc[ex.offset + len(ex.text) :], tuple(spans))


def runner_up_titles(done: Filled, text: str, a: int, b: int) -> list[tuple[str, int, int]]:
    """(title, start, end) of a "use the runner-up" action for each hole of `done` that
    the range [a, b] touches, when the document `text` is still what Fill holes made."""
    if text != done.text:
        return []
    return [
        (
            f"Infill: use the runner-up {_short(s.runner_up)} ({sure(s.runner_up_confidence)} "
            f"sure) instead of {_short(s.fill)} ({sure(s.confidence)})",
            s.start,
            s.end,
        )
        for s in done.spans
        if s.start <= b and a <= s.end
    ]


def runner_up_edit(done: Filled | None, text: str, start: int, end: int) -> Edit | None:
    """The edit that writes the runner-up of the hole of `done` at [start, end); None when
    the document is no longer what Fill holes made or no such hole is known."""
    if done is None or text != done.text:
        return None
    found = next((s for s in done.spans if (s.start, s.end) == (start, end)), None)
    return Edit(start, end, found.runner_up) if found is not None else None


def alternative_edits(result: Result, ex: Excerpt) -> tuple[list[Edit], list[float | None]]:
    """The edits of Fill holes with each hole's runner-up in place of its fill (the other
    holes as filled), in document offsets, and the confidence of each runner-up used;
    no edits when no hole has one."""
    replacements, used = [], []
    for f in result.fills:
        if f.rejected is not None:
            continue
        text = f.runner_ups[0].text if f.runner_ups else f.text
        if f.runner_ups:
            used.append(f.runner_ups[0].confidence)
        replacements.append((f.span.start, f.span.end, text, False))
    if not used:
        return [], []
    return shift(minimal_edits(ex.text, replacements), ex.offset), used


def _short(text: str) -> str:
    one = text.strip().split("\n")[0]
    return repr(one[:40] + ("…" if len(one) > 40 or "\n" in text.strip() else ""))
