"""Held-out evaluation examples cut from the test split (packages never trained on).

Every example is a window of a test file (whole lines, about `window_chars` long) with a
character span to fill, and the span's true text. Deterministic for a given seed.

- single-line: one line's content after its indentation (what a developer deletes and
  asks the model to rewrite), 4 to 80 characters;
- multi-line: 2 to 8 consecutive lines, from the first line's indentation to the end of
  the last line (the line break after it stays);
- bugs: one injected bug in a line (operator swap, flipped comparison, wrong variable,
  off-by-one literal) with the clean text to restore;
- docstrings: a function or class with its docstring taken out (the whole file, as
  Insert docstring sees it) and the docstring as written.
"""

from __future__ import annotations

import argparse
import json
import keyword
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from diffusion_infill import infill
from diffusion_infill.infill.core.engine import PreparedFill, prepare_fill
from diffusion_infill.infill.core.snippets import Snippet
from diffusion_infill.infill.core.spans import neutralise
from diffusion_infill.model.denoiser import Denoiser
from diffusion_infill.model.training.corpus.windows import HELDOUT_WINDOW_CHARS, window_around


@dataclass(frozen=True)
class Example:
    text: str  # the window, with the original content in place
    start: int  # span start (character offset in text)
    end: int  # span end
    kind: str  # single-line | multi-line | bug:<kind>

    @property
    def truth(self) -> str:
        return self.text[self.start : self.end]


@dataclass(frozen=True)
class BugExample:
    clean: str  # the window as written
    buggy: str  # the window with one injected bug
    start: int  # the bug's character range in `buggy`
    end: int
    kind: str  # operator | comparison | variable | off-by-one


def prepare_hole(
    den: Denoiser,
    text: str,
    span: infill.Span,
    options: infill.SamplerOptions,
    context: Sequence[Snippet] = (),
) -> PreparedFill:
    """One held-out hole as the engine prepares a selection's rewrite, the parser reading
    the hole neutralised (what every evaluation of one hole fills)."""
    return prepare_fill(
        text,
        [span],
        denoiser=den,
        options=options,
        rewrite=True,
        parse_text=neutralise(text, [span]),
        context=context,
    )


def heldout_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every held-out evaluation takes: --model, --corpus, --split."""
    parser.add_argument(
        "--model", type=Path, default=None, help="model directory (default: the shipped model)"
    )
    parser.add_argument(
        "--corpus",
        type=Path,
        default=Path("data/corpus_v2"),
        help="corpus folder with <split>.jsonl (python -m diffusion_infill.model.training.corpus)",
    )
    parser.add_argument("--split", default="test", help="split to evaluate on")


def heldout_files(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The texts of --corpus's --split (`heldout_arguments`); a usage error naming the
    file when it is missing."""
    path = args.corpus / f"{args.split}.jsonl"
    if not path.is_file():
        parser.error(
            f"{path} not found: build the corpus with "
            "python -m diffusion_infill.model.training.corpus"
        )
    return load_test_files(args.corpus, args.split)


def load_test_files(corpus: Path, split: str = "test") -> list[str]:
    with (corpus / f"{split}.jsonl").open() as fh:
        return [json.loads(line)["text"] for line in fh]


EDITOR_WINDOW = 0  # window_chars of "what the language server sends": its excerpt
EDITOR_CONTEXT = 12_000  # the server's `contextChars` default (lsp/settings.py)


def _window(
    text: str,
    line_start: int,
    line_end: int,
    rng: random.Random,
    window_chars: int,
    draw_chars: int | None = None,
) -> tuple[str, int]:
    """A window of whole lines around [line_start, line_end); returns (window, offset)
    (model/training/corpus/windows.py). `EDITOR_WINDOW` is the excerpt the language server
    sends (lsp/excerpt.py, its default context: whole lines, cut where a definition
    starts), after the same draw."""
    if window_chars == EDITOR_WINDOW:
        window_around(
            text, line_start, line_end, rng, draw_chars or HELDOUT_WINDOW_CHARS, draw_chars
        )
        from diffusion_infill.lsp.excerpt import excerpt  # pure Python, no torch

        ex = excerpt(text, line_start, line_end, context=EDITOR_CONTEXT)
        return ex.text, ex.offset
    return window_around(text, line_start, line_end, rng, window_chars, draw_chars)


def _lines(text: str) -> list[tuple[int, int]]:
    out, pos = [], 0
    for line in text.splitlines(keepends=True):
        out.append((pos, pos + len(line.rstrip("\n"))))
        pos += len(line)
    return out


