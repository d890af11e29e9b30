"""Repository context: the rest of the user's repository enters a fill (infill/context,
infill/core/cross_copies.py), and every bad thing a repository holds ends in a bounded
outcome: the fill goes on, a note says why."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest
from fakes import TargetDenoiser
from test_copy_fills import CHECKED, Spellings, calls_without_copies

from diffusion_infill.infill import InputError, LimitError, fill_text
from diffusion_infill.infill.cli import main
from diffusion_infill.infill.context import ContextSettings, RepoContext
from diffusion_infill.infill.core.cross_copies import repo_copies
from diffusion_infill.infill.core.snippets import MAX_SNIPPETS, Snippet, Source
from diffusion_infill.infill.serve.protocol import FillRequest, ProtocolError, decode_request, pack
from diffusion_infill.lsp.repository import Repositories
from diffusion_infill.lsp.settings import Settings, parse
from diffusion_infill.model import loading

STORE = (
    "class Store:\n    def __init__(self, path):\n        self.path = path\n"
    "        self._cache = {}\n\n    def get(self, key):\n        return self._cache[key]\n"
)
OTHER = "class Other:\n    def __init__(self, path):\n<mask>\n        self._cache = {}\n"


@pytest.fixture(autouse=True)
def cache_home(tmp_path, monkeypatch):
    """Indexes are cached under a temporary $XDG_CACHE_HOME."""
    home = tmp_path / "cache-home"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home


def _package(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))}


# -- finding and indexing the repository ---------------------------------------------


def test_the_root_is_the_git_tree_else_the_project_else_the_folder(tmp_path):
    plain = _package(tmp_path / "plain", {"a/m.py": STORE})
    assert RepoContext.build(plain / "a/m.py").kind == "directory"
    project = _package(tmp_path / "proj", {"pyproject.toml": "", "pkg/m.py": STORE})
    repo = RepoContext.build(project / "pkg/m.py")
    assert (repo.root, repo.kind) == (project, "project")
    git = _package(tmp_path / "git", {"pkg/m.py": STORE, "pkg/n.py": STORE, ".gitignore": "n.py\n"})
    subprocess.run(["git", "init", "-q", str(git)], check=True)
    repo = RepoContext.build(git / "pkg/m.py")
    assert (repo.root, repo.kind) == (git, "git")
    assert sorted(repo.index.files) == ["pkg/m.py"]  # git's ignore rules hold


def test_snippets_come_from_other_files_and_give_copies(tmp_path):
    root = _package(tmp_path / "r", {"pyproject.toml": "", "a.py": STORE, "b.py": OTHER})
    repo = RepoContext.build(root / "b.py")
    hole = OTHER.index("<mask>")
    snippets = repo.snippets(root / "b.py", OTHER, [(hole, hole + 6)])
    assert [s.path for s in snippets] == ["a.py"]
    ((copy, bonus),) = repo_copies(OTHER, hole, hole + 6, snippets)
    assert copy == "self.path = path" and bonus >= 1.0  # its neighbours are the hole's
    own = repo.snippets(root / "a.py", STORE, [(0, 5)])
    assert own and "a.py" not in [s.path for s in own]  # its own file left out


def test_an_edited_file_is_indexed_again_alone_and_the_cache_is_used(tmp_path, cache_home):
    root = _package(tmp_path / "r", {"pyproject.toml": "", "a.py": STORE, "b.py": "x = 1\n"})
    before = _tree(root)
    first = RepoContext.build(root / "b.py")
    assert list((cache_home / "infill" / "repo-index").glob("*.json"))
    assert _tree(root) == before  # the repository is never written
    first.update(root / "a.py", "def fresh_name():\n    pass\n")  # unsaved text wins
    hits = first.snippets(root / "b.py", "fresh_name()\n", [(0, 0)])
    assert hits and "fresh_name" in hits[0].text
    again = RepoContext.build(root / "b.py")
    assert sorted(again.index.files) == ["a.py", "b.py"] and not again.notes


# -- bad input: each a bounded outcome and a note ----------------------------------------


def test_a_cap_on_files_stops_a_huge_repository_with_a_note(tmp_path):
    root = tmp_path / "many"
    root.mkdir()
    for k in range(3000):
        (root / f"m{k:05d}.py").write_text(f"v{k} = {k}\n")
    repo = RepoContext.build(root / "m00000.py", ContextSettings(max_files=500))
    assert len(repo.index.files) == 500
    assert any("max_files" in n for n in repo.notes)


def test_what_is_not_source_is_skipped_and_counted(tmp_path):
    root = _package(tmp_path / "r", {"pyproject.toml": "", "a.py": STORE})
    (root / "big.py").write_text("x = 1\n" * (50_000_000 // 6 + 1))  # 50 MB
    (root / "bin.py").write_bytes(b"x = 1\x00\x01\x02\n")
    (root / "latin.py").write_bytes("s = 'caf\xe9'\n".encode("latin-1"))
    (root / "gen_pb2.py").write_text("x = 1\n")
    (root / "dir.py").mkdir()  # a folder with a source file's name
    os.mkfifo(root / "pipe.py")  # reading it would wait for ever
    (root / "gone.py").symlink_to(root / "missing.py")  # vanished
    (root / "loop1.py").symlink_to(root / "loop2.py")
    (root / "loop2.py").symlink_to(root / "loop1.py")
    (root / "sub").mkdir()
    (root / "sub" / "up").symlink_to(root)  # a loop of folders
    outside = tmp_path / "secret.py"
    outside.write_text("TOKEN = 1\n")
    (root / "out.py").symlink_to(outside)  # leaves the repository
    repo = RepoContext.build(root / "a.py", ContextSettings(max_file_bytes=1_000_000))
    assert sorted(repo.index.files) == ["a.py"]
    assert repo.skipped["too large"] == 1 and repo.skipped["binary"] == 1
    assert repo.skipped["not UTF-8"] == 1 and repo.skipped["generated"] == 1
    assert any("skipped" in n for n in repo.notes)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_file_is_skipped(tmp_path):
    root = _package(tmp_path / "r", {"pyproject.toml": "", "a.py": STORE, "b.py": STORE})
    (root / "b.py").chmod(0)
    repo = RepoContext.build(root / "a.py")
    assert sorted(repo.index.files) == ["a.py"] and repo.skipped["unreadable"] == 1


def test_a_tracked_file_deleted_before_it_is_read_is_skipped(tmp_path):
    root = _package(tmp_path / "g", {"a.py": STORE, "b.py": STORE})
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "."], check=True)
    (root / "b.py").unlink()  # git still lists it
    repo = RepoContext.build(root / "a.py")
    assert sorted(repo.index.files) == ["a.py"]


def test_a_read_only_repository_and_an_unwritable_cache(tmp_path, cache_home):
    root = _package(tmp_path / "r", {"pyproject.toml": "", "a.py": STORE, "b.py": OTHER})
    before = _tree(root)
    for p in [root, *root.iterdir()]:
        p.chmod(0o555 if p.is_dir() else 0o444)
    cache_home.write_text("not a folder")
    try:
        repo = RepoContext.build(root / "b.py")
    finally:
        for p in [root, *root.iterdir()]:
            p.chmod(0o755 if p.is_dir() else 0o644)
    assert sorted(repo.index.files) == ["a.py", "b.py"]
    assert any("not cached" in n for n in repo.notes)
    assert _tree(root) == before


def test_a_file_outside_any_repository_and_a_missing_folder(tmp_path):
    lone = tmp_path / "lone" / "m.py"
    lone.parent.mkdir()
    lone.write_text(STORE)
    repo = RepoContext.build(lone)
    assert repo.kind == "directory" and list(repo.index.files) == ["m.py"]
    assert repo.snippets(lone, STORE, [(0, 5)]) == []  # a file alone: nothing to add
    missing = RepoContext.build(tmp_path / "gone" / "m.py")
    assert not missing.index.files and any("no python files" in n for n in missing.notes)


def test_settings_must_be_positive():
    with pytest.raises(ValueError, match="max_files"):
        ContextSettings(max_files=0)
    with pytest.raises(ValueError, match="stride_lines"):
        ContextSettings(window_lines=5, stride_lines=10)


# -- the engine, the protocol, the command, the server -----------------------------------


def test_a_copy_from_another_file_the_model_scores_higher_replaces_the_fill():
    text = "def f(a):\n    total = sum(a)\n    <mask>\n    return total\n"
    n = calls_without_copies(text, "pass")
    snippet = Snippet("g.py", "def g(b):\n    total = sum(b)\n    log(total)\n    return total\n")
    den = Spellings("pass", "log(total)", n + 1)
    r = fill_text(text, denoiser=den, context=[snippet], **CHECKED)
    assert r.fills[0].text == "log(total)"
    alone = fill_text(text, denoiser=TargetDenoiser(["pass"]), context=[], **CHECKED)
    assert alone.fills[0].text == "pass"  # without context: the fill as before


@pytest.mark.parametrize(
    ("hole", "other", "own", "copy", "weight"),
    [
        # a line's code: the copy's neighbours (the lines around it in the other file)
        # are the hole's, and their similarity is added to its score
        (
            "    <mask>\n    return total\n",
            "    log(total)\n    return total\n",
            "log(totals)",
            "log(total)",
            "SIMILARITY_WEIGHT",
        ),
        # inside a line: the other file goes on after the same code (`report(`), and the
        # copy (one token of eleven unlikely) gets INLINE_BONUS
        (
            "    report(<mask>)\n    return total\n",
            "    report(total, unix)\n",
            "total, units",
            "total, unix",
            "INLINE_BONUS",
        ),
    ],
)
def test_a_copy_from_another_file_wins_by_its_bonus_where_the_model_prefers_its_fill(
    monkeypatch, hole, other, own, copy, weight
):
    # the copies' pass likes the model's own fill a little better than the copy; the
    # copy's bonus, added to its score, decides
    from diffusion_infill.infill.core import cross_copies

    text = "def f(a):\n    total = sum(a)\n" + hole
    snippet = Snippet("g.py", "def g(b):\n    total = sum(b)\n" + other)
    n = calls_without_copies(text, own)

    def fill() -> str:
        den = Spellings(own, own, n + 1)
        return fill_text(text, denoiser=den, context=[snippet], **CHECKED).fills[0].text

    assert fill() == copy
    monkeypatch.setattr(cross_copies, weight, 0.0)
    assert fill() == own  # scored alone, the model's fill stays


@pytest.mark.parametrize(
    ("context", "error", "match"),
    [
        ("a.py", InputError, "sequence of Snippet"),
        ([("a.py", "x")], InputError, "not a Snippet"),
        ([Snippet("a.py", "x\x00")], InputError, "NUL"),
        ([Snippet("a.py", "\ud800")], InputError, "Unicode"),
        ([Snippet("a.py", "x")] * (MAX_SNIPPETS + 1), LimitError, "the limit is"),
        ([Snippet("a.py", "x" * 100_000)], LimitError, "characters"),
    ],
)
def test_bad_context_is_a_clear_error(context, error, match):
    with pytest.raises(error, match=match):
        fill_text("x = <mask>\n", denoiser=TargetDenoiser(["1"]), context=context, **CHECKED)


def test_the_protocol_carries_snippets_and_omits_none():
    req = FillRequest(1, "x = <mask>\n", context=[Snippet("a.py", "y = 2\n")])
    assert decode_request(pack(req)[4:]) == req
    assert "context" not in FillRequest(2, "x\n").to_wire()
    assert decode_request(pack(FillRequest(3, "x\n"))[4:]).context == []
    with pytest.raises(ProtocolError, match="context"):
        FillRequest.from_wire({"id": 4, "text": "x", "context": [["a.py"]]})


def test_the_command_fills_with_and_without_the_repository(tmp_path, capsys, monkeypatch):
    root = _package(tmp_path / "r", {"pyproject.toml": "", "a.py": STORE, "b.py": OTHER})
    monkeypatch.setattr(loading, "load_denoiser", lambda *a, **k: TargetDenoiser(["self.p = 1"]))
    monkeypatch.setenv("INFILL_WORKER", "off")
    for repo, said in (("auto", ""), ("off", ""), (str(tmp_path / "nowhere"), "not a directory")):
        assert main(["fill", "--repo", repo, str(root / "b.py")]) == 0
        out, err = capsys.readouterr()
        assert "+        self." in out and said in err and "Traceback" not in err


def test_the_server_goes_on_without_a_deleted_workspace_folder(tmp_path):
    root = _package(tmp_path / "ws", {"a.py": STORE, "b.py": OTHER})
    logged: list[str] = []
    repos = Repositories(logged.append, lambda: [root.as_uri()], lambda: {})
    hole = OTHER.index("<mask>")
    found = asyncio.run(repos.snippets((root / "b.py").as_uri(), OTHER, [(hole, hole + 6)]))
    assert [s.path for s in found] == ["a.py"]
    for p in root.iterdir():
        p.unlink()
    root.rmdir()
    repos.forget()
    uri = (root / "b.py").as_uri()
    assert asyncio.run(repos.snippets(uri, OTHER, [(hole, hole + 6)])) == []
    assert any("no python files" in line for line in logged)
    assert asyncio.run(repos.snippets("untitled:1", OTHER, [(0, 1)])) == []


def test_the_server_setting_is_on_by_default_and_checked():
    assert Settings().repository_context is True
    assert parse({"repositoryContext": False})[0].repository_context is False
    bad, warnings = parse({"repositoryContext": "yes"})
    assert bad.repository_context is True and "infill.repositoryContext" in warnings[0]


def test_the_server_sends_where_a_document_lives(tmp_path):
    root = _package(tmp_path / "ws", {"a.py": STORE, "b.py": OTHER})
    repos = Repositories(lambda line: None, lambda: [root.as_uri()], lambda: {})
    doc = root / "b.py"
    assert repos.source(doc.as_uri()) == Source(str(doc), str(root), None)
    assert repos.source(doc.as_uri(), "/venvs/app") == Source(str(doc), str(root), "/venvs/app")
    assert repos.source("untitled:1") is None  # not a file: jedi reads the text alone


def test_the_server_s_python_setting_is_checked():
    assert Settings().python_environment == ""
    assert parse({"pythonEnvironment": "/venvs/app"})[0].python_environment == "/venvs/app"
    for bad in (3, "a\x00b", "p" * 5000):
        fixed, warnings = parse({"pythonEnvironment": bad})
        assert fixed.python_environment == "" and "infill.pythonEnvironment" in warnings[0]
