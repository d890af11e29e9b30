"""Reading a Hugging Face masked-LM directory for HFDenoiser (model/hf.py): the tokenizer,
the network (a ModernBERT like the shipped one through model/modernbert.py, anything else
through transformers, offline and from safetensors only), its mask, null and pad ids; the
device, and the CPU threads torch computes with ($INFILL_THREADS)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer

from diffusion_infill.model import modernbert, weight_files
from diffusion_infill.model.denoiser import ModelLoadError, SpecialIds

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # belt and braces: never reach a hub

# Diffusion models in transformers that denoise a block *after* a prompt (encoder-decoder,
# uniform noise) rather than masked positions inside a sequence: they have their own
# adapter (model/diffusion_gemma.py), which model.loading.load_denoiser picks.
PROMPT_TO_BLOCK = frozenset({"diffusion_gemma"})


def pick_device(device: str | None) -> torch.device:
    if device:
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def load_tokenizer(path: Path) -> Tokenizer:
    try:
        tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    except Exception as exc:  # tokenizers raises plain Exception on bad JSON
        raise ModelLoadError(f"corrupt tokenizer.json in {path}: {exc}") from exc
    tokenizer.encode_special_tokens = True  # "<mask>" in user code is text
    return tokenizer


def load_network(path: Path, trust_remote_code: bool) -> tuple[Any, torch.nn.Module]:
    """(config, model) of the directory, offline, from safetensors only: a ModernBERT like
    the shipped one runs in model/modernbert.py (no transformers import: seconds of
    start-up), anything else through transformers."""
    try:
        own = modernbert.load(path)
    except Exception as exc:  # corrupt safetensors, shape mismatch, unreadable config ...
        raise ModelLoadError(f"cannot load model from {path}: {exc}") from exc
    if own is not None:
        return own
    if not (path / weight_files.WEIGHTS).is_file() and (path / weight_files.PACKED).is_file():
        raise ModelLoadError(
            f"cannot load model from {path}: packed int8 weights "
            f"({weight_files.PACKED}) load only for the ModernBERT this project "
            "trains; unpack them "
            "(python -m diffusion_infill.model.training.packing unpack)"
        )
    from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    kwargs: dict[str, Any] = dict(local_files_only=True, trust_remote_code=trust_remote_code)
    try:
        config = AutoConfig.from_pretrained(path, **kwargs)
        if config.model_type in PROMPT_TO_BLOCK:
            raise ModelLoadError(
                f"{path} holds a {config.model_type} model, which model.diffusion_gemma "
                "loads (model.loading.load_denoiser picks it), not HFDenoiser"
            )
        weights = dict(kwargs, use_safetensors=True, dtype=torch.float32)
        try:
            model = AutoModelForMaskedLM.from_pretrained(path, **weights)
        except ValueError:
            if not trust_remote_code:
                raise
            # LLaDA / Dream register AutoModel (with an LM head) in their remote code.
            model = AutoModel.from_pretrained(path, **weights)
    except ModelLoadError:
        raise
    except ValueError as exc:
        msg = str(exc)
        if "trust_remote_code" in msg:
            msg = (
                "this model needs its own code; pass trust_remote_code=True "
                "(--trust-remote-code) only if you trust the directory"
            )
        raise ModelLoadError(f"cannot load model from {path}: {msg}") from exc
    except Exception as exc:  # corrupt safetensors, shape mismatch, ...
        raise ModelLoadError(f"cannot load model from {path}: {exc}") from exc
    return config, model


def special_ids(tokenizer: Tokenizer, config: Any, path: Path) -> SpecialIds:
    """Mask, null and pad ids, asked of the tokenizer (and the config for the mask)."""

    def token_id(*names: str) -> int | None:
        for n in names:
            if n and (found := tokenizer.token_to_id(n)) is not None:
                return found
        return None

    mask = token_id("<mask>", "[MASK]", "<|mdm_mask|>", "<|mask|>")
    if mask is None and getattr(config, "mask_token_id", None) is not None:
        mask = int(config.mask_token_id)
    if mask is None:
        raise ModelLoadError(f"the tokenizer in {path} has no mask token")
    # External models have no <null>; they pad a short answer with EOS / pad instead.
    null = token_id("<null>", "<|endoftext|>", "<|eot_id|>", "</s>", "[PAD]", "<pad>")
    pad = token_id("<pad>", "[PAD]")
    if pad is None:
        pad = null
    if null is None or pad is None:
        raise ModelLoadError(f"the tokenizer in {path} has no null/eos/pad token")
    return SpecialIds(mask=mask, null=null, pad=pad)


def set_threads(value: str | None) -> None:
    """$INFILL_THREADS: the CPU threads torch computes with (default: torch's, one per
    core), at most: while another process holds a core, the denoiser's passes run on fewer
    (model/threads.py)."""
    if not value:
        return
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise ModelLoadError(f"INFILL_THREADS must be a positive whole number, not {value!r}")
    torch.set_num_threads(n)


def network_digest(model: torch.nn.Module) -> str:
    """A short name of a masked LM's weights as loaded (its prediction head's dense layer,
    rounded to bf16): what the confidence weights were fitted on (model/calibration.py).
    "" for a model without one."""
    weight = getattr(getattr(getattr(model, "head", None), "dense", None), "weight", None)
    if not isinstance(weight, torch.Tensor):
        return ""
    data = weight.detach().to(torch.bfloat16).view(torch.int16).cpu().numpy().tobytes()
    return hashlib.blake2b(data, digest_size=8).hexdigest()
