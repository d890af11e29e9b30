"""DiffusionGemma (transformers' `diffusion_gemma`) behind the engine's Denoiser interface.

DiffusionGemma is a block-diffusion model: a causal encoder reads a prompt into a KV
cache, and a bidirectional decoder denoises a canvas (256 tokens when trained) that reads
the cache, from uniform random-token noise, with self-conditioning on the previous step's
logits. transformers' `generate()` noises every canvas position that is not accepted, so
it cannot hold code after a hole fixed; this adapter runs the encoder and decoder itself:

    engine canvas:   [left context][span slots][gap][span slots][right context]
    encoder input:   <bos> + left context            (prompt "code", the default)
    decoder canvas:  [first slot ............ last slot][first tokens of the right context]

The decoder canvas runs from the first slot to the last, then on through the code after
it, held clean (never noised), to `canvas_length` tokens in all (more only when the spans
need it). The decoder attends bidirectionally within it, so the code after a hole
conditions the slots before it. Per canvas of the engine:
- the encoder runs once per distinct prompt (a request's steps, and its raced lengths,
  share one pass: `encoder_passes` counts them);
- masked slots (the engine's mask id) get uniform random tokens from a generator seeded
  by the request's CacheHint (repeatable), fresh every pass;
- the pass's logits over the decoder canvas, divided by the hint's temperature, with the
  ids a fill never takes (mask, pad, EOS) at -inf, are the next pass's self-conditioning
  (as transformers' sampler feeds its processed logits back), kept per CacheHint key
  until the engine's `forget(key)`.

Prompt "chat" lays the window out as a chat turn instead: the user's turn holds the code
with each hole marked, and the model's turn is pre-filled with the code before the hole.
Which of the two infills better needs the released weights on a GPU; "code" is the default
until that is measured. Nothing here was measured for quality (see docs/GPU.md).
"""

from __future__ import annotations

import copy
import logging
import zlib
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tokenizers import Tokenizer

from diffusion_infill.model import footprint
from diffusion_infill.model.denoiser import CacheHint, ModelLoadError, SpecialIds

log = logging.getLogger(__name__)

MODEL_TYPE = "diffusion_gemma"
PROMPTS = ("code", "chat")  # how the code before a hole reaches the encoder
HOLE = "<|hole|>"  # how a hole is marked in a chat prompt (encoded as plain text)
INSTRUCTION = (
    f"Fill in each {HOLE} in this code. Answer with the code only, from where it stops.\n\n"
)
MAX_WINDOW = 8192  # tokens of a window: the encoder reads the code before the holes
PROMPTS_KEPT = 16  # encoder caches kept (LRU), one per distinct prompt
STATES_KEPT = 64  # canvases whose self-conditioning logits are kept (LRU, on the device)


@dataclass
class _State:
    """What one canvas (a CacheHint key) keeps between passes."""

    noise: torch.Generator
    logits: torch.Tensor | None = None  # (L, V) last pass's processed logits, model dtype


@dataclass
class _Row:
    prompt: tuple[int, ...]
    canvas: torch.Tensor  # (L,) decoder input
    rows: list[int]  # requested positions, relative to the decoder canvas
    state: _State | None
    temperature: float


