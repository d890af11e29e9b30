"""Held-out evaluation of inline completion: what the server would offer, without the LSP.

    python -m benchmarks.eval_completion [--model DIR] [--n 100] [--setting KEY=JSON ...]
                                         [--cases mid-line,...] [--alternatives K]
                                         [--temperature 0.7] [--no-word-starts]
                                         [--no-statement-ends]

Lines of the test packages (never trained on), in 3,000-character documents as
`benchmarks/bench_lsp.py` opens them, completed with the server's completion options
(lsp/completion_ask.py `completion_options`, its excerpt and lsp/offers.py `shape`, its
top item ranked among the fill, its runner-ups and the copies of the document's code
(`offered`, no confidence floor; `without_copies`: the same without the copies, paired),
the settings given by `--setting`, e.g. `multilineSteps=16`; a one-line completion takes
4 passes on 256 tokens, the server's choice before it knows the worker's machine, unless
`completionSteps` and `completionWindowTokens` are given: a CPU without bf16's is
`--setting completionSteps=3 --setting completionWindowTokens=128`) by the engine in this
process:

- `mid-line`: a line cut after the space nearest its middle, the rest of it deleted
  (typing a line): the offer should be the rest of the line;
- `mid-word`: the same, cut inside a word (after the first half of its word of at least
  four characters nearest its middle; lines without one are left out): typing a name;
- `empty line, one line`: a line's content deleted, the cursor after its indentation
  (the next line of a block): the truth is that line;
- `empty line, block`: 2 to 8 lines deleted the same way: the truth is the block.

`--cases` runs some of them (comma-separated of mid-line, mid-word, empty-line, empty-block;
default all four). Per case: exact match of the offer, its first line right, its similarity to the
truth (difflib's ratio), the lines offered, offers holding two blank lines in a row, requests
with no offer, and ms per completion. The key/value carry between keystrokes
(`completionReuse`) is hardly exercised: the requests share one carry key, as one
document's would, but each is another document, so little of the last canvas is reused.

With `--alternatives K`, each request is decoded K more times at `--temperature` (seeds
0..K-1, no carry) and the distinct non-empty offers are kept: `any_exact` is how often the
truth is among all of them (what a list of inline suggestions to cycle through could
hold), `offers_per_request` how many there are; ms then counts every decode.

Prints a table and writes JSON to benchmarks/results/completion_<model>.json.
"""

from __future__ import annotations

import argparse
import difflib
import re
import statistics
import sys
import time
from collections.abc import Collection
from dataclasses import replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from benchmarks.bench_lsp import WINDOW_CHARS, parse_setting
from benchmarks.heldout import (
    Example,
    first_line,
    heldout_arguments,
    heldout_files,
    infill_examples,
    mid_line_cut,
    mid_word_cut,
)
from benchmarks.results_file import write_results
from diffusion_infill import infill
from diffusion_infill.infill.core.copy_offers import completion_copies
from diffusion_infill.lsp.completion_ask import completion_ask
from diffusion_infill.lsp.offers import answers_alone, offered
from diffusion_infill.lsp.settings import Settings, parse
from diffusion_infill.model.loading import default_model_dir, load_denoiser

CASES = ("mid-line", "mid-word", "empty line, one line", "empty line, block")
CASE_KEYS = dict(  # --cases
    zip(("mid-line", "mid-word", "empty-line", "empty-block"), CASES, strict=True)
)
_BLANK_RUN = re.compile(r"\n[ \t]*\n[ \t]*\n")


def requests(examples: list[Example], case: str) -> list[tuple[str, int, str]]:
    """(document, cursor, truth) of each example for `case`."""
    out = []
    for ex in examples:
        if case in ("mid-line", "mid-word"):
            inside = mid_line_cut(ex.truth) if case == "mid-line" else mid_word_cut(ex.truth)
            if inside is None:  # a line without a word to be inside
                continue
            cut = ex.start + inside
            out.append((ex.text[:cut] + ex.text[ex.end :], cut, ex.text[cut : ex.end]))
        else:
            out.append((ex.text[: ex.start] + ex.text[ex.end :], ex.start, ex.truth))
    return out


