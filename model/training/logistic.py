"""Logistic regression for the fitted tables that ship: an L2 fit on standardised features
by Newton's method, its predictions, their log loss and their reliability (the expected
calibration error over equal-width confidence bins)."""

from __future__ import annotations

from typing import Any

import numpy as np

BINS = 10  # equal-width confidence bins of the calibration error
STEPS = 100  # Newton steps at most; a fit stops earlier once a step moves no weight


def fit(
    x: np.ndarray, y: np.ndarray, penalty: float
) -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
    """(mean, scale, bias, weights) of an L2 logistic regression on standardised `x`
    (Newton's method; `penalty` per row on the weights, the bias not penalised)."""
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    z = np.hstack([np.ones((len(x), 1)), (x - mean) / scale])
    w = np.zeros(z.shape[1])
    reg = penalty * len(x) * np.eye(z.shape[1])
    reg[0, 0] = 0.0
    for _ in range(STEPS):
        p = 1 / (1 + np.exp(-np.clip(z @ w, -50, 50)))
        grad = z.T @ (p - y) + reg @ w
        hess = (z * (p * (1 - p))[:, None]).T @ z + reg + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return mean, scale, float(w[0]), w[1:]


def predict(
    x: np.ndarray, mean: np.ndarray, scale: np.ndarray, bias: float, w: np.ndarray
) -> np.ndarray:
    """The probability of each row of `x` under a `fit`."""
    return 1 / (1 + np.exp(-np.clip(bias + ((x - mean) / scale) @ w, -50, 50)))


def log_loss(p: np.ndarray, y: np.ndarray) -> float:
    """The mean negative log-likelihood of outcomes `y` (0 or 1) under probabilities `p`."""
    p = np.clip(p, 1e-9, 1 - 1e-9)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def reliability(
    p: np.ndarray, y: np.ndarray, bins: int = BINS
) -> tuple[float, list[dict[str, Any]]]:
    """Expected calibration error (equal-width bins, weighted by their share of rows)
    and each bin's rows, mean confidence and share right."""
    rows, ece = [], 0.0
    for k in range(bins):
        lo, hi = k / bins, (k + 1) / bins
        inside = (p >= lo) & ((p < hi) if k < bins - 1 else (p <= hi))
        n = int(inside.sum())
        if not n:
            rows.append({"bin": [lo, hi], "n": 0, "confidence": None, "right": None})
            continue
        conf, right = float(p[inside].mean()), float(y[inside].mean())
        ece += n / len(p) * abs(conf - right)
        rows.append({"bin": [lo, hi], "n": n, "confidence": conf, "right": right})
    return ece, rows
