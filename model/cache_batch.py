"""Several canvases' cached passes (model/cache.py) in one batched pass.

A request of many windows (a file of 70 holes) asks, at each step, for a pass over every
live window. One at a time, each is a small pass (a partial pass recomputes a few dozen
span slots) whose cost is mostly per-call overhead; here they run as one batch: the active
rows of every canvas padded to a common count, the cached keys/values to a common length,
and an additive mask that hides the padded keys and keeps each layer's rule (a global
layer sees the whole canvas, a sliding one keys within `local_attention // 2`). Padded
query rows sit at position 0 and attend like any row; their outputs are dropped and their
keys/values are never written.

`many(cached, ids, actives, caches)`: with every cache given, each canvas's result is what
`CachedModernBert.partial` gives for it alone (the caches are not changed); with none given
(`caches=None`), what `CachedModernBert.full` gives, fresh caches included. Checked against
the one-at-a-time passes in tests/test_cache_batch.py.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence

from diffusion_infill.model.cache import CachedModernBert, ContextCache, LayerKV, rope

# Canvases of one call whose cached passes run as one batch, in padded tokens (canvases
# times the longest): a partial pass holds every layer's padded keys and values of its
# batch, a full pass its (canvases x heads x T x T) attention scores.
PARTIAL_BATCH_TOKENS = 1 << 16
FULL_BATCH_TOKENS = 1 << 12


def _masks(
    cached: CachedModernBert, positions: torch.Tensor, lengths: torch.Tensor, dtype: torch.dtype
) -> dict[str, torch.Tensor | None]:
    """Additive masks (B, 1, n, T) per layer type: keys past a canvas's end, and for
    sliding layers keys farther than half the window from the query's position (None:
    nothing to hide)."""
    t = int(lengths.max())
    key_pos = torch.arange(t, device=positions.device)
    pad = (key_pos[None, :] >= lengths[:, None])[:, None, :]  # (B, 1, T)
    far = (positions[:, :, None] - key_pos[None, None, :]).abs() > cached.half_window
    out: dict[str, torch.Tensor | None] = {}
    for kind, blocked in (("full_attention", pad.expand_as(far)), ("sliding_attention", pad | far)):
        mask = torch.zeros(blocked.shape, dtype=dtype, device=positions.device)
        out[kind] = mask.masked_fill_(blocked, float("-inf"))[:, None]
    if bool((lengths == t).all()):
        out["full_attention"] = None  # canvases of one length: a global layer sees every key
    return out


def _padded_kv(caches: Sequence[ContextCache], li: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Layer `li`'s cached keys and values of every canvas, (B, T, heads, head_dim) each,
    zero past a canvas's end (a copy: the caches stay as they were)."""
    keys = pad_sequence([c.layers[li].keys.transpose(0, 1) for c in caches], batch_first=True)
    values = pad_sequence([c.layers[li].values.transpose(0, 1) for c in caches], batch_first=True)
    return keys, values


