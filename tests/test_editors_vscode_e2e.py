"""End to end with a real VS Code: the extension's .vsix installed into code-server, its
workbench driven headless by Chromium (playwright-core), "Infill: Fill holes" run from the
Command Palette on a file opened from the Explorer (editors/vscode/e2e/run.mjs). The
language server is the production one, on the deterministic fake worker
(`infill.workerAddress`), so the filled text is exact. The hole sits after an emoji and
CJK on its line: VS Code's positions are UTF-16.

Needs `editors/vscode/e2e/setup.sh` (Chromium, code-server 4.100.3, playwright-core; a few
minutes, once) and skips without it. The screenshot lands in
editors/vscode/e2e/screenshot.png."""

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

EXT = ROOT / "editors" / "vscode"
E2E = EXT / "e2e"
DEPS = E2E / ".deps" / "node_modules"
CHROMIUM = os.environ.get("E2E_CHROMIUM", "/usr/bin/chromium")
NODE = shutil.which("node")

TEXT = 'def add(a, b):\n    label = "😀中文" + <mask>  # 🙂\n    total = <mask>\n    return total\n'
FILLED = (
    "def add(a, b):\n    label = \"😀中文\" + 'ok'  # 🙂\n    total = a + b\n    return total\n"
)


def missing() -> str | None:
    if NODE is None or shutil.which("npm") is None:
        return "node/npm are not on PATH"
    if not (EXT / "node_modules").is_dir():
        return f"{EXT / 'node_modules'} is missing (npm ci)"
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM}"
    for what in ("code-server", "playwright-core"):
        if not (DEPS / what / "package.json").exists():
            return f"{what} is not installed in {DEPS.parent}"
    return None


SKIP = missing()


@pytest.mark.skipif(
    SKIP is not None,
    reason=f"{SKIP}: run editors/vscode/e2e/setup.sh first "
    "(apt Chromium, code-server, playwright-core)",
)
def test_vscode_fills_holes_in_a_real_workbench(tmp_path):
    assert NODE is not None
    build = subprocess.run(
        ["npm", "run", "package"],
        cwd=EXT,
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "npm_config_update_notifier": "false"},
    )
    vsix = EXT / "infill.vsix"
    assert build.returncode == 0 and vsix.exists(), build.stdout[-3000:] + build.stderr[-3000:]
    out = tmp_path / "out"
    with fake_worker() as address:
        env = {
            **os.environ,
            "E2E_VSIX": str(vsix),
            "E2E_PYTHON": sys.executable,
            "E2E_WORKER": address,
            "E2E_OUT": str(out),
            "E2E_TEXT": json.dumps(TEXT),
            "E2E_PYTHONPATH": str(ROOT),
            "E2E_CHROMIUM": CHROMIUM,
        }
        proc = subprocess.run(
            [NODE, str(E2E / "run.mjs")],
            env=env,
            capture_output=True,
            text=True,
            timeout=420,
            stdin=subprocess.DEVNULL,
        )
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else {}
    for name in ("before.png", "screenshot.png", "error.png"):
        if (out / name).exists():
            shutil.copyfile(out / name, E2E / name)
    assert proc.returncode == 0 and report.get("error") is None, (
        report.get("error"),
        report.get("serverLog"),
        proc.stdout[-2000:],
        proc.stderr[-2000:],
        f"screenshot: {E2E / 'error.png'}",
    )
    print(f"timings (s): {report['timings']}\nscreenshot: {E2E / 'screenshot.png'}")
    assert report["text"] == FILLED
    assert "infill: " in report["statusBar"]  # the worker's model and device
    assert report["progressClosed"], "the progress notification stayed after the fill"
