"""Minimal edits and unified diffs."""

from __future__ import annotations

import random
import subprocess

import pytest

from diffusion_infill.infill.core.diff import (
    Edit,
    apply_edits,
    minimal_edits,
    region_edits,
    unified_diff,
)


def test_hole_is_replaced_whole():
    text = "x = <mask>\n"
    assert region_edits(text, 4, 10, "a > b", minimise=False) == [Edit(4, 10, "a > b")]


def test_equal_rewrite_gives_no_edit():
    text = "a = 1\nb = 2\n"
    assert region_edits(text, 0, len(text), text, minimise=True) == []


def test_single_character_change():
    text = "if x > 0:\n    pass\n"
    edits = region_edits(text, 0, len(text), "if x < 0:\n    pass\n", minimise=True)
    assert edits == [Edit(5, 6, "<")]


def test_word_change_is_one_edit_not_fragments():
    text = "y = count + 1\n"
    edits = region_edits(text, 0, len(text), "y = total + 1\n", minimise=True)
    assert edits == [Edit(4, 9, "total")]


def test_unchanged_lines_are_not_touched():
    old = "a = 1\nb = 2\nc = 3\nd = 4\n"
    new = "a = 1\nb = 20\nc = 3\nd = 4\n"
    assert region_edits(old, 0, len(old), new, minimise=True) == [Edit(11, 11, "0")]


def test_offsets_are_in_the_original_text():
    text = "head\nx = 1\ntail\n"
    start = text.index("x = 1")
    edits = region_edits(text, start, start + 5, "x = 2", minimise=True)
    assert edits == [Edit(start + 4, start + 5, "2")]
    assert apply_edits(text, edits) == "head\nx = 2\ntail\n"


def test_inserted_and_deleted_lines():
    old = "a\nb\nc\n"
    for new in ["a\nb\nnew\nc\n", "a\nc\n", "", "z\n", "a\nb\nc\nd"]:
        edits = region_edits(old, 0, len(old), new, minimise=True)
        assert apply_edits(old, edits) == new


def test_random_rewrites_round_trip():
    rng = random.Random(0)
    alphabet = "ab \n\t(é🎉"
    for _ in range(200):
        old = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        new = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        pre, post = "PRE\n", "\nPOST"
        text = pre + old + post
        edits = region_edits(text, len(pre), len(pre) + len(old), new, minimise=True)
        assert apply_edits(text, edits) == pre + new + post
        assert all(len(pre) <= e.start <= e.end <= len(pre) + len(old) for e in edits)


def test_minimal_edits_of_several_regions_are_sorted():
    text = "a = <mask>; b = 2"
    edits = minimal_edits(text, [(16, 17, "3", True), (4, 10, "1", False)])
    assert edits == [Edit(4, 10, "1"), Edit(16, 17, "3")]
    assert apply_edits(text, edits) == "a = 1; b = 3"


def test_apply_edits_rejects_overlap():
    with pytest.raises(ValueError, match="overlapping"):
        apply_edits("abcdef", [Edit(0, 3, "x"), Edit(2, 4, "y")])


def test_unified_diff_headers_and_hunk():
    d = unified_diff("a = 1\nb = <mask>\n", "a = 1\nb = 2\n", "pkg/m.py")
    assert d.splitlines()[:3] == ["--- a/pkg/m.py", "+++ b/pkg/m.py", "@@ -1,2 +1,2 @@"]
    assert "-b = <mask>\n+b = 2\n" in d


def test_unified_diff_empty_when_unchanged():
    assert unified_diff("same\n", "same\n", "f") == ""


def test_unified_diff_marks_missing_final_newline():
    d = unified_diff("x = <mask>", "x = 1", "f.py")
    assert d.endswith(
        "-x = <mask>\n\\ No newline at end of file\n+x = 1\n\\ No newline at end of file\n"
    )


def test_unified_diff_applies_with_patch(tmp_path):
    old = "a = 1\r\nb = <mask>\r\nc = 'é🎉'\nlast"
    new = old.replace("<mask>", "2")
    (tmp_path / "f.py").write_bytes(old.encode())
    patch = unified_diff(old, new, "f.py")
    try:
        done = subprocess.run(
            ["patch", "-p1", "--quiet", "--binary"],
            input=patch.encode(),
            cwd=tmp_path,
            capture_output=True,
            check=False,
        )
    except FileNotFoundError:
        pytest.skip("patch is not installed")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "f.py").read_bytes() == new.encode()