def _qkv(
    cached: CachedModernBert,
    li: int,
    hidden: torch.Tensor,
    positions: torch.Tensor,
    rows: dict[str, torch.Tensor],
    length: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Layer `li`'s queries and keys (RoPE applied) and values, (B, n, heads, head_dim).
    `rows`: each layer type's cos/sin at `positions` (filled on first use), of canvases of
    at most `length` tokens."""
    b, n, _ = hidden.shape
    layer, kind = cached.body.layers[li], cached.layer_types[li]
    qkv = layer.attn.Wqkv(layer.attn_norm(hidden)).view(b, n, 3, cached.heads, cached.head_dim)
    if kind not in rows:
        table = cached.rotation(kind, qkv.dtype, length, hidden.device)
        rows[kind] = table[positions][:, :, None, None]  # (B, n, 1, 1, 2, d)
    q, k = rope(qkv[:, :, :2], rows[kind]).unbind(dim=2)
    return q, k, qkv[:, :, 2]


def _rows(x: torch.Tensor, picked: torch.Tensor) -> torch.Tensor:
    """x (B, n, ...) at rows `picked` (B, m) of each canvas: (B, m, ...)."""
    return x[torch.arange(x.shape[0], device=x.device)[:, None], picked]


@torch.inference_mode()
def many(
    cached: CachedModernBert,
    ids: Sequence[torch.Tensor],
    actives: Sequence[torch.Tensor],
    caches: Sequence[ContextCache] | None,
    wanted: Sequence[torch.Tensor] | None = None,
) -> tuple[list[torch.Tensor], list[ContextCache] | None]:
    """Final hidden states of canvas `ids[i]` at the `wanted[i]` rows (default: all) of its
    active positions `actives[i]` (sorted), every canvas in one pass. With `caches`,
    attention reads each canvas's cached entries with its active rows fresh (a partial pass
    each); without, each `actives[i]` must be the whole canvas (a full pass each) and the
    fresh caches are returned too. The last layer's keys and values are computed for every
    active row, its attention and MLP only for the wanted ones (the others' outputs would
    not be read)."""
    device, last = ids[0].device, len(cached.body.layers) - 1
    positions = pad_sequence(list(actives), batch_first=True)  # (B, n), padding at 0
    counts = [a.shape[0] for a in (wanted if wanted is not None else actives)]
    rows = (
        torch.arange(positions.shape[1], device=device)[None, :]
        < torch.tensor([a.shape[0] for a in actives], device=device)[:, None]
    )
    bi, ri = rows.nonzero(as_tuple=True)  # the real (canvas, row) pairs
    pi = positions[bi, ri]
    lengths = torch.tensor([t.shape[0] for t in ids], device=device)
    tokens = pad_sequence([t[a] for t, a in zip(ids, actives, strict=True)], batch_first=True)
    hidden = cached.body.embeddings(input_ids=tokens)  # (B, n, H)
    masks: dict[str, torch.Tensor | None] = {}
    rotations: dict[str, torch.Tensor] = {}
    longest = max(t.shape[0] for t in ids)
    store: list[tuple[torch.Tensor, torch.Tensor]] = []
    for li, layer in enumerate(cached.body.layers):
        q, k, v = _qkv(cached, li, hidden, positions, rotations, longest)
        if caches is None:
            keys, values = k, v
            store.append((k, v))
        else:
            keys, values = _padded_kv(caches, li)
            keys[bi, pi] = k[bi, ri].to(keys.dtype)
            values[bi, pi] = v[bi, ri].to(values.dtype)
        if li == last and wanted is not None:
            picked = pad_sequence([*wanted, positions.new_zeros(1)], batch_first=True)[
                :-1
            ]  # (B, m >= 1), padding at row 0
            hidden, q, positions = _rows(hidden, picked), _rows(q, picked), _rows(positions, picked)
            masks = {}
        if not masks:
            masks = _masks(cached, positions, lengths, q.dtype)
        hidden = _attend(layer, hidden, q, keys, values, masks[cached.layer_types[li]])
    hidden = cached.body.final_norm(hidden)
    states = [hidden[i, :c] for i, c in enumerate(counts)]
    return states, (None if caches is not None else _fresh_caches(ids, store))


def _attend(
    layer: torch.nn.Module,
    hidden: torch.Tensor,
    q: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor | None,
) -> torch.Tensor:
    """The rest of one layer after its queries, keys and values: attention over `keys`
    and `values` under the additive `mask`, the output projection and the MLP, each added
    to `hidden` (B, n, H)."""
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2),
        keys.to(q.dtype).transpose(1, 2),
        values.to(q.dtype).transpose(1, 2),
        attn_mask=mask,
    )  # (B, h, n, d)
    hidden = hidden + layer.attn.Wo(out.transpose(1, 2).reshape(hidden.shape[0], q.shape[1], -1))
    return hidden + layer.mlp(layer.mlp_norm(hidden))


def _fresh_caches(
    ids: Sequence[torch.Tensor], store: list[tuple[torch.Tensor, torch.Tensor]]
) -> list[ContextCache]:
    """Each canvas's context entry from a full pass's keys and values per layer (`store`:
    (B, n, heads, head_dim) each, padded past a canvas's end)."""
    return [
        ContextCache(
            t.clone(),
            [
                LayerKV(
                    k[i, : len(t)].transpose(0, 1).contiguous(),
                    v[i, : len(t)].transpose(0, 1).contiguous(),
                )
                for k, v in store
            ],
        )
        for i, t in enumerate(ids)
    ]


def chunks(indices: list[int], lengths: list[int], budget: int) -> list[list[int]]:
    """`indices` in runs whose count times longest length stays within `budget` (a run of
    one where a single canvas is over it)."""
    out: list[list[int]] = []
    longest = 0
    for i, n in zip(indices, lengths, strict=True):
        if out and (len(out[-1]) + 1) * max(longest, n) <= budget:
            out[-1].append(i)
            longest = max(longest, n)
        else:
            out.append([i])
            longest = n
    return out


def alike_chunks(
    indices: Sequence[int], canvases: Sequence[Sequence[int]], budget: int
) -> list[list[int]]:
    """`indices` sorted by the length of their canvases (less padding), in `chunks` of
    `budget` tokens: the batches of canvases whose passes are alike."""
    order = sorted(indices, key=lambda i: len(canvases[i]))
    return chunks(order, [len(canvases[i]) for i in order], budget)