def _good_line(text: str, s: int, e: int) -> bool:
    content = text[s:e].strip()
    return 4 <= len(content) <= 80 and not content.startswith(("#", '"""', "'''"))


def _random_line(
    files: list[str], rng: random.Random
) -> tuple[str, list[tuple[int, int]], int] | None:
    """(text, its lines, index of a usable line away from the file's edges), or None."""
    text = rng.choice(files)
    lines = _lines(text)
    if len(lines) < 12:
        return None
    i = rng.randrange(3, len(lines) - 3)
    s, e = lines[i]
    return (text, lines, i) if _good_line(text, s, e) else None


_CONTENT_LINE = re.compile(r"(?m)^[ \t]*(\S[^\n]*)$")


def random_content_line(files: list[str], rng: random.Random) -> tuple[str, int, int] | None:
    """A random non-blank line of a random file of `files`: (the file, start and end of the
    line's content after its indentation), or None when the file drawn has no such line."""
    text = rng.choice(files)
    lines = list(_CONTENT_LINE.finditer(text))
    if not lines:
        return None
    m = rng.choice(lines)
    return text, m.start(1), m.end(1)


def infill_examples(
    files: list[str],
    kind: str,
    n: int,
    seed: int = 0,
    window_chars: int = HELDOUT_WINDOW_CHARS,
    draw_chars: int | None = None,
) -> list[Example]:
    """`n` holes of `kind` in windows of about `window_chars`; with `draw_chars`, the same
    holes (and where they sit in their windows) as with window_chars=draw_chars."""
    rng = random.Random(seed)
    out: list[Example] = []
    tries = 0
    while len(out) < n and tries < n * 50:
        tries += 1
        picked = _random_line(files, rng)
        if picked is None:
            continue
        text, lines, i = picked
        s, e = lines[i]
        indent = len(text[s:e]) - len(text[s:e].lstrip())
        if kind == "single-line":
            span = (s + indent, e)
        else:
            j = i + rng.randint(1, 7)
            if j >= len(lines) - 1 or len(text[s : lines[j][1]]) > 400:
                continue
            if not text[lines[j][0] : lines[j][1]].strip():
                continue
            span = (s + indent, lines[j][1])
        window, offset = _window(text, span[0], span[1], rng, window_chars, draw_chars)
        out.append(Example(window, span[0] - offset, span[1] - offset, kind))
    return out


def heldout_holes(
    files: list[str], kind: str, n: int, *, seed: int, window_chars: int
) -> list[Example]:
    """`n` holes of `kind` as the held-out figures draw them (in 700-character windows),
    each cut from `window_chars` of its file: the same holes at any window size."""
    return infill_examples(
        files, kind, n, seed=seed, window_chars=window_chars, draw_chars=HELDOUT_WINDOW_CHARS
    )


def first_line(text: str) -> str:
    """The first line of a completion or its truth, stripped: what an offer that runs on
    past a deleted line can be compared on."""
    return text.strip().split("\n")[0].strip()


def mid_word_cut(truth: str) -> int | None:
    """Where a user typing `truth` is inside a word: after the first half of its word (of
    at least 4 letters, digits or underscores) nearest its middle; None without one."""
    words = list(re.finditer(r"\w{4,}", truth))
    if not words:
        return None
    word = min(words, key=lambda m: abs(m.start() + m.end() - len(truth)))
    return word.start() + (word.end() - word.start()) // 2


def mid_line_cut(truth: str) -> int:
    """Where a user typing `truth` is: just after the space nearest its middle (mid-word
    at its middle when it has no space)."""
    spaces = [i + 1 for i, ch in enumerate(truth) if ch == " " and 0 < i < len(truth) - 1]
    if not spaces:
        return len(truth) // 2
    return min(spaces, key=lambda i: abs(i - len(truth) / 2))


_OPERATOR_SWAPS = {
    " + ": " - ",
    " - ": " + ",
    " * ": " / ",
    " / ": " * ",
    " and ": " or ",
    " or ": " and ",
}
_COMPARISON_FLIPS = {
    " < ": " >= ",
    " > ": " <= ",
    " <= ": " > ",
    " >= ": " < ",
    " == ": " != ",
    " != ": " == ",
    " is not ": " is ",
    " in ": " not in ",
}
_NAME = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")
_INT = re.compile(r"(?<![\w.])\d+(?![\w.])")


