"""The README's set-up commands are the ones CI runs; the docs' links resolve."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Set-up: two commands", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.+?)\n```", section)


def test_readme_has_exactly_two_setup_commands() -> None:
    main_job, tests = _commands()
    assert "infill fill examples/holes.py" in main_job
    assert tests.endswith("python -m pytest -q -n 2 --dist worksteal")


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    _, tests = _commands()
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert tests in ci


def test_bundled_example_has_holes() -> None:
    assert "<mask>" in (ROOT / "examples" / "holes.py").read_text()


def test_relative_links_in_the_docs_resolve() -> None:
    """A figure lives in one results file and the docs link to it: every relative link
    of the README, the changelog, docs/ (its logs too) and the model card names a file
    that exists."""
    pages = [
        ROOT / "README.md",
        ROOT / "CHANGELOG.md",
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "docs" / "log").glob("*.md"),
        ROOT / "model" / "weights" / "MODEL_CARD.md",
    ]
    broken = []
    for page in pages:
        for m in re.finditer(r"\]\(([^)#\s]+)(#[^)]*)?\)", page.read_text()):
            target = m.group(1)
            if not re.match(r"[a-z]+:", target) and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken


def test_the_architecture_describes_the_present_in_at_most_600_lines():
    # dated entries belong in docs/log/architecture.md, not in the reference
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    assert len(text.splitlines()) <= 600
    assert not re.search(r"\(20\d\d-\d\d-\d\d[;:)]", text), "a dated entry: move it to docs/log/"
