"""Held-out holes in the shapes users make (README, "Measured figures").

    examples = shape_examples(files, "whole-line", n=200, seed=0)

- `cursor`: a line's code after its indentation; the indentation and the line break are
  given (what a cursor on an emptied line asks for);
- `whole-line`: the same lines from column 0 through the line break: the indentation and
  the line break inside the hole (a selected line, "rewrite these lines");
- `part-of-line`: a tree-sitter node inside one line, strictly shorter than the line's
  code: an expression, a call's arguments, a condition, an assignment's right-hand side;
- `block`: 2 to 8 whole lines (column 0 through the last line break) that tree-sitter
  calls one thing: a body, a branch (an `if`), a loop, a `with` or `try` statement.

The cursor and whole-line sets are the same lines (paired). Every hole sits in a window
of whole lines of its file (`benchmarks.heldout._window`), deterministic for a seed.
`real_file_examples` draws one line per file from a folder of source files outside the
corpus (packages the corpus never holds: benchmarks/real_files.py).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

from benchmarks.heldout import HELDOUT_WINDOW_CHARS, Example, _window, infill_examples

SHAPES = ("cursor", "whole-line", "part-of-line", "block")

# tree-sitter nodes a part-of-line hole is cut from, by what a user selects
_PART_FIELDS = {  # node type -> the child field that is the part
    "if_statement": "condition",
    "elif_clause": "condition",
    "while_statement": "condition",
    "assignment": "right",
    "augmented_assignment": "right",
    "return_statement": None,
}
_PART_TYPES = {
    "argument_list",
    "binary_operator",
    "comparison_operator",
    "boolean_operator",
    "call",
    "subscript",
    "attribute",
    "list",
    "dictionary",
    "tuple",
    "conditional_expression",
    "list_comprehension",
    "string",
}
_BLOCK_TYPES = {
    "block",
    "if_statement",
    "for_statement",
    "while_statement",
    "with_statement",
    "try_statement",
}


def _nodes(root) -> Iterator:  # noqa: ANN001 - tree_sitter types
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))


def _char(data: bytes, byte: int) -> int:
    return len(data[:byte].decode("utf-8", errors="replace"))


def _whole_line(ex: Example) -> Example | None:
    """`ex` (a cursor hole) widened to its line: from column 0 through its line break."""
    start = ex.text.rfind("\n", 0, ex.start) + 1
    if ex.end >= len(ex.text) or ex.text[ex.end] != "\n":
        return None
    return Example(ex.text, start, ex.end + 1, "whole-line")


def _parts(text: str, line_start: int, line_end: int, parser) -> list[tuple[int, int]]:  # noqa: ANN001
    """Character ranges of the part-of-line nodes inside text[line_start:line_end]."""
    data = text.encode("utf-8")
    code = text[line_start:line_end].strip()
    out = []
    for node in _nodes(parser.parse(data).root_node):
        a, b = _char(data, node.start_byte), _char(data, node.end_byte)
        if a < line_start or b > line_end:
            continue
        part = None
        if node.type in _PART_FIELDS:
            field = _PART_FIELDS[node.type]
            child = (
                node.child_by_field_name(field)
                if field
                else (node.named_children[0] if node.named_children else None)
            )
            if child is not None:
                part = (_char(data, child.start_byte), _char(data, child.end_byte))
        elif node.type == "argument_list" and node.named_child_count:
            part = (a + 1, b - 1)  # between the brackets
        elif node.type in _PART_TYPES:
            part = (a, b)
        if part is None:
            continue
        piece = text[part[0] : part[1]].strip()
        if 2 <= len(piece) < len(code) and "\n" not in piece:
            out.append(part)
    return sorted(set(out))


def _blocks(text: str, parser) -> list[tuple[int, int]]:  # noqa: ANN001
    """Whole-line ranges (column 0 through the last line break) of 2-8-line nodes."""
    data = text.encode("utf-8")
    out = []
    for node in _nodes(parser.parse(data).root_node):
        rows = node.end_point[0] - node.start_point[0] + 1
        if node.type not in _BLOCK_TYPES or not 2 <= rows <= 8:
            continue
        a, b = _char(data, node.start_byte), _char(data, node.end_byte)
        start = text.rfind("\n", 0, a) + 1
        end = text.find("\n", b)
        if text[start:a].strip() or end < 0 or text[b:end].strip() or end - start > 600:
            continue
        out.append((start, end + 1))
    return sorted(set(out))


def shape_examples(
    files: list[str], shape: str, n: int, seed: int = 0, window_chars: int = HELDOUT_WINDOW_CHARS
) -> list[Example]:
    """`n` holes of `shape` (SHAPES) in windows of about `window_chars` (the same holes
    at any window size)."""
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; one of {', '.join(SHAPES)}")
    if shape in ("cursor", "whole-line"):
        lines = infill_examples(
            files,
            "single-line",
            2 * n,
            seed=seed,
            window_chars=window_chars,
            draw_chars=HELDOUT_WINDOW_CHARS,
        )
        if shape == "cursor":
            return [
                Example(e.text, e.start, e.end, "cursor")
                for e in lines
                if _whole_line(e) is not None
            ][:n]
        return [w for w in map(_whole_line, lines) if w is not None][:n]
    from diffusion_infill.infill.core.scopes import (
        python_parser,  # tree-sitter, only for these shapes
    )

    parser = python_parser()
    rng = random.Random(seed)
    if shape == "part-of-line":
        return _part_of_line_examples(files, n, seed, window_chars, parser, rng)
    return _block_examples(files, n, window_chars, parser, rng)


def holding(examples: list[Example], text: str | None) -> list[Example]:
    """The examples whose truth holds `text` (eval_shapes --holes-containing; all for None)."""
    return examples if text is None else [ex for ex in examples if text in ex.truth]


def _part_of_line_examples(
    files: list[str], n: int, seed: int, window_chars: int, parser: Any, rng: random.Random
) -> list[Example]:
    """Holes of part of a line: a part of a one-line example's line (an argument, an
    operand, a call: `_parts`)."""
    out: list[Example] = []
    # the part is chosen in the short window, so that any window size has the same
    drawn = [
        infill_examples(
            files,
            "single-line",
            4 * n,
            seed=seed + 3,
            window_chars=size,
            draw_chars=HELDOUT_WINDOW_CHARS,
        )
        for size in (HELDOUT_WINDOW_CHARS, window_chars)
    ]
    for short, ex in zip(*drawn, strict=True):
        parts = _parts(short.text, short.start, short.end, parser)
        if parts:
            a, b = rng.choice(parts)
            out.append(
                Example(
                    ex.text,
                    ex.start + a - short.start,
                    ex.start + b - short.start,
                    "part-of-line",
                )
            )
        if len(out) == n:
            break
    return out


def _block_examples(
    files: list[str], n: int, window_chars: int, parser: Any, rng: random.Random
) -> list[Example]:
    """Holes of a block of 2-8 whole lines (`_blocks`), up to four from a file."""
    out: list[Example] = []
    order = list(range(len(files)))
    rng.shuffle(order)
    seen: set[tuple[int, int, int]] = set()
    for k in order * 4:  # up to four blocks from a file, one per visit
        text = files[k]
        if len(text) > 200_000:
            continue
        found = _blocks(text, parser)
        if not found:
            continue
        a, b = rng.choice(found)
        window, offset = _window(text, a, b, rng, window_chars, HELDOUT_WINDOW_CHARS)
        if (k, a, b) not in seen:
            seen.add((k, a, b))
            out.append(Example(window, a - offset, b - offset, "block"))
        if len(out) == n:
            break
    return out


def real_file_examples(
    texts: list[str], shape: str, seed: int = 0, window_chars: int = HELDOUT_WINDOW_CHARS
) -> list[Example]:
    """One cursor or whole-line hole per text (a file of a package outside the corpus)."""
    if shape not in ("cursor", "whole-line"):
        raise ValueError("real files are measured with cursor and whole-line holes")
    out = []
    for i, text in enumerate(texts):
        found = infill_examples(
            [text],
            "single-line",
            1,
            seed=seed + i,
            window_chars=window_chars,
            draw_chars=HELDOUT_WINDOW_CHARS,
        )
        if not found:
            continue
        ex = found[0]
        wide = _whole_line(ex)
        if wide is None:
            continue
        out.append(Example(ex.text, ex.start, ex.end, "cursor") if shape == "cursor" else wide)
    return out