def _inject(
    line: str, kind: str, names: list[str], rng: random.Random
) -> tuple[int, int, str] | None:
    """(start, end, replacement) in `line`, or None where this kind does not apply."""
    if kind in ("operator", "comparison"):
        table = _OPERATOR_SWAPS if kind == "operator" else _COMPARISON_FLIPS
        hits = [(m.start(), old) for old in table for m in re.finditer(re.escape(old), line)]
        if not hits:
            return None
        pos, old = rng.choice(hits)
        return pos, pos + len(old), table[old]
    if kind == "off-by-one":
        hits = list(_INT.finditer(line))
        if not hits:
            return None
        m = rng.choice(hits)
        value = int(m.group())
        new = value + 1 if value == 0 or rng.random() < 0.5 else value - 1
        return m.start(), m.end(), str(new)
    hits = [m for m in _NAME.finditer(line) if not keyword.iskeyword(m.group())]
    if not hits:
        return None
    m = rng.choice(hits)
    others = [n for n in names if n != m.group() and not keyword.iskeyword(n)]
    if not others:
        return None
    return m.start(), m.end(), rng.choice(others)


def bug_examples(
    files: list[str], n: int, seed: int = 0, window_chars: int = HELDOUT_WINDOW_CHARS
) -> list[BugExample]:
    rng = random.Random(seed)
    kinds = ["operator", "comparison", "variable", "off-by-one"]
    out: list[BugExample] = []
    tries = 0
    while len(out) < n and tries < n * 100:
        tries += 1
        kind = kinds[len(out) % len(kinds)]
        picked = _random_line(files, rng)
        if picked is None:
            continue
        text, lines, i = picked
        s, e = lines[i]
        window, offset = _window(text, s, e, rng, window_chars)
        names = sorted(set(_NAME.findall(window)))
        hit = _inject(text[s:e], kind, names, rng)
        if hit is None:
            continue
        a, b, new = hit
        start = s - offset + a
        buggy = window[:start] + new + window[s - offset + b :]
        out.append(BugExample(window, buggy, start, start + len(new), kind))
    return out


@dataclass(frozen=True)
class DocstringExample:
    text: str  # the whole file with this definition's docstring taken out
    at: int  # a character offset inside the definition (its `def` / `class` keyword)
    truth: str  # the docstring's body as written, between its quotes
    name: str  # the function's or class's name
    kind: str  # "function" | "class"


_TRIPLE = re.compile(r"^[rRuU]?(\"\"\"|''')(.*)\1$", re.DOTALL)


def _docstring_removed(text: str, node) -> tuple[str, int, str] | None:  # noqa: ANN001
    """(text without the docstring of definition `node`, where the definition starts, the
    docstring's body), or None where taking the docstring out would not leave an ordinary
    definition without one: the docstring must be a plain triple-quoted string on lines
    of its own, followed by another statement of the body."""
    body = node.child_by_field_name("body")
    stmts = [c for c in body.named_children if c.type != "comment"] if body else []
    if (
        len(stmts) < 2
        or stmts[0].type != "expression_statement"
        or stmts[0].named_child_count != 1
        or stmts[0].named_children[0].type != "string"
    ):
        return None
    data = text.encode("utf-8")
    start, end = stmts[0].start_byte, stmts[0].end_byte
    m = _TRIPLE.match(data[start:end].decode("utf-8"))
    if m is None or not m.group(2).strip():
        return None
    line_a = data.rfind(b"\n", 0, start) + 1
    line_b = data.find(b"\n", end)
    if data[line_a:start].strip() or line_b < 0 or data[end:line_b].strip():
        return None
    cut = data[:line_a] + data[line_b + 1 :]
    return cut.decode("utf-8"), len(data[: node.start_byte].decode("utf-8")), m.group(2)


def docstring_examples(
    files: list[str], n: int, seed: int = 0, per_file: int = 3
) -> list[DocstringExample]:
    """Functions and classes of the test files that have a docstring, each with the
    docstring taken out: what "Insert docstring" is offered on. At most `per_file` from one
    file, so that a few long modules do not make up the sample."""
    from diffusion_infill.infill.core.scopes import python_parser  # tree-sitter, only for this kind

    parser = python_parser()
    rng = random.Random(seed)
    pool: list[list[DocstringExample]] = []
    for text in files:
        found = []
        stack = [parser.parse(text.encode("utf-8")).root_node]
        while stack:
            node = stack.pop()
            if node.type in ("function_definition", "class_definition"):
                cut = _docstring_removed(text, node)
                name = node.child_by_field_name("name")
                if cut is not None and name is not None:
                    kind = "function" if node.type == "function_definition" else "class"
                    found.append(
                        DocstringExample(cut[0], cut[1], cut[2], name.text.decode("utf-8"), kind)
                    )
            stack.extend(node.named_children)
        rng.shuffle(found)
        pool.append(found[:per_file])
    out = [ex for group in pool for ex in group]
    rng.shuffle(out)
    return out[:n]
