"""Write a model's int8 calibration (model/smoothing.py) beside its weights.

python -m diffusion_infill.model.calibrate_int8 --model model/weights --corpus data/corpus_v2
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from diffusion_infill.model.denoiser import ModelLoadError
from diffusion_infill.model.loading import load_denoiser
from diffusion_infill.model.smoothing import (
    ALPHA,
    CALIBRATION,
    FILES,
    Calibration,
    completion_cases,
    input_max,
)


def calibrate(
    model_dir: Path, corpus: Path, files: int = FILES, alpha: float = ALPHA
) -> Calibration:
    """The calibration of the model in `model_dir`, measured in fp32 on the first `files`
    files of `corpus`/train.jsonl."""
    texts = []
    with (Path(corpus) / "train.jsonl").open() as fh:
        for line in fh:
            texts.append(json.loads(line)["text"])
            if len(texts) >= files:
                break
    den = load_denoiser(model_dir, device="cpu", dtype="fp32")
    cases = completion_cases(texts, den.encode, den.special.mask)
    maxima = input_max(den.model, lambda c: den.logits([c[0]], [c[1]]), cases)
    source = (
        f"{len(cases)} inline-completion canvases of the first {len(texts)} files "
        f"of {Path(corpus).name}/train.jsonl"
    )
    return Calibration(alpha, maxima, source)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, required=True, help="model directory to calibrate")
    parser.add_argument("--corpus", type=Path, required=True, help="folder with train.jsonl")
    parser.add_argument("--files", type=int, default=FILES)
    parser.add_argument("--alpha", type=float, default=ALPHA)
    args = parser.parse_args(argv)
    if not (args.corpus / "train.jsonl").is_file():
        parser.error(f"no train.jsonl in {args.corpus}")
    if args.files < 1:
        parser.error("--files must be at least 1")
    if not 0 < args.alpha <= 1:
        parser.error(f"--alpha must be in (0, 1], got {args.alpha}")
    try:
        cal = calibrate(args.model, args.corpus, args.files, args.alpha)
    except ModelLoadError as exc:
        parser.error(str(exc))
    (args.model / CALIBRATION).write_text(json.dumps(cal.to_json()) + "\n")
    print(f"wrote {args.model / CALIBRATION}: {cal.source}, alpha {cal.alpha}", file=sys.stderr)


if __name__ == "__main__":
    main()