def offer(
    den,
    text: str,
    at: int,
    settings: Settings,
    alternatives: int = 0,
    temperature: float = 0.7,
    off: Collection[str] = (),
) -> tuple[str, int, list[str], str]:
    """The text the server would offer at `at` ("" for none), the passes it took, the
    distinct other offers of `alternatives` more decodes at `temperature` (seeds 0..k-1):
    what a list of inline suggestions to cycle through could hold, and the text it would
    offer without the copies (the model's fill and runner-ups alone). `off`: the engine's
    stages turned off, by their `SamplerOptions` switch (`word_starts`, `statement_ends`)."""
    line_end = text.find("\n", at)
    ask = completion_ask(
        text, at, (text.rfind("\n", 0, at) + 1, len(text) if line_end < 0 else line_end), settings
    )
    if ask is None:
        return "", 0, [], ""
    offers, nfe, alone = [], 0, ""
    asked = replace(ask.options, **dict.fromkeys(off, False))
    for k in range(alternatives + 1):
        options = (
            asked if k == 0 else replace(asked, temperature=temperature, seed=k - 1, carry_key="")
        )
        try:
            result = infill.fill_spans(ask.excerpt.text, [ask.span], denoiser=den, options=options)
        except infill.InfillError:  # e.g. tokens that decode to no text: the server
            if k == 0:  # offers nothing (lsp/completion.py)
                offers.append("")
            continue
        fill = result.fills[0] if result.fills else None
        if k == 0:  # the server's top item, copies of the document's code ranked in
            copies = completion_copies(ask.excerpt.text, ask.span.start)
            every = replace(settings, completion_min_confidence=0.0)
            sure = answers_alone(copies, ask.multiline)  # the server asks no model then
            items = offered(ask.offer, None if sure else fill, every, copies, ask.multiline)
            got = items[0][0] if items else ""
            alone = next(iter(offered(ask.offer, fill, every, (), ask.multiline)), ("", None))[0]
        else:
            got = ask.offer(fill.text if fill is not None else "")
        nfe += result.stats.nfe if k == 0 else 0
        if k == 0 or (got.strip() and got.strip() not in {o.strip() for o in offers}):
            offers.append(got)
    return offers[0], nfe, offers[1:], alone


def score(offers: list[str], truths: list[str], ms: list[float]) -> dict[str, Any]:
    n = len(truths)
    first = [first_line(o) if o else None for o in offers]
    return {
        "n": n,
        "exact_match": sum(o.strip() == t.strip() for o, t in zip(offers, truths, strict=True)) / n,
        "first_line_right": sum(f == first_line(t) for f, t in zip(first, truths, strict=True)) / n,
        "similarity": statistics.fmean(
            difflib.SequenceMatcher(None, o.strip(), t.strip()).ratio()
            for o, t in zip(offers, truths, strict=True)
        ),
        "lines_offered": statistics.fmean(o.count("\n") + 1 if o else 0 for o in offers),
        "blank_line_runs": sum(bool(_BLANK_RUN.search(o)) for o in offers) / n,
        "no_offer": sum(not o for o in offers) / n,
        "ms_p50": statistics.median(ms),
        "ms_p95": sorted(ms)[int(0.95 * (n - 1))],
    }


def alternatives_score(
    offers: list[str], others: list[list[str]], truths: list[str]
) -> dict[str, float]:
    """With alternatives: how often the truth is among all the offers (the greedy one and
    its distinct alternatives), and how many distinct offers there are per request."""
    n = len(truths)
    return {
        "any_exact": sum(
            any(o.strip() == t.strip() for o in [first, *more])
            for first, more, t in zip(offers, others, truths, strict=True)
        )
        / n,
        "offers_per_request": statistics.fmean(1 + len(more) for more in others),
    }


