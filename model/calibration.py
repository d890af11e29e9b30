"""The confidence weights beside a model's weights (`confidence.json`): plain data.

A small logistic regression that turns what a decode knows of a fill into the probability
that it is right (infill/core/confidence.py computes the features and applies it). It is
fitted on one network's fills (`python -m diffusion_infill.model.training.fit_confidence`)
and names that network (model/hf_loading.py `network_digest`): beside other weights (a new
checkpoint, a copy packed to int8 from other weights) it would say the wrong thing, so the
loader does not use it and says so. A directory without the file has no confidence.

    {"format": 1, "network": "...", "features": [...], "mean": [...], "scale": [...],
     "weights": [...], "bias": 0.0, "fit": {...}}
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

CALIBRATION = "confidence.json"
FORMAT = 1


@dataclass(frozen=True)
class Calibration:
    """The fitted weights: p = sigmoid(bias + weights . (x - mean) / scale), x the named
    features of a fill."""

    network: str  # the network the weights were fitted on (`network_digest`)
    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float
    fit: dict[str, Any] = field(default_factory=dict)  # how it was fitted (for people)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "network": self.network,
            "features": list(self.features),
            "mean": list(self.mean),
            "scale": list(self.scale),
            "weights": list(self.weights),
            "bias": self.bias,
            "fit": self.fit,
        }


def parse_calibration(data: Any, where: str) -> Calibration:
    """A Calibration from parsed JSON; ValueError naming `where` and what is wrong."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{where} is not confidence weights of format {FORMAT}")
    names = data.get("features")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ValueError(f"{where}: `features` must be a list of names")
    numbers = {}
    for key in ("mean", "scale", "weights"):
        values = data.get(key)
        if (
            not isinstance(values, list)
            or len(values) != len(names)
            or not all(_finite(v) for v in values)
        ):
            raise ValueError(f"{where}: `{key}` must be {len(names)} finite numbers")
        numbers[key] = tuple(float(v) for v in values)
    if any(v <= 0 for v in numbers["scale"]):
        raise ValueError(f"{where}: `scale` must be above 0")
    if not _finite(data.get("bias")):
        raise ValueError(f"{where}: `bias` must be a finite number")
    network = data.get("network")
    if not isinstance(network, str):
        raise ValueError(f"{where}: `network` must name the network it was fitted on")
    fit = data.get("fit", {})
    return Calibration(
        network,
        tuple(names),
        numbers["mean"],
        numbers["scale"],
        numbers["weights"],
        float(data["bias"]),
        fit if isinstance(fit, dict) else {},
    )


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def load_calibration(directory: Path, network: str) -> Calibration | None:
    """The confidence weights beside a model's weights, or None when the directory has
    none or they were fitted on another network (logged). ValueError when the file cannot
    be read as confidence weights."""
    path = Path(directory) / CALIBRATION
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path} cannot be read as confidence weights: {exc}") from exc
    calibration = parse_calibration(data, str(path))
    if calibration.network != network:
        log.warning(
            "%s was fitted on other weights (%s, these are %s): no confidence; refit it "
            "with python -m diffusion_infill.model.training.fit_confidence",
            path,
            calibration.network,
            network or "unnamed",
        )
        return None
    return calibration


def save_calibration(calibration: Calibration, directory: Path) -> Path:
    """Write `calibration` beside the weights in `directory`."""
    path = Path(directory) / CALIBRATION
    path.write_text(json.dumps(calibration.to_json(), indent=1) + "\n", encoding="utf-8")
    return path
