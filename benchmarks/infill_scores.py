"""Filling held-out holes and scoring the fills (benchmarks.eval_model's infill parts, and
benchmarks.eval_shapes): exact match, cost, where the fills end, how near a miss came, and
what the engine's checks say of the fills and of the true text; the "arguments" holes
(inside a line, with code after them)."""

from __future__ import annotations

import difflib
import statistics
import sys
import time
from dataclasses import dataclass, field

from tqdm import tqdm

from benchmarks.heldout import HELDOUT_WINDOW_CHARS, Example, infill_examples
from diffusion_infill import infill
from diffusion_infill.infill.core.checks import KINDS, check_fills, splice, syntax_error
from diffusion_infill.infill.core.engine import prepare_fill, prepare_holes
from diffusion_infill.infill.core.sampler import denoise
from diffusion_infill.infill.core.spans import DEFAULT_MARKER, neutralise


def closeness(fill: str, truth: str) -> dict[str, float | bool]:
    """How near a fill that is not exact came (exact match is flat at 0 for multi-line
    holes, so these are what moves): `similarity`, difflib's ratio of the two texts;
    `lines_in_place`, the share of the truth's lines that the fill has at the same line
    (indentation aside); `repeats`, whether the fill writes one non-blank line three
    times or more (the model's loop, docs/ARCHITECTURE.md "Multi-line holes")."""
    fill_lines = [line.strip() for line in fill.strip().split("\n")]
    truth_lines = [line.strip() for line in truth.strip().split("\n")]
    written = [line for line in fill_lines if line]
    return {
        "similarity": difflib.SequenceMatcher(None, fill.strip(), truth.strip()).ratio(),
        "lines_in_place": sum(a == b for a, b in zip(fill_lines, truth_lines, strict=False))
        / len(truth_lines),
        "repeats": any(written.count(line) >= 3 for line in set(written)),
    }


def failed_checks(ex, before: str, fill: str, kinds=KINDS) -> set[str]:
    """The kinds of check the text with `fill` in the example's span fails."""
    after, filled = splice(ex.text, [(ex.start, ex.end)], [fill])
    return {p.kind for p in check_fills(before, after, [(ex.start, ex.end)], filled, kinds=kinds)}


def marker_text(ex: Example, form: str) -> str:
    """The example's text with its hole (whole lines) written as a line-start hole marker:
    "alone", the marker alone on the hole's line (its line break kept); "next", as
    fill-in-the-middle tasks cut it, the marker followed by the next line
    (infill/core/line_holes.py)."""
    keep = "\n" if form == "alone" and ex.truth.endswith("\n") else ""
    return ex.text[: ex.start] + DEFAULT_MARKER + keep + ex.text[ex.end :]


def same_text(result: infill.FillResult, ex: Example) -> bool:
    """The filled text is the example's, line by line (trailing spaces aside)."""
    return [ln.rstrip() for ln in result.text.split("\n")] == [
        ln.rstrip() for ln in ex.text.split("\n")
    ]


def same_code(fill: str, truth: str) -> bool:
    """Exact match of a hole whose indentation is given: the texts stripped."""
    return fill.strip() == truth.strip()


def infill_scores(
    den,
    examples,
    *,
    true_length: bool,
    desc: str,
    options: infill.SamplerOptions,
    same=same_code,
    truth_tokens=None,
    rewrite_length: bool = False,
    marker: str | None = None,
) -> dict[str, float]:
    """Exact match and cost of filling each example's span, and what the checks say of
    the fills. The span is filled as a hole: the checks see the text with the span
    neutralised, never the truth; a rejected fill is a miss. `same(fill, truth)` decides
    a match; `truth_tokens(ex)` is the true length given (default: the truth's tokens).
    With `rewrite_length` the engine's length starts from what a rewrite of the span
    allocates (the token count of the text it replaces, nulls and growth allowed) instead
    of a hole's default. With `marker` ("alone" or "next": `marker_text`) the hole is a
    line-start marker filled as `infill fill` fills it, and a match is the whole text
    with the fill equal to the example's, line by line."""
    tally = _Tally()
    for ex in tqdm(examples, desc=desc, file=sys.stderr, leave=False):
        if marker is not None:
            t0 = time.perf_counter()
            fill = prepare_holes(marker_text(ex, marker), denoiser=den, options=options)
            denoise(fill.job, den)
            result = fill.result()
            ms = (time.perf_counter() - t0) * 1000
            before = neutralise(ex.text, [infill.Span(ex.start, ex.end)])
            tally.add(den, ex, before, result, ms, lambda _f, _t, r=result, e=ex: same_text(r, e))
            continue
        if true_length:
            n_true = truth_tokens(ex) if truth_tokens is not None else len(den.encode(ex.truth))
            span = infill.Span(ex.start, ex.end, length=n_true, exact=True)
        elif rewrite_length:  # what "rewrite selection" gets: the replaced text's count
            span = infill.Span(ex.start, ex.end)
        else:  # what a hole marker gets: the default allocation, nulls and growth
            span = infill.Span(ex.start, ex.end, length=options.default_span_tokens)
        before = neutralise(ex.text, [span])
        t0 = time.perf_counter()
        fill = prepare_fill(
            ex.text, [span], denoiser=den, options=options, rewrite=True, parse_text=before
        )
        denoise(fill.job, den)
        result = fill.result()
        tally.add(den, ex, before, result, (time.perf_counter() - t0) * 1000, same)
    return tally.summary(len(examples))


