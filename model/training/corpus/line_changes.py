"""One-line changes between two versions of a Python file, kept when they read as fixes.

`one_line_changes(old, new)` diffs the files line by line and returns every hunk that
replaces exactly one line by one line, with the same indentation, where the rest of the
old file is identical to the new one inside a window of about HELDOUT_WINDOW_CHARS of
whole lines around it (so the window shows the bug alone). A change is dropped (the
reason, `why_dropped`) when it

- changes only whitespace ("whitespace"), or leaves the code's syntax tree as it was:
  a comment, a docstring, a type annotation, quotes or parentheses ("no effect");
- needs the rest of the release to parse, or the old file is not Python 3 ("not parsed");
- is an import line ("import": a reordering or a move, not a bug a window shows);
- touches a version string ("version");
- rewords a message: every token that differs is a string literal with a space in it
  ("message");
- is a line of data: literals and punctuation only, a table's row ("data");
- adds to a signature (a def line that only gains text) or to `__all__` ("signature");
- renames: the one name it swaps is the one the line defines, or is used elsewhere in the
  old file and nowhere in the new one ("rename").
"""

from __future__ import annotations

import ast
import difflib
import io
import random
import re
import tokenize
from dataclasses import dataclass

from diffusion_infill.model.training.corpus.windows import HELDOUT_WINDOW_CHARS, window_around

_WORD = re.compile(r"\w+|[^\w\s]+")
_VERSION = re.compile(r"version|\b\d+\.\d+\.\d+\b", re.IGNORECASE)
_IMPORT = re.compile(r"\s*(import\s|from\s+\S+\s+import\s)")
_EXPORT = re.compile(r"\s*__all__\b")
_DEF = re.compile(r"\s*(async\s+)?def\s")


@dataclass(frozen=True)
class Change:
    line: int  # 0-based index of the changed line in the old file
    old_line: str  # the line as it was (the bug), without its line break
    new_line: str  # the line as released next (the fix)
    window: str  # whole lines of the old file around the line (the buggy window)
    fixed_window: str  # the same lines of the new file
    window_line: int  # 0-based index of the changed line in the window

    @property
    def words_changed(self) -> int:
        """How many words (identifier, number or operator run) differ between the lines."""
        a, b = _WORD.findall(self.old_line), _WORD.findall(self.new_line)
        ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
        return sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in ops if tag != "equal")


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _window_lines(old: str, index: int, seed: str) -> tuple[str, int, int]:
    """The window around line `index` (a held-out example's window, its draw seeded by
    `seed`): (window, first line, end line) of the old file."""
    starts = [0] + [m.end() for m in re.finditer("\n", old)]
    s = starts[index]
    e = old.find("\n", s)
    e = len(old) if e < 0 else e
    window, offset = window_around(old, s, e, random.Random(seed), HELDOUT_WINDOW_CHARS)
    first = old.count("\n", 0, offset)
    return window, first, first + len(window.splitlines())


def _conflicts(ops: list[tuple[str, int, int, int, int]], own: int, a: int, b: int) -> bool:
    """Whether a change other than ops[own] touches old lines [a, b)."""
    for k, (tag, i1, i2, _, _) in enumerate(ops):
        if k == own or tag == "equal":
            continue
        if (i1 < b and i2 > a) if i2 > i1 else a < i1 < b:
            return True
    return False


def one_line_changes(old: str, new: str, seed: str = "") -> list[tuple[Change, str | None]]:
    """Every one-line hunk of old -> new that stands alone in its window, with the reason
    it is dropped (None: kept). `seed` places the windows (heldout's draw)."""
    old_lines, new_lines = old.splitlines(keepends=True), new.splitlines(keepends=True)
    ops = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False).get_opcodes()
    out = []
    for k, (tag, i1, i2, j1, j2) in enumerate(ops):
        if tag != "replace" or i2 - i1 != 1 or j2 - j1 != 1:
            continue
        bad, good = old_lines[i1].rstrip("\r\n"), new_lines[j1].rstrip("\r\n")
        if not bad.strip() or not good.strip() or _indent(bad) != _indent(good):
            continue
        window, a, b = _window_lines(old, i1, f"{seed}:{i1}")
        if _conflicts(ops, k, a, b):
            continue
        lines = window.splitlines(keepends=True)
        ending = lines[i1 - a][len(bad) :]
        lines[i1 - a] = good + ending
        change = Change(i1, bad, good, window, "".join(lines), i1 - a)
        out.append((change, why_dropped(old, new, change)))
    return out


