"""The `infill` command as a process: in-place writes that cannot lose a file, signals,
a closed stdout, files that are not regular, declared encodings, a start without torch.
Most run `tests/cli_fake_main.py` (the command's console script on the fake model)."""

from __future__ import annotations

import errno
import json
import os
import re
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fakes import TargetDenoiser
from worker_fake_main import WorkerFake

from diffusion_infill.infill.cli import main
from diffusion_infill.infill.cli.changes import hunks
from diffusion_infill.infill.core import window
from diffusion_infill.infill.core.repair import SCORE_BATCH
from diffusion_infill.model import loading

FAKE_MAIN = Path(__file__).resolve().parent / "cli_fake_main.py"
ORIGINAL = b"# keep me\n" + b"pad = 1\n" * 300 + b"x = <mask>\n"


def _run(*args: str, env: dict[str, str] | None = None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(FAKE_MAIN), *args],
        capture_output=True,
        env={**os.environ, **(env or {})},
        timeout=60,
        check=False,
        **kw,
    )


def _one_line(stderr: bytes, *needles: str) -> str:
    err = stderr.decode()
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("infill: "), err
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def _leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(".infill-tmp")]


# -- in-place writes are atomic ---------------------------------------------------------


def test_in_place_write_past_a_file_size_limit_leaves_the_file_as_it_was(tmp_path):
    """A real failing write: the process may write at most 1 KiB per file (RLIMIT_FSIZE,
    EFBIG, as a full disk gives ENOSPC); the new text is longer."""
    f = tmp_path / "a.py"
    f.write_bytes(ORIGINAL)

    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))

    proc = _run("fill", "--in-place", str(f), preexec_fn=small_files)
    assert proc.returncode == 1
    _one_line(proc.stderr, str(f), "cannot write: File too large", "unchanged")
    assert f.read_bytes() == ORIGINAL
    assert _leftovers(tmp_path) == []


