"""Checks a code editor can afford: does a fill break the code around it?

    problems = check_fills(before, after, before_ranges, after_ranges, language="python")

`before` is the text as it was, with each span's characters at `before_ranges` (for a hole,
the marker *neutralised* to `_`, so that the parser reads an identifier where the hole
is; for a rewritten selection, the selection as written); `after` is the text with the
fills in place at `after_ranges`. Each problem names the range (its index) it is blamed on:

- `parse`: the fill leaves more tree-sitter ERROR or MISSING nodes touching its range than
  the text before had touching the span, or, where the statement around the span parsed,
  any inside the statement the fill touches (an error elsewhere in the file, or one that
  was there already, is not the fill's fault); and in Python, where the text before
  parses with Python's own parser (`ast`), with a stand-in in each span if need be (a
  header `if _:` for a hidden line that opened a block, `_):` for one that ended a
  signature: infill/core/stand_ins.py), the text with this fill alone must too
  (tree-sitter reads past `if lines[0]` without its colon, a dedent that matches no
  block, a string left open to the next quote);
- `comment`: a comment the fill opens runs on over code after it on the same line (the
  fill commented out text it was not given: `for x in  # ...:` hides the colon);
- `keyword`: a call that the fill touches names one keyword argument twice (Python);
- `line` (any language, no parser): the fill of a span inside one line (code before it
  and after it on that line) holds a line break: `f(<hole>)` filled with `a,\n    b`.
  A model that does not end an in-line hole writes on past it into new lines; the
  failing fill then gets the shorter alternatives. Not inside a Python triple-quoted
  string, where a line break is text: Insert docstring fills an empty docstring, with
  its quotes on both sides, and a docstring may take lines;
- `name` (Python): the fill loads an identifier that the code before never spells (not
  defined, imported or even used anywhere), that the fill does not bind itself, and that
  is no builtin. `x.name` and `f(name=...)` are not loads. "Never spells" is deliberately
  lenient: a name used anywhere in the code passes, so a name defined further down, or
  one a cut-off text uses without its definition, is not blamed; after `from m import *`
  every name passes. Words of comments and strings do not count: `lines` in a docstring
  ("Return the lines of ...") defines nothing, and was the usual way a made-up name got
  through. One exception the other way: a name spelled only as a local of other
  functions, lambdas or comprehensions (`fh` of another function's `with open(p) as
  fh:`) is blamed too, since no such name exists where the fill runs
  (infill/core/visible.py).
- `member` (Python, with jedi): the fill reads an attribute or module member that jedi
  shows does not exist on a base it knows whole (`os.path.joinn`, `self.signature()`),
  or passes a keyword argument the callee does not take (infill/core/member_uses.py,
  jedi_names.py); what jedi cannot judge, or a request past its budget, is left to `name`.

Other languages get the parse check when a `tree_sitter_<language>` grammar is installed,
and only `line` otherwise. One parse of each text and walks limited to the nodes that touch
the ranges keep a call to a few milliseconds (docs/log/architecture.md, "Checks"). What the
checks read of a tree (the nodes around a range, what an identifier binds or loads) is
infill/core/syntax_tree.py.
"""

from __future__ import annotations

import builtins
import importlib
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from diffusion_infill.infill.core.docstring_cuts import as_read
from diffusion_infill.infill.core.jedi_names import JediBudget, Use, missing_members
from diffusion_infill.infill.core.member_uses import member_uses, repeated_keywords
from diffusion_infill.infill.core.scopes import PythonScopes, python_parser
from diffusion_infill.infill.core.snippets import Source
from diffusion_infill.infill.core.stand_ins import StandIn, first_error, parsing_stand_in
from diffusion_infill.infill.core.syntax_tree import (
    binds,
    byte_ranges,
    names_at,
    overlaps,
    touches,
    walk,
)
from diffusion_infill.infill.core.visible import name_visible

Range = tuple[int, int]  # [start, end) in characters

