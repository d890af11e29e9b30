"""Where a big model runs and whether it fits: device, dtype, 8/4-bit weights, memory.

The memory a model directory needs is read from its safetensors headers (the dtype and
shape of every tensor), without loading a weight, so that a model that cannot fit is
refused in a second, with the numbers, instead of failing minutes into a 52 GB load.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import struct
from pathlib import Path
from typing import Any

import torch

from diffusion_infill.model.denoiser import ModelLoadError

# Bytes per element of each safetensors dtype.
DTYPE_BYTES = {
    "F64": 8,
    "I64": 8,
    "U64": 8,
    "F32": 4,
    "I32": 4,
    "U32": 4,
    "F16": 2,
    "BF16": 2,
    "I16": 2,
    "U16": 2,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
}
DTYPES = {
    "bf16": torch.bfloat16,
    "bfloat16": torch.bfloat16,
    "fp16": torch.float16,
    "float16": torch.float16,
    "fp32": torch.float32,
    "float32": torch.float32,
}
QUANTIZE = {"8bit": 1.0, "4bit": 0.5}  # bytes per parameter of bitsandbytes weights
HEADROOM = 1.15  # the weights plus activations, self-conditioning logits, allocator slack
MAX_HEADER = 100 * 2**20  # a safetensors header larger than this is corrupt


def gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def pick_device(device: str | None) -> torch.device:
    """`device`, else CUDA when present, else the CPU; CUDA asked for without a GPU is a
    ModelLoadError."""
    if not device:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except RuntimeError as exc:
        raise ModelLoadError(f"unknown device {device!r}: {exc}") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ModelLoadError(
            f"device {device!r} was asked for, but no CUDA GPU is available "
            "(torch.cuda.is_available() is False); use --device cpu"
        )
    return dev


def pick_dtype(dtype: str | None, device: torch.device) -> torch.dtype:
    """The weights' dtype: `dtype`, else $INFILL_DTYPE, else bf16 on CUDA and fp32 on
    the CPU."""
    wish = (dtype or os.environ.get("INFILL_DTYPE") or "auto").lower()
    if wish == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if wish not in DTYPES:
        raise ModelLoadError(
            f"unsupported dtype {wish!r} for this model: use auto, "
            f"{', '.join(sorted(DTYPES))} (8-bit or 4-bit weights: --quantize)"
        )
    return DTYPES[wish]


def env_prompt() -> str:
    """$INFILL_PROMPT, else "code" (model/diffusion_gemma.py)."""
    return os.environ.get("INFILL_PROMPT") or "code"


def quantization(kind: str | None, device: torch.device) -> Any:
    """transformers' BitsAndBytesConfig for 8-bit or 4-bit weights ($INFILL_QUANTIZE when
    `kind` is None), or None. Refuses an unknown kind, a device other than CUDA, and a
    missing bitsandbytes package."""
    kind = kind or os.environ.get("INFILL_QUANTIZE") or None
    if kind is None or kind == "none":
        return None
    if kind not in QUANTIZE:
        raise ModelLoadError(f"unknown quantisation {kind!r}: use {', '.join(QUANTIZE)} or none")
    if device.type != "cuda":
        raise ModelLoadError(f"{kind} weights (bitsandbytes) need a CUDA device, not {device.type}")
    if importlib.util.find_spec("bitsandbytes") is None:
        raise ModelLoadError(
            f"{kind} weights need the bitsandbytes package, which is not "
            "installed (pip install bitsandbytes)"
        )
    from transformers import BitsAndBytesConfig

    if kind == "8bit":
        return BitsAndBytesConfig(load_in_8bit=True)
    return BitsAndBytesConfig(
        load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16
    )


def weights(path: Path) -> tuple[int, int]:
    """(parameters, bytes as stored) over the directory's safetensors files, from their
    headers alone."""
    params = stored = 0
    for file in sorted(Path(path).glob("*.safetensors")):
        try:
            with file.open("rb") as fh:
                (size,) = struct.unpack("<Q", fh.read(8))
                if size > MAX_HEADER:
                    raise ValueError(f"a header of {size} bytes")
                header = json.loads(fh.read(size))
            for name, t in header.items():
                if name == "__metadata__":
                    continue
                params += math.prod(t["shape"])
                stored += t["data_offsets"][1] - t["data_offsets"][0]
        except (OSError, ValueError, KeyError, TypeError, struct.error) as exc:
            raise ModelLoadError(f"corrupt safetensors file {file}: {exc}") from exc
    return params, stored


def needed_bytes(path: Path, dtype: torch.dtype, quantize: str | None = None) -> int:
    """Memory the model in `path` needs to run: its weights in `dtype` (or quantised),
    plus headroom."""
    params, _ = weights(path)
    kind = quantize or os.environ.get("INFILL_QUANTIZE")
    per = QUANTIZE.get(kind or "", torch.tensor([], dtype=dtype).element_size())
    return int(params * per * HEADROOM)


def free_bytes(device: torch.device) -> int:
    """Free memory of `device`: the GPU's, or the machine's available RAM for the CPU."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def check_fits(need: int, free: int, device: torch.device, path: Path) -> None:
    """ModelLoadError when `need` bytes do not fit in `free`, saying what might."""
    if need <= free:
        return
    hint = (
        "; try --quantize 8bit or 4bit (bitsandbytes), or a bigger GPU"
        if device.type == "cuda"
        else "; use a GPU (--device cuda)"
    )
    raise ModelLoadError(
        f"the model in {path} needs about {gib(need)} on {device}, but "
        f"only {gib(free)} is free{hint}"
    )
