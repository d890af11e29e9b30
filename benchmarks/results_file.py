"""Where benchmark scripts write their figures: benchmarks/results/<kind>_<model>.json."""

from __future__ import annotations

import os
import platform
import shlex
import sys
from pathlib import Path
from typing import Any

from diffusion_infill.model.training.provenance import (
    REPORTS,
    commit,
    cpu,
    described_cpu,
    fill_code,
    model_name,
    write_report,
)

# the stamp (commit, fill code, machine) is model/training/provenance.py's, which the fits
# of the tables that ship write their reports with too
__all__ = [
    "RESULTS",
    "commit",
    "cpu",
    "fill_code",
    "machine",
    "model_name",
    "run_command",
    "write_results",
]

RESULTS = REPORTS  # benchmarks/results/


def machine() -> str:
    """The machine line of a study's results: the platform, the CPU and its instructions,
    and the dtype asked for."""
    return f"{platform.platform()}, {described_cpu()}, {os.environ.get('INFILL_DTYPE', 'auto')}"


def run_command() -> str | None:
    """The command that runs this process, where it is a benchmark run as a module
    (`python -m benchmarks.<name> ...`); None otherwise (a test calling `main`)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    name = getattr(spec, "name", None)
    if not name or not name.startswith("benchmarks."):
        return None
    return shlex.join(["python", "-m", name, *sys.argv[1:]])


def write_results(
    kind: str, model: Path | None, results: dict[str, Any], out: Path | None = None
) -> Path:
    """Write `results` as JSON (default path from kind and model), print the path. Unless
    `results` says, the file records the command that ran it (a benchmark run as a module:
    `run_command`), the commit it started from, the fill code's hash and the machine: its CPU,
    cores, the dtype and threads asked for, and the kernels' instruction sets where they
    were held below the CPU's (provenance.py `ISA_CAPS`: "AVX2 kernels" on a faster CPU)."""
    results = dict(results)
    if "command" not in results and (command := run_command()) is not None:
        results["command"] = command
    return write_report(results, out or RESULTS / f"{kind}_{model_name(model)}.json")