class _Plain(ast.NodeTransformer):
    """A syntax tree without what does not run: docstrings and bare strings, annotations."""

    def visit_Expr(self, node: ast.Expr) -> ast.AST:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return ast.Pass()
        return self.generic_visit(node)

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.annotation = None
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.returns = None
        return self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        if node.value is None:
            return ast.Pass()
        return self.generic_visit(ast.Assign(targets=[node.target], value=node.value))


def _plain_tree(text: str) -> str | None:
    try:
        return ast.dump(_Plain().visit(ast.parse(text)))
    except (SyntaxError, ValueError, RecursionError):
        return None


def _tokens(text: str, row: int) -> list[tuple[int, str]]:
    """(type, text) of the tokens of `text` that touch line `row` (1-based)."""
    out = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.start[0] <= row <= tok.end[0] and tok.type not in (
                tokenize.NL,
                tokenize.NEWLINE,
                tokenize.INDENT,
                tokenize.DEDENT,
                tokenize.COMMENT,
            ):
                out.append((tok.type, tok.string))
            if tok.start[0] > row:
                break
    except (tokenize.TokenError, SyntaxError):
        pass
    return out


def _differing(old: str, hybrid: str, row: int) -> tuple[list, list]:
    """The tokens on line `row` that the change removes and adds."""
    a, b = _tokens(old, row), _tokens(hybrid, row)
    removed, added = [], []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            removed += a[i1:i2]
            added += b[j1:j2]
    return removed, added


def why_dropped(old: str, new: str, change: Change) -> str | None:
    """Why `change` of the file `old` (released next as `new`) is not a plausible fix, or
    None (the reasons: the module's docstring)."""
    bad, good = change.old_line, change.new_line
    if "".join(bad.split()) == "".join(good.split()):
        return "whitespace"
    lines = old.splitlines(keepends=True)
    ending = lines[change.line][len(bad) :]
    hybrid = "".join(lines[: change.line] + [good + ending] + lines[change.line + 1 :])
    before, after = _plain_tree(old), _plain_tree(hybrid)
    if before is None or after is None:
        return "not parsed"
    if before == after:
        return "no effect"
    if _IMPORT.match(bad) or _IMPORT.match(good):
        return "import"
    if _VERSION.search(bad) or _VERSION.search(good):
        return "version"
    removed, added = _differing(old, hybrid, change.line + 1)
    if removed + added and all(t == tokenize.STRING and " " in s for t, s in removed + added):
        return "message"
    if all(
        t in (tokenize.NUMBER, tokenize.STRING, tokenize.OP)
        for t, _ in _tokens(old, change.line + 1)
    ):
        return "data"
    if _EXPORT.match(bad) or (_DEF.match(bad) and not removed):
        return "signature"
    return "rename" if _renames(removed, added, bad, old, new, change.line) else None


def _renames(removed: list, added: list, bad: str, old: str, new: str, line: int) -> bool:
    """Whether the change swaps one name for another, where the old name is defined by the
    line (a def, a class, an assignment's target) or is gone from the whole new file while
    the old file uses it elsewhere."""
    if not (len(removed) == 1 == len(added) and removed[0][0] == added[0][0] == tokenize.NAME):
        return False
    name = re.escape(removed[0][1])
    if re.match(rf"\s*((async\s+)?def|class)\s+{name}\b|\s*{name}\s*(:[^=]*)?=[^=]", bad):
        return True
    word = re.compile(rf"\b{name}\b")
    lines = old.splitlines(keepends=True)
    return bool(word.search("".join(lines[:line] + lines[line + 1 :]))) and not word.search(new)
