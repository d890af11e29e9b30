"""Docstring slots: where a function or class without a docstring would get one.

    slot = docstring_slot(text, offset)           # the def/class around `offset`, or None
    template, at = slot.template(text)            # text with an empty docstring; body at `at`
    edit = slot.edit(body)                        # Edit inserting the docstring into `text`

The slot is found with tree-sitter-python (hole markers are neutralised first, so a
function with a `<mask>` in it still parses). The docstring goes on its own line after the
signature, indented like the body's first statement, with the quotes the file's other
docstrings use (`\"\"\"` unless most of them use `'''`) and the file's line break. A body on
the signature's line (`def f(): return 1`) is moved to a line of its own.

The engine fills the empty insertion point between the quotes (`fill_spans` with an empty
span at `at`); `clean_body` makes sure the result cannot end the string early.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, replace

from diffusion_infill.infill.core.diff import Edit
from diffusion_infill.infill.core.errors import InfillError
from diffusion_infill.infill.core.scopes import python_parser
from diffusion_infill.infill.core.spans import DEFAULT_MARKER, find_holes, neutralise
from diffusion_infill.lsp.positions import LINE_BREAK, line_start

DEFS = {"function_definition": "function", "class_definition": "class"}
_STRING = {"string", "concatenated_string"}


@dataclass(frozen=True)
class DocstringSlot:
    name: str  # the function's or class's name
    kind: str  # "function" or "class"
    start: int  # the original characters [start, end) are replaced by before+body+after
    end: int
    before: str  # line break / indentation and the opening quote
    after: str  # the closing quote, a line break (and the body's indentation)
    quote: str  # '\"\"\"' or "'''"
    indent: str  # the docstring's indentation

    def template(self, text: str) -> tuple[str, int]:
        """`text` with an empty docstring in the slot, and the offset of its body."""
        at = self.start + len(self.before)
        return text[: self.start] + self.before + self.after + text[self.end :], at

    def clean_body(self, body: str) -> str:
        """The body cut where it would close the string (or escape its closing quote)."""
        cut = body.find(self.quote)
        if cut >= 0:
            body = body[:cut]
        body = body.rstrip()
        while body.endswith(("\\", self.quote[0])):
            body = body[:-1].rstrip()
        return body

    def moved(self, offset: int) -> DocstringSlot:
        """The slot found in an excerpt, in the offsets of the text the excerpt starts at
        `offset` of."""
        return replace(self, start=self.start + offset, end=self.end + offset)

    def edit(self, body: str) -> Edit:
        """The edit that inserts the docstring with `body` into the original text."""
        return Edit(self.start, self.end, self.before + self.clean_body(body) + self.after)


class _Source:
    """Text parsed once, with byte <-> character offsets."""

    def __init__(self, text: str, marker: str) -> None:
        self.text = text
        try:
            parse_text = neutralise(text, find_holes(text, marker))
        except InfillError:  # no holes, or a malformed marker: parse as it is
            parse_text = text
        self.data = parse_text.encode("utf-8")
        self.tree = python_parser().parse(self.data)
        self.ascii = len(self.data) == len(text)

    def char(self, b: int) -> int:
        return b if self.ascii else len(self.data[:b].decode("utf-8", errors="replace"))

    def byte(self, i: int) -> int:
        return i if self.ascii else len(self.text[:i].encode("utf-8"))


def _first_statement(body):  # noqa: ANN001, ANN202 - tree_sitter nodes
    for child in body.named_children:
        if child.type != "comment":
            return child
    return None


def _has_docstring(node) -> bool:  # noqa: ANN001 - a tree_sitter node
    body = node.child_by_field_name("body")
    first = _first_statement(body) if body is not None else None
    return (
        first is not None
        and first.type == "expression_statement"
        and first.named_child_count > 0
        and first.named_children[0].type in _STRING
    )


def quote_style(src: _Source) -> str:
    """The triple quote most of the file's docstrings use; `\"\"\"` when there are none."""
    counts: Counter[str] = Counter()
    stack = [src.tree.root_node]
    while stack:
        node = stack.pop()
        body = node if node.type == "module" else node.child_by_field_name("body")
        first = _first_statement(body) if body is not None else None
        if (
            (node.type == "module" or node.type in DEFS)
            and first is not None
            and first.type == "expression_statement"
            and first.named_child_count
            and first.named_children[0].type in _STRING
        ):
            literal = src.text[src.char(first.start_byte) : src.char(first.end_byte)]
            head = literal.lstrip("rRuUbBfF")
            counts["'''" if head.startswith("'") else '"""'] += 1
        stack.extend(
            c
            for c in node.named_children
            if c.type in DEFS or c.type in ("block", "decorated_definition")
        )
    if counts["'''"] > counts['"""']:
        return "'''"
    return '"""'


def _slot(src: _Source, node, quote: str) -> DocstringSlot | None:  # noqa: ANN001
    text = src.text
    body = node.child_by_field_name("body")
    name_node = node.child_by_field_name("name")
    first = _first_statement(body) if body is not None else None
    if first is None or name_node is None:
        return None
    colons = [c for c in node.children if c.type == ":" and c.end_byte <= body.start_byte]
    if not colons:
        return None
    colon = src.char(colons[-1].end_byte)
    stmt = src.char(first.start_byte)
    name = text[src.char(name_node.start_byte) : src.char(name_node.end_byte)]
    header_start = line_start(text, src.char(node.start_byte))
    header_indent = re.match(r"[ \t]*", text[header_start:]).group(0)
    m = LINE_BREAK.search(text, colon)
    newline = m.group(0) if m else "\n"
    if m is not None and m.start() < stmt:  # the body starts on a later line
        line = line_start(text, stmt)
        indent = text[line:stmt]
        if indent.strip():  # something else before the statement on its line (`;`)
            return None
        at = m.end()
        return DocstringSlot(
            name, DEFS[node.type], at, at, indent + quote, quote + newline, quote, indent
        )
    # `def f(): return 1`: the docstring and the body go on lines of their own.
    unit = "\t" if "\t" in header_indent else "    "
    indent = header_indent + unit
    return DocstringSlot(
        name,
        DEFS[node.type],
        colon,
        stmt,
        newline + indent + quote,
        quote + newline + indent,
        quote,
        indent,
    )


def docstring_slot(text: str, offset: int, *, marker: str = DEFAULT_MARKER) -> DocstringSlot | None:
    """The slot of the innermost function or class around character `offset`, or None
    when that one has a docstring (or there is none, or it cannot be parsed)."""
    src = _Source(text, marker)
    b = src.byte(min(max(offset, 0), len(text)))
    node = src.tree.root_node.descendant_for_byte_range(b, b)
    while node is not None and node.type not in DEFS:
        if node.type == "decorated_definition":  # on a decorator: the decorated definition
            node = node.child_by_field_name("definition")
            break
        node = node.parent
    if node is None or _has_docstring(node):
        return None
    return _slot(src, node, quote_style(src))


def missing_docstrings(text: str, *, marker: str = DEFAULT_MARKER) -> list[DocstringSlot]:
    """Every function and class without a docstring, in text order."""
    src = _Source(text, marker)
    quote = quote_style(src)
    out: list[DocstringSlot] = []
    stack = [src.tree.root_node]
    while stack:
        node = stack.pop()
        if node.type in DEFS and not _has_docstring(node):
            slot = _slot(src, node, quote)
            if slot is not None:
                out.append(slot)
        stack.extend(reversed(node.named_children))
    return sorted(out, key=lambda s: s.start)
