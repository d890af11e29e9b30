"""Shared fixtures: a tiny tokenizer and a tiny random ModernBERT saved as a HF directory,
so the real loading and inference path runs in seconds without the shipped weights; and
a runner for the benchmark scripts."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The command uses a worker running on the default socket unasked; the tests' commands
# must not meet the one a developer may have running (tests/test_client.py turns it on).
os.environ["INFILL_WORKER"] = "off"

SOURCES = [
    "def add(a, b):\n    return a + b\n",
    "class Point:\n\tdef __init__(self, x):\n\t\tself.x = x  \n",
    "import os\n\n\nPATH = os.path.join('a', 'b')\nprint('héllo wörld 😀 中文')\n",
    "for i in range(10):\n    if i % 2 == 0:\n        continue\n    total += i\r\n",
] * 20


@pytest.fixture(scope="session")
def modules_corpus(tmp_path_factory) -> Path:
    """A test split of this repository's own modules (whole files, long enough for the
    held-out line windows of the benchmark scripts)."""
    folder = tmp_path_factory.mktemp("modules_corpus")
    with (folder / "test.jsonl").open("w") as fh:
        for name in ("ends.py", "diff.py", "spans.py"):
            fh.write(json.dumps({"text": (ROOT / "infill" / "core" / name).read_text()}) + "\n")
    return folder


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    for split in ("train", "valid", "test"):
        with (root / f"{split}.jsonl").open("w") as fh:
            for i, text in enumerate(SOURCES):
                fh.write(json.dumps({"unit": f"u{i % 3}", "path": f"f{i}.py", "text": text}) + "\n")
    return root


@pytest.fixture(scope="session")
def tok_dir(corpus: Path, tmp_path_factory) -> Path:
    from diffusion_infill.model.training import tokenizer

    out = tmp_path_factory.mktemp("tok")
    tokenizer.save_for_transformers(tokenizer.train(corpus, vocab_size=400), out)
    return out


@pytest.fixture(scope="session")
def tiny_model_dir(tok_dir: Path, tmp_path_factory) -> Path:
    """A random `tiny` ModernBERT with the test tokenizer, as the trainer exports it."""
    import torch
    from tokenizers import Tokenizer
    from transformers import ModernBertForMaskedLM

    from diffusion_infill.model.training.config import PRESETS, modernbert_config
    from diffusion_infill.model.training.noising import Vocab
    from diffusion_infill.model.training.tokenizer import save_for_transformers

    out = tmp_path_factory.mktemp("tiny_model")
    tok = Tokenizer.from_file(str(tok_dir / "tokenizer.json"))
    v = Vocab.of(tok)
    torch.manual_seed(0)
    model = ModernBertForMaskedLM(modernbert_config(PRESETS["tiny"], v.size, v.pad, v.mask, v.eos))
    model.save_pretrained(out)
    save_for_transformers(tok, out)
    return out


def _run_module(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "INFILL_THREADS": "1", "INFILL_DTYPE": "fp32"},
    )


@pytest.fixture(scope="session")
def run_module() -> Callable[..., subprocess.CompletedProcess]:
    """`run_module(module, *args)`: `python -m MODULE ARGS` from the repository root, on
    one CPU thread in fp32, its output captured as text."""
    return _run_module


@pytest.fixture(scope="session")
def run_benchmark() -> Callable[..., subprocess.CompletedProcess]:
    """`run_benchmark(name, *args)`: `run_module` of `benchmarks.<name>`."""

    def run(name: str, *args: str) -> subprocess.CompletedProcess:
        return _run_module(f"benchmarks.{name}", *args)

    return run


@pytest.fixture
def module_main(capsys) -> Callable[..., tuple[int, str]]:
    """`module_main(module, *args)`: `MODULE.main(ARGS)` in this process, for what a
    command refuses before it works (bad arguments, missing or bad inputs): its exit status
    and stderr as `run_module` would see them (`SystemExit("message")`: 1, the message on
    stderr), without a new interpreter's seconds of imports."""

    def run(module: str, *args: str) -> tuple[int, str]:
        main = importlib.import_module(module).main
        code: int | str | None = 0
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code
        err = capsys.readouterr().err
        if isinstance(code, str):
            return 1, f"{err}{code}\n"
        return code or 0, err

    return run


@pytest.fixture
def benchmark_main(module_main) -> Callable[..., tuple[int, str]]:
    """`benchmark_main(name, *args)`: `module_main` of `benchmarks.<name>`."""

    def run(name: str, *args: str) -> tuple[int, str]:
        return module_main(f"benchmarks.{name}", *args)

    return run
