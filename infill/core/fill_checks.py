"""What the checks say of a combination of fills, one per span (infill/core/candidates.py):
each span's tokens decoded, the spans of a window checked together, the other windows'
spans as they were."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from diffusion_infill.infill.core.checks import Problem, summary
from diffusion_infill.infill.core.errors import DenoiserError

# (fill text of every span, the spans to look at) -> their problems in that combination
Check = Callable[[list[str], set[int]], list[Problem]]
# (span index, tokens) -> (text, how many of the tokens it keeps); DenoiserError
Decode = Callable[[int, list[int]], tuple[str, int]]


class FillChecks:
    """The checks of a request's spans: `neutral` is each span's text before (what a
    rejected span keeps), `windows` the spans each window holds."""

    def __init__(
        self, decode: Decode, check: Check, neutral: list[str], windows: list[set[int]]
    ) -> None:
        self.decode = decode
        self._check = check
        self.neutral = neutral
        rest = set(range(len(neutral))).difference(*windows)
        self.windows = windows + ([rest] if rest else [])

    def group(self, span: int) -> set[int]:
        """The spans checked with `span`: its window's."""
        return next(g for g in self.windows if span in g)

    def texts(self, ids: dict[int, list[int] | None]) -> tuple[list[str], dict[int, str]]:
        """Each span's text (None: its text before, as a rejected span keeps it), and the
        spans whose tokens are no valid text (and why)."""
        texts, bad = [], {}
        for i in range(len(self.neutral)):
            if ids[i] is None:
                texts.append(self.neutral[i])
                continue
            try:
                texts.append(self.decode(i, ids[i])[0])
            except DenoiserError as exc:
                texts.append(self.neutral[i])
                bad[i] = str(exc)
        return texts, bad

    def kept(self, span: int, ids: list[int]) -> int:
        """How many of a fill's tokens its text keeps (all, where they are no text)."""
        try:
            return self.decode(span, ids)[1]
        except DenoiserError:
            return len(ids)

    def why(
        self, ids: dict[int, list[int] | None], windows: Sequence[set[int]] | None = None
    ) -> dict[int, str]:
        """Why each failing span of `windows` (default: every window) fails with the fills
        `ids`, by span. A window's spans are checked together, the other windows' spans as
        they were (neutral): a window's fills never saw another's, and a fill that breaks
        the parse far around it must not fail the spans of other windows with it."""
        texts, bad = self.texts(ids)
        out = dict(bad)
        for group in self.windows if windows is None else windows:
            mixed = (
                texts
                if len(self.windows) == 1
                else [t if i in group else self.neutral[i] for i, t in enumerate(texts)]
            )
            problems = [p for p in self._check(mixed, group) if p.range in group]
            for i in sorted({p.range for p in problems} - set(out)):
                out[i] = summary([p for p in problems if p.range == i])
        return out

    def passes(self, span: int, ids: dict[int, list[int] | None]) -> bool:
        """Whether `span` passes its window's checks with the fills `ids`."""
        return span not in self.why(ids, [self.group(span)])
