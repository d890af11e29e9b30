"""End a training run: ship the export as the default model, or keep it to resume from.

    python -m benchmarks.eval_model --model runs/long/export
    python -m diffusion_infill.model.training.release --export runs/long/export --eval benchmarks/results/eval_long.json

An export that beats the shipped model on the held-out evaluation (the sum of single-line
exact match with the engine's length and with the true length, multi-line exact match and
top-1 bug localisation) is copied to model/weights with a new model card; one that does not
is copied to model/resume, the one tracked folder each kept run overwrites, so that the
next run continues from it (`python -m diffusion_infill.model.training.train --init-from model/resume`). Weights
whose bf16 would not fit in 64 MiB are packed to int8 (model/training/packing.py; `--pack` packs any).
Either way the point is added to the learning curve across runs
(benchmarks/results/learning_curve.json, docs/img/learning_curve.png). Over 64 MiB even
packed is refused; --force ships regardless of the score.

The card is generated from the export's training.json and the evaluation; what is written
by hand below its `NOTES` line (each run's recipe, figures measured another way, the
models it replaced) is kept when a new model ships.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from diffusion_infill.model import weight_files
from diffusion_infill.model.training import packing
from diffusion_infill.model.training.cards import hand_written

ROOT = Path(__file__).resolve().parent.parent
WEIGHTS = ROOT / "model" / "weights"
RESUME = ROOT / "model" / "resume"  # a checkpoint that did not beat the shipped one
CURVE = ROOT / "benchmarks" / "results" / "learning_curve.json"
CURVE_PNG = ROOT / "docs" / "img" / "learning_curve.png"
SIZE_LIMIT = 64 * 2**20
NOTES = "<!-- hand-written history below this line is kept when model/training/release.py ships a model -->"
BESIDE = ("config.json", "tokenizer.json", "tokenizer_config.json", "training.json")


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _infill_rows(ev: dict) -> str:
    rows = []
    for key, label in (
        ("single_line", "single-line, length left to the model"),
        ("single_line_true_length", "single-line, true length given"),
        ("multi_line", "multi-line (2-8 lines), length left to the model"),
        ("multi_line_true_length", "multi-line, true length given"),
    ):
        r = ev[key]
        rows.append(
            f"| {label} | {_pct(r['exact_match'])} | {r['n']} | "
            f"{r['nfe_per_token']:.2f} | {r['ms_p50']:.0f} |"
        )
    return "\n".join(rows)


def _bug_rows(bugs: dict) -> str:
    return "\n".join(
        f"| {k} | {_pct(v['top1_localisation'])} | {_pct(v['exact_repair'])} | {v['n']} |"
        for k, v in bugs["by_kind"].items()
    )


def card(
    training: dict,
    ev: dict,
    size: int,
    notes: str = NOTES + "\n",
    canvas: int | None = None,
    form: str = "bf16",
) -> str:
    """The model card: generated from `training` and `ev`, then `notes` (the hand-written
    part of the card it replaces, from its NOTES line on: `hand_written`).
    `canvas`: the model's longest input (config.json), not the last run's batch length."""
    return _card_head(training, size, canvas, form) + _card_evaluation(ev) + _card_end(notes)


def _card_head(t: dict, size: int, canvas: int | None, form: str) -> str:
    """The card's title, what the model is, and its table: size, data, compute, loss."""
    threads = t.get("threads", "?")
    return f"""# Model card: the shipped default (`model/weights`)

A masked-diffusion code model: `ModernBertForMaskedLM` trained from scratch by
`model/training/train.py` with the MDLM objective plus span masks, variable-length holes (`<null>`
tails) and random-token substitution (model/training/noising.py). Loads with
`AutoModelForMaskedLM.from_pretrained("model/weights")`; the engine uses it by default.

| | |
|---|---|
| preset | `{t["preset"]}` |
| parameters | {t["parameters"] / 1e6:.2f}M (of which the tied 16k x hidden embedding is a large share) |
| canvas length | {canvas or t["seq_len"]} tokens (the engine's window limit) |
| files on disk | {size / 2**20:.1f} MiB (safetensors weights in {form}, tokenizer) |
| training data | Python sources: standard library + pinned permissive PyPI wheels; see docs/DATA_CARD.md |
| tokens seen | {t.get("tokens_total", t["tokens"]) / 1e6:.1f}M over all runs ({t["tokens"] / 1e6:.1f}M in the last: {t["step"]} steps of {t["batch_size"]} x {t["seq_len"]}) |
| compute (last run) | {t["minutes"]:.0f} minutes on {t["device"]} ({threads} thread{"" if threads == 1 else "s"}), {t.get("dtype", "bf16" if t.get("bf16") else "fp32")} ({t.get("dtype_reason", "")}) |
| peak learning rate | {t["lr"]} (AdamW, warm-up then cosine to 10%) |
| validation loss | weighted {t["valid"]["loss"]:.3f}, masked CE {t["valid"]["masked_ce"]:.3f}, masked accuracy {_pct(t["valid"]["masked_acc"])} |

"""


