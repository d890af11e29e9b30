"""Where benchmark scripts write their figures: benchmarks/results/<kind>_<model>.json."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def model_name(model: Path | None) -> str:
    """A short name for a model directory: "shipped" for the default (model/weights),
    the run's name for runs/<name>/export."""
    if model is None:
        return "shipped"
    path = Path(model).resolve()
    if path.name == "weights" and path.parent.name == "model":
        return "shipped"
    return path.parent.name if path.name == "export" else path.name


def machine() -> str:
    """The machine line of a study's results: the platform and the dtype asked for."""
    return f"{platform.platform()}, {os.environ.get('INFILL_DTYPE', 'auto')}"


def write_results(
    kind: str, model: Path | None, results: dict[str, Any], out: Path | None = None
) -> Path:
    """Write `results` as JSON (default path from kind and model), print the path."""
    path = out or RESULTS / f"{kind}_{model_name(model)}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {path}")
    return path
