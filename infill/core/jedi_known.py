"""Whether jedi knows a base or a callee *whole*: what lets infill/core/jedi_names.py say
that a name does not exist there.

A base is judged only when its type is not jedi's guess (`untrusted_base`): `self` /
`cls`, or a name jedi follows to an import of a module or to a class's definition. Then
every value it infers to must be a module (a module-level `__getattr__` shows among its
members) or a class, or an instance of one, whose bases all infer, none defining
`__getattr__` or overriding `__getattribute__`, with no metaclass but `type` / `ABCMeta` /
`EnumMeta`, no class decorator but the dataclass kind, no dynamic attributes in a class
body of the text, and, for a class of the text, a definition that ends before the text
does (`why_unknown`, `class_known`). A callee must be a name jedi follows to a function's
or a class's definition (`untrusted_callee`), not behind an unknown decorator
(`callee_why`). Each function returns why not (a short phrase), or None when it is known.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

_SAFE_METACLASSES = {"builtins.type", "abc.ABCMeta", "enum.EnumMeta", "enum.EnumType"}
_SAFE_DECORATORS = {"dataclass", "dataclasses.dataclass", "total_ordering", "final", "unique"}
_SAFE_FUNCTION_DECORATORS = {"overload", "staticmethod", "classmethod", "abstractmethod"}
_DYNAMIC = ("setattr(", "__dict__", "vars(", "locals(", "__getattr__", "__getattribute__")
_OBJECT_GETATTRIBUTE = "builtins.object.__getattribute__"


def line_col(text: str, offset: int) -> tuple[int, int]:
    """jedi's (1-based line, 0-based column in code points) of a character offset, its
    lines split as its parser splits them (`\r` and `\r\n` end a line too)."""
    from parso import split_lines

    lines = split_lines(text[:offset])
    return len(lines), len(lines[-1])


def _class_text_ok(cls: Any, script_path: str | None, text_lines: int) -> str | None:
    """Why a class of the text is not known whole (None: it is): cut off by the text's
    end, or a body that makes attributes dynamically."""
    tree = getattr(cls, "tree_node", None)
    if tree is None:
        return None
    module = cls.get_root_context()
    path = module.py__file__()
    of_text = path is None if script_path is None else str(path) == str(script_path)
    if not of_text or module.is_stub() or module.is_compiled():
        return None  # a library class: its file is whole
    end_line = tree.end_pos[0]
    if end_line >= text_lines:
        return f"class {tree.name.value} runs to the end of the text"
    code = tree.get_code()
    for word in _DYNAMIC:
        if word in code:
            return f"class {tree.name.value} makes attributes dynamically ({word})"
    for deco in tree.get_decorators() if hasattr(tree, "get_decorators") else ():
        name = deco.children[1].get_code().strip() if len(deco.children) > 1 else ""
        if name.split("(")[0] not in _SAFE_DECORATORS:
            return f"class {tree.name.value} has the decorator {name[:40]}"
    return None


def class_known(cls: Any, script_path: str | None, text_lines: int, depth: int = 0) -> str | None:
    """Why a class value is not known whole (None: it is), its bases followed."""
    if depth > 20:
        return "bases nested too deep"
    if getattr(cls, "is_compiled", lambda: False)():
        return None
    why = _class_text_ok(cls, script_path, text_lines)
    if why is not None:
        return why
    try:
        meta = cls.get_metaclasses()
    except Exception:
        meta = []
    for m in meta:
        full = _full_name(m)
        if full not in _SAFE_METACLASSES:
            return f"metaclass {full or '?'}"
    for lazy in cls.py__bases__():
        values = list(lazy.infer())
        if not values:
            return "a base class jedi cannot infer"
        for base in values:
            if not base.is_class():
                return "a base that is not a class"
            why = class_known(base, script_path, text_lines, depth + 1)
            if why is not None:
                return why
    return None


def _full_name(value: Any) -> str | None:
    try:
        name = value.name
        module = value.get_root_context().py__name__()
        return f"{module}.{name.string_name}" if module else name.string_name
    except Exception:
        return None


def why_unknown(inferred: Sequence[Any], script_path: str | None, text_lines: int) -> str | None:
    """Why the values a base infers to are not all known whole (None: they are)."""
    if not inferred:
        return "jedi infers nothing for it"
    for name in inferred:
        values = list(name._name.infer())  # jedi's values behind its public Name
        if not values:
            return "jedi infers nothing for it"
        for v in values:
            if v.is_module():
                continue  # a module-level __getattr__ shows among its members
            cls = v if v.is_class() else getattr(v, "class_value", None)
            if cls is None or not hasattr(cls, "py__bases__"):
                if getattr(v, "is_compiled", lambda: False)():
                    continue
                return f"a {v.api_type} value"
            why = class_known(cls, script_path, text_lines)
            if why is not None:
                return why
    return None


def dynamic_members(completions: Sequence[Any]) -> bool:
    """The members hold a `__getattr__`, or a `__getattribute__` that is not object's."""
    for c in completions:
        if c.name == "__getattr__":
            return True
        if c.name == "__getattribute__" and c.full_name not in (None, _OBJECT_GETATTRIBUTE):
            return True
    return False


