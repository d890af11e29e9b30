"""docs/RESULTS.md is written from the results files, and links every one of them."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import report
from benchmarks.cited import cited

ROOT = Path(__file__).resolve().parent.parent


def test_page_is_written_and_a_malformed_file_is_listed(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    (results / "shapes_tiny_test.json").write_text(
        json.dumps(
            {
                "command": "python -m benchmarks.eval_shapes --n 2",
                "shapes": {"cursor": {"engine_length": {"exact_match": 0.5, "ms_p50": 12.0}}},
            }
        )
    )
    (results / "lsp_broken.json").write_text("{not json")
    out = tmp_path / "docs" / "RESULTS.md"

    assert report.main(["--results", str(results), "--out", str(out)]) == 0

    page = out.read_text()
    assert "## Quality by hole shape" in page
    assert "](../results/shapes_tiny_test.json)" in page
    assert "`python -m benchmarks.eval_shapes --n 2`" in page
    assert "50.0%" in page
    not_understood = page.split("## Files not understood", 1)[1]
    assert "lsp_broken.json" in not_understood


def test_a_file_without_a_command_says_so(tmp_path: Path) -> None:
    (tmp_path / "worker_x.json").write_text(json.dumps({"modes": {"1": {"ms_p50": 3.0}}}))
    page = report.render(tmp_path, tmp_path / "RESULTS.md")
    assert "Command: not recorded in the file." in page
    assert "## Worker throughput" in page


def test_every_results_file_is_linked_from_the_results_page() -> None:
    """Regenerate with `python -m benchmarks.report` after adding a results file."""
    page = (ROOT / "docs" / "RESULTS.md").read_text()
    missing = [
        p.relative_to(report.RESULTS).as_posix()
        for p in report.results_files(report.RESULTS)
        if f"](../benchmarks/results/{p.relative_to(report.RESULTS).as_posix()})" not in page
    ]
    assert not missing, f"run python -m benchmarks.report; not linked: {missing}"


def test_only_the_files_the_docs_cite_get_a_section(tmp_path: Path) -> None:
    root, results = tmp_path, tmp_path / "benchmarks" / "results"
    (results / "headline").mkdir(parents=True)
    for name in ("shapes_now.json", "shapes_then.json", "headline/shapes.json"):
        data = {"commit": "abcdef0123", "shapes": {"cursor": {"exact_match": 0.25}}}
        (results / name).write_text(json.dumps(data))
    (root / "README.md").write_text("See [x](benchmarks/results/shapes_now.json).\n")
    current = cited(results, root)
    assert current == {results / "shapes_now.json", results / "headline" / "shapes.json"}
    page = report.render(results, root / "docs" / "RESULTS.md", current)
    shown, earlier = page.split("## Earlier results", 1)
    assert "### [shapes_now.json]" in shown and "### [headline/shapes.json]" in shown
    assert "shapes_then.json" not in shown
    assert "- [shapes_then.json](../benchmarks/results/shapes_then.json) (abcdef0)" in earlier
