"""Python scopes with tree-sitter: the parser, and the scopes that enclose a range.

The grammar comes from the `tree-sitter-python` wheel (nothing is fetched at run time).
Windows (infill/core/window.py) ascend these scopes; the language server's docstring
slots parse with the same parser.
"""

from __future__ import annotations

from bisect import bisect_right
from functools import cache

# Node types that delimit a scope worth keeping whole.
_SCOPE_TYPES = {"function_definition", "class_definition"}


@cache
def python_parser():  # noqa: ANN202 - tree_sitter types
    import tree_sitter
    import tree_sitter_python

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_python.language()))


class PythonScopes:
    """Enclosing scopes in Python source, parsed once with tree-sitter.

    Offsets convert between characters and UTF-8 bytes through per-line tables (rows split
    at "\\n", as tree-sitter counts them), so a lookup costs one line, not the text before
    it: a long file's windows are planned in time proportional to the windows."""

    def __init__(self, source: str) -> None:
        self.data = source.encode("utf-8")
        self.source = source
        self.tree = python_parser().parse(self.data)
        self._char_starts, self._byte_starts = [0], [0]  # of each row
        for line in source.split("\n")[:-1]:
            self._char_starts.append(self._char_starts[-1] + len(line) + 1)
            self._byte_starts.append(self._byte_starts[-1] + len(line.encode("utf-8")) + 1)

    def _char(self, point: tuple[int, int]) -> int:
        """Character offset of a tree-sitter point (row, byte column)."""
        row, col = point
        b = self._byte_starts[row]
        return self._char_starts[row] + len(self.data[b : b + col].decode("utf-8", "replace"))

    def _byte(self, char: int) -> int:
        """UTF-8 byte offset of a character offset."""
        row = bisect_right(self._char_starts, char) - 1
        line_start = self._char_starts[row]
        return self._byte_starts[row] + len(self.source[line_start:char].encode("utf-8"))

    def around(self, start: int, end: int) -> list[tuple[int, int, str]]:
        """Scopes enclosing characters [start, end), smallest first, as (start, end, node
        type). Scopes that tree-sitter could not parse cleanly are left out: their extent is
        a guess."""
        b_start, b_end = self._byte(start), self._byte(end)
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
                scope = (self._char(take.start_point), self._char(take.end_point), take.type)
                if not scopes or scopes[-1][:2] != scope[:2]:
                    scopes.append(scope)
            node = parent
        return scopes

    def string_quote(self, start: int, end: int) -> str | None:
        """The closing quote (`'`, `"`, `\'\'\'` or `\"\"\"`) of the string literal whose
        text holds characters [start, end), or None: the range is code (an f-string's
        `{...}` is code too), or not inside one literal."""
        b_start, b_end = self._byte(start), self._byte(end)
        node = self.tree.root_node.descendant_for_byte_range(b_start, b_end)
        while node is not None and node.type not in ("string", "interpolation"):
            node = node.parent
        if node is None or node.type != "string" or node.has_error:
            return None
        first, last = node.children[0], node.children[-1]
        if first.type != "string_start" or last.type != "string_end":
            return None
        if not first.end_byte <= b_start <= b_end <= last.start_byte:
            return None
        return self.data[last.start_byte : last.end_byte].decode("utf-8")