@dataclass
class _Tally:
    """What `infill_scores` adds up over its examples."""

    hits: int = 0
    nfe: int = 0
    tokens: int = 0
    ms: list[float] = field(default_factory=list)
    parse_ok: int = 0
    # of the fills returned in a text that Python parses with the truth: those with which
    # it no longer does (Python's own parser, not the checks)
    python_judged: int = 0
    python_broken: int = 0
    clean: int = 0
    rejected: int = 0
    candidates: int = 0
    # |tokens of the fill - tokens of the truth|, per fill
    length_errors: list[int] = field(default_factory=list)
    truth_fails: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    # one per example, for reading the tail
    records: list[dict[str, object]] = field(default_factory=list)
    # sums; rejected: 0
    near: dict[str, float] = field(
        default_factory=lambda: {"similarity": 0.0, "lines_in_place": 0.0, "repeats": 0}
    )

    def add(self, den, ex, before: str, result, ms: float, same) -> None:
        """One example's fill (`result`, which took `ms`), checked against `before` (the
        text with the span neutralised)."""
        self.ms.append(ms)
        (f,) = result.fills
        self.nfe += result.stats.nfe
        self.tokens += max(1, result.stats.tokens)
        self.candidates += result.stats.candidates
        for kind in failed_checks(ex, before, ex.truth):
            self.truth_fails[kind] += 1
        exact = f.rejected is None and same(f.text, ex.truth)
        parses = None
        if f.rejected is None and syntax_error(ex.text) is None:
            parses = syntax_error(result.text) is None
            self.python_judged += 1
            self.python_broken += not parses
        self.records.append(
            {
                "truth": ex.truth,
                "fill": f.text,
                "rejected": f.rejected,
                "exact": exact,
                "ms": round(ms, 1),
                "nfe": result.stats.nfe,
                "tokens": result.stats.tokens,
                "candidates": result.stats.candidates,
                "remasks": result.stats.remasks,
                "python_parses": parses,
            }
        )
        if f.rejected is not None:
            self.rejected += 1
            return
        self.hits += exact
        for key, value in closeness(f.text, ex.truth).items():
            self.near[key] += value
        self.length_errors.append(
            abs(len(den.encode(f.text.strip())) - len(den.encode(ex.truth.strip())))
        )
        problems = failed_checks(ex, before, f.text)
        self.parse_ok += "parse" not in problems
        self.clean += not problems

    def summary(self, n: int) -> dict[str, float]:
        """The figures over the `n` examples."""
        ms, length_errors, near = self.ms, self.length_errors, self.near
        parse_ok, rejected = self.parse_ok, self.rejected
        return {
            "exact_match": self.hits / n,
            "n": n,
            "nfe_per_token": self.nfe / self.tokens,
            "ms_p50": statistics.median(ms),
            "ms_mean": statistics.fmean(ms),
            "parse_rate": parse_ok / max(1, n - rejected),  # of the fills returned
            # fills returned that add a syntax error
            "broken": (n - rejected - parse_ok) / n,
            "clean": self.clean / n,  # fills returned that pass every check
            "python_judged": self.python_judged,
            "python_unparseable": self.python_broken,
            "rejected": rejected / n,
            "candidates_per_fill": self.candidates / n,
            # where fills end (meaningful with the engine's length): mean token-count
            # error and the share of fills within one token of the truth's length
            "length_error_tokens": (statistics.fmean(length_errors) if length_errors else None),
            # the mean is pulled by a few fills that grow to hundreds of tokens
            "length_error_median": (statistics.median(length_errors) if length_errors else None),
            "ends_within_1": sum(e <= 1 for e in length_errors) / n,
            # how near the fills came (`closeness`; a rejected fill counts as nothing)
            "similarity": near["similarity"] / n,
            "lines_in_place": near["lines_in_place"] / n,
            "repeated_line_fills": near["repeats"] / n,
            "truth_fails": {k: v / n for k, v in self.truth_fails.items()},
            "records": self.records,
        }


def argument_examples(
    files: list[str], n: int, seed: int, window_chars: int = HELDOUT_WINDOW_CHARS
) -> list[Example]:
    """Holes inside a line: a single-line example's call arguments, between its first `(`
    and its last `)`, so that there is code after the hole on its line (what a fill can
    comment out) and a call around it (where it can repeat a keyword)."""
    out = []
    for ex in infill_examples(
        files,
        "single-line",
        4 * n,
        seed=seed,
        window_chars=window_chars,
        draw_chars=HELDOUT_WINDOW_CHARS,
    ):
        i, j = ex.truth.find("("), ex.truth.rfind(")")
        if 0 <= i < j - 1 and ex.truth[i + 1 : j].strip():
            out.append(Example(ex.text, ex.start + i + 1, ex.start + j, "arguments"))
    return out[:n]
