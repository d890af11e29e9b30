"""Held-out evaluation of "Insert docstring": how near the model's docstrings come to the
ones the authors wrote.

    python -m benchmarks.eval_docstrings [--model DIR] [--split test] [--n 100]

Functions and classes of the test packages (never trained on) that have a docstring get
it taken out (benchmarks/heldout.py, `docstring_examples`), and the docstring is written
as the language server writes it: the slot of lsp/docstring.py (an empty docstring after
the signature), the server's excerpt and its default sampler options (checks on, no raced
lengths, key/value reuse, growth to 64 tokens), the body cut where it would close the
string. Prose has no exact match worth the name, so the figures are overlaps of words
(lower-cased `\\w+` runs), the usual measure for code summaries:

- `summary_rouge_l`: ROUGE-L F1 (longest common subsequence) of the summary, the first
  sentence of the first paragraph, against the author's;
- `summary_word_f1`: the same words counted as a bag (order aside);
- `summary_exact`: the summary's words are the author's, in order;
- `body_rouge_l`: ROUGE-L F1 of the whole docstring;
- `written`: docstrings the model wrote at all (the server offers nothing otherwise).

Beside the model, a baseline with no model: the summary spelt from the name
(`split_before` -> "Split before."), which a model should beat to be worth its passes.

Prints a table and writes JSON to benchmarks/results/docstrings_<model>.json.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

from tqdm import tqdm

from benchmarks.heldout import (
    DocstringExample,
    docstring_examples,
    heldout_arguments,
    heldout_files,
)
from benchmarks.results_file import write_results
from diffusion_infill import infill
from diffusion_infill.lsp.actions import action_options, docstring_request
from diffusion_infill.lsp.docstring import docstring_slot
from diffusion_infill.lsp.settings import Settings
from diffusion_infill.model.loading import default_model_dir, load_denoiser

_WORD = re.compile(r"\w+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def summary(body: str) -> str:
    """The first sentence of a docstring's first paragraph, whitespace collapsed."""
    paragraph = re.split(r"\n[ \t]*\n", body.strip(), maxsplit=1)[0]
    flat = " ".join(paragraph.split())
    return _SENTENCE_END.split(flat, maxsplit=1)[0]


def rouge_l(candidate: list[str], reference: list[str]) -> float:
    """ROUGE-L F1: the longest common subsequence of two word lists, against both lengths."""
    if not candidate or not reference:
        return 0.0
    prev = [0] * (len(reference) + 1)
    for c in candidate:
        cur = [0]
        for j, r in enumerate(reference):
            cur.append(prev[j] + 1 if c == r else max(prev[j + 1], cur[j]))
        prev = cur
    lcs = prev[-1]
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(candidate), lcs / len(reference)
    return 2 * precision * recall / (precision + recall)


