"""Fit the length head (model/length_head.py) on holes of the training split.

    python -m benchmarks.fit_length_head [--model DIR] [--train-files 8000] [--n 3000]
                                         [--n-valid 400] [--features DIR] [--no-save]

Draws one-line holes of the three shapes a user makes (the line's code, the whole line,
part of a line: benchmarks/shapes.py) from `--train-files` files of the training split, in
700-character windows and in the language server's excerpt, builds each hole's canvas as
the engine does (its default allocation of 16 slots), and keeps what the head reads of
the first pass over it (HFDenoiser.slot_features) with the truth's length in tokens. The
head is trained on those with the network frozen (AdamW, cross-entropy over the 17
classes); the epoch kept is the one with the lowest loss on the same draw from the
validation split. Prints how often the head's likeliest length is the truth's, per shape
and window, beside the network's own first-pass reading of its nulls, and writes the head
beside the weights (model/weights/length_head.safetensors unless --no-save) and the
figures to benchmarks/results/length_head_<checkpoint>.json.

About 25 minutes for the training holes on one CPU thread (`--features DIR` keeps them).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

from benchmarks.eval_shapes import checkpoint, truth_token_count
from benchmarks.heldout import EDITOR_WINDOW, HELDOUT_WINDOW_CHARS, load_test_files, prepare_hole
from benchmarks.results_file import write_results
from benchmarks.shapes import shape_examples
from diffusion_infill import infill
from diffusion_infill.model.length_head import (
    CLASSES,
    SLOTS,
    LengthHead,
    save_length_head,
)
from diffusion_infill.model.loading import default_model_dir, load_denoiser

SHAPES = ("cursor", "whole-line", "part-of-line")
WINDOWS = {"700": HELDOUT_WINDOW_CHARS, "editor": EDITOR_WINDOW}
# chosen on validation loss among widths 32-256, learning rates 1e-4-1e-3, decay 0.05-0.1
# (docs/ARCHITECTURE.md, "A length head read from the first pass"): the smallest learnt
# as much as any
HIDDEN, LR, WEIGHT_DECAY = 32, 1e-3, 0.1


def first_canvas(den, text: str, span: infill.Span, options) -> tuple[list[int], list[int]]:
    """The canvas of the first pass over one span's allocation, and the span's slots."""
    fill = prepare_hole(den, text, span, options)
    canvas = fill.job.canvases[0]
    first = canvas.offsets()[0]
    return canvas.ids(), list(range(first, first + len(canvas.spans[0].ids)))


def length_prior(null_lp: list[float], length: int) -> float:
    """log P(fill length = L) from the first pass's null probabilities."""
    not_null = [math.log1p(-min(math.exp(v), 1 - 1e-9)) for v in null_lp]
    if length > len(null_lp):
        return sum(not_null)
    end = null_lp[length] if length < len(null_lp) else 0.0
    return sum(not_null[:length]) + end


def hole_features(den, ex, options: infill.SamplerOptions) -> tuple | None:  # noqa: ANN001
    """(slot states, null log-probs, true length) of one hole's default allocation, or
    None where the engine gives it another (a window too tight to hold 16 slots)."""
    span = infill.Span(ex.start, ex.end, length=options.default_span_tokens)
    ids, slots = first_canvas(den, ex.text, span, options)
    if len(slots) != SLOTS:
        return None
    states, null = den.slot_features([ids], [[slots]])
    return states[0].half(), null[0], truth_token_count(den, ex, options)


def collect(den, files: list[str], n: int, seed: int) -> dict[str, torch.Tensor]:  # noqa: ANN001
    """Features of `n` holes per shape and window, with each hole's shape and window."""
    options = infill.SamplerOptions(length_head=False)  # a head already there: its slots
    states, nulls, lengths, groups = [], [], [], []
    for wi, (wname, chars) in enumerate(WINDOWS.items()):
        for si, shape in enumerate(SHAPES):
            examples = shape_examples(files, shape, n, seed=seed, window_chars=chars)
            for ex in tqdm(examples, desc=f"{shape}, {wname}", file=sys.stderr, leave=False):
                got = hole_features(den, ex, options)
                if got is not None:
                    states.append(got[0])
                    nulls.append(got[1])
                    lengths.append(got[2])
                    groups.append(wi * len(SHAPES) + si)
    return {
        "states": torch.stack(states),
        "nulls": torch.stack(nulls),
        "lengths": torch.tensor(lengths),
        "groups": torch.tensor(groups),
    }


def sample_files(corpus: Path, count: int, seed: int) -> list[str]:
    """`count` files of the training split, drawn at random without reading it all in."""
    path = corpus / "train.jsonl"
    with path.open() as fh:
        total = sum(1 for _ in fh)
    keep = set(random.Random(seed).sample(range(total), min(count, total)))
    with path.open() as fh:
        return [json.loads(line)["text"] for i, line in enumerate(fh) if i in keep]


