"""The corpus builder on tiny synthetic archives (no network): test folders in, vendored
folders and copyleft packages out, held-out units held out, and a training copy of
held-out code dropped."""

from __future__ import annotations

import ast
import io
import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from diffusion_infill.model.training import corpus
from diffusion_infill.model.training.corpus.card import NOTES


def code(seed: int, lines: int = 30, changed: int = 0) -> str:
    """A parseable module of distinct lines; `changed` of them differ from `code(seed)`."""
    body = [
        f"def f_{seed}_{i}(x):\n    return x * {i} + {seed}  # step {i} of {seed}\n"
        for i in range(lines)
    ]
    for i in range(changed):
        body[i] = f"def g_{seed}_{i}(y):\n    return y - {i} - {seed}  # other {i}\n"
    return "".join(body)


def wheel(cache: Path, name: str, version: str, licence: str, files: dict[str, str]) -> None:
    dist = f"{name.replace('-', '_')}-{version}"
    with zipfile.ZipFile(cache / f"{dist}-py3-none-any.whl", "w") as zf:
        zf.writestr(
            f"{dist}.dist-info/METADATA",
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
            f"Classifier: License :: OSI Approved :: {licence}\n",
        )
        for path, text in files.items():
            zf.writestr(path, text)


def sdist(cache: Path, name: str, version: str, licence: str, files: dict[str, str]) -> None:
    top = f"{name}-{version}"
    with tarfile.open(cache / f"{top}.tar.gz", "w:gz") as tf:
        members = {
            "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nLicense: {licence}\n",
            **files,
        }
        for path, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{path}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


@pytest.fixture()
def built(tmp_path: Path) -> Path:
    cache = tmp_path / "cache"
    cache.mkdir()
    held_out = code(1)
    # held-out unit (test split), its tests included
    wheel(
        cache,
        "click",
        "1.0",
        "BSD License",
        {"click/core.py": held_out, "click/tests/test_core.py": code(2)},
    )
    # a training wheel: code, tests, a vendored copy of click, a near copy of click/core.py
    # (5 of 30 functions changed: Jaccard ~0.7, below the within-split bar, above the
    # cross-split one), an exact copy, and a generated protobuf module
    wheel(
        cache,
        "good",
        "2.0",
        "MIT License",
        {
            "good/a.py": code(3),
            "good/tests/test_a.py": code(4),
            "good/_vendor/lib/core.py": code(5),
            "good/click/__init__.py": code(6),  # a held-out package inside: a copy
            "good/tests/requests/get.py": code(17),  # a folder named so, no package: kept
            "good/compat.py": code(1, changed=5),
            "good/copy.py": held_out,
            "good/msg_pb2.py": code(7),
        },
    )
    # a training sdist: its tests/ folder (wheels often leave it out) comes along
    sdist(
        cache, "src-pkg", "3.0", "Apache-2.0", {"src_pkg/b.py": code(8), "tests/test_b.py": code(9)}
    )
    # copyleft: dropped whole, as is MPL AND MIT
    wheel(
        cache, "gpl-pkg", "1.0", "GNU General Public License v3 (GPLv3)", {"gpl_pkg/c.py": code(10)}
    )
    wheel(
        cache, "mpl-pkg", "1.0", "Mozilla Public License 2.0 (MPL 2.0)", {"mpl_pkg/d.py": code(11)}
    )
    packages = {"click": "1.0", "good": "2.0", "src-pkg": "3.0", "gpl-pkg": "1.0", "mpl-pkg": "1.0"}
    stdlib = tmp_path / "stdlib"
    for rel, text in {
        "json/__init__.py": code(12),
        "os.py": code(13),
        "test/test_os.py": code(14),
        "test/test_json/test_dump.py": code(15),
        "test/test_csv.py": code(16),
    }.items():
        (stdlib / rel).parent.mkdir(parents=True, exist_ok=True)
        (stdlib / rel).write_text(text)
    out = tmp_path / "out"
    summary = corpus.build(out, cache, stdlib, packages, sdists=frozenset({"src-pkg"}))
    corpus.write_card(out, tmp_path / "CARD.md", summary)
    return out


def test_rebuilding_the_card_keeps_the_hand_written_notes(built: Path, tmp_path: Path) -> None:
    card = tmp_path / "CARD.md"
    text = card.read_text()
    assert text.rstrip().endswith(NOTES)
    card.write_text(text.replace("Build:", "Stale build:") + "The model saw 90% of train.\n")
    corpus.write_card(
        built,
        card,
        {s: {"files": 1, "chars": 1, "test_chars": 0} for s in ("train", "valid", "test")},
    )
    rebuilt = card.read_text()
    assert rebuilt.endswith(NOTES + "\nThe model saw 90% of train.\n")
    assert "Stale build:" not in rebuilt and "Build:" in rebuilt


