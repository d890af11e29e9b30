"""Python scopes with tree-sitter: the parser, and the scopes that enclose a range.

The grammar comes from the `tree-sitter-python` wheel (nothing is fetched at run time).
Windows (infill/core/window.py) ascend these scopes; the language server's docstring
slots parse with the same parser.
"""

from __future__ import annotations

from functools import cache

# Node types that delimit a scope worth keeping whole.
_SCOPE_TYPES = {"function_definition", "class_definition"}


@cache
def python_parser():  # noqa: ANN202 - tree_sitter types
    import tree_sitter
    import tree_sitter_python

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_python.language()))


class PythonScopes:
    """Enclosing scopes in Python source, parsed once with tree-sitter."""

    def __init__(self, source: str) -> None:
        self.data = source.encode("utf-8")
        self.source = source
        self.tree = python_parser().parse(self.data)

    def _char(self, b: int) -> int:
        return len(self.data[:b].decode("utf-8", errors="replace"))

    def around(self, start: int, end: int) -> list[tuple[int, int, str]]:
        """Scopes enclosing characters [start, end), smallest first, as (start, end, node
        type). Scopes that tree-sitter could not parse cleanly are left out: their extent is
        a guess."""
        b_start = len(self.source[:start].encode("utf-8"))
        b_end = b_start + len(self.source[start:end].encode("utf-8"))
        node = self.tree.root_node.descendant_for_byte_range(b_start, b_end)
        scopes: list[tuple[int, int, str]] = []
        while node is not None:
            parent = node.parent
            take = None
            if node.type in _SCOPE_TYPES:
                decorated = parent is not None and parent.type == "decorated_definition"
                take = parent if decorated else node
            elif node.type == "module" or (parent is not None and parent.type == "module"):
                take = node
            if take is not None and not take.has_error:
                scope = (self._char(take.start_byte), self._char(take.end_byte), take.type)
                if not scopes or scopes[-1][:2] != scope[:2]:
                    scopes.append(scope)
            node = parent
        return scopes
