"""torch's OpenMP threads spin briefly (model/openmp.py): the setting must be in the
environment before torch is first imported, by every entry point that loads a model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from diffusion_infill.model.openmp import SERVING_SPINCOUNT, SPINCOUNT, serving_spin, settle_spin

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


def _probe(script: str, arg: str, cwd: Path, **env: str) -> list[str]:
    """The lines a probe script prints, run with `arg` in a fresh interpreter whose
    environment has no spin setting but `env`'s."""
    base = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    out = subprocess.run(
        [sys.executable, "-c", script, arg],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**base, **env},
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    return out.stdout.strip().splitlines()


def _spin_when_torch_loads(module: str, **env: str) -> dict[str, str | None]:
    return json.loads(_probe(PROBE, module, ROOT, **env)[-1])


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


def test_a_spin_of_its_own_is_replaced_and_a_users_kept() -> None:
    env = {"GOMP_SPINCOUNT": SPINCOUNT}  # what a parent process that loaded torch set
    settle_spin(env, SERVING_SPINCOUNT)
    assert env == {"GOMP_SPINCOUNT": SERVING_SPINCOUNT}
    settle_spin(env)
    assert env == {"GOMP_SPINCOUNT": SPINCOUNT}
    env = {"GOMP_SPINCOUNT": "50"}
    settle_spin(env, SERVING_SPINCOUNT)
    assert env == {"GOMP_SPINCOUNT": "50"}


def test_the_serving_spin_comes_too_late_once_torch_is_loaded(monkeypatch) -> None:
    env = {"GOMP_SPINCOUNT": SPINCOUNT}
    monkeypatch.setitem(sys.modules, "torch", sys.modules.get("torch") or object())
    serving_spin(env)
    assert env == {"GOMP_SPINCOUNT": SPINCOUNT}


# Prints the spin settings at the moment `torch` is first imported, then runs CODE.
RUN_PROBE = """
import importlib.abc, json, os, sys
class Watch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torch" and not getattr(self, "seen", False):
            self.seen = True
            print(json.dumps(os.environ.get("GOMP_SPINCOUNT")), flush=True)
        return None
sys.meta_path.insert(0, Watch())
exec(sys.argv[1])
"""


def _spin_when_it_runs(code: str, tmp_path: Path) -> str | None:
    # GOMP_SPINCOUNT as a test or a training run leaves it to the processes it starts
    return json.loads(_probe(RUN_PROBE, code, tmp_path, GOMP_SPINCOUNT=SPINCOUNT)[0])


@pytest.mark.slow
def test_the_command_and_the_worker_spin_longer(tiny_model_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def f(x):\n    return <mask>\n")
    command = (
        "from diffusion_infill.infill.cli import run; "
        f"sys.argv = ['infill', 'fill', '--model', {str(tiny_model_dir)!r}, 'a.py']; run()"
    )
    assert _spin_when_it_runs(command, tmp_path) == SERVING_SPINCOUNT
    worker = (
        "from diffusion_infill.infill.serve.worker import main; "
        f"main(['--socket', 'w.sock', '--model', {str(tiny_model_dir)!r}, '--exit-with-stdin'])"
    )
    assert _spin_when_it_runs(worker, tmp_path) == SERVING_SPINCOUNT
