"""The `infill-worker` command's arguments: where to listen, the model and how it runs, and
the limits (a flag per field of protocol.Limits, with its help and default)."""

from __future__ import annotations

import argparse
from dataclasses import fields

from diffusion_infill.infill.core.strategies import STRATEGIES
from diffusion_infill.infill.serve.protocol import Limits
from diffusion_infill.infill.serve.sockets import default_socket_path


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="infill-worker",
        description="Host the infilling engine and model; serve requests over a socket "
        "until SIGTERM/SIGINT.",
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--socket",
        metavar="PATH",
        help=f"Unix socket to listen on (default: {default_socket_path()})",
    )
    where.add_argument(
        "--listen", metavar="ADDRESS", help="unix:PATH, PATH, or tcp:HOST:PORT (TCP needs a token)"
    )
    p.add_argument(
        "--token-file",
        metavar="FILE",
        help="file holding the shared token (else $INFILL_WORKER_TOKEN)",
    )
    _add_model_arguments(p)
    p.add_argument(
        "--no-batching",
        action="store_true",
        help="one request per forward pass (to measure what batching brings)",
    )
    p.add_argument(
        "--exit-with-stdin",
        action="store_true",
        help="stop when stdin reaches end of file (set by a client that spawns "
        "the worker, so the worker ends with its parent)",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="log every request")
    _add_limit_arguments(p)
    return p


def _add_model_arguments(p: argparse.ArgumentParser) -> None:
    """The model, its device and precision, and how requests are decoded."""
    p.add_argument("--model", metavar="DIR", help="model directory (default: shipped)")
    p.add_argument("--device", help="torch device (default: cuda when present, else cpu)")
    p.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="allow a model directory's own code (LLaDA, Dream)",
    )
    p.add_argument(
        "--quantize",
        choices=["8bit", "4bit"],
        help="DiffusionGemma: 8-bit or 4-bit weights on a CUDA GPU (needs "
        "bitsandbytes; default: $INFILL_QUANTIZE, else bf16 on CUDA)",
    )
    p.add_argument(
        "--dtype",
        choices=["auto", "fp32", "bf16", "int8"],
        help="compute precision (default: $INFILL_DTYPE, else auto: bf16 where the "
        "CPU has it and it is faster, else int8 linear layers on a CPU)",
    )
    p.add_argument(
        "--prompt",
        choices=["code", "chat"],
        help="DiffusionGemma: the code before a hole as raw code (default) or as "
        "a chat turn (default: $INFILL_PROMPT, else code; docs/GPU.md)",
    )
    p.add_argument(
        "--order",
        choices=sorted(STRATEGIES),
        help="decode requests that ask for the default order (confidence) with "
        "this one (default: the model's own: entropy-bound for DiffusionGemma)",
    )


def _add_limit_arguments(p: argparse.ArgumentParser) -> None:
    lim = p.add_argument_group("limits")
    for f in fields(Limits):
        lim.add_argument(
            f"--{f.name.replace('_', '-')}",
            type=type(f.default),
            default=f.default,
            metavar="N",
            help=f"{f.metadata['help']} (default {f.default})",
        )
