"""The measures of benchmarks/eval_names.py: names a fill uses that do not exist."""

from __future__ import annotations

import pytest

from benchmarks.eval_names import judge, whole_file
from benchmarks.heldout import Example

pytest.importorskip("jedi")

FILE = (
    "import os\n\n\n"
    "class Reader:\n"
    "    def value(self):\n"
    "        return 1\n\n"
    "    def read(self, path):\n"
    "        return os.path.join(path)\n\n\n"
    "x = 1\n"
)


def _example() -> tuple[Example, int]:
    window = FILE[FILE.index("    def read") :]
    start = window.index("os.path")
    end = window.index("\n", start)
    return Example(window, start, end, "cursor"), FILE.index(window)


def test_a_window_is_found_in_its_file():
    ex, offset = _example()
    assert whole_file(ex.text, ["nothing here", FILE], {}) == (FILE, offset)
    assert whole_file("absent", [FILE], {}) is None


@pytest.mark.parametrize(
    ("fill", "missing", "unspelled"),
    [
        ("os.path.join(path)", 0, []),
        ("os.path.joinn(path)", 1, []),
        ("self.signature()", 1, []),
        ("frobnicate(path)", 0, ["frobnicate"]),
        ("len(path) + sys.maxsize", 0, []),  # builtins and stdlib module names
        ("[p for p in path]", 0, []),  # bound by the fill
    ],
)
def test_the_two_measures(fill, missing, unspelled):
    ex, offset = _example()
    got = judge(FILE, offset, ex, fill)
    assert len(got["missing"]) == missing and got["unspelled"] == unspelled
