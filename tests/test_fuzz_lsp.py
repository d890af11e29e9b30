"""A short seeded run of the LSP fuzzer (benchmarks/fuzz_lsp.py; the long run is a
benchmark): random sessions over stdio against the fake worker, every encoding, every
answer checked. About a minute."""

from __future__ import annotations

import json

import pytest

from benchmarks import fuzz_lsp


@pytest.mark.slow
def test_a_short_seeded_fuzz_run_finds_nothing(tmp_path):
    out = tmp_path / "fuzz.json"
    status = fuzz_lsp.main(
        [
            "--sessions",
            "48",
            "--sessions-per-server",
            "16",
            "--seed",
            "7",
            "--steps",
            "16",
            "--deadline",
            "20",
            "--out",
            str(out),
        ]
    )
    figures = json.loads(out.read_text())
    assert figures["examples"] == [] and status == 0, figures
    assert figures["sessions"] == 48 and figures["runs"] == 3
    assert figures["unanswered"] == 0 and figures["crashes"] == 0
    assert figures["answered"] == figures["requests"] > 200
    assert figures["edits_checked"] > 20