def rows(out: Path, split: str) -> set[tuple[str, str]]:
    with (out / f"{split}.jsonl").open() as fh:
        return {(r["unit"], r["path"]) for r in map(json.loads, fh)}


def test_build_includes_tests_skips_vendored_and_copyleft(built: Path) -> None:
    train = rows(built, "train")
    assert ("good", "good/a.py") in train
    assert ("good", "good/tests/test_a.py") in train  # test folders are in
    assert ("src-pkg", "tests/test_b.py") in train  # an sdist's top-level tests/ too
    assert ("src-pkg", "src_pkg/b.py") in train
    assert ("stdlib/test", "test/test_os.py") in train  # Lib/test is in...
    assert not any("_vendor" in p for _, p in train)  # vendored copies are not
    assert ("good", "good/click/__init__.py") not in train  # nor a held-out package
    assert ("good", "good/tests/requests/get.py") in train  # (a mere folder name is kept)
    assert ("good", "good/msg_pb2.py") not in train  # generated
    assert not {u for u, _ in train} & {"gpl-pkg", "mpl-pkg"}  # copyleft
    licences = json.loads((built / "licences.json").read_text())
    assert licences["gpl-pkg"]["kept"] == licences["mpl-pkg"]["kept"] == "no (licence)"
    assert licences["src-pkg"]["kind"] == "sdist" and licences["good"]["tests"] == 2


def test_held_out_units_stay_held_out_and_win_dedupe(built: Path) -> None:
    train, test, valid = rows(built, "train"), rows(built, "test"), rows(built, "valid")
    assert test == {
        ("click", "click/core.py"),
        ("click", "click/tests/test_core.py"),
        ("stdlib/json", "json/__init__.py"),
    }
    assert valid == set()
    assert not {u for u, _ in train} & (corpus.TEST_UNITS | corpus.VALID_UNITS)
    # the exact and the near copy of click/core.py are dropped from train, not from test
    assert ("good", "good/copy.py") not in train
    assert ("good", "good/compat.py") not in train
    # ...and the stdlib tests of held-out modules are in no split
    everything = train | test | valid
    assert not any(p.startswith(("test/test_json", "test/test_csv")) for _, p in everything)
    dropped = json.loads((built / "stats.json").read_text())["dropped"]
    assert dropped["exact duplicate (train of test)"] == 1
    assert dropped["near duplicate (train of test)"] == 1


def test_near_copy_within_train_is_kept_below_the_within_split_bar() -> None:
    files = [
        corpus.SourceFile("a", "a.py", code(1)),
        corpus.SourceFile("b", "b.py", code(1, changed=5)),
        corpus.SourceFile("c", "c.py", code(1, changed=1)),
    ]
    kept = corpus.deduplicate(files)
    assert [f.unit for f in kept] == ["a", "b"]  # c (J ~0.94) goes, b (J ~0.7) stays


@pytest.mark.parametrize(
    ("licence", "allowed"),
    [
        ("MIT License", True),
        ("Apache-2.0 OR BSD-3-Clause", True),
        ("Zope Public License", True),
        ("MPL-2.0 OR MIT", True),
        ("MPL-2.0 AND MIT", False),
        ("MIT License; Mozilla Public License 2.0 (MPL 2.0); MPL-2.0 AND MIT", False),
        ("GNU Lesser General Public License v2 or later (LGPLv2+)", False),
        ("Eclipse Public License 2.0", False),
        ("unknown", False),
    ],
)
def test_licence_allowed(licence: str, allowed: bool) -> None:
    assert corpus.licence_allowed(licence) is allowed


def test_the_builder_is_made_of_short_pieces() -> None:
    """The project's rule (tests/test_layout.py): no file over 400 lines, no function over 60."""
    files = sorted(Path(corpus.__file__).parent.glob("*.py"))
    assert not [p.name for p in files if len(p.read_text().splitlines()) > 400]
    long_functions = [
        f"{p.name}:{n.lineno} {n.name}"
        for p in files
        for n in ast.walk(ast.parse(p.read_text()))
        if isinstance(n, ast.FunctionDef) and n.end_lineno - n.lineno >= 60
    ]
    assert not long_functions


def test_runs_as_a_module() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "diffusion_infill.model.training.corpus", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert run.returncode == 0 and "--cache" in run.stdout, run.stderr