def word_f1(candidate: list[str], reference: list[str]) -> float:
    common = sum((Counter(candidate) & Counter(reference)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(candidate), common / len(reference)
    return 2 * precision * recall / (precision + recall)


def name_summary(name: str) -> str:
    """The no-model baseline: the name's words as a sentence (`_get_app_dir` -> "Get app
    dir.", `HTTPError` -> "Http error.")."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", name)
    parts = [p for p in re.split(r"[_\s]+", spaced) if p]
    if not parts:
        return ""
    text = " ".join(p.lower() for p in parts)
    return text[0].upper() + text[1:] + "."


def scores(written: str, truth: str) -> dict[str, float]:
    """How near a docstring body comes to the author's (`written` may be empty)."""
    ws, ts = words(summary(written)), words(summary(truth))
    return {
        "summary_rouge_l": rouge_l(ws, ts),
        "summary_word_f1": word_f1(ws, ts),
        "summary_exact": float(bool(ws) and ws == ts),
        "body_rouge_l": rouge_l(words(written), words(truth)),
    }


def write_docstring(
    den, ex: DocstringExample, settings: Settings, options: infill.SamplerOptions
) -> tuple[str, infill.FillResult]:
    """The body the server would insert for `ex` ("" when it would insert nothing)."""
    slot = docstring_slot(ex.text, ex.at, marker=settings.hole_marker)
    if slot is None:
        raise ValueError(f"no docstring slot for {ex.name}")
    cut, span = docstring_request(ex.text, slot, settings.context_chars)
    result = infill.fill_spans(cut.text, [span], denoiser=den, options=options)
    body = result.fills[0].text if result.fills and result.fills[0].rejected is None else ""
    return slot.clean_body(body), result


def evaluate(den, examples: list[DocstringExample], settings: Settings) -> dict[str, object]:
    options = action_options(settings, race=False)  # Insert docstring's, as the server's
    sums: Counter[str] = Counter()
    base: Counter[str] = Counter()
    ms, nfe, tokens, records = [], 0, 0, []
    for ex in tqdm(examples, desc="docstrings", file=sys.stderr, leave=False):
        t0 = time.perf_counter()
        body, result = write_docstring(den, ex, settings, options)
        ms.append((time.perf_counter() - t0) * 1000)
        nfe += result.stats.nfe
        tokens += max(1, result.stats.tokens)
        got = scores(body, ex.truth)
        sums.update(got)
        sums["written"] += bool(body.strip())
        base.update(scores(name_summary(ex.name), ex.truth))
        records.append(
            {
                "name": ex.name,
                "kind": ex.kind,
                "truth": ex.truth,
                "written": body,
                "ms": round(ms[-1], 1),
                "nfe": result.stats.nfe,
                "tokens": result.stats.tokens,
                **{k: round(v, 4) for k, v in got.items()},
            }
        )
    n = len(examples)
    return {
        "n": n,
        "functions": sum(ex.kind == "function" for ex in examples),
        **{
            k: sums[k] / n
            for k in (
                "written",
                "summary_rouge_l",
                "summary_word_f1",
                "summary_exact",
                "body_rouge_l",
            )
        },
        "name_baseline": {
            k: base[k] / n
            for k in ("summary_rouge_l", "summary_word_f1", "summary_exact", "body_rouge_l")
        },
        "nfe_per_token": nfe / max(1, tokens),
        "ms_p50": statistics.median(ms),
        "ms_mean": statistics.fmean(ms),
        "records": records,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    heldout_arguments(parser)
    parser.add_argument("--n", type=int, default=100, help="definitions to write docstrings for")
    parser.add_argument("--seed", type=int, default=0, help="example selection seed")
    parser.add_argument("--out", type=Path, default=None, help="results JSON path")
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error(f"--n must be at least 1, got {args.n}")
    examples = docstring_examples(heldout_files(parser, args), args.n, seed=args.seed)
    if not examples:
        parser.error(f"no definition with a docstring in {args.corpus / args.split}.jsonl")
    den = load_denoiser(args.model)
    t0 = time.perf_counter()
    result = evaluate(den, examples, Settings())
    out = {
        "model": str(args.model or default_model_dir()),
        "split": args.split,
        "seed": args.seed,
        "docstrings": result,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    base = result["name_baseline"]
    print(
        f"{result['n']} definitions ({result['functions']} functions), "
        f"{args.split} split, {out['seconds']} s"
    )
    print(f"{'':24} {'model':>8} {'name baseline':>14}")
    print(f"{'written':24} {result['written']:8.1%} {'':>14}")
    for key in ("summary_rouge_l", "summary_word_f1", "summary_exact", "body_rouge_l"):
        print(f"{key:24} {result[key]:8.3f} {base[key]:14.3f}")
    print(
        f"ms per docstring p50 {result['ms_p50']:.0f}, forward passes per token "
        f"{result['nfe_per_token']:.2f}"
    )
    write_results("docstrings", args.model, out, args.out)


if __name__ == "__main__":
    main()
