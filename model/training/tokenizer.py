"""Byte-level BPE tokenizer for code, trained with `tokenizers` on the training split.

Every byte sequence round-trips exactly (byte-level alphabet, no normalisation, no prefix
space), and `\\n` is split off before BPE so a line edge is always a token edge: a hole
that covers whole lines then has clean token boundaries on both sides.

    python -m diffusion_infill.model.training.tokenizer --corpus data/corpus_v2 \\
        --out data/tokenizer --vocab 16384
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

# The special tokens the engine and the training objective rely on. Ids are looked up by
# name from the tokenizer, never hard-coded.
PAD = "<pad>"  # batch padding, never predicted
MASK = "<mask>"  # a position to be denoised
NULL = "<null>"  # "no token here": fills the unused tail of a span allocation
EOS = "<eos>"  # separates files in the training stream
SPECIAL_TOKENS = [PAD, MASK, NULL, EOS]


def build_tokenizer() -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(r"\n"), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    return tok


def corpus_texts(corpus: Path, split: str = "train") -> Iterator[str]:
    with (corpus / f"{split}.jsonl").open() as fh:
        for line in fh:
            yield json.loads(line)["text"]


def chars_per_token(tok: Tokenizer, corpus: Path, docs: int = 200) -> float:
    """Characters per token on the first `docs` validation files: turns a per-token loss
    or speed into a per-character one, so that vocabularies compare."""
    texts = [t for t, _ in zip(corpus_texts(corpus, "valid"), range(docs), strict=False)]
    tokens = sum(len(e.ids) for e in tok.encode_batch(texts))
    return sum(map(len, texts)) / max(1, tokens)


def train(corpus: Path, vocab_size: int) -> Tokenizer:
    tok = build_tokenizer()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=2,
        show_progress=True,
    )
    tok.train_from_iterator(corpus_texts(corpus), trainer=trainer)
    return tok


def save_for_transformers(tok: Tokenizer, out: Path) -> None:
    """tokenizer.json plus the config that lets `AutoTokenizer.from_pretrained` load it."""
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "pad_token": PAD,
        "mask_token": MASK,
        "eos_token": EOS,
        "additional_special_tokens": [NULL],
        "clean_up_tokenization_spaces": False,
        "model_max_length": 1_000_000,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=1))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--corpus",
        type=Path,
        default=Path("data/corpus_v2"),
        help="folder with train.jsonl from model.training.corpus",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("data/tokenizer"), help="output folder for tokenizer.json"
    )
    parser.add_argument("--vocab", type=int, default=16384, help="vocabulary size")
    args = parser.parse_args(argv)
    tok = train(args.corpus, args.vocab)
    save_for_transformers(tok, args.out)
    sample = next(corpus_texts(args.corpus, "valid"))
    ids = tok.encode(sample).ids
    assert tok.decode(ids) == sample, "tokenizer does not round-trip"
    print(
        f"vocab {tok.get_vocab_size()}, {len(sample) / len(ids):.2f} chars/token on a "
        f"validation file"
    )


if __name__ == "__main__":
    main()