def _card_evaluation(ev: dict) -> str:
    """The card's held-out figures: infill exact match, masked-token accuracy, bugs."""
    acc = ev["masked_token_accuracy"]
    b = ev["bugs"]
    return f"""## Evaluation (held-out test packages, engine's default sampler)

Command: `python -m benchmarks.eval_model` (results in
`benchmarks/results/eval_shipped.json`); {ev["seconds"]:.0f} s on this machine.

| infill | exact match | n | NFE/token | p50 ms |
|---|---|---|---|---|
{_infill_rows(ev)}

Masked-token accuracy by mask rate (one forward pass):
{", ".join(f"{k}: {_pct(v)}" for k, v in acc.items())}.

Injected bugs (one per window): top-1 localisation {_pct(b["top1_localisation"])}, exact
repair {_pct(b["exact_repair"])} (n={b["n"]}).

| bug kind | top-1 localisation | exact repair | n |
|---|---|---|---|
{_bug_rows(b)}

"""


def _card_end(notes: str) -> str:
    """The card's learning curve and limits, then the hand-written `notes`."""
    return f"""## Learning curve across runs

Held-out figures and validation loss of every shipped or kept checkpoint against the tokens
it has seen (`benchmarks/results/learning_curve.json`, drawn by `model/training/release.py`):

![learning curve](../../docs/img/learning_curve.png)

## Limits

Quality is bound by training compute (a few GPU minutes and some CPU hours; see
docs/TRAINING.md and ../shared/notes/cpu-training-probe.md). Expect the right shape and
indentation more often than the right tokens. Python only.

{notes}"""


HELD_OUT = (
    ("single_line", "single-line EM, engine's length"),
    ("single_line_true_length", "single-line EM, true length"),
    ("multi_line", "multi-line EM, engine's length"),
)


def score(ev: dict) -> float:
    """One number to compare checkpoints: the sum of the held-out target figures
    (three exact-match rates and top-1 bug localisation)."""
    return sum(ev[key]["exact_match"] for key, _ in HELD_OUT) + ev["bugs"]["top1_localisation"]


def curve_point(training: dict, ev: dict, where: str) -> dict:
    valid = training.get("valid", {})
    return {
        "date": time.strftime("%Y-%m-%d"),
        "where": where,
        "tokens_total": training.get("tokens_total", training.get("tokens", 0)),
        "valid_loss": valid.get("loss"),
        "valid_masked_ce": valid.get("masked_ce"),
        **{key: ev[key]["exact_match"] for key, _ in HELD_OUT},
        "bug_top1": ev["bugs"]["top1_localisation"],
        "bug_repair": ev["bugs"]["exact_repair"],
        # multi-line exact match has been 0% at every checkpoint; how near the fills
        # come is what moves (benchmarks/infill_scores.py `closeness`; None in older records)
        "multi_line_similarity": ev.get("multi_line_true_length", {}).get("similarity"),
    }


