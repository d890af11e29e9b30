"""model/training/train_on_gpu.sh, the script a GPU machine runs, dry-run on the CPU with the
tiny model: it grows the packed init it is sent (GROW), trains from it, and brings the export
back as tar parts, packed when it is large, that this side can load and ship; later calls
feed the running run more of the corpus.

The runs are budgeted in steps, not minutes, and every wait is for an event (the run's
end, a line in its log, an export) with a deadline that only catches a hang, so a slow or
busy machine takes longer but gets the same run."""

from __future__ import annotations

import contextlib
import json
import lzma
import os
import shutil
import signal
import subprocess
import tarfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from diffusion_infill.model.loading import load_denoiser
from diffusion_infill.model.training import packing

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
HANG = 600  # seconds after which a step that has not come is taken for a hang


def _checkout(corpus: Path, tmp_path: Path) -> Path:
    """The checkout as it lands on the device machine: model/ and .gpu/ with the corpus's
    training rows xz-compressed and its validation split."""
    checkout = tmp_path / "checkout"
    (checkout / ".gpu").mkdir(parents=True)
    (checkout / "model").symlink_to(ROOT / "model")
    (checkout / ".gpu" / "train.jsonl.xz").write_bytes(
        lzma.compress((corpus / "train.jsonl").read_bytes())
    )
    shutil.copy(corpus / "valid.jsonl", checkout / ".gpu" / "valid.jsonl")
    return checkout


def _script(checkout: Path, env: dict[str, str], *args: str) -> str:
    """model/training/train_on_gpu.sh run with `args` in `checkout`: its output, after
    asserting that it succeeded."""
    proc = subprocess.run(
        ["bash", str(ROOT / "model" / "training" / "train_on_gpu.sh"), *args],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc.stdout


def test_a_gpu_run_grows_its_init_trains_and_returns_a_packed_export(
    corpus: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    checkout = _checkout(corpus, tmp_path)
    init = tmp_path / "init"
    shutil.copytree(tiny_model_dir, init)
    (init / "training.json").write_text(json.dumps({"tokens_total": 5000, "history": []}))
    packing.pack(init, checkout / ".gpu" / "init")
    layers = json.loads((init / "config.json").read_text())["num_hidden_layers"]

    machine, out = tmp_path / "machine", tmp_path / "out"
    env = dict(
        os.environ,
        GPU_RUN_TMP=str(machine),
        GPU_RUN_COMPILE="0",
        PACK_OVER="0",
        GROW="2",
        OUT=str(out),
    )
    stdout = _script(
        checkout,
        env,
        # no time budget (MINUTES 0): 20 steps end the run; the deadline only catches a hang
        *("run", "0", str(HANG - 60), "--preset", "tiny", "--init-from", str(machine / "init")),
        *("--batch-size", "4", "--seq-len", "64", "--dtype", "fp32", "--max-steps", "20"),
        *("--eval-every", "1000"),
    )

    parts = sorted(out.glob("export.tar.*"))
    assert parts, stdout[-2000:]
    joined = tmp_path / "export.tar"
    joined.write_bytes(b"".join(p.read_bytes() for p in parts))
    with tarfile.open(joined) as tar:
        tar.extractall(tmp_path / "back", filter="data")
    export = tmp_path / "back" / "export"
    assert (export / packing.PACKED).is_file() and not (export / packing.WEIGHTS).exists()
    config = json.loads((export / "config.json").read_text())
    assert config["num_hidden_layers"] == 2 * layers
    record = json.loads((export / "training.json").read_text())
    assert record["tokens_total"] == 5000 + record["tokens"]
    assert record["grown"]["layers"] == [layers, 2 * layers]
    den = load_denoiser(export, device="cpu", dtype="fp32")
    (logits,) = den.logits([den.encode("x = 1\n") + [den.special.mask]], [[0]])
    assert logits.shape[0] == 1


def _until(what: str, ready: Callable[[], bool], alive: Callable[[], bool]) -> None:
    """Return once `ready()`; fail if the run ends first or HANG seconds pass."""
    deadline = time.monotonic() + HANG
    while not ready():
        assert alive(), f"the run ended before {what}"
        assert time.monotonic() < deadline, f"no {what} in {HANG} s"
        time.sleep(0.1)  # a polling interval, not a wait for the event


def _parts_exported(export: Path) -> list[str]:
    """The --more-corpus parts the run's latest export lists (none while it is written)."""
    try:
        record = json.loads((export / "training.json").read_text())
    except (OSError, ValueError):
        return []
    return list((record.get("more_corpus") or {}).get("parts", []))


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Path]:
    """The machine's folder (GPU_RUN_TMP); a run started there is ended afterwards."""
    machine = tmp_path / "machine"
    yield machine
    pid_file = machine / "run.pid"
    if pid_file.exists():
        pid = int(pid_file.read_text())
        with contextlib.suppress(ProcessLookupError):  # the run's own group (setsid)
            os.killpg(pid, signal.SIGTERM)


def test_each_call_may_feed_the_running_run_another_part_of_the_corpus(
    corpus: Path, tok_dir: Path, tmp_path: Path, running: Path
) -> None:
    # A run started with --more-corpus and no end in sight (a step budget it will not
    # reach); two later calls bring a part each in .gpu2/ (the carry replaces it), the
    # second once the first has joined: both join what the run trains on, in order.
    checkout = _checkout(corpus, tmp_path)
    shutil.copy(tok_dir / "tokenizer.json", checkout / ".gpu" / "tokenizer.json")
    machine = running
    env = dict(os.environ, GPU_RUN_TMP=str(machine), GPU_RUN_COMPILE="0", OUT=str(tmp_path / "out"))
    log = machine / "run.log"

    def call(*args: str) -> str:
        return _script(checkout, env, *args)

    def alive() -> bool:
        try:
            os.kill(int((machine / "run.pid").read_text()), 0)
        except ProcessLookupError:
            return False
        return True

    train_args = ["--preset", "tiny", "--batch-size", "4", "--seq-len", "64", "--dtype", "fp32"]
    call(
        *("start", "0", *train_args, "--max-steps", "1000000000", "--eval-every", "5"),
        *("--more-corpus", str(machine / "corpus_more"), "--more-check-seconds", "0"),
    )
    rows = (corpus / "train.jsonl").read_text().splitlines()
    for n, part in enumerate((rows[:2], rows[2:3]), 1):
        (checkout / ".gpu2").mkdir(exist_ok=True)
        (checkout / ".gpu2" / "train.jsonl.xz").write_bytes(
            lzma.compress(("\n".join(part) + "\n").encode())
        )
        out = call("feed", "0")
        assert f"part_{n}.jsonl" in out
        _until(f"part_{n} joining", lambda n=n: f"part_{n}.jsonl" in log.read_text(), alive)
    export = machine / "run" / "export"
    _until("export with both parts", lambda: len(_parts_exported(export)) == 2, alive)
    text = log.read_text()
    assert "2 more training files" in text and "1 more training files" in text
    assert _parts_exported(export) == ["part_1", "part_2"]