def fit(
    train: dict[str, torch.Tensor], valid: dict[str, torch.Tensor], epochs: int, seed: int
) -> tuple[LengthHead, dict[str, float]]:
    """The head of the epoch with the lowest validation loss, and that epoch's figures."""
    torch.manual_seed(seed)
    head = LengthHead(train["states"].shape[-1], hidden=HIDDEN)
    opt = torch.optim.AdamW(head.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    xs, ns, ys = train["states"].float(), train["nulls"], classes(train["lengths"])
    best: tuple[float, int, dict] = (float("inf"), -1, {})
    for epoch in range(epochs):
        head.train()
        for batch in torch.randperm(len(ys)).split(256):
            loss = torch.nn.functional.cross_entropy(head(xs[batch], ns[batch]), ys[batch])
            opt.zero_grad()
            loss.backward()
            opt.step()
        head.eval()
        with torch.no_grad():
            logits = head(valid["states"].float(), valid["nulls"])
            nll = torch.nn.functional.cross_entropy(logits, classes(valid["lengths"])).item()
        if nll < best[0]:
            best = (nll, epoch, {k: v.clone() for k, v in head.state_dict().items()})
    head.load_state_dict(best[2])
    return head.eval(), {"valid_loss": round(best[0], 4), "epoch": best[1] + 1}


def classes(lengths: torch.Tensor) -> torch.Tensor:
    return lengths.clamp(max=CLASSES - 1).long()


def first_pass_prior(nulls: torch.Tensor) -> torch.Tensor:
    """log P(length = 0..16) from the network's own null probabilities at the first pass
    (`length_prior`), one row per hole."""
    return torch.tensor([[length_prior(row, n) for n in range(CLASSES)] for row in nulls.tolist()])


def accuracy(head: LengthHead, valid: dict[str, torch.Tensor]) -> dict[str, dict]:
    """Per shape and window: the head's likeliest length is the truth's (top-1), one of
    its two likeliest (top-2), within one token; the first-pass prior's top-1."""
    with torch.no_grad():
        logits = head(valid["states"].float(), valid["nulls"])
    prior = first_pass_prior(valid["nulls"]).argmax(1)
    truth = classes(valid["lengths"])
    top2 = logits.topk(2, dim=1).indices
    out: dict[str, dict] = {}
    for wi, wname in enumerate(WINDOWS):
        for si, shape in enumerate(SHAPES):
            m = valid["groups"] == wi * len(SHAPES) + si
            y, pred = truth[m], logits[m].argmax(1)
            out[f"{shape}, {wname}"] = {
                "n": int(m.sum()),
                "top1": round((pred == y).float().mean().item(), 4),
                "top2": round((top2[m] == y[:, None]).any(1).float().mean().item(), 4),
                "within_one": round(((pred - y).abs() <= 1).float().mean().item(), 4),
                "first_pass_prior_top1": round((prior[m] == y).float().mean().item(), 4),
            }
    return out


def features(den, args: argparse.Namespace, split: str) -> dict[str, torch.Tensor]:  # noqa: ANN001
    """The split's features, from --features when it holds them (else saved there)."""
    cached = args.features / f"{split}.pt" if args.features else None
    if cached is not None and cached.is_file():
        return torch.load(cached)
    if split == "train":
        got = collect(
            den, sample_files(args.corpus, args.train_files, args.seed), args.n, args.seed
        )
    else:
        got = collect(den, load_test_files(args.corpus, split), args.n_valid, 0)
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        torch.save(got, cached)
    return got


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    if min(args.train_files, args.n, args.n_valid, args.epochs) < 1:
        parser.error("--train-files, --n, --n-valid and --epochs must be >= 1")
    missing = [s for s in ("train", "valid") if not (args.corpus / f"{s}.jsonl").is_file()]
    if missing and not (
        args.features and all((args.features / f"{s}.pt").is_file() for s in missing)
    ):
        parser.error(
            f"{args.corpus / (missing[0] + '.jsonl')} not found: build the corpus with "
            "python -m diffusion_infill.model.training.corpus"
        )
    model = args.model or default_model_dir()
    den = load_denoiser(model)
    t0 = time.perf_counter()
    train, valid = features(den, args, "train"), features(den, args, "valid")
    head, fitted = fit(train, valid, args.epochs, args.seed)
    figures = accuracy(head, valid)
    for name, row in figures.items():
        print(f"{name:22s} {row}")
    if not args.no_save:
        print(f"wrote {save_length_head(head, model, den.network)}")
    command = ["python -m benchmarks.fit_length_head", *(sys.argv[1:] if argv is None else argv)]
    results = {
        "command": " ".join(command),
        "model": str(model),
        "train_holes": len(train["lengths"]),
        "valid_holes": len(valid["lengths"]),
        **fitted,
        "seconds": round(time.perf_counter() - t0, 1),
        "valid": figures,
    }
    out = args.out or Path("benchmarks/results") / f"length_head_{checkpoint(model)}.json"
    write_results("length_head", args.model, results, out)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", type=Path, default=None, help="model directory (default: shipped)")
    p.add_argument("--corpus", type=Path, default=Path("data/corpus_v2"))
    p.add_argument("--train-files", type=int, default=8000, help="files drawn from train")
    p.add_argument("--n", type=int, default=3000, help="training holes per shape and window")
    p.add_argument("--n-valid", type=int, default=400, help="validation holes per shape, window")
    p.add_argument("--epochs", type=int, default=12)
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--features", type=Path, default=None, help="keep the features here")
    p.add_argument("--no-save", action="store_true", help="report only; keep the head unsaved")
    p.add_argument("--out", type=Path, default=None)
    return p


if __name__ == "__main__":
    main()
