"""Where a report comes from, and the report written with it: the checkout's commit, a hash
of the code that decides a fill, and the machine; and the short name of the model a report
is about. The fits of the tables that ship write
their reports with it into benchmarks/results/, beside the measurements, whose results
files carry the same stamp (benchmarks/results_file.py)."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from diffusion_infill.model.cpu import BF16_FLAGS, cpu_flags

ROOT = Path(__file__).resolve().parents[2]  # the checkout (model/training/ is two below)
REPORTS = ROOT / "benchmarks" / "results"  # the results files and the fits' reports
# the variables that hold the kernels below what the CPU has (MKL, ATen, oneDNN, fbgemm)
ISA_CAPS = (
    "MKL_ENABLE_INSTRUCTIONS",
    "ATEN_CPU_CAPABILITY",
    "ONEDNN_MAX_CPU_ISA",
    "FBGEMM_ENABLE_INSTRUCTIONS",
)
# what decides a fill: a run made with other files here is not the same run
FILL_CODE = ("infill/core", "model")


def model_name(model: Path | None) -> str:
    """A short name for a model directory: "shipped" for the default (model/weights),
    the run's name for runs/<name>/export."""
    if model is None:
        return "shipped"
    path = Path(model).resolve()
    if path.name == "weights" and path.parent.name == "model":
        return "shipped"
    return path.parent.name if path.name == "export" else path.name


def _fill_code_files(also: tuple[str, ...] = ()) -> list[Path]:
    """The files `fill_code` hashes, in its order."""
    out = []
    for top in (*FILL_CODE, *also):
        found = [ROOT / top] if (ROOT / top).is_file() else sorted((ROOT / top).rglob("*"))
        for path in found:
            rel = path.relative_to(ROOT).as_posix()
            if path.is_file() and "training" not in rel and "__pycache__" not in rel:
                out.append(path)
    return out


def fill_code(also: tuple[str, ...] = ()) -> str:
    """A hash of the files that decide a fill (the engine, the model's code and weights;
    not the training code), and of the files `also` names (relative to the checkout):
    runs with the same hash are runs of the same fills."""
    digest = hashlib.sha256()
    for path in _fill_code_files(also):
        digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def fill_code_state() -> tuple[tuple[str, int, int], ...]:
    """The fill code's files by name, size and modification time: what `fill_code` would
    read, without reading it (a few ms), to tell whether it changed since."""
    return tuple(
        (path.relative_to(ROOT).as_posix(), (st := path.stat()).st_size, st.st_mtime_ns)
        for path in _fill_code_files()
    )


def commit() -> str:
    """The checkout's commit, `-dirty` after it where tracked files differ from it (results
    files aside: a run of several benchmarks writes them as it goes); or "unknown" outside
    a git checkout."""

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False
        )
        return done.stdout.strip() if done.returncode == 0 else ""

    head = git("rev-parse", "HEAD")
    if not head:
        return "unknown"
    reports = REPORTS.relative_to(ROOT).as_posix()
    changed = git("status", "--porcelain", "--untracked-files=no", "--", ".", f":!{reports}")
    return head + ("-dirty" if changed else "")


def cpu() -> str:
    """The CPU's model name (/proc/cpuinfo), or the platform's processor."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def instructions(flags: frozenset[str] | None = None) -> str:
    """What the CPU computes a model with, from its feature `flags` (default: this CPU's):
    its widest vector instructions ("AVX-512", "AVX2", "SSE"), then "BF16" and "AMX"
    where it has bf16 instructions and AMX tiles, "VNNI" where it has int8 dot products,
    e.g. "AVX2" for a Zen 3 and "AVX-512 BF16 AMX VNNI" for a Sapphire Rapids; "" where
    the flags are unknown (no /proc/cpuinfo)."""
    flags = cpu_flags() if flags is None else flags
    if not flags:
        return ""
    words = ["AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "SSE"]
    if flags & BF16_FLAGS:
        words.append("BF16")
    if "amx_tile" in flags:
        words.append("AMX")
    if flags & {"avx512_vnni", "avx_vnni", "amx_int8"}:
        words.append("VNNI")
    return " ".join(words)


def described_cpu() -> str:
    """The CPU's model name and, where known, the instructions it computes with:
    "AMD EPYC (AVX2)"."""
    isa = instructions()
    return f"{cpu()} ({isa})" if isa else cpu()


def host() -> str:
    """The machine line of a report: its CPU and the instructions it computes with
    (`described_cpu`), cores, the dtype and threads asked for, and the kernels' instruction
    sets where they are held below the CPU's (`ISA_CAPS`)."""
    capped = "".join(f", {k}={os.environ[k]}" for k in ISA_CAPS if k in os.environ)
    return (
        f"{described_cpu()}, {os.cpu_count()} cores, "
        f"INFILL_DTYPE={os.environ.get('INFILL_DTYPE', 'auto')}"
        f", INFILL_THREADS={os.environ.get('INFILL_THREADS', 'auto')}{capped}"
    )


def command(module: str, argv: list[str] | None) -> str:
    """The command line that runs `module` with `argv` (None: this process's arguments)."""
    return shlex.join(["python", "-m", module, *(sys.argv[1:] if argv is None else argv)])


# The code this process runs: the checkout's commit and the state of the fill code's files
# when this module was first imported, before a benchmark or a fit did anything. A commit
# made while a long run goes on is not the code that ran, so `write_report` stamps these.
STARTED_AT = commit()
STARTED_FILES = fill_code_state()
CHANGED_WHILE_RUNNING = "changed while it ran"


def write_report(results: dict[str, Any], path: Path) -> Path:
    """Write `results` as JSON to `path` and print the path. Unless `results` says, the
    file records the commit that made it (`STARTED_AT`: the commit when the run started),
    the fill code's hash (`CHANGED_WHILE_RUNNING` where its files changed since the start)
    and the machine (`host`)."""
    results = dict(results)
    results.setdefault("commit", STARTED_AT)
    if "fill_code" not in results:
        same = fill_code_state() == STARTED_FILES
        results["fill_code"] = fill_code() if same else CHANGED_WHILE_RUNNING
    results.setdefault("machine", host())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {path}")
    return path
