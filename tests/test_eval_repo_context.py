"""The repository set's holes as the language server sends them (benchmarks/eval_repo_context.py
`--editor-excerpt`): the same hole, the file's excerpt in place of its window."""

from __future__ import annotations

from benchmarks.eval_repo_context import editor_hole
from benchmarks.heldout import Example
from benchmarks.repo_set import RepoHole

FILE = "import os\n\n\ndef path(name):\n    return os.path.join(ROOT, name)\n\n\nROOT = '/tmp'\n"


def test_a_hole_gets_the_whole_small_file_around_it(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(FILE)
    window = "def path(name):\n    return os.path.join(ROOT, name)\n"
    start = window.index("os.path")
    hole = RepoHole("pkg", "m.py", Example(window, start, start + 7, "cursor"))
    wide = editor_hole(hole, tmp_path)
    assert wide is not None and (wide.package, wide.path) == ("pkg", "m.py")
    assert wide.example.truth == "os.path" and wide.example.text == FILE  # imports in view


def test_a_window_found_twice_or_not_at_all_is_left_out(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(FILE + FILE)
    twice = RepoHole("pkg", "m.py", Example("import os\n", 0, 6, "cursor"))
    assert editor_hole(twice, tmp_path) is None
    gone = RepoHole("pkg", "m.py", Example("import sys\n", 0, 6, "cursor"))
    assert editor_hole(gone, tmp_path) is None
