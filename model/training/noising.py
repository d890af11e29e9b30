"""Training examples for the masked-diffusion objective, built from source text.

Three kinds of corruption, mixed per sequence (shares in `NoiseConfig`):

- token masks: t ~ U(eps, 1), every token masked with probability t, loss weight 1/t
  (the MDLM / LLaDA objective);
- a block mask: one contiguous run of round(t * T) tokens, weight 1/t (editors mask spans);
- variable-length holes, built exactly as the engine builds its canvas: one to three
  character spans (part of a line, a line's content after its indentation, or 2-8 whole
  lines) are cut out, the text around them is tokenized segment by segment, and each span
  gets an allocation of mask positions. The target is the span's own tokens followed by
  `<null>` up to the allocation ("length contract", docs/ARCHITECTURE.md); a share of
  allocations is *shorter* than the content, with the content's first tokens as target and
  no null, which is what the engine sees while it grows an allocation. Half of the other
  allocations are sized as the engine sizes them (16 slots, grown 16 at a time), so the
  end of a fill is learnt at every length the engine produces; and half of the holes are
  shown part-decoded (each slot, content or null, revealed with probability 1 - t), the
  canvas the sampler feeds back after its first pass.

On top of any of these (model/training/corruptions.py), a share of the clean positions is
replaced by tokens drawn from the batch (random-token substitution) with the original as
target, and a few clean positions are trained to predict themselves, so that one pass over
a clean buffer scores every token (bug finding). With `p_plausible`, some rows also get
bug-shaped swaps (model/training/swaps.py), the subtle corruptions the fixer must find, and
with `p_negation` a ` not` where it does not belong, whose target is `<null>` (delete it).
`end_weight` gives the slot where a hole's fill ends (its first `<null>`) a loss weight of
its own. With `p_fix` and fix pairs, some rows are real fixes (model/training/fix_rows.py).
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from tokenizers import Tokenizer

from diffusion_infill.model.training.corruptions import (
    insert_negations,
    plausible_swaps,
    substitute,
    swaps_of,
)
from diffusion_infill.model.training.fix_rows import FixPair, draw_fix, fix_example
from diffusion_infill.model.training.hole_spans import line_spans


@dataclass(frozen=True)
class NoiseConfig:
    eps: float = 1e-3  # lower bound of the mask rate t, avoids the 1/t blow-up at 0
    # how the mask rate t of token/block examples is drawn: "uniform" U(eps, 1); "bell"
    # Beta(2, 2) (more mid-range t, fewer near-empty and near-full canvases); "stratified"
    # one draw per batch row from evenly spaced strata (low-discrepancy: a batch covers
    # (0, 1) evenly)
    t_dist: str = "uniform"
    p_tokens: float = 0.3  # share of sequences with independent token masks
    p_block: float = 0.15  # share with one contiguous masked block
    # the remaining share gets variable-length holes
    max_extra: int = 24  # most <null> slots appended after a span's content
    p_short: float = 0.15  # share of allocations shorter than their content
    # share of the other allocations sized as the engine sizes them: `engine_alloc` slots,
    # grown `engine_alloc` at a time until the content fits (so nulls are learnt at every
    # span length the engine produces, not only after short extras)
    p_engine_alloc: float = 0.5
    engine_alloc: int = 16  # infill's default_span_tokens and grow
    # share of holes shown part-decoded, as the sampler's canvas is after its first pass:
    # each slot (content or null) revealed with probability 1 - t, t ~ U(0, 1)
    p_reveal: float = 0.5
    max_background: float = 0.2  # most extra token masking around variable holes
    # share of the part-of-line holes cut where an editor cuts them, with code after them
    # on the line: a bracket pair's contents, or a run of whole words (the others are cut
    # at random characters, and end at the line's end half the time)
    p_inline: float = 0.0
    # share of all holes of these examples (of any kind) drawn first as an editor-shaped
    # in-line hole where the chosen line has one: raises their share above the part-of-line
    # kind's 30% (in-line holes were left unended: docs/log/training.md, "In-line holes")
    p_inline_span: float = 0.0
    p_substitute: float = 0.5  # share of sequences with random-token substitution
    max_substitute: float = 0.15  # most of a sequence's clean tokens substituted
    p_identity: float = 0.05  # clean positions trained to predict themselves
    # share of sequences with bug-shaped swaps (model/training/swaps.py: a name for another name of
    # the window, + for -, < for >=, n for n+1), 1..max_plausible of them, original as target
    p_plausible: float = 0.0
    max_plausible: int = 3
    # share of sequences with one ` not` inserted where it does not belong (`x not in y`
    # for `x in y`, `x is not y` for `x is y`; model/training/swaps.py), target <null>: the row
    # shifts right by one from there and loses its last token
    p_negation: float = 0.0
    # loss weight of the decision where a hole's fill ends: the first `<null>` slot after
    # a span's content (1.0: like any other slot; the engine's length rests on this slot)
    end_weight: float = 1.0
    # share of rows that are real fixes where the run has fix pairs (--fix-pairs;
    # model/training/fix_rows.py): an older release's line in view, targeted at the next's
    p_fix: float = 0.0


@dataclass
class Batch:
    input_ids: torch.Tensor  # (B, T) long
    targets: torch.Tensor  # (B, T) long; meaningful where weights > 0
    weights: torch.Tensor  # (B, T) float; 0 = no loss
    masked: torch.Tensor  # (B, T) bool; positions that were masked (for the metrics)

    def map(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> Batch:
        """The batch with `fn` applied to each of its tensors."""
        return Batch(fn(self.input_ids), fn(self.targets), fn(self.weights), fn(self.masked))

    def to(self, device: torch.device) -> Batch:
        return self.map(lambda x: x.to(device, non_blocking=True))

    def pin_memory(self) -> Batch:  # the DataLoader's pin_memory=True calls this
        return self.map(torch.Tensor.pin_memory)


@dataclass(frozen=True)
class Vocab:
    pad: int
    mask: int
    null: int
    eos: int
    size: int

    @classmethod
    def of(cls, tok: Tokenizer) -> Vocab:
        def need(name: str) -> int:
            found = tok.token_to_id(name)
            if found is None:
                raise ValueError(f"tokenizer has no {name} token")
            return found

        return cls(
            pad=need("<pad>"),
            mask=need("<mask>"),
            null=need("<null>"),
            eos=need("<eos>"),
            size=tok.get_vocab_size(),
        )


class TextSampler:
    """Random windows of source text that start at a line start."""

    def __init__(self, texts: Sequence[str], window_chars: int, seed: int) -> None:
        self.texts = [t for t in texts if len(t) > 0]
        self.window_chars = window_chars
        self.rng = random.Random(seed)
        weights = [len(t) for t in self.texts]
        total = float(sum(weights))
        self.cum: list[float] = []
        acc = 0.0
        for w in weights:
            acc += w / total
            self.cum.append(acc)

    def window(self) -> str:
        text = self.texts[min(bisect.bisect(self.cum, self.rng.random()), len(self.texts) - 1)]
        if len(text) <= self.window_chars:
            return text
        start = self.rng.randrange(0, len(text) - self.window_chars // 2)
        nl = text.rfind("\n", 0, start)
        start = nl + 1 if nl >= 0 else 0
        return text[start : start + self.window_chars]


def _allocation(n: int, cfg: NoiseConfig, rng: random.Random) -> int:
    """Slots given to a span of `n` content tokens (shorter than n: the engine must grow)."""
    if rng.random() < cfg.p_short and n > 1:
        return rng.randint(1, n - 1)
    if rng.random() < cfg.p_engine_alloc:
        return cfg.engine_alloc * max(1, math.ceil(n / cfg.engine_alloc))
    return n + min(int(rng.expovariate(1 / 6)), cfg.max_extra)


def _reveal(
    span_targets: list[int], vocab: Vocab, cfg: NoiseConfig, rng: random.Random
) -> tuple[list[int], list[float]]:
    """Span input ids and loss weights: all masked, or part-decoded (some slots shown)."""
    if rng.random() >= cfg.p_reveal:
        return [vocab.mask] * len(span_targets), [1.0] * len(span_targets)
    t = draw_rates(1, cfg, rng)[0]
    shown = [rng.random() >= t for _ in span_targets]
    if all(shown):  # keep at least one slot to learn from
        shown[rng.randrange(len(shown))] = False
    ids = [tgt if s else vocab.mask for tgt, s in zip(span_targets, shown, strict=True)]
    return ids, [0.0 if s else 1.0 for s in shown]


def _variable_example(
    text: str,
    tok: Tokenizer,
    vocab: Vocab,
    seq_len: int,
    cfg: NoiseConfig,
    rng: random.Random,
) -> tuple[list[int], list[int], list[float]] | None:
    """Canvas ids, targets and weights for one text with variable-length holes."""
    enc = tok.encode(text)
    if len(enc.ids) < 8:
        return None
    # Place holes in the first 3/4 of what fits, so that suffix context stays visible.
    limit_tok = min(len(enc.ids), seq_len) * 3 // 4
    limit = enc.offsets[max(0, limit_tok - 1)][1]
    spans = line_spans(text, limit, rng, cfg.p_inline, cfg.p_inline_span)
    if not spans:
        return None
    ids: list[int] = []
    targets: list[int] = []
    weights: list[float] = []
    cursor = 0
    for a, b in spans:
        outside = tok.encode(text[cursor:a]).ids if a > cursor else []
        ids += outside
        targets += outside
        weights += [0.0] * len(outside)
        content = tok.encode(text[a:b]).ids
        alloc = _allocation(len(content), cfg, rng)
        span_targets = content[:alloc] + [vocab.null] * max(0, alloc - len(content))
        span_ids, span_weights = _reveal(span_targets, vocab, cfg, rng)
        if alloc > len(content) and span_weights[len(content)] > 0:
            span_weights[len(content)] *= cfg.end_weight
        ids += span_ids
        targets += span_targets
        weights += span_weights
        cursor = b
    rest = tok.encode(text[cursor:]).ids
    ids += rest
    targets += rest
    weights += [0.0] * len(rest)
    ids, targets, weights = ids[:seq_len], targets[:seq_len], weights[:seq_len]
    # Some extra masking around the holes, so that holes are also learnt among noise.
    rate = rng.uniform(0, cfg.max_background)
    for i in range(len(ids)):
        if weights[i] == 0.0 and rng.random() < rate:
            ids[i] = vocab.mask
            weights[i] = 1.0
    return ids, targets, weights


def draw_rates(n: int, cfg: NoiseConfig, rng: random.Random) -> list[float]:
    """`n` draws in [0, 1) of the mask-rate variable, by `cfg.t_dist`."""
    if cfg.t_dist == "uniform":
        return [rng.random() for _ in range(n)]
    if cfg.t_dist == "bell":
        return [rng.betavariate(2.0, 2.0) for _ in range(n)]
    if cfg.t_dist == "stratified":
        offset = rng.random()
        draws = [((i + offset) / n) % 1.0 for i in range(n)]
        rng.shuffle(draws)
        return draws
    raise ValueError(f"unknown t_dist {cfg.t_dist!r}: uniform, bell or stratified")


def _masked_example(
    text: str,
    tok: Tokenizer,
    vocab: Vocab,
    seq_len: int,
    cfg: NoiseConfig,
    rng: random.Random,
    block: bool,
    u: float,
) -> tuple[list[int], list[int], list[float]]:
    targets = tok.encode(text).ids[:seq_len]
    ids = list(targets)
    weights = [0.0] * len(ids)
    t = cfg.eps + (1 - cfg.eps) * u
    if block:
        n = max(1, round(t * len(ids)))
        start = rng.randint(0, len(ids) - n)
        chosen = range(start, start + n)
    else:
        chosen = [i for i in range(len(ids)) if rng.random() < t]
    for i in chosen:
        ids[i] = vocab.mask
        weights[i] = 1.0 / t
    return ids, targets, weights


def _row(
    sampler: TextSampler,
    tok: Tokenizer,
    vocab: Vocab,
    seq_len: int,
    cfg: NoiseConfig,
    rng: random.Random,
    u: float,
    fixes: Sequence[FixPair],
) -> tuple[list[int], list[int], list[float]] | None:
    """One training row: a real fix (a share `p_fix` where there are fix pairs), else a
    window with token masks, a block mask or variable-length holes (None: none fit)."""
    if fixes and rng.random() < cfg.p_fix:
        return fix_example(draw_fix(fixes, rng), tok, seq_len, vocab.null, rng)
    text = sampler.window()
    kind = rng.random()
    if kind < cfg.p_tokens:
        return _masked_example(text, tok, vocab, seq_len, cfg, rng, block=False, u=u)
    if kind < cfg.p_tokens + cfg.p_block:
        return _masked_example(text, tok, vocab, seq_len, cfg, rng, block=True, u=u)
    return _variable_example(text, tok, vocab, seq_len, cfg, rng)


def make_batch(
    sampler: TextSampler,
    tok: Tokenizer,
    vocab: Vocab,
    batch_size: int,
    seq_len: int,
    cfg: NoiseConfig,
    rng: random.Random,
    fixes: Sequence[FixPair] = (),
) -> Batch:
    rows: list[tuple[list[int], list[int], list[float]]] = []
    rates = draw_rates(batch_size, cfg, rng)
    while len(rows) < batch_size:
        row = _row(sampler, tok, vocab, seq_len, cfg, rng, rates[len(rows)], fixes)
        if row is not None and len(row[0]) >= 8:
            rows.append(row)

    B, T = batch_size, max(len(r[0]) for r in rows)
    input_ids = torch.full((B, T), vocab.pad, dtype=torch.long)
    targets = torch.full((B, T), vocab.pad, dtype=torch.long)
    weights = torch.zeros((B, T), dtype=torch.float32)
    for b, (ids, tgt, w) in enumerate(rows):
        input_ids[b, : len(ids)] = torch.tensor(ids)
        targets[b, : len(tgt)] = torch.tensor(tgt)
        weights[b, : len(w)] = torch.tensor(w)
    masked = input_ids == vocab.mask

    real = (input_ids != vocab.pad) & ~masked
    if cfg.p_negation > 0:
        insert_negations(
            input_ids,
            targets,
            weights,
            masked,
            real,
            swaps_of(tok),
            vocab.null,
            cfg.p_negation,
            rng,
        )
    # Bug-shaped swaps (drawn before the random substitution, which then avoids them).
    if cfg.p_plausible > 0:
        plausible_swaps(
            input_ids, weights, real, swaps_of(tok), cfg.p_plausible, cfg.max_plausible, rng
        )
    substitute(
        input_ids, targets, weights, real, vocab.null, cfg.p_substitute, cfg.max_substitute, rng
    )
    # A few clean positions learn to keep their token (calibrates the bug-finding score).
    keep = real & (weights == 0) & (torch.rand(B, T) < cfg.p_identity)
    weights[keep] = 1.0
    return Batch(input_ids=input_ids, targets=targets, weights=weights, masked=masked)
