"""A deeper model from a trained one, computing the same function: more capacity to train on a GPU.

    python -m diffusion_infill.model.training.grow model/weights runs/grown --factor 2  # 6 -> 12

Each layer of the source keeps its weights and its attention kind (global or sliding) and is
followed by `factor - 1` new layers. A new layer is a copy of the one before it with its two
output projections (`attn.Wo`, `mlp.Wo`) set to zero, so that it adds nothing to the
residual stream: the grown model's logits equal the source's (tests/test_grow.py), and
training starts from the source's loss instead of from scratch. The zero projections get
gradients at the first step (their inputs are the copied layer's activations), and the rest
of the new layer follows from the second (LLaMA Pro's block expansion; Gstack grows depth by
copying too). A new layer attends as its source does, so `layer_types` lists every layer.

The record (`training.json`) is carried over with its tokens and history, plus a `grown`
entry saying from what; a warm restart (`python -m diffusion_infill.model.training.train
--init-from DIR`) continues the count. Only ModernBERT directories as model.training.train
exports them are grown.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import save_file

from diffusion_infill.model import weight_files

LAYER = "model.layers."
ZEROED = ("attn.Wo.weight", "mlp.Wo.weight")  # a layer's writes to the residual stream


def grow_state(state: dict[str, torch.Tensor], layers: int, factor: int) -> dict[str, torch.Tensor]:
    """The grown model's tensors: layer i of `layers` becomes layer i * factor, and layers
    i * factor + 1 ... + factor - 1 are its copies with zeroed output projections."""
    out: dict[str, torch.Tensor] = {}
    for name, t in state.items():
        if not name.startswith(LAYER):
            out[name] = t
            continue
        index, rest = name.removeprefix(LAYER).split(".", 1)
        i = int(index)
        if not 0 <= i < layers:
            raise ValueError(f"tensor {name} names layer {i}; the config has {layers}")
        out[f"{LAYER}{i * factor}.{rest}"] = t
        for k in range(1, factor):
            out[f"{LAYER}{i * factor + k}.{rest}"] = (
                torch.zeros_like(t) if rest in ZEROED else t.clone()
            )
    # Layer 0 has no attention norm (ModernBERT normalises the embeddings instead); its
    # copies are not layer 0 and have one: the identity norm, a LayerNorm of ones.
    for k in range(1, factor):
        name = f"{LAYER}{k}.attn_norm.weight"
        if name not in out:
            like = out[f"{LAYER}{k}.mlp_norm.weight"]
            out[name] = torch.ones_like(like)
    return out


def grow_config(config: dict, factor: int) -> dict:
    """config.json of the grown model: `factor` times the layers, each copy attending as
    the layer it was copied from."""
    if config.get("model_type") != "modernbert":
        raise ValueError(f"only ModernBERT models are grown, not {config.get('model_type')!r}")
    layers = int(config["num_hidden_layers"])
    kinds = config.get("layer_types") or [
        "full_attention"
        if i % int(config["global_attn_every_n_layers"]) == 0
        else "sliding_attention"
        for i in range(layers)
    ]
    out = dict(config)
    out["num_hidden_layers"] = layers * factor
    out["layer_types"] = [kind for kind in kinds for _ in range(factor)]
    return out


def grow(src: Path, dst: Path, factor: int) -> dict:
    """Write the grown model directory `dst` from the exported model `src`; its config."""
    if factor < 2:
        raise ValueError(f"--factor {factor}: a grown model has at least twice the layers")
    config = json.loads((src / "config.json").read_text())
    grown_config = grow_config(config, factor)
    state = grow_state(weight_files.read_weights(src), int(config["num_hidden_layers"]), factor)
    dst.mkdir(parents=True, exist_ok=True)
    save_file(
        {k: v.contiguous() for k, v in state.items()},
        str(dst / weight_files.WEIGHTS),
        metadata={"format": "pt"},
    )
    (dst / "config.json").write_text(json.dumps(grown_config, indent=2) + "\n")
    for f in src.iterdir():
        if f.is_file() and f.name not in (
            weight_files.WEIGHTS,
            weight_files.PACKED,
            "config.json",
            "training.json",
            "MODEL_CARD.md",
        ):
            shutil.copy2(f, dst / f.name)
    record_path = src / "training.json"
    record = json.loads(record_path.read_text()) if record_path.is_file() else {}
    record["grown"] = {
        "from": str(src),
        "layers": [config["num_hidden_layers"], grown_config["num_hidden_layers"]],
        "tokens_at_growth": record.get("tokens_total", record.get("tokens", 0)),
        "parameters": sum(t.numel() for n, t in state.items() if n != "decoder.weight"),
    }
    (dst / "training.json").write_text(json.dumps(record, indent=1) + "\n")
    return grown_config


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("src", type=Path, help="an exported model folder (model/weights)")
    parser.add_argument("dst", type=Path, help="where the grown model is written")
    parser.add_argument("--factor", type=int, default=2, help="layers multiplied by this")
    args = parser.parse_args(argv)
    try:
        config = grow(args.src, args.dst, args.factor)
    except (ValueError, FileNotFoundError) as exc:
        parser.exit(2, f"model.training.grow: {exc}\n")
    size = sum(f.stat().st_size for f in args.dst.iterdir()) / 2**20
    print(f"grew {args.src} -> {args.dst}: {config['num_hidden_layers']} layers ({size:.1f} MiB)")


if __name__ == "__main__":
    main()
