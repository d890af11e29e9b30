"""Ship a trained export as the default model: copy it to model/weights, write the card.

    python -m model.ship --export runs/small/export --eval benchmarks/results/eval_small.json

Refuses a checkpoint that does not beat the shipped one on held-out single-line exact match
(length left to the model) unless --force, and one over the 64 MiB size limit.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

WEIGHTS = Path(__file__).resolve().parent / "weights"
SIZE_LIMIT = 64 * 2**20
FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
         "training.json")


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def card(training: dict, ev: dict, size: int) -> str:
    t = training
    rows = []
    for key, label in (("single_line", "single-line, length left to the model"),
                       ("single_line_true_length", "single-line, true length given"),
                       ("multi_line", "multi-line (2-8 lines), length left to the model"),
                       ("multi_line_true_length", "multi-line, true length given")):
        r = ev[key]
        rows.append(f"| {label} | {_pct(r['exact_match'])} | {r['n']} | "
                    f"{r['nfe_per_token']:.2f} | {r['ms_p50']:.0f} |")
    acc = ev["masked_token_accuracy"]
    b = ev["bugs"]
    kinds = "\n".join(f"| {k} | {_pct(v['top1_localisation'])} | {_pct(v['exact_repair'])} | "
                      f"{v['n']} |" for k, v in b["by_kind"].items())
    return f"""# Model card: the shipped default (`model/weights`)

A masked-diffusion code model: `ModernBertForMaskedLM` trained from scratch by
`model/train.py` with the MDLM objective plus span masks, variable-length holes (`<null>`
tails) and random-token substitution (model/noising.py). Loads with
`AutoModelForMaskedLM.from_pretrained("model/weights")`; the engine uses it by default.

| | |
|---|---|
| preset | `{t['preset']}` |
| parameters | {t['parameters'] / 1e6:.2f}M (of which the tied 16k x hidden embedding is a large share) |
| canvas length | {t['seq_len']} tokens (the engine's window limit) |
| files on disk | {size / 2**20:.1f} MiB (bf16 safetensors + tokenizer) |
| training data | Python sources: standard library + pinned permissive PyPI wheels; see docs/DATA_CARD.md |
| tokens seen | {t['tokens'] / 1e6:.1f}M ({t['step']} steps of {t['batch_size']} x {t['seq_len']}) |
| compute | {t['minutes']:.0f} minutes on {t['device']} ({t.get('threads', '?')} threads), bf16 autocast: {t['bf16']} |
| peak learning rate | {t['lr']} (AdamW, warm-up then cosine to 10%) |
| validation loss | weighted {t['valid']['loss']:.3f}, masked CE {t['valid']['masked_ce']:.3f}, masked accuracy {_pct(t['valid']['masked_acc'])} |

## Evaluation (held-out test packages, engine's default sampler)

Command: `python -m benchmarks.eval_model` (results in
`benchmarks/results/eval_shipped.json`); {ev['seconds']:.0f} s on this machine.

| infill | exact match | n | NFE/token | p50 ms |
|---|---|---|---|---|
{chr(10).join(rows)}

Masked-token accuracy by mask rate (one forward pass):
{", ".join(f"{k}: {_pct(v)}" for k, v in acc.items())}.

Injected bugs (one per window): top-1 localisation {_pct(b['top1_localisation'])}, exact
repair {_pct(b['exact_repair'])} (n={b['n']}).

| bug kind | top-1 localisation | exact repair | n |
|---|---|---|---|
{kinds}

## Limits

Trained on a 2-core CPU for the time of one session: quality is bound by training
compute (see ../shared/notes/cpu-training-probe.md). Expect the right shape and
indentation more often than the right tokens. Python only. The `base` preset is meant for
a GPU run (issue: train `base` on a GPU).
"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--export", type=Path, required=True, help="an export folder")
    parser.add_argument("--eval", type=Path, required=True,
                        help="benchmarks.eval_model results for that export")
    parser.add_argument("--force", action="store_true",
                        help="ship even if it does not beat the current default")
    args = parser.parse_args(argv)
    ev = json.loads(args.eval.read_text())
    current = Path(__file__).resolve().parent.parent / "benchmarks/results/eval_shipped.json"
    if current.exists() and not args.force:
        old = json.loads(current.read_text())["single_line"]["exact_match"]
        new = ev["single_line"]["exact_match"]
        if new <= old:
            sys.exit(f"not shipped: single-line EM {new:.3f} does not beat {old:.3f}")
    size = sum((args.export / f).stat().st_size for f in FILES)
    if size > SIZE_LIMIT:
        sys.exit(f"not shipped: {size / 2**20:.1f} MiB is over the 64 MiB limit")
    WEIGHTS.mkdir(exist_ok=True)
    for f in FILES:
        shutil.copy2(args.export / f, WEIGHTS / f)
    training = json.loads((args.export / "training.json").read_text())
    (WEIGHTS / "MODEL_CARD.md").write_text(card(training, ev, size))
    shutil.copy2(args.eval, current)
    print(f"shipped {args.export} -> {WEIGHTS} ({size / 2**20:.1f} MiB)")


if __name__ == "__main__":
    main()
