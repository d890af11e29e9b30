"""The `infill` command (its console script, `run`) in a process of its own, on the
deterministic fake model, for tests that signal it, close its stdout or fill its file system.

    python tests/cli_fake_main.py fill a.py [...]

Environment: INFILL_FAKE_READY=PATH makes the fake touch PATH on its first forward pass
and then take INFILL_FAKE_DELAY seconds per pass (default 0), so a test can signal the
process while the model runs.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fakes import TargetDenoiser  # noqa: E402

from diffusion_infill.infill.cli import run  # noqa: E402
from diffusion_infill.model import loading  # noqa: E402


class SlowFake(TargetDenoiser):
    def logits(self, canvases, positions, hints=None):  # noqa: ANN001, ANN201
        ready = os.environ.get("INFILL_FAKE_READY")
        if ready:
            Path(ready).touch()
            time.sleep(float(os.environ.get("INFILL_FAKE_DELAY", "0")))
        return super().logits(canvases, positions, hints)


def _load(model_dir=None, **kw):  # noqa: ANN001, ANN202, ANN003
    return SlowFake({"= ": "42", "return ": "x + 1"}, confidence=0.99)


loading.load_denoiser = _load

if __name__ == "__main__":
    run()  # as the console script: exits without tearing the interpreter down
