"""`--in-place` and a file it must not write: read-only by its permission bits (refused
unless --force, even for root), immutable or append-only (never written), in a read-only
directory, or another user's. Each case runs the command in a process of its own on a
fake model, as this user and, where the tests run as root, as an unprivileged user too
(`nobody`, through `setpriv` where there is one, else a plain setuid): root passes the
system's permission checks, so for root the command applies the rule itself (no write bit
for the owner: read-only)."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from worker_fake_main import WorkerFake

from diffusion_infill.infill.cli import main
from diffusion_infill.model import loading

TESTS = Path(__file__).resolve().parent
# The command's `main` on the fake worker model: it fills "a = <mask>" with "1 + 2" and
# repairs the "-" of "y = x - 1" into "+".
SCRIPT = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
from worker_fake_main import WorkerFake
from diffusion_infill.model import loading
loading.load_denoiser = lambda *a, **kw: WorkerFake(confidence=0.99)
from diffusion_infill.infill.cli import main
sys.exit(main(sys.argv[1:]))
"""
BEFORE = {"fill": b"a = <mask>\n", "fix": b"y = x - 1\n"}
AFTER = {"fill": b"a = 1 + 2\n", "fix": b"y = x + 1\n"}
IS_ROOT = os.geteuid() == 0


@dataclass
class User:
    """Who runs the command, and a folder of theirs for its files."""

    name: str
    uid: int
    gid: int
    folder: Path
    drop: Drop | None = None  # how to become this user; None: the tests' own user

    def file(
        self,
        name: str,
        data: bytes,
        mode: int = 0o644,
        folder: Path | None = None,
        owner: int | None = None,
    ) -> Path:
        path = (folder or self.folder) / name
        path.write_bytes(data)
        os.chown(path, self.uid if owner is None else owner, self.gid if owner is None else 0)
        path.chmod(mode)
        return path

    def run(self, *args: str) -> subprocess.CompletedProcess:
        return _python(["-c", SCRIPT, *args], self.folder, self.drop)


@dataclass
class Drop:
    """Running a process as another user: `setpriv` (it keeps root's capabilities up to
    the exec, so an interpreter installed where only root can look still starts) or a
    setuid before the exec. Either way the process runs with that user's ids and no
    capabilities."""

    uid: int
    gid: int
    setpriv: bool

    def prefix(self) -> list[str]:
        if not self.setpriv:
            return []
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups"]

    def preexec(self) -> Callable[[], None] | None:
        if self.setpriv:
            return None

        def drop() -> None:
            os.setgroups([])
            os.setgid(self.gid)
            os.setuid(self.uid)

        return drop


def _python(args: list[str], cwd: Path, drop: Drop | None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*(drop.prefix() if drop else []), sys.executable, *args],
        capture_output=True,
        cwd=cwd,
        preexec_fn=drop and drop.preexec(),
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        timeout=60,
        check=False,
    )


@pytest.fixture(scope="session")
def nobody() -> Drop:
    """How to run the command as `nobody`, once it is known to work; skips otherwise."""
    if not IS_ROOT:
        pytest.skip("the tests run unprivileged already: the 'this user' cases are those")
    try:
        entry = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user 'nobody' to drop privileges to")
    folder = Path(tempfile.mkdtemp(prefix="infill-probe-"))
    why = []
    try:
        folder.chmod(0o755)
        for setpriv in [True, False] if shutil.which("setpriv") else [False]:
            drop = Drop(entry.pw_uid, entry.pw_gid, setpriv)
            try:
                probe = "import os, diffusion_infill.infill.cli; print(os.geteuid())"
                proc = _python(["-c", probe], folder, drop)
            except OSError as exc:
                why.append(str(exc))
                continue
            if proc.returncode == 0 and proc.stdout.strip() == str(entry.pw_uid).encode():
                return drop
            why.append(proc.stderr.decode().strip().splitlines()[-1:])
    finally:
        shutil.rmtree(folder)
    pytest.skip(f"'nobody' cannot run {sys.executable} with this project: {why}")


def _writable_again(folder: Path) -> None:
    """Undo what a test made read-only, so that the folder can be removed."""
    for path in [folder, *folder.rglob("*")]:
        with contextlib.suppress(OSError):
            path.chmod(path.stat().st_mode | stat.S_IWUSR)


@pytest.fixture(params=["this user", "unprivileged"])
def user(request, tmp_path) -> Iterator[User]:
    if request.param == "this user":
        folder = tmp_path / "work"
        folder.mkdir()
        yield User("this user", os.geteuid(), os.getegid(), folder)
        _writable_again(folder)
        return
    drop = request.getfixturevalue("nobody")
    folder = Path(tempfile.mkdtemp(prefix="infill-readonly-"))  # nobody can reach it
    try:
        folder.chmod(0o755)
        os.chown(folder, drop.uid, drop.gid)
        yield User("nobody", drop.uid, drop.gid, folder, drop)
    finally:
        _writable_again(folder)
        shutil.rmtree(folder)