def plot_curve(points: list[dict], path: Path) -> None:
    """Held-out exact match and validation loss against tokens seen, across runs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = sorted(points, key=lambda p: p["tokens_total"])
    x = [p["tokens_total"] / 1e6 for p in points]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for key, label in HELD_OUT:
        left.plot(x, [100 * p[key] for p in points], "o-", label=label)
    left.plot(x, [100 * p["bug_top1"] for p in points], "o-", label="bug top-1 localisation")
    near = [
        (xi, p["multi_line_similarity"])
        for xi, p in zip(x, points, strict=True)
        if p.get("multi_line_similarity") is not None
    ]
    if near:
        left.plot(
            [a for a, _ in near],
            [100 * b for _, b in near],
            "d--",
            label="multi-line similarity to the truth, true length (x100)",
        )
    left.set_xlabel("tokens seen (M)")
    left.set_ylabel("held-out test packages (%)")
    left.legend(fontsize=8)
    left.grid(alpha=0.3)
    right.plot(x, [p["valid_masked_ce"] for p in points], "s-", label="validation masked CE")
    right.plot(x, [p["valid_loss"] for p in points], "o-", label="validation weighted loss")
    right.set_xlabel("tokens seen (M)")
    right.legend(fontsize=8)
    right.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def copy_export(export: Path, dest: Path, pack: bool = False) -> tuple[int, str]:
    """Copy the export's weights and files into `dest`: (bytes, the weights' form). The
    weights go as exported (bf16, or int8 if the export holds only packed ones) when
    everything fits in 64 MiB, else packed to int8 (model/training/packing.py: a model grown by
    model.training.grow); `pack` packs them regardless. Over the limit even packed, nothing is
    copied; `dest`'s other weights file is removed."""
    beside = sum((export / f).stat().st_size for f in BESIDE)
    with tempfile.TemporaryDirectory() as tmp:
        weights = export / weight_files.WEIGHTS
        if not weights.is_file():  # packed already (a GPU run's export of a grown model)
            weights = export / weight_files.PACKED
        elif pack or beside + weights.stat().st_size > SIZE_LIMIT:
            weights = Path(tmp) / weight_files.PACKED
            packing.pack_file(export / weight_files.WEIGHTS, weights)
        size = beside + weights.stat().st_size
        if size > SIZE_LIMIT:
            sys.exit(f"not copied: {size / 2**20:.1f} MiB is over the 64 MiB limit")
        dest.mkdir(parents=True, exist_ok=True)
        for f in BESIDE:
            shutil.copy2(export / f, dest / f)
        shutil.copy2(weights, dest / weights.name)
    for stale in {weight_files.WEIGHTS, weight_files.PACKED} - {weights.name}:
        (dest / stale).unlink(missing_ok=True)
    form = (
        "int8, packed by model/training/packing.py"
        if weights.name == weight_files.PACKED
        else "bf16"
    )
    return size, form


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--export", type=Path, required=True, help="an export folder")
    parser.add_argument(
        "--eval", type=Path, required=True, help="benchmarks.eval_model results for that export"
    )
    parser.add_argument(
        "--force", action="store_true", help="ship even if it does not beat the current default"
    )
    parser.add_argument(
        "--pack", action="store_true", help="ship the weights as int8 even if bf16 fits in 64 MiB"
    )
    args = parser.parse_args(argv)
    ev = json.loads(args.eval.read_text())
    training = json.loads((args.export / "training.json").read_text())
    current = ROOT / "benchmarks/results/eval_shipped.json"
    old = score(json.loads(current.read_text())) if current.exists() else float("-inf")
    beats = score(ev) > old
    if beats or args.force:
        notes = hand_written(WEIGHTS / "MODEL_CARD.md", NOTES)
        size, form = copy_export(args.export, WEIGHTS, args.pack)
        config = json.loads((args.export / "config.json").read_text())
        (WEIGHTS / "MODEL_CARD.md").write_text(
            card(training, ev, size, notes, config.get("max_position_embeddings"), form)
        )
        shutil.copy2(args.eval, current)
        where, what = "weights", f"shipped to {WEIGHTS}"
    else:
        size, _ = copy_export(args.export, RESUME, args.pack)
        shutil.copy2(args.eval, RESUME / "eval.json")
        where, what = (
            "resume",
            (
                f"kept in {RESUME} (held-out score {score(ev):.3f} does not "
                f"beat the shipped {old:.3f})"
            ),
        )
    points = json.loads(CURVE.read_text()) if CURVE.exists() else []
    points.append(curve_point(training, ev, where))
    CURVE.write_text(json.dumps(points, indent=1) + "\n")
    plot_curve(points, CURVE_PNG)
    print(f"{args.export}: {what} ({size / 2**20:.1f} MiB); learning curve: {CURVE_PNG}")


if __name__ == "__main__":
    main()
