"""The real inference path: a tiny random ModernBERT behind HFDenoiser, through the public
entry points (fill_text, fill_spans, repair, the `infill` command). Random weights give
random code; these tests check the mechanics, not the quality."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from diffusion_infill import infill
from diffusion_infill.infill.core.repair import fix_text, score_text
from diffusion_infill.model.loading import load_denoiser

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
TEXT = "def area(w, h):\n\t# 😀 中文  \r\n    return <mask> * h\n\nx = <mask:3>\n"


@pytest.fixture(scope="module")
def den(tiny_model_dir: Path) -> infill.Denoiser:
    return load_denoiser(tiny_model_dir)


@pytest.mark.parametrize("order", sorted(infill.STRATEGIES))
def test_every_order_fills_only_the_holes(den, order: str) -> None:
    """An untrained model's byte tokens may spell invalid UTF-8 (a sampling order draws
    them, and which dtype `auto` times fastest changes the draw): the engine then declines
    the fill with a clear error and changes nothing (infill/core/fills.py `valid_text`).
    So each order gets six seeds; every outcome is a fill of the holes alone or that
    refusal, and at least one is a fill."""
    filled = 0
    for seed in range(6):
        try:
            result = infill.fill_text(
                TEXT, denoiser=den, order=order, max_span_tokens=24, seed=seed
            )
        except infill.DenoiserError as exc:
            assert "are not valid UTF-8; nothing was changed" in str(exc)
            continue
        filled += 1
        assert "<mask" not in result.text
        assert result.text.startswith("def area(w, h):\n\t# 😀 中文  \r\n    return ")
        assert result.text.endswith("\n")
        assert " * h\n\nx = " in result.text
        assert infill.apply_edits(TEXT, result.edits) == result.text
        assert result.stats.nfe >= 1 and result.stats.spans == 2
    assert filled


def test_cached_context_passes_give_a_complete_fill(den) -> None:
    result = infill.fill_text(TEXT, denoiser=den, cache_refresh=3, max_span_tokens=24)
    assert "<mask" not in result.text
    assert " * h\n\nx = " in result.text


def test_exact_length_fill_has_exactly_the_given_tokens(den) -> None:
    text = "a = 1\nb = 2\n"
    result = infill.fill_spans(text, [infill.Span(4, 5, length=3, exact=True)], denoiser=den)
    (fill,) = result.fills
    assert fill.tokens == 3
    assert result.text.startswith("a = ") and result.text.endswith("\nb = 2\n")


def test_scores_cover_every_token_of_the_range(den) -> None:
    text = "x = 1\ny = x + 2  # 😀\ns = 'é中文🙂x'  # \ufffd kept\n"
    scores = score_text(text, denoiser=den, language=None)  # every token, comments too
    assert all(text[s.start : s.end] == s.text for s in scores)
    assert "".join(s.text for s in scores) == text
    code = score_text(text, denoiser=den)  # Python: comments read, never scored
    assert {(s.start, s.end) for s in code} < {(s.start, s.end) for s in scores}
    assert not any("#" in s.text or "😀" in s.text for s in code)
    assert all(0.0 <= s.suspicion <= 1.0 and 0.0 <= s.p_likely <= 1.0 for s in scores)
    assert all(s.likely != s.text for s in scores)  # the likeliest *other* token
    result, _ = fix_text(
        text, denoiser=den, start=6, end=len(text), min_suspicion=0.0, min_likely=0.0
    )
    assert result is not None
    assert all(e.start >= 6 for e in result.edits)
    assert result.text.startswith("x = 1\n")


def test_cli_fills_a_file_with_a_model_directory(tiny_model_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "holes.py"
    path.write_text("def f(a):\n    return <mask>\n")
    # --no-checks: the untrained tiny model writes what the checks would leave out
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "diffusion_infill.infill.cli",
            "fill",
            str(path),
            "--json",
            "--no-checks",
            "--model",
            str(tiny_model_dir),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["text"].startswith("def f(a):\n    return ")
    assert "<mask>" not in out["text"]


@pytest.mark.skipif(
    not any((ROOT / "model" / "weights").glob("model*.safetensors")), reason="no shipped model yet"
)  # bf16, or packed int8 (training/packing.py)
def test_readme_main_job_runs_with_the_shipped_model() -> None:
    proc = subprocess.run(
        ["infill", "fill", "examples/holes.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "3 spans" in proc.stderr
    # what the README says of it: all three holes filled, the first right
    assert "left as it was:" not in proc.stderr, proc.stderr
    added = [line for line in proc.stdout.splitlines() if line.startswith("+ ")]
    assert len(added) == 3 and not any("<mask" in line for line in added), proc.stdout
    assert '+        return [line.rstrip("\\n") for line in fh]' in proc.stdout, proc.stdout


def test_cli_fix_repairs_only_inside_the_given_lines(
    tiny_model_dir: Path, tmp_path: Path, capsys
) -> None:
    from diffusion_infill.infill.cli import main

    path = tmp_path / "bug.py"
    source = "def f(a):\n    b = a + 1\n    return b\n"
    path.write_text(source)
    anything = ["--min-suspicion", "0", "--min-likely", "0"]  # the model's worst token
    code = main(
        ["fix", str(path), "--lines", "2:2", *anything, "--json", "--model", str(tiny_model_dir)]
    )
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert {s["start"] for s in out["scores"]} <= set(range(10, 24))
    assert all(e["start"] >= 10 and e["end"] <= 24 for e in out.get("edits", []))
    code = main(
        [
            "fix",
            str(path),
            "--lines",
            "2:2",
            *anything,
            "--in-place",
            "--model",
            str(tiny_model_dir),
        ]
    )
    assert code == 0
    after = path.read_text()
    assert after.startswith("def f(a):\n") and after.endswith("    return b\n")
    assert "most suspicious" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "code", "needle"),
    [
        (["--lines", "3:1"], 2, "--lines must be A:B"),
        (["--lines", "x"], 2, "--lines must be A:B"),
        (["--max-fixes", "0"], 2, "--max-fixes must be >= 1"),
        (["--min-suspicion", "1.5"], 2, "--min-suspicion must be in 0..1"),
        (["--min-likely", "-0.5"], 2, "--min-likely must be in 0..1"),
        (["--lines", "1:9"], 1, "the file has 3 lines"),
    ],
)
def test_cli_fix_rejects_bad_options(
    tiny_model_dir: Path, tmp_path: Path, capsys, argv: list[str], code: int, needle: str
) -> None:
    from diffusion_infill.infill.cli import main

    path = tmp_path / "bug.py"
    path.write_text("a = 1\nb = 2\nc = 3\n")
    assert main(["fix", str(path), *argv, "--model", str(tiny_model_dir)]) == code
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_cli_fix_of_clean_code_says_nothing_suspicious(
    tiny_model_dir: Path, tmp_path: Path, capsys
) -> None:
    # At the calibrated default the tiny model is never confident enough to edit.
    from diffusion_infill.infill.cli import main

    path = tmp_path / "clean.py"
    source = "def f(a):\n    b = a + 1\n    return b\n"
    path.write_text(source)
    assert main(["fix", str(path), "--in-place", "--model", str(tiny_model_dir)]) == 0
    assert path.read_text() == source
    assert "nothing suspicious" in capsys.readouterr().err