class DiffusionGemmaDenoiser:
    """A DiffusionGemmaForBlockDiffusion on one device (see the module docstring)."""

    preferred_order = "entropy-bound"  # its own sampler; a worker decodes with it by default

    def __init__(
        self,
        model: Any,
        tokenizer: Tokenizer,
        *,
        name: str,
        device: torch.device,
        prompt: str = "code",
    ) -> None:
        if prompt not in PROMPTS:
            raise ModelLoadError(
                f"unknown prompt layout {prompt!r}: use one of {', '.join(PROMPTS)}"
            )
        self.model, self.tokenizer, self.name, self.device = model, tokenizer, name, device
        self.prompt = prompt
        text = model.config.get_text_config()
        self.vocab_size = int(text.vocab_size)
        self.canvas_length = int(model.config.canvas_length or 256)
        self.max_length = min(MAX_WINDOW, int(text.max_position_embeddings))

        def token(name: str) -> int:
            found = tokenizer.token_to_id(name)
            if found is None:
                raise ModelLoadError(
                    f"the tokenizer of model {self.name} has no {name} "
                    "token (DiffusionGemma's tokenizer has it)"
                )
            return found

        self.special = SpecialIds(mask=token("<mask>"), null=token("<eos>"), pad=token("<pad>"))
        self.bos = token("<bos>")
        if prompt == "chat":
            self._turn = (token("<|turn>"), token("<turn|>"))
        # Ids a fill never takes: code spells a special token's text in plain characters
        # (encode_special_tokens), so the model's special tokens (mask, pad, EOS, turns,
        # image tokens ...) get -inf in the logits returned and in the self-conditioning.
        special = {i for i, t in tokenizer.get_added_tokens_decoder().items() if t.special}
        special |= {self.special.mask, self.special.pad, self.special.null}
        self.banned = sorted(i for i in special if i < self.vocab_size)
        self.encoder_passes = 0  # prompts encoded
        self.decoder_passes = 0  # decoder forward calls (a batch of canvases each)
        self._prompts: OrderedDict[tuple[int, ...], Any] = OrderedDict()
        self._states: OrderedDict[Hashable, _State] = OrderedDict()

    @classmethod
    def load(
        cls,
        path: Path,
        *,
        device: str | None = None,
        dtype: str | None = None,
        quantize: str | None = None,
        prompt: str | None = None,
    ) -> DiffusionGemmaDenoiser:
        """The model in `path` (checked by model.loading), offline, from safetensors only,
        never with remote code. Refuses (ModelLoadError) a CUDA device without a GPU, an
        unsupported dtype or quantisation, and weights that do not fit the free memory."""
        path = Path(path)
        dev = footprint.pick_device(device)
        torch_dtype = footprint.pick_dtype(dtype, dev)
        qconfig = footprint.quantization(quantize, dev)
        need = footprint.needed_bytes(path, torch_dtype, quantize)
        free = footprint.free_bytes(dev)
        log.info(
            "%s: the weights need %s on %s (%s), %s free",
            path,
            footprint.gib(need),
            dev,
            quantize or str(torch_dtype).removeprefix("torch."),
            footprint.gib(free),
        )
        footprint.check_fits(need, free, dev, path)
        tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        tokenizer.encode_special_tokens = True  # "<mask>" in user code is text
        from transformers import DiffusionGemmaForBlockDiffusion
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        kwargs: dict[str, Any] = dict(
            local_files_only=True, trust_remote_code=False, use_safetensors=True, dtype=torch_dtype
        )
        if qconfig is not None:
            kwargs.update(quantization_config=qconfig, device_map={"": dev.index or 0})
        elif dev.type == "cuda":
            kwargs.update(device_map={"": dev.index or 0})
        try:
            model = DiffusionGemmaForBlockDiffusion.from_pretrained(path, **kwargs)
        except Exception as exc:  # corrupt safetensors, shape mismatch, CUDA OOM, ...
            raise ModelLoadError(f"cannot load model from {path}: {exc}") from exc
        if qconfig is None and dev.type != "cuda":
            model.to(dev)
        model.eval()
        return cls(
            model, tokenizer, name=path.name, device=dev, prompt=prompt or footprint.env_prompt()
        )

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)

    def forget(self, key: Hashable) -> None:
        """Drop the self-conditioning logits and noise generator of a finished canvas."""
        self._states.pop(key, None)

    # -- a pass -----------------------------------------------------------------------

    @torch.inference_mode()
    def logits(
        self,
        canvases: Sequence[Sequence[int]],
        positions: Sequence[Sequence[int]],
        hints: Sequence[CacheHint | None] | None = None,
    ) -> list[np.ndarray]:
        hints = hints or [None] * len(canvases)
        rows = [
            self._row(list(c), list(p), h)
            for c, p, h in zip(canvases, positions, hints, strict=True)
        ]
        out: list[np.ndarray | None] = [None] * len(rows)
        groups: dict[tuple[int, ...], list[int]] = {}
        for i, r in enumerate(rows):
            groups.setdefault(r.prompt, []).append(i)
        for prompt, members in groups.items():
            for i, arr in zip(
                members, self._decode(prompt, [rows[i] for i in members]), strict=True
            ):
                out[i] = arr
        return [a for a in out if a is not None]

    def _row(self, ids: list[int], pos: list[int], hint: CacheHint | None) -> _Row:
        """Split an engine canvas into the encoder's prompt and the decoder's canvas, and
        put noise in its masked slots."""
        mask = self.special.mask
        masked = [j for j, t in enumerate(ids) if t == mask]
        slots = sorted(set(hint.active if hint is not None else ()) | set(pos) | set(masked))
        if not slots:
            return _Row((self.bos,), torch.zeros(0, dtype=torch.long), [], None, 1.0)
        first, last = slots[0], slots[-1]
        end = max(last + 1, min(len(ids), first + self.canvas_length))
        canvas = torch.tensor(ids[first:end], dtype=torch.long)
        state = self._state(hint, ids)
        noise = torch.randint(0, self.vocab_size, (1, len(canvas)), generator=state.noise)[0]
        at = torch.tensor([j - first for j in masked], dtype=torch.long)
        canvas[at] = noise[at]
        t = hint.temperature if hint is not None and hint.temperature else 1.0
        return _Row(
            self._prompt(ids, slots, end),
            canvas,
            [p - first for p in pos],
            state if hint is not None else None,
            float(t),
        )

    def _state(self, hint: CacheHint | None, ids: list[int]) -> _State:
        if hint is None:  # no key: noise seeded by the canvas itself, no self-conditioning
            seed = zlib.crc32(np.asarray(ids, dtype=np.int64).tobytes())
            return _State(torch.Generator().manual_seed(seed))
        state = self._states.get(hint.key)
        if state is None:
            state = _State(torch.Generator().manual_seed(hint.seed or 0))
            self._states[hint.key] = state
            while len(self._states) > STATES_KEPT:
                self._states.popitem(last=False)
        self._states.move_to_end(hint.key)
        return state

    def _prompt(self, ids: list[int], slots: list[int], end: int) -> tuple[int, ...]:
        before = ids[: slots[0]]
        if self.prompt == "code":
            return (self.bos, *before)
        hole, inside = self.encode(HOLE), set(slots)
        marked: list[int] = []
        for j, t in enumerate(ids):
            if j not in inside:
                marked.append(t)
            elif j == 0 or j - 1 not in inside:
                marked += hole
        turn_open, turn_close = self._turn
        return (
            self.bos,
            turn_open,
            *self.encode("user\n" + INSTRUCTION),
            *marked,
            turn_close,
            *self.encode("\n"),
            turn_open,
            *self.encode("model\n"),
            *before,
        )

    def _encoded(self, prompt: tuple[int, ...]) -> Any:
        """The encoder's KV cache of `prompt`: computed once, kept (LRU)."""
        cache = self._prompts.get(prompt)
        if cache is None:
            from transformers import DynamicCache

            cache = DynamicCache(config=self.model.config.get_text_config(decoder=True))
            ids = torch.tensor([prompt], dtype=torch.long, device=self.device)
            self.model.model.encoder(input_ids=ids, cache=cache)
            self.encoder_passes += 1
            self._prompts[prompt] = cache
            while len(self._prompts) > PROMPTS_KEPT:
                self._prompts.popitem(last=False)
        self._prompts.move_to_end(prompt)
        return cache

    def _decode(self, prompt: tuple[int, ...], rows: list[_Row]) -> list[np.ndarray]:
        """One decoder pass over the canvases that share `prompt` (a request's steps, its
        raced lengths): shorter canvases are padded, and their padding masked out."""
        width = max(len(r.canvas) for r in rows)
        if width == 0:
            return [np.zeros((0, self.vocab_size), dtype=np.float32) for _ in rows]
        start, size = len(prompt), len(rows)
        canvas = torch.full((size, width), self.special.pad, dtype=torch.long)
        seen = torch.ones((size, start + width), dtype=torch.bool)  # cache + canvas keys
        for b, r in enumerate(rows):
            canvas[b, : len(r.canvas)] = r.canvas
            seen[b, start + len(r.canvas) :] = False
        emb = self.model.model.decoder.embed_tokens.weight.dtype
        sc = mask = None
        if any(r.state is not None and r.state.logits is not None for r in rows):
            sc = torch.zeros((size, width, self.vocab_size), dtype=emb, device=self.device)
            for b, r in enumerate(rows):
                if r.state is not None and r.state.logits is not None:
                    sc[b, : len(r.state.logits)] = r.state.logits
            mask = torch.tensor(
                [r.state is not None and r.state.logits is not None for r in rows],
                device=self.device,
            )
        where = torch.arange(start, start + width, device=self.device)[None]
        out = self.model(
            decoder_input_ids=canvas.to(self.device),
            cache=_batched(self._encoded(prompt), size),
            self_conditioning_logits=sc,
            self_conditioning_mask=mask,
            decoder_position_ids=where,
            decoder_attention_mask=None if seen.all() else seen.to(self.device),
        )
        self.decoder_passes += 1
        logits = out.logits  # (B, L, V) float32
        logits[:, :, self.banned] = float("-inf")
        result = []
        for b, r in enumerate(rows):
            if r.state is not None:
                r.state.logits = (logits[b, : len(r.canvas)] / r.temperature).to(emb)
            at = torch.tensor(r.rows, dtype=torch.long, device=self.device)
            result.append(logits[b, at].float().cpu().numpy())
        return result


def _batched(cache: Any, size: int) -> Any:
    """`cache` (batch 1) seen as a batch of `size`, without copying its tensors."""
    if size == 1:
        return cache
    view = copy.copy(cache)
    view.layers = []
    for layer in cache.layers:
        shallow = copy.copy(layer)
        shallow.keys = layer.keys.expand(size, -1, -1, -1)
        shallow.values = layer.values.expand(size, -1, -1, -1)
        view.layers.append(shallow)
    return view
