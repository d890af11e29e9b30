"""DiffusionGemma's speed through the worker, with random weights of the full architecture.

    python -m benchmarks.bench_diffusion_gemma                 # full size, on a CUDA GPU
    python -m benchmarks.bench_diffusion_gemma --config DIR/config.json   # the released config
    python -m benchmarks.bench_diffusion_gemma --tiny          # 2 layers, on the CPU

Builds DiffusionGemmaForBlockDiffusion with random weights (no download: the speed of a
step does not depend on the weights' values, only on the architecture, the canvas and the
batch), puts it behind model/diffusion_gemma.py in a worker, and sends fills of a one-line
hole (16 tokens), a 64-token and a 256-token span from 1, 4 and 16 concurrent clients,
order entropy-bound with a fixed number of steps (random weights never stop early).

Reported per span and concurrency: ms per denoising step (wall clock / steps: the
concurrent requests step together), generated tokens/s, decoder forward calls per
scheduler pass (requests with different code before their holes are separate decoder
calls today: docs/GPU.md) and encoder passes. Writes
benchmarks/results/diffusion_gemma_<full|tiny>_<device>.json.

The full-size configuration below takes the sizes the model card and docs/notes give (30
layers, hidden 2816, 128 experts of which 8 active, vocabulary 262,144, sliding window 1024)
and transformers' DiffusionGemmaTextConfig defaults for the rest; the expert and shared
MLP widths and the head counts are assumptions that give ~25B parameters: pass the
released config.json with --config to measure the real one.
"""

from __future__ import annotations

import argparse
import asyncio
import string
import threading
import time
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer, decoders, models, trainers

from benchmarks.results_file import RESULTS, write_results

ROOT = Path(__file__).resolve().parent.parent
SPECIAL = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<|turn>", "<turn|>"]  # Gemma's ids
SPANS = {"line": 16, "64": 64, "256": 256}
VISION_TINY = dict(
    model_type="gemma4_vision",
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=1,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=16,
)


def tiny_config(canvas_length: int = 16) -> Any:
    """2 layers, hidden 64, 4 experts (2 active), vocabulary 512."""
    from transformers import DiffusionGemmaConfig

    return DiffusionGemmaConfig(
        text_config=dict(
            vocab_size=512,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=32,
            global_head_dim=32,
            num_experts=4,
            top_k_experts=2,
            moe_intermediate_size=32,
            sliding_window=64,
            max_position_embeddings=4096,
            layer_types=["sliding_attention", "full_attention"],
        ),
        vision_config=VISION_TINY,
        canvas_length=canvas_length,
    )


def full_config() -> Any:
    """google/diffusiongemma-26B-A4B-it's sizes (see the module docstring)."""
    from transformers import DiffusionGemmaConfig

    return DiffusionGemmaConfig(
        text_config=dict(
            vocab_size=262_144,
            hidden_size=2816,
            num_hidden_layers=30,
            num_experts=128,
            top_k_experts=8,
            sliding_window=1024,
            moe_intermediate_size=704,
            intermediate_size=2112,
            num_attention_heads=16,
            num_key_value_heads=8,
            num_global_key_value_heads=2,
        ),
        vision_config=VISION_TINY,
        canvas_length=256,
    )  # the vision tower is not run


def gemma_tokenizer() -> Tokenizer:
    """A small BPE tokenizer (vocabulary 512, trained on this repository's engine code)
    with Gemma's special tokens at Gemma's ids."""
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.decoder = decoders.Fuse()
    alphabet = list(string.printable)
    tok.train_from_iterator(
        [p.read_text() for p in sorted((ROOT / "infill" / "core").glob("*.py"))],
        trainers.BpeTrainer(
            vocab_size=512,
            special_tokens=SPECIAL,
            initial_alphabet=alphabet,
            limit_alphabet=len(alphabet),
            show_progress=False,
        ),
    )
    return tok


def build(config: Any, device: torch.device, dtype: torch.dtype) -> Any:
    """The model with random weights, made on `device` in `dtype`."""
    from transformers import DiffusionGemmaForBlockDiffusion

    torch.manual_seed(0)
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with device:
            return DiffusionGemmaForBlockDiffusion(config).eval()
    finally:
        torch.set_default_dtype(default)


def texts(n: int, tokens: int) -> list[str]:
    """`n` requests with different code before their hole of exactly `tokens` tokens."""
    return [
        f"def f{i}(a, b):\n    total{i} = a + b\n    return <mask:{tokens}>\n\nprint(f{i}(1, 2))\n"
        for i in range(n)
    ]


