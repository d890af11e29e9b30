"""Which spellings of a name could a fill at a range see? (Python scopes, tree-sitter)

The `name` check (infill/core/checks.py) passes a name that the text spells somewhere.
That is lenient on purpose (a window may miss the imports; a name may be defined further
down), but too lenient in one common case: a name that is a *local* of another function.
A fill in `mean()` that loads `fh` passes because `read()` has `with open(p) as fh:`,
though no `fh` exists where the fill runs.

`visible_spelling(root, data, name, r)` says whether one spelling of `name` could be seen
from byte range `r`: a spelling is hidden when it lies inside a function, lambda or
comprehension that binds the name locally (parameter, assignment, `for`, `with ... as`,
`except ... as`, import; not declared `global` or `nonlocal`) and that does not enclose
`r`. Everything else stays visible: module names, names of enclosing functions, class
bodies (lenient), spellings in comments and strings outside other functions, and any
spelling the parse does not place inside a scope (a window cut mid-function parses with
errors; the old, lenient answer holds there).
"""

from __future__ import annotations

import re
from typing import Any

# Nodes that open a local scope: what they bind is theirs alone.
SCOPES = {
    "function_definition",
    "lambda",
    "list_comprehension",
    "set_comprehension",
    "dictionary_comprehension",
    "generator_expression",
}
_DECLARED = {"global_statement", "nonlocal_statement"}
Range = tuple[int, int]  # bytes


def _encloses(node: Any, r: Range) -> bool:
    return node.start_byte <= r[0] and r[1] <= node.end_byte


def _is_own_name(scope: Any, node: Any) -> bool:
    """`node` is the name of function `scope` (that name binds in the scope around it)."""
    name = scope.child_by_field_name("name") if scope.type == "function_definition" else None
    return name is not None and name.id == node.id


def _binds_here(scope: Any, data: bytes, name: str, binds: Any) -> bool:
    """`scope` binds `name` itself: a binding spelling inside it and outside its nested
    scopes (a nested function's own name binds here), with no global/nonlocal for it."""
    stack = list(scope.children)
    found = False
    while stack:
        n = stack.pop()
        if n.type in SCOPES:
            own = n.child_by_field_name("name") if n.type == "function_definition" else None
            if (
                own is not None
                and data[own.start_byte : own.end_byte].decode("utf-8", "replace") == name
            ):
                found = True
            continue
        if n.type in _DECLARED and any(
            c.type == "identifier"
            and data[c.start_byte : c.end_byte].decode("utf-8", "replace") == name
            for c in n.children
        ):
            return False
        if (
            n.type == "identifier"
            and not _is_own_name(scope, n)
            and data[n.start_byte : n.end_byte].decode("utf-8", "replace") == name
            and binds(n)
        ):
            found = True
        stack.extend(n.children)
    return found


def visible_spelling(
    root: Any, data: bytes, name: str, at: int, r: Range, binds: Any, memo: dict[int, bool]
) -> bool:
    """The spelling of `name` at byte `at` could be seen from range `r`. `binds(node)`
    says whether an identifier binds (syntax_tree.binds); `memo` caches scope answers for one
    name across its spellings."""
    node = root.descendant_for_byte_range(at, at + len(name.encode("utf-8")))
    while node is not None:
        if node.type in SCOPES and not _encloses(node, r):
            if node.id not in memo:
                memo[node.id] = _binds_here(node, data, name, binds)
            if memo[node.id]:
                return False
        node = node.parent
    return True


def name_visible(root: Any, data: bytes, name: str, r: Range, binds: Any) -> bool:
    """Some spelling of `name` in `data` (outside `r`) could be seen from `r`."""
    memo: dict[int, bool] = {}
    word = re.compile(rb"(?<![\w])" + re.escape(name.encode("utf-8")) + rb"(?![\w])")
    spots = sorted(
        (m.start() for m in word.finditer(data) if not r[0] <= m.start() < r[1]),
        key=lambda at: abs(at - r[0]),
    )  # the enclosing scope's spellings first
    return any(visible_spelling(root, data, name, at, r, binds, memo) for at in spots)