def _errors(stderr: bytes) -> list[str]:
    err = stderr.decode()
    assert "Traceback" not in err, err
    return [line for line in err.splitlines() if line.startswith("infill: ")]


def _one_error(stderr: bytes, *needles: str) -> str:
    (line,) = _errors(stderr)
    for n in needles:
        assert n in line, line
    return line


def _leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.rglob("*") if p.name.endswith(".infill-tmp")]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# -- read-only by its permission bits ----------------------------------------------------


@pytest.mark.parametrize("command", ["fill", "fix"])
def test_a_read_only_file_is_left_as_it_was_and_the_others_are_written(user, command):
    ro = user.file("ro.py", BEFORE[command], 0o444)
    rw = user.file("rw.py", BEFORE[command])
    proc = user.run(command, "--in-place", str(ro), str(rw))
    assert proc.returncode == 1
    _one_error(
        proc.stderr,
        f"infill: {ro}: read-only (mode 0444)",
        "the file is unchanged",
        "--force writes it anyway",
    )
    assert ro.read_bytes() == BEFORE[command] and _mode(ro) == 0o444
    assert rw.read_bytes() == AFTER[command]
    assert proc.stdout == b""
    assert _leftovers(user.folder) == []


@pytest.mark.parametrize("command", ["fill", "fix"])
def test_force_writes_a_read_only_file_of_ones_own_and_keeps_its_mode(user, command):
    ro = user.file("ro.py", BEFORE[command], 0o444)
    proc = user.run(command, "--in-place", "--force", str(ro))
    assert proc.returncode == 0, proc.stderr
    assert _errors(proc.stderr) == []
    assert ro.read_bytes() == AFTER[command] and _mode(ro) == 0o444
    assert _leftovers(user.folder) == []


def test_a_file_with_only_group_and_other_write_bits_counts_as_read_only(user):
    f = user.file("a.py", BEFORE["fill"], 0o466)
    proc = user.run("fill", "--in-place", str(f))
    assert proc.returncode == 1
    _one_error(proc.stderr, f"{f}: read-only (mode 0466)", "unchanged")
    assert f.read_bytes() == BEFORE["fill"]


def test_a_read_only_file_is_read_as_ever_without_in_place(user):
    f = user.file("a.py", BEFORE["fill"], 0o444)
    proc = user.run("fill", str(f))
    assert proc.returncode == 0, proc.stderr
    assert b"+a = 1 + 2\n" in proc.stdout
    assert f.read_bytes() == BEFORE["fill"]


def test_fix_with_nothing_to_repair_leaves_a_read_only_file_without_an_error(user):
    f = user.file("a.py", b"z = 1\n", 0o444)
    proc = user.run("fix", "--in-place", str(f))
    assert proc.returncode == 0, proc.stderr
    assert _errors(proc.stderr) == [] and b"nothing suspicious" in proc.stderr
    assert f.read_bytes() == b"z = 1\n"


def test_fill_refuses_a_read_only_file_before_the_model_runs(tmp_path, monkeypatch, capsys):
    loads = []

    def load(*a, **kw):
        loads.append(a)
        return WorkerFake(confidence=0.99)

    monkeypatch.setattr(loading, "load_denoiser", load)
    f = tmp_path / "a.py"
    f.write_bytes(BEFORE["fill"])
    f.chmod(0o444)
    assert main(["fill", "--in-place", str(f)]) == 1
    _one_error(capsys.readouterr().err.encode(), f"{f}: read-only (mode 0444)")
    assert loads == [] and f.read_bytes() == BEFORE["fill"]


def test_a_read_only_file_behind_a_symlink_is_left_as_it_was(user):
    f = user.file("a.py", BEFORE["fill"], 0o444)
    link = user.folder / "link.py"
    link.symlink_to(f)
    proc = user.run("fill", "--in-place", str(link))
    assert proc.returncode == 1
    _one_error(proc.stderr, f"{link}: read-only (mode 0444)")
    assert f.read_bytes() == BEFORE["fill"] and link.is_symlink()


# -- a read-only directory ---------------------------------------------------------------


@pytest.mark.parametrize("force", [[], ["--force"]], ids=["plain", "force"])
@pytest.mark.parametrize("command", ["fill", "fix"])
def test_a_file_in_a_read_only_directory_is_left_as_it_was(user, command, force):
    folder = user.folder / "sealed"
    folder.mkdir()
    os.chown(folder, user.uid, user.gid)
    f = user.file("a.py", BEFORE[command], folder=folder)
    folder.chmod(0o555)
    proc = user.run(command, "--in-place", *force, str(f))
    assert proc.returncode == 1
    _one_error(
        proc.stderr,
        f"{f}: its directory {folder} is read-only (mode 0555)",
        "cannot be written beside the file",
        "the file is unchanged",
    )
    assert f.read_bytes() == BEFORE[command]
    assert sorted(p.name for p in folder.iterdir()) == ["a.py"]