async def measure(address: str, span: int, clients: int, steps: int) -> dict[str, float]:
    from diffusion_infill.infill.serve.client import WorkerClient

    options = {"order": "entropy-bound", "exact_length": True, "max_steps": steps, "checks": ""}
    conns = [WorkerClient(address) for _ in range(clients)]
    try:
        t0 = time.perf_counter()
        done = await asyncio.gather(
            *(c.fill(t, options=options) for c, t in zip(conns, texts(clients, span), strict=True))
        )
        wall = time.perf_counter() - t0
    finally:
        for c in conns:
            await c.close()
    tokens = sum(r.stats.tokens for r in done if r.stats)
    return {
        "seconds": wall,
        "ms_per_step": wall * 1000 / steps,
        "tokens": tokens,
        "tokens_per_s": tokens / wall,
    }


def _config(args: argparse.Namespace) -> Any:
    """The model's configuration: --config's, else the tiny or the full-size one."""
    if args.config:
        from transformers import DiffusionGemmaConfig

        return DiffusionGemmaConfig.from_pretrained(args.config.parent)
    return tiny_config() if args.tiny else full_config()


def run(args: argparse.Namespace) -> dict[str, Any]:
    from diffusion_infill.infill.serve.worker import Worker
    from diffusion_infill.model.diffusion_gemma import DiffusionGemmaDenoiser

    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if not args.tiny and device.type != "cuda":
        raise SystemExit(
            "bench_diffusion_gemma: the full-size model needs a CUDA GPU with "
            "about 60 GB free; use --tiny on a CPU"
        )
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    config = _config(args)
    t0 = time.perf_counter()
    model = build(config, device, dtype)
    built = time.perf_counter() - t0
    den = DiffusionGemmaDenoiser(model, gemma_tokenizer(), name="random", device=device)
    worker = Worker(denoiser=den)
    thread = threading.Thread(
        target=lambda: asyncio.run(worker.serve(f"unix:{args.socket}")), daemon=True
    )
    thread.start()
    if not worker.ready.wait(60):
        raise SystemExit("bench_diffusion_gemma: the worker did not start")
    rows: dict[str, dict[str, dict[str, float]]] = {}
    try:
        asyncio.run(measure(args.socket, SPANS["line"], 1, 2))  # warm-up
        for name in args.spans:
            rows[name] = {}
            for n in args.concurrency:
                assert worker.scheduler is not None
                before = (worker.scheduler.passes, den.decoder_passes, den.encoder_passes)
                row = asyncio.run(measure(args.socket, SPANS[name], n, args.steps))
                passes = max(1, worker.scheduler.passes - before[0])
                row["decoder_calls_per_pass"] = (den.decoder_passes - before[1]) / passes
                row["encoder_passes"] = den.encoder_passes - before[2]
                rows[name][str(n)] = row
                print(
                    f"span {name:>4s} clients {n:>2d}: {row['ms_per_step']:8.1f} ms/step "
                    f"{row['tokens_per_s']:9.1f} tok/s",
                    flush=True,
                )
    finally:
        worker.stop()
        thread.join(30)
    params = sum(p.numel() for p in model.parameters())
    return {
        "size": "tiny" if args.tiny else ("config" if args.config else "full"),
        "device": str(device),
        "device_name": (torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"),
        "dtype": str(dtype).removeprefix("torch."),
        "parameters": params,
        "build_seconds": built,
        "steps": args.steps,
        "weights": "random",
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="a 2-layer model (CPU, tests)")
    parser.add_argument("--config", type=Path, help="a DiffusionGemma config.json to build")
    parser.add_argument("--device", help="torch device (default: cuda when present)")
    parser.add_argument("--steps", type=int, default=48, help="denoising steps per fill")
    parser.add_argument(
        "--spans",
        type=lambda s: s.split(","),
        default=list(SPANS),
        help=f"comma-separated, of {', '.join(SPANS)}",
    )
    parser.add_argument(
        "--concurrency",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[1, 4, 16],
        help="comma-separated concurrent clients",
    )
    parser.add_argument(
        "--socket", default="/tmp/infill-bench-dg.sock", help="the worker's Unix socket"
    )
    parser.add_argument("--out", type=Path, help="results JSON path")
    args = parser.parse_args(argv)
    if args.steps < 1 or min(args.concurrency) < 1 or set(args.spans) - set(SPANS):
        parser.error(f"--steps and --concurrency must be positive; --spans of {', '.join(SPANS)}")
    results = run(args)
    name = f"{results['size']}_{results['device'].split(':')[0]}"
    write_results(
        "diffusion_gemma", Path(name), results, args.out or RESULTS / f"diffusion_gemma_{name}.json"
    )


if __name__ == "__main__":
    main()
