"""Which lines of code releases change: a prior over a window's lines, from their text.

The fixer's model reads a real one-line change as ordinary in view and, out of view, only
somewhat surprising (infill/core/suspect_lines.py). Yet the lines that releases change are
not any lines: a `return`, a call's arguments, a condition, a string are changed far more
often than a `def`, an import or a closing bracket. A conditional logit over the lines of
a window (softmax over its code lines of w . features(line)) learns that from the one-line
changes between consecutive releases of the training packages (12,574 of 344 packages,
model/training/fix_pairs.py; `python -m diffusion_infill.model.training.fit_line_prior`), and
the fixer adds its score to the ranking of the lines it reads masked
(infill/core/suspect_lines.py).

A line's features are its text alone, never its place in the window: its size in tokens and
characters (and against the window's mean), its first keyword, what it holds (a string, a
number, a comparison, a call, an assignment, ...), its indentation, the share of its names
that other code lines of the window use, and which of the vocabulary's common tokens it
holds (`LinePrior.vocab`, tokens of at least so many training lines).

The fitted weights ship beside this module (line_prior.json); `load_line_prior` reads them.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np

from diffusion_infill.infill.core.lexer import prose_ranges

LINE_PRIOR_FILE = Path(__file__).with_name("line_prior.json")
KEYWORDS = (
    "if", "elif", "while", "return", "raise", "assert", "for", "with", "def", "class",
    "import", "from", "else", "try", "except", "yield", "del", "pass", "break", "continue",
    "lambda", "async", "await",
)  # fmt: skip
SHAPE = (
    "string", "f-string", "number", "comparison", "boolean operator", "call", "assignment",
    "augmented assignment", "attribute", "subscript", "closing brackets", "ends with ':'",
    "ends with ','", "ends with an open bracket", "decorator", "None", "True or False",
    "self.", "assignment from a call", "indentation / 8",
)  # fmt: skip
FEATURES = (
    "log(1 + tokens)",
    "log(1 + characters)",
    *(f"starts with {k!r}" for k in KEYWORDS),
    *SHAPE,
    "log(1 + tokens) - the window's mean",
    "share of its names other lines use",
)
_LEX = re.compile(
    r"[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?|\"[^\"]*\"|'[^']*'|==|!=|<=|>=|\*\*|//|->|\S"
)
_VOCAB_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+|==|!=|<=|>=|\*\*|//|->|[^\sA-Za-z0-9_]")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FIRST_WORD = re.compile(r"[A-Za-z_]+")
_PATTERNS = {  # SHAPE's features that a regular expression finds in the line's code
    "string": re.compile(r"[\"']"),
    "f-string": re.compile(r"\bf[\"']"),
    "number": re.compile(r"(?<![A-Za-z_])\d"),
    "comparison": re.compile(r"==|!=|<=|>=|(?<![-=<>])[<>](?![=>])|\bin\b|\bis\b"),
    "boolean operator": re.compile(r"\band\b|\bor\b|\bnot\b"),
    "augmented assignment": re.compile(r"[+\-*/|&%]="),
    "None": re.compile(r"\bNone\b"),
    "True or False": re.compile(r"\bTrue\b|\bFalse\b"),
}
_ASSIGN = re.compile(r"(?<![=!<>])=(?!=)")
_ASSIGN_FROM = re.compile(r"[a-z_]\w*\s*=\s*[^=]")
_CLOSERS = re.compile(r"[)\]}]+[,:]?")


def _shape(line: str) -> list[float]:
    """The line's size, first keyword and SHAPE features (FEATURES' first part)."""
    code = line.strip()
    first = _FIRST_WORD.match(code)
    word = first.group(0) if first else ""
    statement = word not in KEYWORDS
    found = {name: bool(p.search(code)) for name, p in _PATTERNS.items()}
    found.update(
        {
            "call": "(" in code,
            "assignment": bool(_ASSIGN.search(code)) and statement,
            "attribute": "." in code,
            "subscript": "[" in code,
            "closing brackets": bool(_CLOSERS.fullmatch(code)),
            "ends with ':'": code.endswith(":"),
            "ends with ','": code.endswith(","),
            "ends with an open bracket": code.endswith(("(", "[", "{")),
            "decorator": code.startswith("@"),
            "self.": "self." in code,
            "assignment from a call": bool(_ASSIGN_FROM.search(code)) and "(" in code and statement,
        }
    )
    sizes = [math.log1p(len(_LEX.findall(code))), math.log1p(len(code))]
    indent = (len(line) - len(line.lstrip())) / 8.0
    shape = [float(found[name]) for name in SHAPE[:-1]] + [indent]
    return sizes + [float(word == k) for k in KEYWORDS] + shape


def vocabulary_tokens(code: str) -> set[str]:
    """The tokens of a line's code as the vocabulary counts them (numbers as "<num>")."""
    return {t if not t[0].isdigit() else "<num>" for t in _VOCAB_TOKEN.findall(code)}