def test_a_write_that_raises_leaves_the_file_byte_for_byte(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(
        loading, "load_denoiser", lambda *a, **kw: TargetDenoiser({"= ": "42"}, confidence=0.99)
    )

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    f = tmp_path / "a.py"
    f.write_bytes(ORIGINAL)
    assert main(["fill", "--in-place", str(f)]) == 1
    _one_line(capsys.readouterr().err.encode(), "No space left on device", "unchanged")
    assert f.read_bytes() == ORIGINAL
    assert _leftovers(tmp_path) == []


def test_in_place_keeps_the_mode_and_a_symlink(tmp_path):
    f = tmp_path / "a.py"
    f.write_bytes(b"x = <mask>\n")
    f.chmod(0o751)
    link = tmp_path / "link.py"
    link.symlink_to(f)
    proc = _run("fill", "--in-place", str(link))
    assert proc.returncode == 0, proc.stderr
    assert f.read_bytes() == b"x = 42\n"
    assert link.is_symlink() and oct(f.stat().st_mode & 0o7777) == oct(0o751)
    assert _leftovers(tmp_path) == []


# -- signals and pipes ------------------------------------------------------------------


def _default_signals() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


@pytest.mark.parametrize(
    ("sig", "status", "word"),
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")],
)
def test_a_signal_during_the_run_ends_with_one_line(tmp_path, sig, status, word):
    f = tmp_path / "a.py"
    f.write_bytes(ORIGINAL)
    ready = tmp_path / "ready"
    env = {**os.environ, "INFILL_FAKE_READY": str(ready), "INFILL_FAKE_DELAY": "30"}
    # As a terminal would: a run started in the background of a non-interactive shell (CI)
    # inherits SIGINT ignored, and Python then keeps ignoring it, as it should.
    proc = subprocess.Popen(
        [sys.executable, str(FAKE_MAIN), "fill", "--in-place", str(f)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        preexec_fn=_default_signals,
    )
    deadline = time.monotonic() + 60
    while not ready.exists():  # the model is running
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == status
    assert _one_line(err, word) == f"infill: {word}"
    assert out == b""
    assert f.read_bytes() == ORIGINAL
    assert _leftovers(tmp_path) == []


def test_a_closed_stdout_ends_quietly(tmp_path):
    f = tmp_path / "a.py"
    f.write_bytes(ORIGINAL)
    proc = subprocess.Popen(
        [sys.executable, str(FAKE_MAIN), "fill", str(f), str(f)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()  # `| head -c0`: the reader is gone before the diff is written
    err = proc.stderr.read()
    assert proc.wait(timeout=60) in (0, 141)
    assert b"Traceback" not in err and b"BrokenPipe" not in err and b"Exception" not in err


# -- what is read -----------------------------------------------------------------------


def test_a_fifo_is_refused_before_it_is_read(tmp_path):
    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)  # nobody writes to it: opening it would block forever
    proc = _run("fill", str(fifo))
    assert proc.returncode == 1
    _one_line(proc.stderr, str(fifo), "a FIFO, not a regular file")
    proc = _run("fix", "/dev/null")
    assert proc.returncode == 1
    _one_line(proc.stderr, "/dev/null", "a device, not a regular file")


def test_a_declared_encoding_is_read_and_written_back(tmp_path):
    f = tmp_path / "a.py"
    text = "# -*- coding: latin-1 -*-\nname = 'café'\nx = <mask>\n"
    f.write_bytes(text.encode("latin-1"))
    proc = _run("fill", "--in-place", str(f))
    assert proc.returncode == 0, proc.stderr
    assert f.read_bytes() == text.replace("<mask>", "42").encode("latin-1")


def test_a_fill_the_declared_encoding_cannot_hold_leaves_the_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(
        loading, "load_denoiser", lambda *a, **kw: TargetDenoiser({"= ": "'€'"}, confidence=0.99)
    )
    f = tmp_path / "a.py"
    original = "# coding: latin-1\nname = 'café'\nx = <mask>\n".encode("latin-1")
    f.write_bytes(original)
    assert main(["fill", "--in-place", str(f)]) == 1
    _one_line(capsys.readouterr().err.encode(), "'€'", "iso8859-1", "unchanged")
    assert f.read_bytes() == original


def test_an_unknown_declared_encoding_is_an_error(tmp_path, capsys):
    f = tmp_path / "a.py"
    f.write_bytes(b"# coding: klingon\nx = <mask>\n")
    assert main(["fill", str(f)]) == 1
    _one_line(capsys.readouterr().err.encode(), "unknown encoding: klingon")


# -- start-up ---------------------------------------------------------------------------


def test_help_and_input_errors_do_not_import_torch(tmp_path):
    (tmp_path / "plain.py").write_text("x = 1\n")
    (tmp_path / "hole.py").write_text("x = <mask>\n")
    script = """
import contextlib, io, sys
from diffusion_infill.infill.cli import main
from diffusion_infill.infill.cli.changes import hunks
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    codes = [main(["--help"]), main(["fill", "--help"]), main(["fill", "missing.py"]),
             main(["fill", "plain.py"]), main(["fill", "--steps", "0", "hole.py"]),
             main(["fix", "--lines", "9:1", "hole.py"]), main(["frob"])]
print(codes, sorted(m for m in ("torch", "transformers") if m in sys.modules))
"""
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=True,
    )
    assert proc.stdout.strip() == "[0, 0, 1, 1, 2, 2, 2] []"


# -- long files: work bounded by what was asked -----------------------------------------


@pytest.fixture
def counted(monkeypatch):
    """The fake model (it fills the first span with "y"; scoring, it expects "b" where an
    "a" is written, so `fix` has a suspicious token to repair) and a count of Python
    parses."""
    fake = WorkerFake(["y"], wrong={"a": "b"}, confidence=0.99, max_length=128)
    monkeypatch.setattr(loading, "load_denoiser", lambda *a, **kw: fake)
    parses = []

    class Counted(window.PythonScopes):
        def __init__(self, source: str) -> None:
            parses.append(len(source))
            super().__init__(source)

    monkeypatch.setattr(window, "PythonScopes", Counted)
    return fake, parses


LONG = "def f(a):\n    return a + 1\n\n" * 1000  # 3,000 lines


def test_fix_scores_a_long_file_a_few_windows_per_pass(tmp_path, counted, capsys):
    fake, parses = counted
    f = tmp_path / "long.py"
    f.write_text(LONG)
    assert main(["fix", "--progress", "--no-checks", str(f)]) == 0  # "y" is no known name
    per_pass = [len(canvases) for canvases, _ in fake.calls]
    assert len(per_pass) > 20 and max(per_pass) <= SCORE_BATCH  # memory: a few windows
    assert len(parses) == 2  # once to score, once for the repair's window: not per window
    err = capsys.readouterr().err
    windows = re.findall(r"scoring (\d+)/(\d+) windows", err)
    assert windows[-1][0] == windows[-1][1] and int(windows[-1][1]) > 100
    assert err.splitlines()[-1].startswith(f"{f}: 1 spans")  # the summary on its own line


def test_fix_lines_scores_only_the_windows_of_those_lines(tmp_path, counted, capsys):
    fake, _ = counted
    f = tmp_path / "long.py"
    f.write_text(LONG)
    assert main(["fix", "--json", "--no-checks", "--lines", "1501:1503", str(f)]) == 0
    scoring = fake.calls[0][0]
    assert len(scoring) == 1 and len(scoring[0]) <= 128  # one window, around those lines
    (edit,) = json.loads(capsys.readouterr().out)["edits"]
    assert 1501 <= LONG[: edit["start"]].count("\n") + 1 <= 1503


def test_fill_of_one_hole_in_a_long_file_reads_one_window(tmp_path, counted, capsys):
    fake, parses = counted
    f = tmp_path / "long.py"
    f.write_text(LONG + "x = <mask>\n" + LONG)
    assert main(["fill", "--progress", "--no-checks", "--lengths", "1", str(f)]) == 0
    assert {len(canvases) for canvases, _ in fake.calls} == {1}
    assert max(len(c[0]) for c, _ in fake.calls) <= 128 and len(parses) == 1
    out, err = capsys.readouterr()
    assert re.search(r"filling (\d+)/\1 slots 100%", err)
    assert "\n+x = y\n" in out


# -- fix --changed: the lines changed since git's HEAD ------------------------------------


def _git(folder: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
    )


@pytest.fixture
def repo(tmp_path):
    """A git work tree with long.py (LONG) committed."""
    _git(tmp_path, "init", "-q")
    (tmp_path / "long.py").write_text(LONG)
    _git(tmp_path, "add", "long.py")
    _git(tmp_path, "commit", "-q", "-m", "one")
    return tmp_path


def _edited_lines(out: str, text: str) -> list[int]:
    return [text[: e["start"]].count("\n") + 1 for e in json.loads(out)["edits"]]


def test_fix_changed_repairs_each_changed_region_and_reads_nothing_else(repo, counted, capsys):
    fake, _ = counted
    lines = LONG.split("\n")
    for n in (1502, 2702):  # two edits far apart ("return a + 1" lines)
        lines[n - 1] = "    return a + 2"
    edited = "\n".join(lines)
    (repo / "long.py").write_text(edited)
    assert main(["fix", "--json", "--no-checks", "--changed", str(repo / "long.py")]) == 0
    scored = [c for canvases, _ in fake.calls for c in canvases]
    assert len(scored) <= 6 and max(len(c) for c in scored) <= 128  # windows of 2 regions
    assert _edited_lines(capsys.readouterr().out, edited) == [1502, 2702]  # one fix each


def test_fix_changed_skips_an_unchanged_file_without_loading_the_model(repo, counted, capsys):
    fake, _ = counted
    assert main(["fix", "--changed", str(repo / "long.py")]) == 0
    assert fake.calls == []
    assert capsys.readouterr().err.strip() == f"{repo / 'long.py'}: no changes since HEAD"


def test_fix_changed_takes_an_untracked_file_whole_and_refuses_outside_git(
    repo, tmp_path_factory, counted, capsys
):
    new = repo / "new.py"
    new.write_text("x = a\n")
    assert main(["fix", "--json", "--no-checks", "--changed", str(new)]) == 0
    assert _edited_lines(capsys.readouterr().out, "x = a\n") == [1]
    outside = tmp_path_factory.mktemp("plain") / "a.py"
    outside.write_text("x = a\n")
    assert main(["fix", "--changed", str(outside)]) == 1
    assert "--changed: not in a git work tree" in capsys.readouterr().err
    assert main(["fix", "--changed", "--base", "nosuchrev", str(repo / "long.py")]) == 1
    assert "unknown revision 'nosuchrev'" in capsys.readouterr().err


@pytest.mark.parametrize("flags", [["--changed", "--lines", "1:2"], ["--base", "HEAD~1"]])
def test_fix_changed_flag_misuse_is_a_usage_error(repo, flags, capsys):
    assert main(["fix", *flags, str(repo / "long.py")]) == 2


def test_changed_hunks_take_both_sides_of_a_deletion_and_merge_neighbours():
    diff = (
        "@@ -3 +3 @@\n-a\n+b\n@@ -5,2 +4,0 @@\n-c\n-d\n@@ -9,0 +9,2 @@\n+e\n+f\n"
        "@@ -20,0 +30 @@\n+g\n"
    )
    assert hunks(diff, 30) == [(3, 5), (9, 10), (30, 30)]


def test_the_command_flushes_all_its_output_before_it_exits(tmp_path):
    # the console script leaves with os._exit: what stdout still buffers must be written
    files = []
    for i in range(200):
        f = tmp_path / f"f{i:03d}.py"
        f.write_text("x = <mask>\n")
        files.append(str(f))
    proc = _run("fill", "--json", *files)
    assert proc.returncode == 0, proc.stderr.decode()
    lines = proc.stdout.decode().splitlines()
    assert len(lines) == 200 and all(json.loads(ln)["text"] == "x = 42\n" for ln in lines)
