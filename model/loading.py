"""Finding and loading a model: the one way a program gets a Denoiser with a network in it.

    den = load_denoiser()                      # the checkpoint shipped in model/weights
    den = load_denoiser("runs/small/export", device="cuda")

The directory is checked here, before torch is imported, so that a typo in `--model` or a
directory without safetensors weights is reported at once; `model.hf` (torch,
transformers) is imported only when a model is really loaded. The worker process and the
`infill` command call this; the engine never does (it is handed a Denoiser).
"""

from __future__ import annotations

import json
from pathlib import Path

from diffusion_infill.model.denoiser import Denoiser, ModelLoadError

__all__ = ["ModelLoadError", "check_model_dir", "default_model_dir", "load_denoiser"]


def default_model_dir() -> Path:
    """The checkpoint shipped in the repository (model/weights)."""
    return Path(__file__).resolve().parent / "weights"


def check_model_dir(path: Path) -> None:
    """Refuse a directory that cannot hold a loadable model: no config.json, no
    safetensors weights (pickled `.bin` / `.pt` ones are never loaded), no tokenizer.json,
    or a config.json that is not JSON."""
    if not path.exists():
        raise ModelLoadError(f"model directory not found: {path}")
    if not path.is_dir():
        raise ModelLoadError(f"model path is not a directory: {path}")
    if not (path / "config.json").is_file():
        raise ModelLoadError(f"no config.json in model directory {path}")
    if not any(path.glob("*.safetensors")):
        pickles = [p.name for p in path.glob("*.bin")] + [p.name for p in path.glob("*.pt")]
        hint = (
            (
                f" (found {', '.join(pickles)}: pickled weights are refused; convert them "
                "to safetensors)"
            )
            if pickles
            else ""
        )
        raise ModelLoadError(f"no .safetensors weights in {path}{hint}")
    if not (path / "tokenizer.json").is_file():
        raise ModelLoadError(f"no tokenizer.json in model directory {path}")
    try:
        json.loads((path / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"corrupt config.json in {path}: {exc}") from exc


def _model_type(path: Path) -> str:
    try:
        found = json.loads((path / "config.json").read_text()).get("model_type")
    except (OSError, ValueError, AttributeError):
        return ""
    return found if isinstance(found, str) else ""


def load_denoiser(
    model_dir: str | Path | None = None,
    *,
    device: str | None = None,
    trust_remote_code: bool = False,
    dtype: str | None = None,
    quantize: str | None = None,
    prompt: str | None = None,
) -> Denoiser:
    """A Hugging Face model directory (default: the shipped model) behind the Denoiser
    interface, on `device` (default: CUDA when present, else the CPU).

    `trust_remote_code` lets a directory's own Python code run (LLaDA, Dream); it is off
    unless the user turns it on. `dtype` ("fp32", "bf16"; default: $INFILL_DTYPE, else
    what is fast on this machine, see model.precision). Raises ModelLoadError for anything
    wrong with the directory or its files, or an unknown dtype.

    A DiffusionGemma directory (config.json's model_type `diffusion_gemma`) loads through
    model/diffusion_gemma.py, never with remote code: bf16 on CUDA by default, `quantize`
    "8bit" / "4bit" (bitsandbytes; default $INFILL_QUANTIZE), `prompt` "code" / "chat"
    (default $INFILL_PROMPT, else "code"); the memory it needs is checked against the
    device's free memory before a weight is read. Other models take neither option.
    """
    path = Path(model_dir) if model_dir is not None else default_model_dir()
    check_model_dir(path)
    if _model_type(path) == "diffusion_gemma":
        try:
            from diffusion_infill.model.diffusion_gemma import DiffusionGemmaDenoiser  # noqa: PLC0415
        except ImportError as exc:
            raise ModelLoadError(
                f"cannot load the model backend (torch, transformers): {exc}"
            ) from exc
        return DiffusionGemmaDenoiser.load(
            path, device=device, dtype=dtype, quantize=quantize, prompt=prompt
        )
    if quantize or prompt:
        raise ModelLoadError(
            f"--quantize and --prompt are for DiffusionGemma models; {path} "
            f"holds a {_model_type(path) or 'different'} model"
        )
    try:
        from diffusion_infill.model.hf import HFDenoiser  # noqa: PLC0415 - torch only when a model is loaded
    except ImportError as exc:
        raise ModelLoadError(f"cannot load the model backend (torch, transformers): {exc}") from exc
    return HFDenoiser.load(path, device=device, trust_remote_code=trust_remote_code, dtype=dtype)
