"""torch's OpenMP threads spin briefly (model/openmp.py): the setting must be in the
environment before torch is first imported, by every entry point that loads a model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from diffusion_infill.model.openmp import SPINCOUNT, settle_spin

ROOT = Path(__file__).resolve().parents[1]

# Records the spin settings at the moment `torch` is first imported, then imports MODULE.
PROBE = """
import importlib, importlib.abc, json, os, sys
seen = {}
class Watch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torch" and not seen:
            seen.update({k: os.environ.get(k) for k in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")})
        return None
sys.meta_path.insert(0, Watch())
importlib.import_module(sys.argv[1])
import torch  # noqa: F401  (a module that never imports torch still gets a reading)
print(json.dumps(seen))
"""


def _spin_when_torch_loads(module: str, **env: str) -> dict[str, str | None]:
    base = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, module],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
        env={**base, **env},
        timeout=120,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize(
    "module",
    [
        "diffusion_infill.infill.serve.worker",
        "diffusion_infill.infill.cli",
        "diffusion_infill.model.training.train",
        "diffusion_infill.model.loading",
        "benchmarks.bench_train",
    ],
)
def test_entry_points_set_the_spin_before_torch_loads(module: str) -> None:
    assert _spin_when_torch_loads(module)["GOMP_SPINCOUNT"] == SPINCOUNT


@pytest.mark.slow
def test_a_users_own_setting_is_left_alone() -> None:
    worker = "diffusion_infill.infill.serve.worker"
    assert _spin_when_torch_loads(worker, GOMP_SPINCOUNT="50") == {
        "GOMP_SPINCOUNT": "50",
        "OMP_WAIT_POLICY": None,
    }
    assert _spin_when_torch_loads(worker, OMP_WAIT_POLICY="PASSIVE") == {
        "GOMP_SPINCOUNT": None,
        "OMP_WAIT_POLICY": "PASSIVE",
    }


def test_settle_spin_only_fills_a_gap() -> None:
    env: dict[str, str] = {}
    settle_spin(env)
    assert env == {"GOMP_SPINCOUNT": SPINCOUNT}
    env = {"OMP_WAIT_POLICY": "ACTIVE"}
    settle_spin(env)
    assert env == {"OMP_WAIT_POLICY": "ACTIVE"}