PYTHON = "python"
# every check, in the order they run
KINDS = ("parse", "comment", "keyword", "name", "member", "line")
# Names every module has without defining them (module attributes the builtins lack).
_MODULE_NAMES = {
    "__file__",
    "__builtins__",
    "__path__",
    "__all__",
    "__annotations__",
    "__cached__",
    "__qualname__",
    "__module__",
    "__class__",
    "__dict__",
}
_KNOWN = frozenset(dir(builtins)) | _MODULE_NAMES
_STAR_IMPORT = re.compile(r"^[ \t]*from[ \t]+[\w.]+[ \t]+import[ \t]+\*", re.MULTILINE)


@dataclass(frozen=True)
class Problem:
    kind: str  # one of KINDS
    range: int  # index of the fill range it is blamed on
    message: str  # short, for people: "unknown name 'foo'"


@cache
def parser_for(language: str | None) -> Any:
    """A tree-sitter parser for `language`, or None when no grammar is installed."""
    if language == PYTHON:
        return python_parser()
    if not language or not language.isidentifier():
        return None
    try:
        import tree_sitter

        grammar = importlib.import_module(f"tree_sitter_{language.lower()}")
        return tree_sitter.Parser(tree_sitter.Language(grammar.language()))
    except (ImportError, AttributeError, ValueError, TypeError):
        return None


def splice(text: str, ranges: Sequence[Range], fills: Sequence[str]) -> tuple[str, list[Range]]:
    """`text` with each (sorted, disjoint) range replaced by its fill, and the fills'
    ranges in the new text."""
    parts: list[str] = []
    out: list[Range] = []
    pos = shift = 0
    for (start, end), fill in zip(ranges, fills, strict=True):
        parts += [text[pos:start], fill]
        out.append((start + shift, start + shift + len(fill)))
        shift += len(fill) - (end - start)
        pos = end
    parts.append(text[pos:])
    return "".join(parts), out


def _widen(data: bytes, r: Range) -> Range:
    """`r` with the spaces on either side, on its lines: an error node next to a fill
    often stops at the space before it (`for x in ` then a fill that hid the colon)."""
    a, b = r
    while a > 0 and data[a - 1] in b" \t":
        a -= 1
    while b < len(data) and data[b] in b" \t":
        b += 1
    return a, b


def _swallowed(root: Any, data: bytes, r: Range) -> bool:
    """A comment that starts in the fill and runs past it over code on the same line:
    the fill commented out text it was not given."""
    for n in walk(root, lambda n: overlaps(n, r)):
        if n.type == "comment" and r[0] <= n.start_byte < r[1] < n.end_byte:
            return data[r[1] : n.end_byte].strip() != b""
    return False


def _errors(root: Any, r: Range, *, statement: bool = False) -> int:
    """ERROR and MISSING nodes touching byte range `r`; with `statement`, also those
    inside the innermost statement that touches it (`rv =` as a line's fill parses as
    `rv = return ...`, the error on the next line)."""
    if not statement:
        return sum(
            n.type == "ERROR" or n.is_missing
            for n in walk(root, lambda n: n.has_error and touches(n, r))
        )
    return sum(
        (n.type == "ERROR" or n.is_missing) and (touches(n, r) or touches(_statement(n), r))
        for n in walk(root, lambda n: n.has_error)
    )


def _new_errors(
    old_root: Any, old_data: bytes, old: Range, new_root: Any, new_data: bytes, new: Range
) -> int:
    """The errors the fill brings: more touching its range than touched the span; where
    the statement around the span parsed before, any in the statement the fill touches
    (a text cut inside a statement or a docstring, as a window is, keeps the first rule:
    the parser's recovery there differs with whatever stands in the span)."""
    old_w, new_w = _widen(old_data, old), _widen(new_data, new)
    added = _errors(new_root, new_w) - _errors(old_root, old_w)
    if added <= 0 and _errors(old_root, old_w, statement=True) == 0:
        added = _errors(new_root, new_w, statement=True)
    return added


def syntax_error(text: str) -> str | None:
    """Python's message for the first syntax error of `text` (None: it parses)."""
    return None if (error := first_error(text)) is None else error[1]


def _statement(node: Any) -> Any:
    """The innermost statement holding `node` (a child of a block or of the module), or
    the node itself at the top."""
    while node.parent is not None and node.parent.type not in ("block", "module"):
        node = node.parent
    return node


