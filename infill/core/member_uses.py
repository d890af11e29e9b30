"""What a fill reads as members: the attributes and keyword arguments the `member` check
asks jedi about (infill/core/checks.py, infill/core/jedi_names.py); and the keyword
arguments a call names twice (the `keyword` check).

    uses = member_uses(root, data, (start, end))   # tree-sitter tree and bytes of the text

An attribute counts where it is read (`x.attr`, not assigned, augmented or deleted) and
its word overlaps the byte range; a keyword argument where it is a call's.
"""

from __future__ import annotations

from typing import Any

from diffusion_infill.infill.core.jedi_names import Use
from diffusion_infill.infill.core.syntax_tree import overlaps, touches, walk

Range = tuple[int, int]  # [start, end) in bytes

_STORES = ("assignment", "augmented_assignment", "delete_statement", "for_statement")


def member_uses(root: Any, data: bytes, r: Range) -> list[Use]:
    """The attributes read (`x.attr`, not assigned or deleted) and the keyword arguments
    of calls whose word overlaps byte range `r`, as character offsets for jedi."""
    out: list[Use] = []

    def chars(b: int) -> int:
        return len(data[:b].decode("utf-8", "replace"))

    for n in walk(root, lambda n: touches(n, r)):
        if n.type == "attribute":
            word = n.child_by_field_name("attribute")
            if word is None or not overlaps(word, r) or _stored(n):
                continue
            dot = next((c for c in n.children if c.type == "."), None)
            if dot is None:
                continue
            text = data[word.start_byte : word.end_byte].decode("utf-8", "replace")
            out.append(Use(text, chars(word.start_byte), chars(dot.start_byte)))
        elif n.type == "keyword_argument":
            word = n.child_by_field_name("name")
            args = n.parent
            if word is None or not overlaps(word, r) or args is None:
                continue
            if args.type != "argument_list" or args.parent is None or args.parent.type != "call":
                continue
            text = data[word.start_byte : word.end_byte].decode("utf-8", "replace")
            out.append(Use(text, chars(word.start_byte), None))
    return out


def _stored(node: Any) -> bool:
    """`node` is (inside) the target of an assignment, a `del` or a `for`."""
    child, parent = node, node.parent
    while parent is not None and parent.type in (
        "pattern_list",
        "tuple_pattern",
        "list_pattern",
        "tuple",
        "list",
        "expression_list",
    ):
        child, parent = parent, parent.parent
    if parent is None or parent.type not in _STORES:
        return False
    if parent.type == "delete_statement":
        return True
    target = parent.child_by_field_name("left")
    return target is not None and target.id == child.id


def repeated_keywords(root: Any, data: bytes, r: Range) -> list[str]:
    """Keyword names given twice in one argument list that touches `r`, where one of the
    two overlaps it."""
    out: list[str] = []
    for n in walk(root, lambda n: touches(n, r)):
        if n.type != "argument_list":
            continue
        seen: set[str] = set()
        for arg in n.children:
            name = arg.child_by_field_name("name") if arg.type == "keyword_argument" else None
            if name is None:
                continue
            word = data[name.start_byte : name.end_byte].decode("utf-8", "replace")
            if word in seen and touches(arg, r):
                out.append(word)
            seen.add(word)
    return out
