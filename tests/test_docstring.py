"""lsp.docstring: which function or class lacks a docstring, where one goes, and in
which indentation, quote style and line break."""

from __future__ import annotations

from diffusion_infill.infill.core.diff import apply_edits
from diffusion_infill.lsp.docstring import docstring_slot, missing_docstrings


def insert(text: str, at: str, body: str = "Doc.") -> str:
    slot = docstring_slot(text, text.index(at))
    assert slot is not None
    return apply_edits(text, [slot.edit(body)])


def test_function_body_on_the_next_line() -> None:
    text = "def greet(name):\n    return 'hi ' + name\n"
    slot = docstring_slot(text, text.index("return"))
    assert slot is not None and (slot.name, slot.kind) == ("greet", "function")
    template, at = slot.template(text)
    assert template == 'def greet(name):\n    """"""\n    return \'hi \' + name\n'
    assert template[:at].endswith('    """')
    assert insert(text, "greet") == 'def greet(name):\n    """Doc."""\n    return \'hi \' + name\n'


def test_class_method_tabs_and_crlf() -> None:
    text = "class A:\r\n\t'''A.'''\r\n\tdef inner(self):\r\n\t\tpass\r\n"
    assert (
        insert(text, "pass")
        == "class A:\r\n\t'''A.'''\r\n\tdef inner(self):\r\n\t\t'''Doc.'''\r\n\t\tpass\r\n"
    )


def test_quote_style_follows_the_files_docstrings() -> None:
    text = "def a():\n    '''A.'''\n\ndef b():\n    '''B.'''\n\ndef c():\n    return 1\n"
    slot = docstring_slot(text, text.index("return"))
    assert slot is not None and slot.quote == "'''"
    mixed = 'def a():\n    """A."""\n\ndef c():\n    return 1\n'
    slot = docstring_slot(mixed, mixed.index("return"))
    assert slot is not None and slot.quote == '"""'


def test_body_on_the_signature_line_moves_down() -> None:
    text = "def one(): return 1\n"
    assert insert(text, "return") == 'def one():\n    """Doc."""\n    return 1\n'


def test_multiline_signature_decorator_and_comments() -> None:
    text = "@cache\ndef f(\n    a,\n    b,\n) -> int:  # note\n    # lead\n    return a\n"
    assert insert(text, "@cache") == (
        "@cache\ndef f(\n    a,\n    b,\n) -> int:  # note\n"
        '    """Doc."""\n    # lead\n    return a\n'
    )


def test_documented_functions_and_other_places_get_no_slot() -> None:
    text = 'def f():\n    """Has one."""\n    return 1\n\nx = 1\n'
    assert docstring_slot(text, text.index("return")) is None
    assert docstring_slot(text, text.index("x = 1")) is None
    assert docstring_slot("", 0) is None


def test_innermost_definition_and_hole_markers() -> None:
    text = 'class K:\n    """K."""\n    def m(self):\n        return <mask>\n'
    slot = docstring_slot(text, text.index("<mask>"))
    assert slot is not None and slot.name == "m" and slot.indent == "        "


def test_body_is_cleaned_so_the_string_stays_closed() -> None:
    text = "def f():\n    pass\n"

    def doc(body: str) -> str:
        return f'def f():\n    """{body}"""\n    pass\n'

    assert insert(text, "pass", 'Stop here."""\nmore') == doc("Stop here.")
    assert insert(text, "pass", 'Ends in a quote"  ') == doc("Ends in a quote")
    assert insert(text, "pass", "Backslash\\") == doc("Backslash")


def test_missing_docstrings_lists_all_in_order() -> None:
    text = (
        "class A:\n    def x(self):\n        '''X.'''\n    def y(self):\n        pass\n"
        "def z(): ...\n"
    )
    assert [(s.kind, s.name) for s in missing_docstrings(text)] == [
        ("class", "A"),
        ("function", "y"),
        ("function", "z"),
    ]


def test_non_ascii_offsets() -> None:
    text = "s = '😀中'\ndef f():\n    return s\n"
    slot = docstring_slot(text, text.index("return"))
    assert slot is not None and slot.start == text.index("    return")