def _spelled(root: Any, data: bytes) -> set[str]:
    """Every identifier the code of the tree uses or binds; not the words of its comments
    and strings (an f-string's interpolations are code)."""
    out: set[str] = set()
    stack = [root]
    while stack:
        n = stack.pop()
        if n.type == "identifier":
            out.add(data[n.start_byte : n.end_byte].decode("utf-8", "replace"))
        elif n.type != "comment":
            stack.extend(n.children)
    return out


@dataclass
class _Before:
    """The text a fill is checked against, parsed: the last one is kept, since the
    candidates of a request, window by window, are all checked against the same text."""

    text: str
    language: str | None
    data: bytes
    root: Any
    _spelled: set[str] | None = None
    budget: JediBudget = field(default_factory=JediBudget)  # jedi's seconds for this text
    _parsing: dict[tuple[Range, ...], StandIn | None] = field(default_factory=dict)

    def parsing(self, ranges: Sequence[Range]) -> StandIn | None:
        """The text, its spans stood in for, that Python's own parser reads (the text
        itself when it does; None when no stand-in does: infill/core/stand_ins.py). Found
        once per spans, when a fill needs it."""
        key = tuple(ranges)
        if key not in self._parsing:
            self._parsing[key] = parsing_stand_in(self.text, key)
        return self._parsing[key]

    def spelled(self) -> set[str]:
        """The code's identifiers, walked for once when a load needs them."""
        if self._spelled is None:
            self._spelled = _spelled(self.root, self.data)
        return self._spelled


_last_before: list[_Before] = []


def _before(parser: Any, text: str, language: str | None) -> _Before:
    last = _last_before[0] if _last_before else None  # one read: threads may swap it
    if last is not None and last.text is text and last.language == language:
        return last
    data = text.encode("utf-8")
    parsed = _Before(text, language, data, parser.parse(data).root_node)
    _last_before[:] = [parsed]
    return parsed


def check_fills(
    before: str,
    after: str,
    before_ranges: Sequence[Range],
    after_ranges: Sequence[Range],
    *,
    language: str | None = PYTHON,
    kinds: Sequence[str] = KINDS,
    only: Collection[int] | None = None,
    source: Source | None = None,
) -> list[Problem]:
    """The problems of `kinds` that the fills at `after_ranges` bring into `after` (the
    module docstring); [] when none. Only `line` runs without a grammar for `language`.
    `only`: the fills to look at (default: all; the others are text around them, as a
    file's windows are to one window's fills). `source`: where the text lives (jedi)."""
    if language == PYTHON:  # a text cut inside a docstring reads as its file does
        before, after = as_read(before, after, before_ranges, after_ranges)
    lines = "line" in kinds
    problems = _broken_lines(before, after, before_ranges, after_ranges, language) if lines else []
    parser = parser_for(language) if set(kinds) - {"line"} else None
    if parser is None:
        return problems
    prior = _before(parser, before, language)
    old_data, old_root = prior.data, prior.root
    new_data = after.encode("utf-8")
    new_root = parser.parse(new_data).root_node
    old_bytes, new_bytes = byte_ranges(before, before_ranges), byte_ranges(after, after_ranges)
    python = language == PYTHON
    star = python and _STAR_IMPORT.search(before) is not None
    uses: list[tuple[int, Use]] = []
    for i, (old, new) in enumerate(zip(old_bytes, new_bytes, strict=True)):
        if only is not None and i not in only:
            continue
        added = 0
        if new_root.has_error and "parse" in kinds:
            added = _new_errors(old_root, old_data, old, new_root, new_data, new)
        if added > 0:
            problems.append(Problem("parse", i, f"{added} new syntax error{'s' * (added > 1)}"))
        elif python and "parse" in kinds:
            fill = after[after_ranges[i][0] : after_ranges[i][1]]
            if (error := _python_refuses(prior, before_ranges, i, fill)) is not None:
                problems.append(Problem("parse", i, f"Python cannot parse it: {error}"))
        if "comment" in kinds and _swallowed(new_root, new_data, new):
            problems.append(Problem("comment", i, "a comment hides the code after the fill"))
        if not python:
            continue
        repeated = repeated_keywords(new_root, new_data, new) if "keyword" in kinds else []
        for word in dict.fromkeys(repeated):
            problems.append(Problem("keyword", i, f"keyword argument {word!r} repeated"))
        if "member" in kinds and new[0] != new[1] and not _broken(problems, i):
            uses += [(i, u) for u in member_uses(new_root, new_data, new)]  # jedi: below
        if star or new[0] == new[1] or "name" not in kinds:
            continue
        loads, bound = names_at(new_root, new_data, new)
        for word in dict.fromkeys(w for w, _ in loads if w not in _KNOWN and w not in bound):
            if word not in prior.spelled():
                problems.append(Problem("name", i, f"unknown name {word!r}"))
            elif not _visible(word, old_root, old_data, old, new_root, new_data, new):
                problems.append(Problem("name", i, f"{word!r} is local to another scope"))
    return problems + _members(after, uses, prior.budget, source or Source())


