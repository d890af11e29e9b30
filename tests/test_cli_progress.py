"""Long work through the `infill` command: a progress line every few seconds on a stderr
that is not a terminal, and `infill fix --max-lines`, which refuses to fix a huge file
whole before any model runs. The processes run `tests/cli_fake_main.py` (the command's
console script on the fake model)."""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from worker_fake_main import WorkerFake

from diffusion_infill.infill.cli import main
from diffusion_infill.infill.cli.parser import DEFAULT_MAX_LINES
from diffusion_infill.model import loading

FAKE_MAIN = Path(__file__).resolve().parent / "cli_fake_main.py"
FUNCTION = "def f(a):\n    return a + 1\n\n"  # three lines


def _file(folder: Path, lines: int, name: str = "huge.py") -> Path:
    f = folder / name
    f.write_text(FUNCTION * (lines // 3) + "x = 1\n" * (lines % 3))
    return f


def _first_line_like(
    args: list[str], pattern: str, within: float, env: dict[str, str] | None = None
) -> tuple[str, float]:
    """Run the command with stderr on a pipe; its first stderr line matching `pattern` and
    the seconds from the start to it (waiting at most `within` seconds); then stop it."""
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, str(FAKE_MAIN), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    seen = []
    try:
        while True:
            try:
                line = lines.get(timeout=max(0.0, started + within - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no progress line within {within} s: {seen}") from None
            assert line is not None, f"the command ended without a progress line: {seen}"
            seen.append(line)
            if re.search(pattern, line):
                return line, time.monotonic() - started
    finally:
        proc.terminate()
        proc.wait(20)


def test_a_huge_fix_writes_progress_lines_on_a_stderr_that_is_no_terminal(tmp_path):
    f = _file(tmp_path, 100_000)
    line, seconds = _first_line_like(
        ["fix", "--max-lines", "0", str(f)], r"huge\.py: scoring \d+/\d+ windows", within=5.0
    )
    assert seconds < 5.0
    assert "\r" not in line and line.endswith("\n")  # a plain line, not one drawn over
    assert re.fullmatch(
        rf"{re.escape(str(f))}: scoring (\d+)/(\d+) windows \(\d+%\)"
        r"(, [\d.]+ windows/s, about (\d+ min )?\d+ s left)?\n",
        line,
    ), line


@pytest.mark.slow
def test_a_long_fill_writes_progress_lines_on_a_stderr_that_is_no_terminal(tmp_path):
    f = tmp_path / "holes.py"
    f.write_text("".join(f"def f{i}(x):\n    y = x\n    return <mask>\n\n\n" for i in range(100)))
    env = {"INFILL_FAKE_READY": str(tmp_path / "ready"), "INFILL_FAKE_DELAY": "0.2"}
    line, seconds = _first_line_like(
        ["fill", "--no-checks", "--lengths", "1", "--tokens-per-step", "1", str(f)],
        r"holes\.py: filling \d+/\d+ slots",
        within=10.0,
        env=env,
    )
    assert re.match(rf"{re.escape(str(f))}: filling \d+/\d+ slots \(\d+%\)", line), line


def test_a_100000_line_file_is_refused_whole_at_once_with_the_ways_around(tmp_path):
    f = _file(tmp_path, 100_000)
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, str(FAKE_MAIN), "fix", str(f)], capture_output=True, text=True, timeout=60
    )
    assert time.monotonic() - started < 60
    assert run.returncode == 2 and run.stdout == ""
    (line,) = run.stderr.splitlines()
    assert line.startswith(f"infill: error: {f} has 100000 lines, more than --max-lines ")
    for way in ("--lines A:B", "--changed", "--max-lines"):
        assert way in line, line


@pytest.fixture
def fake_model(monkeypatch):
    """The fake model; fixing, it finds the `-` of `y = x - 1` suspicious."""
    monkeypatch.setattr(loading, "load_denoiser", lambda *a, **kw: WorkerFake(confidence=0.99))


def test_max_lines_bounds_only_a_whole_file_fix(tmp_path, fake_model, capsys):
    f = _file(tmp_path, 10)
    assert main(["fix", "--max-lines", "9", str(f)]) == 2
    assert f"{f} has 10 lines, more than --max-lines 9" in capsys.readouterr().err
    assert main(["fix", "--max-lines", "10", str(f)]) == 0  # at the bound: fixed whole
    assert main(["fix", "--max-lines", "0", str(f)]) == 0  # no bound
    assert main(["fix", "--max-lines", "9", "--lines", "1:10", str(f)]) == 0  # a part
    assert DEFAULT_MAX_LINES == 3000
    assert main(["fix", str(_file(tmp_path, DEFAULT_MAX_LINES + 1, "long.py"))]) == 2


def test_a_file_over_the_bound_stops_the_run_before_any_model(tmp_path, monkeypatch, capsys):
    def no_model(*a, **kw):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(loading, "load_denoiser", no_model)
    small, big = _file(tmp_path, 4, "small.py"), _file(tmp_path, 30, "big.py")
    missing = tmp_path / "missing.py"  # left to the run, which would report it
    assert main(["fix", "--max-lines", "20", str(small), str(missing), str(big)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [
        f"infill: error: {big} has 30 lines, more than --max-lines 20: fixing it whole would "
        "take minutes; check part of it with --lines A:B or --changed, or raise --max-lines "
        "(0: no limit)"
    ]


@pytest.mark.parametrize(
    ("value", "message"),
    [("-1", "--max-lines must be >= 0 (0: no limit), got -1"), ("many", "invalid int value")],
)
def test_a_bad_max_lines_is_a_usage_error(tmp_path, fake_model, capsys, value, message):
    f = _file(tmp_path, 3)
    assert main(["fix", "--max-lines", value, str(f)]) == 2
    assert message in capsys.readouterr().err