def copies_score(offers: list[str], alone: list[str], truths: list[str]) -> dict[str, float]:
    """The offer without the copies (the model's fill and runner-ups alone): its exact
    match, and the requests right only with the copies (won) and only without (lost)."""
    with_copies = [o.strip() == t.strip() for o, t in zip(offers, truths, strict=True)]
    without = [o.strip() == t.strip() for o, t in zip(alone, truths, strict=True)]
    pairs = list(zip(with_copies, without, strict=True))
    return {
        "exact_match": sum(without) / len(truths),
        "won": sum(w and not m for w, m in pairs),
        "lost": sum(m and not w for w, m in pairs),
    }


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error(f"--n must be at least 1, got {args.n}")
    if args.alternatives < 0:
        parser.error(f"--alternatives must be 0 or more, got {args.alternatives}")
    if args.alternatives and args.temperature <= 0:
        parser.error(f"--temperature must be above 0 to sample, got {args.temperature}")
    keys = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in keys if c not in CASE_KEYS]
    if unknown or not keys:
        parser.error(
            f"--cases: unknown case(s) {', '.join(unknown) or '(none)'}: use {', '.join(CASE_KEYS)}"
        )
    cases = [CASE_KEYS[k] for k in keys]
    overrides = dict(parse_setting(kv) for kv in args.setting)
    settings, problems = parse(overrides)
    if problems:
        parser.error("; ".join(problems))
    files = heldout_files(parser, args)
    lines = infill_examples(files, "single-line", args.n, seed=args.seed, window_chars=WINDOW_CHARS)
    blocks = infill_examples(
        files, "multi-line", args.n, seed=args.seed + 1, window_chars=WINDOW_CHARS
    )
    den = load_denoiser(args.model)
    t0 = time.perf_counter()
    results: dict[str, Any] = {
        "model": str(args.model or default_model_dir()),
        "split": args.split,
        "settings": overrides,
        "word_starts": not args.no_word_starts,
        "statement_ends": not args.no_statement_ends,
        "cases": {},
    }
    for case in (c for c in CASES if c in cases):
        examples = blocks if case == "empty line, block" else lines
        results["cases"][case] = _case(den, examples, case, settings, args)
    results["seconds"] = round(time.perf_counter() - t0, 1)
    print(
        f"{'case':22} {'n':>4} {'exact':>6} {'1st line':>8} {'similar':>7} {'lines':>5} "
        f"{'blanks':>6} {'none':>5} {'p50 ms':>7}"
    )
    for case, r in results["cases"].items():
        print(
            f"{case:22} {r['n']:4d} {r['exact_match']:6.1%} {r['first_line_right']:8.1%} "
            f"{r['similarity']:7.3f} {r['lines_offered']:5.1f} {r['blank_line_runs']:6.1%} "
            f"{r['no_offer']:5.1%} {r['ms_p50']:7.0f}"
            + (
                f"   any of {r['offers_per_request']:.1f} offers: {r['any_exact']:.1%}"
                if args.alternatives
                else ""
            )
        )
    write_results("completion", args.model, results, args.out)


def _case(
    den, examples: list[Example], case: str, settings: Settings, args: argparse.Namespace
) -> dict[str, Any]:
    """One case's figures and records: the offer at each of its requests."""
    offers, truths, ms, nfe, others, alone = [], [], [], 0, [], []
    for text, at, truth in tqdm(requests(examples, case), desc=case, file=sys.stderr, leave=False):
        t = time.perf_counter()
        got, passes, more, own = offer(
            den, text, at, settings, args.alternatives, args.temperature, _off(args)
        )
        ms.append((time.perf_counter() - t) * 1000)
        offers.append(got)
        alone.append(own)
        truths.append(truth)
        others.append(more)
        nfe += passes
    r = {**score(offers, truths, ms), "nfe_per_request": nfe / len(ms)}
    if args.alternatives:
        r.update(alternatives_score(offers, others, truths))
    r["without_copies"] = copies_score(offers, alone, truths)
    r["records"] = [
        {"truth": t, "offer": o, "model": m, **({"alternatives": a} if args.alternatives else {})}
        for t, o, m, a in zip(truths, offers, alone, others, strict=True)
    ]
    return r


def _off(args: argparse.Namespace) -> list[str]:
    """The engine's stages the command turns off, by their `SamplerOptions` switch."""
    flags = {"word_starts": args.no_word_starts, "statement_ends": args.no_statement_ends}
    return [switch for switch, off in flags.items() if off]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    heldout_arguments(parser)
    parser.add_argument("--n", type=int, default=100, help="lines (and blocks) per case")
    parser.add_argument("--seed", type=int, default=0, help="example selection seed")
    parser.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="a server setting, e.g. multilineSteps=16 (repeatable)",
    )
    parser.add_argument(
        "--alternatives",
        type=int,
        default=0,
        metavar="K",
        help="K more decodes per request at --temperature (seeds 0..K-1): "
        "is the truth among the distinct offers? (0: none)",
    )
    parser.add_argument(
        "--temperature", type=float, default=0.7, help="sampling temperature of the alternatives"
    )
    parser.add_argument(
        "--cases",
        default=",".join(CASE_KEYS),
        help=f"comma-separated cases to run, of: {', '.join(CASE_KEYS)}",
    )
    parser.add_argument(
        "--no-word-starts",
        action="store_true",
        help="the engine's word_starts stage off (a completion inside a word continues the "
        "word's last token as it stands)",
    )
    parser.add_argument(
        "--no-statement-ends",
        action="store_true",
        help="the engine's statement_ends stage off (a completion at a line's end is not cut "
        "where its statement ends)",
    )
    parser.add_argument("--out", type=Path, default=None, help="results JSON path")
    return parser


if __name__ == "__main__":
    main()
