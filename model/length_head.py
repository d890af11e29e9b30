"""The length head: where a hole's fill ends, read from the first pass over its slots.

The network ends a fill by writing `<null>` into the tail of its allocation, and on
held-out holes its own length is the truth's about one time in five. The length head is a
small network trained apart from it, on the model's frozen states (`fit_length_head` in
benchmarks/), that reads the final states of a hole's default allocation (16 slots, all
masked) and gives a distribution over the fill's length in tokens: 0..15, or "16 or
more". It is a separate file beside the weights (`length_head.safetensors`), so the
network stays loadable on its own; a model directory without it has no length head. The
file names the network it was fit on (`network_digest`): beside other weights (a new
checkpoint shipped, an int8-packed copy) it is not used, and the loader says so.

The features of slot i: the prediction head's output there (what the vocabulary is read
from, `ModernBertForMaskedLM.head`) and the log-probability of `<null>` at it. The score of
"the fill is L tokens" reads slot L + 1 (the first slot left empty) and slot L (the last
one written); "16 or more" reads the mean of all slots.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from torch import nn

log = logging.getLogger(__name__)

LENGTH_HEAD = "length_head.safetensors"
SLOTS = 16  # the slots the head reads: a hole's default allocation
CLASSES = SLOTS + 1  # lengths 0..15 and "16 or more"


class LengthHead(nn.Module):
    def __init__(self, width: int, hidden: int = 128) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.LayerNorm(width), nn.Linear(width, hidden), nn.GELU())
        self.end = nn.Linear(2 * hidden + 1, 1)
        self.full = nn.Linear(hidden, 1)
        self.bias = nn.Parameter(torch.zeros(CLASSES))

    def forward(self, states: torch.Tensor, null_logp: torch.Tensor) -> torch.Tensor:
        """Length logits (B, CLASSES) from the slots' head outputs (B, SLOTS, width) and
        their `<null>` log-probabilities (B, SLOTS)."""
        f = self.features(states)
        last = torch.cat([torch.zeros_like(f[:, :1]), f[:, :-1]], dim=1)
        ends = self.end(torch.cat([f, last, null_logp.unsqueeze(-1)], dim=-1)).squeeze(-1)
        return torch.cat([ends, self.full(f.mean(dim=1))], dim=1) + self.bias


def network_digest(model: nn.Module) -> str:
    """A short name of a masked LM's weights as loaded (its prediction head's dense layer,
    rounded to bf16): what a length head was fit on. "" for a model without one."""
    weight = getattr(getattr(getattr(model, "head", None), "dense", None), "weight", None)
    if not isinstance(weight, torch.Tensor):
        return ""
    data = weight.detach().to(torch.bfloat16).view(torch.int16).cpu().numpy().tobytes()
    return hashlib.blake2b(data, digest_size=8).hexdigest()


def save_length_head(head: LengthHead, directory: Path, network: str) -> Path:
    """Write `head` beside the weights in `directory`, naming the `network` it was fit on."""
    path = Path(directory) / LENGTH_HEAD
    tensors = {k: v.detach().float().contiguous() for k, v in head.state_dict().items()}
    save_file(tensors, str(path), metadata={"network": network})
    return path


def load_length_head(directory: Path, width: int, network: str) -> LengthHead | None:
    """The length head beside a model's weights, or None when the directory has none or
    the head was fit on another network (logged). ValueError when the file cannot be read
    or does not fit a network of this `width`."""
    path = Path(directory) / LENGTH_HEAD
    if not path.is_file():
        return None
    try:
        with safe_open(str(path), "pt") as fh:
            fitted = (fh.metadata() or {}).get("network")
            tensors = {name: fh.get_tensor(name) for name in fh.keys()}  # noqa: SIM118
    except Exception as exc:  # not a safetensors file, truncated, unreadable
        raise ValueError(f"{path} cannot be read as a length head: {exc}") from exc
    if fitted != network:
        log.warning(
            "%s was fit on other weights (%s, these are %s): no length head; refit it with "
            "python -m benchmarks.fit_length_head",
            path,
            fitted,
            network or "unnamed",
        )
        return None
    try:
        head = LengthHead(width, tensors["features.1.weight"].shape[0])
        head.load_state_dict(tensors)
    except (KeyError, RuntimeError) as exc:
        raise ValueError(f"{path} does not fit this model (width {width}): {exc}") from exc
    return head.eval()
