"""What a training batch's clean tokens get on top of its masks (model/training/noising.py):
bug-shaped swaps (model/training/swaps.py), a ` not` where it does not belong (its target
`<null>`: the token should go), and random-token substitution from the batch's own tokens;
each changed position a target, and no longer clean. Every function works in place on the
batch's (B, T) tensors."""

from __future__ import annotations

import random

import torch
from tokenizers import Tokenizer

from diffusion_infill.model.training.swaps import PlausibleSwaps

_SWAPS: dict[int, tuple[Tokenizer, PlausibleSwaps]] = {}


def swaps_of(tok: Tokenizer) -> PlausibleSwaps:
    """The swap tables of `tok`, built once (the entry keeps `tok` alive, so its id is
    never reused by another tokenizer)."""
    hit = _SWAPS.get(id(tok))
    if hit is None or hit[0] is not tok:
        hit = _SWAPS[id(tok)] = (tok, PlausibleSwaps(tok))
    return hit[1]


def insert_negations(
    input_ids: torch.Tensor,
    targets: torch.Tensor,
    weights: torch.Tensor,
    masked: torch.Tensor,
    real: torch.Tensor,
    swaps: PlausibleSwaps,
    null: int,
    share: float,
    rng: random.Random,
) -> None:
    """A `share` of the rows get one ` not` where it does not belong, with `<null>` (id
    `null`) as its target (the token should go)."""
    for b in range(input_ids.shape[0]):
        if rng.random() >= share:
            continue
        spots = swaps.negations(input_ids[b].tolist(), real[b].tolist())
        if not spots:
            continue
        p = rng.choice(spots)
        for t in (input_ids, targets, weights, masked, real):
            t[b, p + 1 :] = t[b, p:-1].clone()
        input_ids[b, p], targets[b, p], weights[b, p] = swaps.not_id, null, 1.0
        masked[b, p] = real[b, p] = False


def plausible_swaps(
    input_ids: torch.Tensor,
    weights: torch.Tensor,
    real: torch.Tensor,
    swaps: PlausibleSwaps,
    share: float,
    most: int,
    rng: random.Random,
) -> None:
    """Bug-shaped swaps: in a `share` of the rows, 1 to `most` clean tokens swapped for a
    plausible wrong one."""
    for b in range(input_ids.shape[0]):
        if rng.random() >= share:
            continue
        n = rng.randint(1, most)
        for pos, new in swaps.pick(input_ids[b].tolist(), real[b].tolist(), n, rng):
            input_ids[b, pos] = new
            weights[b, pos] = 1.0
            real[b, pos] = False


def substitute(
    input_ids: torch.Tensor,
    targets: torch.Tensor,
    weights: torch.Tensor,
    real: torch.Tensor,
    null: int,
    share: float,
    most: float,
    rng: random.Random,
) -> None:
    """Random-token substitution: in a `share` of the rows, a share (up to `most`) of the
    clean tokens replaced by tokens drawn from the batch's clean targets (`<null>` aside)."""
    B, T = input_ids.shape
    pool = targets[real & (targets != null)]
    for b in range(B):
        if rng.random() >= share or pool.numel() == 0:
            continue
        fraction = rng.uniform(0, most)
        pick = real[b] & (torch.rand(T) < fraction)
        n = int(pick.sum())
        if n:
            input_ids[b, pick] = pool[torch.randint(pool.numel(), (n,))]
            weights[b, pick] = 1.0
