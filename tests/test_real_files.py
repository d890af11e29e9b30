"""The real-files set (benchmarks/real_files.py): built from the wheels alone, exactly the
files its manifest pins; `--select` chooses them again against a corpus's training split."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from benchmarks import real_files

LONG = "".join(
    f"value_{i} = compute_something_distinctive({i}, 'argument {i}')\n" for i in range(45)
)
SHORT = "x = 1\n"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache holding the wheel of one pinned package, and a manifest of its own."""
    monkeypatch.setattr(real_files, "PACKAGES", {"tinypkg": "1.0"})
    monkeypatch.setattr(real_files, "MANIFEST", tmp_path / "real_files.json")
    folder = tmp_path / "cache"
    folder.mkdir()
    with zipfile.ZipFile(folder / "tinypkg-1.0-py3-none-any.whl", "w") as zf:
        zf.writestr("tinypkg/long.py", LONG)
        zf.writestr("tinypkg/other.py", LONG.replace("value_", "other_"))
        zf.writestr("tinypkg/short.py", SHORT)
        zf.writestr("tinypkg/tests/test_long.py", LONG)
    return folder


def pin(path: str, text: str) -> dict[str, str]:
    return {"package": "tinypkg", "path": path, "sha256": hashlib.sha256(text.encode()).hexdigest()}


def test_the_set_is_the_files_the_manifest_pins(cache: Path, tmp_path: Path) -> None:
    real_files.MANIFEST.write_text(
        json.dumps({"files": [pin("tinypkg/other.py", LONG.replace("value_", "other_"))]})
    )
    out = tmp_path / "real.jsonl"
    real_files.main(["--cache", str(cache), "--out", str(out)])  # no corpus needed
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["path"] == "tinypkg/other.py" and record["text"].startswith("other_0 = ")


def test_a_wheel_whose_file_changed_is_refused_with_the_file_named(
    cache: Path, tmp_path: Path
) -> None:
    real_files.MANIFEST.write_text(
        json.dumps({"files": [pin("tinypkg/long.py", LONG + "# edited\n")]})
    )
    with pytest.raises(SystemExit, match="tinypkg tinypkg/long.py: not the pinned file"):
        real_files.main(["--cache", str(cache), "--out", str(tmp_path / "real.jsonl")])
    real_files.MANIFEST.write_text(json.dumps({"files": [pin("tinypkg/gone.py", LONG)]}))
    with pytest.raises(SystemExit, match="tinypkg tinypkg/gone.py: absent"):
        real_files.main(["--cache", str(cache), "--out", str(tmp_path / "real.jsonl")])


def test_select_chooses_against_the_training_split_and_pins_the_choice(
    cache: Path, tmp_path: Path
) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    # long.py is training code; short.py is too short; tests/ is never read
    (corpus / "train.jsonl").write_text(json.dumps({"text": LONG}) + "\n")
    out = tmp_path / "real.jsonl"
    real_files.main(["--select", "--corpus", str(corpus), "--cache", str(cache), "--out", str(out)])
    assert [json.loads(line)["path"] for line in out.read_text().splitlines()] == [
        "tinypkg/other.py"
    ]
    pinned = json.loads(real_files.MANIFEST.read_text())["files"]
    assert pinned == [pin("tinypkg/other.py", LONG.replace("value_", "other_"))]
    again = tmp_path / "again.jsonl"
    real_files.main(["--cache", str(cache), "--out", str(again)])  # from the pins alone
    assert again.read_text() == out.read_text()


def test_select_without_a_corpus_is_a_usage_error(
    cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        real_files.main(["--select", "--corpus", str(tmp_path / "none"), "--cache", str(cache)])
    assert exc.value.code == 2
    assert "train.jsonl not found" in capsys.readouterr().err