def _members(
    after: str, uses: list[tuple[int, Use]], budget: JediBudget, source: Source
) -> list[Problem]:
    """The `member` problems of the attributes and keyword arguments fills read."""
    if not uses:
        return []
    found = missing_members(
        after, uses, path=source.path, root=source.root, environment=source.python, budget=budget
    )
    return [Problem("member", m.range, m.message) for m in found or ()]


def _broken(problems: list[Problem], i: int) -> bool:
    """Range `i` already fails to parse: jedi's time goes to the others."""
    return any(p.range == i and p.kind == "parse" for p in problems)


def _python_refuses(prior: _Before, ranges: Sequence[Range], i: int, fill: str) -> str | None:
    """Python's message where the text before, its spans stood in for, parses and does
    not with `fill` alone in span `i`; None otherwise."""
    if (stood := prior.parsing(ranges)) is None:
        return None
    a, b = stood.ranges[i]
    return syntax_error(stood.text[:a] + fill + stood.text[b:])


def _visible(
    word: str,
    old_root: Any,
    old_data: bytes,
    old: Range,
    new_root: Any,
    new_data: bytes,
    new: Range,
) -> bool:
    """`word` is spelled where the fill can see it. A fill of whole lines (from column 0)
    is placed by its own indentation: where its code stands in the text with the fill in
    (the text before holds the hole, which at column 0 ends any block around it)."""
    if new[0] == 0 or new_data[new[0] - 1 : new[0]] == b"\n":
        chunk = new_data[new[0] : new[1]]
        start = new[0] + len(chunk) - len(chunk.lstrip())
        end = new[1] - (len(chunk) - len(chunk.rstrip()))
        if start < end:
            return name_visible(new_root, new_data, word, (start, end), binds)
    return name_visible(old_root, old_data, word, old, binds)


def _inside_line(text: str, r: Range) -> bool:
    """`r` lies inside one line of `text` with code before it and after it on that line."""
    a, b = r
    if "\n" in text[a:b]:
        return False
    line_start = text.rfind("\n", 0, a) + 1
    line_end = text.find("\n", b)
    return bool(text[line_start:a].strip()) and bool(
        text[b : len(text) if line_end < 0 else line_end].strip()
    )


def _broken_lines(
    before: str,
    after: str,
    before_ranges: Sequence[Range],
    after_ranges: Sequence[Range],
    language: str | None,
) -> list[Problem]:
    broken = [
        i
        for i, (old, new) in enumerate(zip(before_ranges, after_ranges, strict=True))
        if "\n" in after[new[0] : new[1]] and _inside_line(before, old)
    ]
    if broken and language == PYTHON:  # a line break inside a triple-quoted string is text
        scopes = PythonScopes(before)
        broken = [i for i in broken if len(scopes.string_quote(*before_ranges[i]) or "") != 3]
    return [Problem("line", i, "the fill breaks the line it was asked for") for i in broken]


def summary(problems: Sequence[Problem]) -> str:
    """One line for people: the problems' messages, joined."""
    return "; ".join(dict.fromkeys(p.message for p in problems))
