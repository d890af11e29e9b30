"""bf16 linear layers for inference under autocast: each linear layer's weights cast once, at
load, instead of at every pass.

bf16 inference runs the model under `torch.autocast` (model/hf.py), which computes a linear
layer in bf16 by casting its fp32 weights to bf16 at every call; its cache of casts lives
only as long as one autocast region, and every pass of the network is one region. So every
pass wrote a bf16 copy of every weight matrix first, whatever the rows it computed: on a
pass over a completion's few rows that copy cost more than the products. With the weights
stored in bf16, autocast has nothing to cast and computes exactly what it computed before
(the same bf16 weights, rounded once instead of at every pass): the same logits, the same
fills. On a 2-core Xeon with AMX, a line's completion took 73 instead of 111 ms p50
(docs/log/architecture.md, "bf16 weights cast once").

Only `nn.Linear` weights and biases change; embeddings, norms and the rest keep their
fp32 weights and compute as before (tests/test_precision.py compares the logits bit for
bit). A weight shared with another module (the decoder's,
tied to the token embeddings) is cast for the linear layer alone: the embedding keeps its
fp32 table.
"""

from __future__ import annotations

import torch


def bf16_linear_weights(model: torch.nn.Module) -> torch.nn.Module:
    """`model` with the weights and biases of its linear layers stored in bf16, in place
    (for inference under bf16 autocast); returned for chaining."""
    for module in model.modules():
        if not isinstance(module, torch.nn.Linear):
            continue
        for name in ("weight", "bias"):
            param = getattr(module, name)
            if param is None or not param.dtype.is_floating_point or param.dtype == torch.bfloat16:
                continue  # nothing to cast: absent, quantised codes, or bf16 already
            cast = param.detach().to(torch.bfloat16).clone()  # a copy: a tied weight untied
            setattr(module, name, torch.nn.Parameter(cast, requires_grad=False))
    return model