def word_start(text: str, end: int) -> int:
    """Where the identifier that ends at `end` starts."""
    while end > 0 and (text[end - 1].isalnum() or text[end - 1] == "_"):
        end -= 1
    return end


def untrusted_base(script: Any, text: str, dot: int) -> str | None:
    """Why the base ending at `dot` (a `.`) is not one whose type jedi can be trusted
    with (None: it is): `self` or `cls`, or a name that jedi follows to
    an import of a module or a class's definition. A variable's type is jedi's guess from
    its assignments, and a wrong guess (a name rebound, a generic's parameter) would blame
    right code: those bases are not judged."""
    end = dot
    while end > 0 and text[end - 1] in " \t":
        end -= 1
    start = word_start(text, end)
    word = text[start:end]
    before = text[start - 1] if start > 0 else ""
    if word in ("self", "cls") and before != ".":
        return None
    if not word:
        return "the base is an expression"
    line, col = line_col(text, end)
    kinds = {d.type for d in script.goto(line, col, follow_imports=True)}
    if kinds and kinds <= {"module", "class"}:
        if before == ".":
            return untrusted_base(script, text, start - 1)
        return None
    return "the base is a variable"


def untrusted_callee(script: Any, text: str, bracket: tuple[int, int]) -> str | None:
    """Why the callee before the call's `(` (jedi's (line, column)) is not trusted (None:
    it is): it must be a name jedi follows to a function's or a class's definition (not
    a variable), after a base that `untrusted_base` trusts if it is an attribute."""
    line, col = bracket
    kinds = {d.type for d in script.goto(line, col, follow_imports=True)}
    if not kinds or not kinds <= {"function", "class"}:
        return "the callee is not a function or class jedi can follow"
    lines = text.split("\n")
    offset = sum(len(x) + 1 for x in lines[: line - 1]) + col
    end = offset
    while end > 0 and text[end - 1] in " \t":
        end -= 1
    start = word_start(text, end)
    if start > 0 and text[start - 1] == ".":
        return untrusted_base(script, text, start - 1)
    return None


def callee_why(script: Any, text: str, signatures: Sequence[Any], path: str | None) -> str | None:
    """Why a call's callee is not known whole: a function behind an unknown decorator,
    or a class not known whole."""
    lines = line_col(text, len(text))[0]
    for sig in signatures:
        for v in sig._name.infer() if hasattr(sig._name, "infer") else ():
            if v.is_class():
                why = class_known(v, path, lines)
                if why is not None:
                    return why
            tree = getattr(v, "tree_node", None)
            if tree is not None and tree.type in ("funcdef", "async_funcdef"):
                for deco in tree.get_decorators():
                    name = deco.children[1].get_code().strip() if len(deco.children) > 1 else ""
                    if name.split(".")[-1] not in _SAFE_FUNCTION_DECORATORS:
                        return f"a function decorated with {name[:40]}"
    return None
