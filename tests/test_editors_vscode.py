"""The VS Code extension (editors/vscode): it compiles, and its unit tests pass (`npm test`:
node's test runner on the modules that need no VS Code: settings mapping, status text,
code action choice, live view layout). The extension's settings are checked against the
server's own (lsp/settings.py), so the two lists cannot drift apart.

Running the extension inside a real VS Code (code-server) is not done here."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from diffusion_infill.lsp.settings import KEYS

EXT = Path(__file__).resolve().parent.parent / "editors" / "vscode"
NPM = shutil.which("npm")
CLIENT_ONLY = {"pythonPath", "serverCommand", "languages", "trace.server"}
OFFLINE = ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT", "ENETUNREACH")  # npm's codes


def npm(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    assert NPM is not None
    env = {
        **os.environ,
        "npm_config_audit": "false",
        "npm_config_fund": "false",
        "npm_config_update_notifier": "false",
        "npm_config_yes": "true",
    }
    return subprocess.run(
        [NPM, *args],
        cwd=EXT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.slow
@pytest.mark.skipif(
    NPM is None, reason="npm is not on PATH (Node.js 20+ builds the VS Code extension)"
)
def test_extension_compiles_and_its_unit_tests_pass():
    if not (EXT / "node_modules").is_dir():
        done = npm("ci", timeout=240)
        log = done.stdout + done.stderr
        if done.returncode != 0 and any(code in log for code in OFFLINE):
            pytest.skip("npm ci cannot reach the npm registry: " + log.strip()[-300:])
        assert done.returncode == 0, log[-6000:]
    done = npm("run", "compile", timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    done = npm("test", timeout=120)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    counts = {
        k: int(v)
        for k, v in (
            line[2:].split() for line in out.splitlines() if line.startswith(("# pass ", "# fail "))
        )
    }
    assert counts.get("fail") == 0 and counts.get("pass", 0) >= 10, out[-4000:]


def test_extension_settings_match_the_server():
    manifest = json.loads((EXT / "package.json").read_text(encoding="utf-8"))
    props = manifest["contributes"]["configuration"]["properties"]
    ours = {key.removeprefix("infill."): spec for key, spec in props.items()}
    server = {name for name in ours if name not in CLIENT_ONLY}
    assert server == set(KEYS), "package.json and lsp/settings.py name different settings"
    for name in server:
        field = KEYS[name]
        assert ours[name].get("description") or ours[name].get("markdownDescription"), name
        default = None if field.default is dataclasses.MISSING else field.default
        assert ours[name]["default"] == default, name