def code_line_numbers(text: str) -> list[int]:
    """The 0-based lines of `text` with a character of code: not blank, and not all
    comment or docstring (the lines the fixer can name)."""
    prose = bytearray(len(text))
    for a, b in prose_ranges(text):
        prose[a:b] = b"\x01" * (b - a)
    out, start = [], 0
    for k, line in enumerate(text.split("\n")):
        if any(not ch.isspace() and not prose[start + j] for j, ch in enumerate(line)):
            out.append(k)
        start += len(line) + 1
    return out


def line_features(rows: list[str], vocab: tuple[str, ...]) -> np.ndarray:
    """One row per line of code in `rows` (the lines ranked together), FEATURES then
    whether it holds each token of `vocab`: the window's mean and the names other lines use
    are those of `rows`."""
    if not rows:
        return np.zeros((0, len(FEATURES) + len(vocab)))
    base = np.array([_shape(r) for r in rows], dtype=np.float64)
    names = [set(_NAME.findall(r)) for r in rows]
    users = Counter(n for line_names in names for n in line_names)
    shared = [np.mean([users[n] > 1 for n in ns]) if ns else 1.0 for ns in names]
    index = _index(vocab)
    holds = np.zeros((len(rows), len(vocab)))
    for i, r in enumerate(rows):
        for t in vocabulary_tokens(r.strip()):
            if t in index:
                holds[i, index[t]] = 1.0
    relative = base[:, :1] - base[:, :1].mean()
    return np.concatenate([base, relative, np.array(shared).reshape(-1, 1), holds], axis=1)


@dataclass(frozen=True)
class LinePrior:
    """Weights over FEATURES and then over `vocab` (whether the line holds the token)."""

    vocab: tuple[str, ...]
    weights: np.ndarray
    meta: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.weights.shape != (len(FEATURES) + len(self.vocab),):
            raise ValueError(
                f"a line prior needs {len(FEATURES) + len(self.vocab)} weights "
                f"({len(FEATURES)} features and {len(self.vocab)} tokens), got "
                f"{self.weights.shape[0] if self.weights.ndim == 1 else self.weights.shape}"
            )

    def scores(self, text: str, lines: list[int]) -> np.ndarray:
        """The log-odds (up to a constant per window) that each of `lines` (0-based lines
        of `text`, ranked together) is the one changed."""
        all_lines = text.split("\n")
        return line_features([all_lines[k] for k in lines], self.vocab) @ self.weights

    def to_json(self) -> dict:
        return {"vocab": list(self.vocab), "weights": self.weights.tolist(), **self.meta}


@cache
def _index(vocab: tuple[str, ...]) -> dict[str, int]:
    return {t: i for i, t in enumerate(vocab)}


def load_line_prior(path: Path | None = None) -> LinePrior:
    """The prior saved at `path` (default: the one shipped, LINE_PRIOR_FILE); a ValueError
    naming the file when it is missing or not a line prior."""
    path = Path(path or LINE_PRIOR_FILE)
    try:
        raw = json.loads(path.read_text())
        vocab, weights = raw.pop("vocab"), raw.pop("weights")
        if not all(isinstance(t, str) for t in vocab):
            raise TypeError("vocab holds a non-string")
        return LinePrior(tuple(vocab), np.asarray(weights, dtype=np.float64), raw)
    except FileNotFoundError:
        raise ValueError(
            f"no line prior at {path}: python -m diffusion_infill.model.training.fit_line_prior"
        ) from None
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise ValueError(f"{path} is not a line prior: {e}") from None


@cache
def shipped_line_prior() -> LinePrior:
    """The shipped prior, read once."""
    return load_line_prior()
