"""The records the build passes along: a source file of a unit, and a unit's archive."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SourceFile:
    unit: str  # split unit: a distribution name or "stdlib/<module>"
    path: str  # path inside the unit, for the record
    text: str


@dataclass
class Source:
    """One unit's archive (or the standard library) as read: what the card records."""

    unit: str
    version: str
    licence: str
    kind: str  # "wheel", "sdist", "deb" or "stdlib"
    kept: str = "yes"
    bundles: str = ""  # a public benchmark the archive ships ("HumanEval: path"), if any
    files: int = 0  # .py files read (before filters)
    tests: int = 0  # of which under a test folder or named test_*.py / *_test.py


def is_test_path(path: str) -> bool:
    """Under a test folder (test/, tests/, testing/, testsuite/, t/) or named as a test."""
    parts = path.split("/")
    name = parts[-1]
    return (
        any(p.lower() in {"test", "tests", "testing", "t", "testsuite"} for p in parts[:-1])
        or name.startswith("test_")
        or name.endswith("_test.py")
    )