# -- immutable and append-only -----------------------------------------------------------


@contextlib.contextmanager
def _attribute(path: Path, flag: str) -> Iterator[None]:
    """`chattr +flag` on the file for the block; skips where that cannot be done."""
    if shutil.which("chattr") is None:
        pytest.skip("no chattr on this system")
    proc = subprocess.run(["chattr", f"+{flag}", str(path)], capture_output=True, check=False)
    if proc.returncode != 0:
        pytest.skip(
            f"chattr +{flag} is not allowed here (needs root and a file system "
            f"with attributes): {proc.stderr.decode().strip()}"
        )
    try:
        yield
    finally:
        subprocess.run(["chattr", f"-{flag}", str(path)], capture_output=True, check=True)


@pytest.mark.parametrize("force", [[], ["--force"]], ids=["plain", "force"])
@pytest.mark.parametrize(("flag", "word"), [("i", "immutable"), ("a", "append-only")])
def test_an_immutable_or_append_only_file_is_never_written(user, flag, word, force):
    f = user.file("a.py", BEFORE["fill"])
    with _attribute(f, flag):
        proc = user.run("fill", "--in-place", *force, str(f))
        assert proc.returncode == 1
        _one_error(
            proc.stderr,
            f"{f}: {word}: the system refuses to replace it",
            "even for root and with --force",
            "the file is unchanged",
        )
        assert f.read_bytes() == BEFORE["fill"]
    assert _leftovers(user.folder) == []


# -- another user's file (needs root to set up; the command runs as nobody) ---------------


@pytest.mark.parametrize(
    ("mode", "force", "needles"),
    [
        (0o444, [], ["read-only (mode 0444, owner uid 0)", "the file is unchanged"]),
        (
            0o444,
            ["--force"],
            ["read-only (mode 0444, owner uid 0)", "--force writes only your own"],
        ),
        (0o644, [], ["not writable by you (mode 0644, owner uid 0)", "the file is unchanged"]),
        (
            0o644,
            ["--force"],
            ["not writable by you (mode 0644, owner uid 0)", "--force writes only your own"],
        ),
    ],
    ids=["0444", "0444-force", "0644", "0644-force"],
)
def test_another_users_file_is_left_as_it_was_even_with_force(nobody, mode, force, needles):
    """nobody may rename a file over root's in nobody's own folder: the command must not."""
    folder = Path(tempfile.mkdtemp(prefix="infill-readonly-"))
    try:
        folder.chmod(0o755)
        os.chown(folder, nobody.uid, nobody.gid)
        me = User("nobody", nobody.uid, nobody.gid, folder, nobody)
        f = me.file("a.py", BEFORE["fill"], mode, owner=0)
        proc = me.run("fill", "--in-place", *force, str(f))
        assert proc.returncode == 1
        line = _one_error(proc.stderr, f"{f}: ", *needles)
        assert "--force writes it anyway" not in line
        assert f.read_bytes() == BEFORE["fill"] and f.stat().st_uid == 0
        assert _leftovers(folder) == []
    finally:
        shutil.rmtree(folder)


def test_a_rename_the_system_refuses_leaves_the_file_and_no_temporary(nobody):
    """root's file, writable by all, in root's sticky shared folder: nobody passes every
    check, writes the new text beside it, and the system refuses the rename."""
    folder = Path(tempfile.mkdtemp(prefix="infill-sticky-"))
    try:
        folder.chmod(0o1777)
        me = User("nobody", nobody.uid, nobody.gid, folder, nobody)
        f = me.file("a.py", BEFORE["fill"], 0o666, owner=0)
        proc = me.run("fill", "--in-place", str(f))
        assert proc.returncode == 1
        _one_error(
            proc.stderr,
            f"{f}: cannot replace it (Operation not permitted",
            "sticky directory",
            "the file is unchanged",
        )
        assert f.read_bytes() == BEFORE["fill"] and f.stat().st_uid == 0
        assert _leftovers(folder) == []
    finally:
        shutil.rmtree(folder)


# -- usage -------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["fill", "fix"])
def test_force_without_in_place_is_a_usage_error(tmp_path, command, capsys):
    f = tmp_path / "a.py"
    f.write_bytes(BEFORE[command])
    assert main([command, "--force", str(f)]) == 2
    _one_error(capsys.readouterr().err.encode(), "infill: error: --force applies to --in-place")
    assert f.read_bytes() == BEFORE[command]


@pytest.mark.parametrize("command", ["fill", "fix"])
def test_help_says_what_in_place_and_force_do(command, capsys):
    assert main([command, "--help"]) == 0
    out = "".join(capsys.readouterr().out.split())  # whatever the width it was wrapped to
    assert "--in-placewritethe" in out and "aread-onlyfile" in out
    assert "--forcewith--in-place:writeafileofyoursthatisread-onlybyitspermissionbits" in out
    assert "neveranimmutablefile" in out
