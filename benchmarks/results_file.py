"""Where benchmark scripts write their figures: benchmarks/results/<kind>_<model>.json."""

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

RESULTS = Path(__file__).resolve().parent / "results"


def model_name(model: Path | None) -> str:
    """A short name for a model directory: "shipped" for the default (model/weights),
    the run's name for runs/<name>/export."""
    if model is None:
        return "shipped"
    path = Path(model).resolve()
    if path.name == "weights" and path.parent.name == "model":
        return "shipped"
    return path.parent.name if path.name == "export" else path.name


def machine() -> str:
    """The machine line of a study's results: the platform and the dtype asked for."""
    return f"{platform.platform()}, {os.environ.get('INFILL_DTYPE', 'auto')}"


# the variables that hold the kernels below what the CPU has (MKL, ATen, oneDNN, fbgemm)
ISA_CAPS = (
    "MKL_ENABLE_INSTRUCTIONS",
    "ATEN_CPU_CAPABILITY",
    "ONEDNN_MAX_CPU_ISA",
    "FBGEMM_ENABLE_INSTRUCTIONS",
)
# what decides a fill: a run made with other files here is not the same run
FILL_CODE = ("infill/core", "model")


def fill_code(also: tuple[str, ...] = ()) -> str:
    """A hash of the files that decide a fill (the engine, the model's code and weights;
    not the training code), and of the files `also` names (relative to the checkout):
    runs with the same hash are runs of the same fills."""
    root = RESULTS.parent.parent
    digest = hashlib.sha256()
    for top in (*FILL_CODE, *also):
        found = [root / top] if (root / top).is_file() else sorted((root / top).rglob("*"))
        for path in found:
            rel = path.relative_to(root).as_posix()
            if not path.is_file() or "training" in rel or "__pycache__" in rel:
                continue
            digest.update(rel.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def commit() -> str:
    """The checkout's commit, `-dirty` after it where tracked files differ from it (results
    files aside: a run of several benchmarks writes them as it goes); or "unknown" outside
    a git checkout."""
    root = RESULTS.parent.parent

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, check=False
        )
        return done.stdout.strip() if done.returncode == 0 else ""

    head = git("rev-parse", "HEAD")
    if not head:
        return "unknown"
    results = RESULTS.relative_to(root).as_posix()
    changed = git("status", "--porcelain", "--untracked-files=no", "--", ".", f":!{results}")
    return head + ("-dirty" if changed else "")


def run_command() -> str | None:
    """The command that runs this process, where it is a benchmark run as a module
    (`python -m benchmarks.<name> ...`); None otherwise (a test calling `main`)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    name = getattr(spec, "name", None)
    if not name or not name.startswith("benchmarks."):
        return None
    return shlex.join(["python", "-m", name, *sys.argv[1:]])


def cpu() -> str:
    """The CPU's model name (/proc/cpuinfo), or the platform's processor."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def write_results(
    kind: str, model: Path | None, results: dict[str, Any], out: Path | None = None
) -> Path:
    """Write `results` as JSON (default path from kind and model), print the path. The
    file records the commit that made it and, unless `results` says, the command that ran
    it (a benchmark run as a module: `run_command`) and the machine: its CPU, cores, the
    dtype and threads asked for, and the kernels' instruction sets where they were held
    below the CPU's (`ISA_CAPS`: "AVX2 kernels" on a faster CPU)."""
    results = dict(results)
    if "command" not in results and (command := run_command()) is not None:
        results["command"] = command
    results.setdefault("commit", commit())
    results.setdefault("fill_code", fill_code())
    capped = "".join(f", {k}={os.environ[k]}" for k in ISA_CAPS if k in os.environ)
    results.setdefault(
        "machine",
        f"{cpu()}, {os.cpu_count()} cores, INFILL_DTYPE={os.environ.get('INFILL_DTYPE', 'auto')}"
        f", INFILL_THREADS={os.environ.get('INFILL_THREADS', 'auto')}{capped}",
    )
    path = out or RESULTS / f"{kind}_{model_name(model)}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {path}")
    return path
