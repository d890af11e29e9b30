"""What the checks (infill/core/checks.py) read of a tree-sitter tree around a fill: the
nodes that touch or overlap a byte range, and what an identifier does there: binds a name,
loads one, or neither (`x.name`, `f(name=...)`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

Range = tuple[int, int]  # [start, end)

# Where an identifier binds a name rather than loading it: (parent type, field) pairs and
# parent types whose identifier children all bind. Patterns in between (x, (y, *z)) are
# climbed through.
_BINDING_FIELDS = {
    ("assignment", "left"),
    ("augmented_assignment", "left"),
    ("for_statement", "left"),
    ("for_in_clause", "left"),
    ("named_expression", "name"),
    ("function_definition", "name"),
    ("class_definition", "name"),
    ("as_pattern", "alias"),
    ("default_parameter", "name"),
    ("typed_default_parameter", "name"),
    ("type_alias_statement", "left"),
}
_BINDING_PARENTS = {
    "parameters",
    "lambda_parameters",
    "typed_parameter",
    "global_statement",
    "nonlocal_statement",
    "import_statement",
    "import_from_statement",
    "aliased_import",
    "type_parameter",
    "case_pattern",
    "keyword_pattern",
    "dict_pattern",
    "class_pattern",
    "splat_pattern",
    "as_pattern_target",
    "dotted_name",
}
_PATTERNS = {
    "pattern_list",
    "tuple_pattern",
    "list_pattern",
    "list_splat_pattern",
    "dictionary_splat_pattern",
    "tuple",
    "list",
    "parenthesized_expression",
}
_TYPES = {"type", "generic_type"}  # `T` of `class C[T]` and `type A = ...` binds
# Not loads: the attribute of `x.name`, the keyword of `f(name=1)`.
_NOT_LOADS = {("attribute", "attribute"), ("keyword_argument", "name")}


def byte_ranges(text: str, ranges: Sequence[Range]) -> list[Range]:
    """Character ranges as UTF-8 byte ranges (tree-sitter's offsets)."""
    if text.isascii():
        return list(ranges)
    return [(len(text[:a].encode("utf-8")), len(text[:b].encode("utf-8"))) for a, b in ranges]


def touches(node: Any, r: Range) -> bool:
    return node.start_byte <= r[1] and node.end_byte >= r[0]


def overlaps(node: Any, r: Range) -> bool:
    return node.start_byte < r[1] and node.end_byte > r[0]


def walk(node: Any, keep: Any) -> Iterator[Any]:
    """`node` and its descendants, entering only the nodes for which `keep` holds."""
    stack = [node]
    while stack:
        n = stack.pop()
        if keep(n):
            yield n
            stack.extend(reversed(n.children))


def _field(node: Any) -> str | None:
    parent = node.parent
    for i, child in enumerate(parent.children):
        if child.id == node.id:
            return parent.field_name_for_child(i)
    return None


def binds(node: Any) -> bool | None:
    """True: identifier `node` binds a name; None: it is no load either (x.name, f(name=));
    False: it loads the name."""
    parent = node.parent
    if parent is None or (parent.type, _field(node)) in _NOT_LOADS:
        return None
    while parent is not None and parent.type in _PATTERNS:
        node, parent = parent, parent.parent
    if parent is not None and parent.type in _TYPES:  # an annotation loads, unless it is
        while parent is not None and parent.type in _TYPES:  # a type parameter or alias
            node, parent = parent, parent.parent
        return parent is not None and (
            parent.type == "type_parameter"
            or ((parent.type, _field(node)) == ("type_alias_statement", "left"))
        )
    if parent is None:
        return False
    return parent.type in _BINDING_PARENTS or (parent.type, _field(node)) in _BINDING_FIELDS


def names_at(root: Any, data: bytes, r: Range) -> tuple[list[tuple[str, int]], set[str]]:
    """The identifiers overlapping byte range `r`: the loads (name, start byte) and the
    names bound there."""
    loads: list[tuple[str, int]] = []
    bound: set[str] = set()
    for n in walk(root, lambda n: overlaps(n, r)):
        if n.type != "identifier":
            continue
        name = data[n.start_byte : n.end_byte].decode("utf-8", "replace")
        kind = binds(n)
        if kind:
            bound.add(name)
        elif kind is False:
            loads.append((name, n.start_byte))
    return loads, bound
