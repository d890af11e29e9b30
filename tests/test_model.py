"""The model side: tokenizer round trip, the training script end to end on a tiny corpus,
the noise's length contract, and the loader's refusals."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
from conftest import SOURCES
from tokenizers import Tokenizer

from diffusion_infill.model.loading import ModelLoadError, load_denoiser
from diffusion_infill.model.training import noising, train

ROUND_TRIP = [
    "\tx = 1  \r\n",
    "    return a\n\n\n   ",
    "s = '😀 中文 é'\n",
    "a = '<mask>'  # <null> <pad>\n",
    "",
    "\x00\x01 weird bytes \u2028 line sep",
]


@pytest.mark.parametrize("text", ROUND_TRIP)
def test_tokenizer_round_trips_whitespace_and_unicode(tok_dir: Path, text: str) -> None:
    tok = Tokenizer.from_file(str(tok_dir / "tokenizer.json"))
    tok.encode_special_tokens = True
    assert tok.decode(tok.encode(text).ids, skip_special_tokens=False) == text


def test_tokenizer_splits_newlines_into_their_own_tokens(tok_dir: Path) -> None:
    tok = Tokenizer.from_file(str(tok_dir / "tokenizer.json"))
    enc = tok.encode("x = 1\n    y = 2\n")
    newline_tokens = [t for t in enc.tokens if "Ċ" in t]
    assert newline_tokens == ["Ċ", "Ċ"]


def test_variable_length_examples_end_allocations_in_null(tok_dir: Path) -> None:
    tok = Tokenizer.from_file(str(tok_dir / "tokenizer.json"))
    vocab = noising.Vocab.of(tok)
    cfg = noising.NoiseConfig(
        p_tokens=0.0, p_block=0.0, p_short=0.0, max_background=0.0, p_substitute=0.0, p_identity=0.0
    )
    sampler = noising.TextSampler(SOURCES, window_chars=400, seed=0)
    batch = noising.make_batch(sampler, tok, vocab, 16, 64, cfg, random.Random(0))
    for ids, tgt, w in zip(batch.input_ids, batch.targets, batch.weights, strict=True):
        masked = (ids == vocab.mask).nonzero().flatten().tolist()
        assert masked, "every variable example has a hole"
        assert all(w[i] > 0 for i in masked)
        # Inside each run of masks, nulls only ever follow content, never precede it.
        runs: list[list[int]] = [[masked[0]]]
        for i in masked[1:]:
            (runs[-1].append(i) if i == runs[-1][-1] + 1 else runs.append([i]))
        for run in runs:
            labels = [int(tgt[i]) for i in run]
            first_null = labels.index(vocab.null) if vocab.null in labels else len(labels)
            assert all(t == vocab.null for t in labels[first_null:])


@pytest.mark.slow
def test_train_script_runs_resumes_and_exports_a_loadable_model(
    corpus: Path, tok_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    argv = [
        "--preset",
        "tiny",
        "--corpus",
        str(corpus),
        "--tokenizer",
        str(tok_dir / "tokenizer.json"),
        "--out",
        str(out),
        "--batch-size",
        "4",
        "--seq-len",
        "64",
        "--max-steps",
        "6",
        "--eval-every",
        "3",
        "--save-every",
        "3",
        "--quiet",
        "--no-bf16",
    ]
    train.main(argv)
    state = torch.load(out / "ckpt.pt", weights_only=False)
    assert state["step"] == 6
    train.main([*argv[:-4], "--max-steps", "8", "--quiet", "--no-bf16"])  # resumes
    assert torch.load(out / "ckpt.pt", weights_only=False)["step"] == 8
    assert (out / "loss.png").stat().st_size > 0

    from transformers import AutoModelForMaskedLM

    model = AutoModelForMaskedLM.from_pretrained(out / "export")
    assert model.config.max_position_embeddings == 64
    den = load_denoiser(out / "export")
    ids = den.encode("def add(a, b):\n")
    canvas = ids[:3] + [den.special.mask] * 2 + ids[5:]
    (logits,) = den.logits([canvas], [[3, 4]])
    assert logits.shape == (2, den.vocab_size)


def test_progress_bar_follows_a_token_budget(
    corpus: Path, tok_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train.main(
        [
            "--preset",
            "tiny",
            "--corpus",
            str(corpus),
            "--tokenizer",
            str(tok_dir / "tokenizer.json"),
            "--out",
            str(tmp_path / "run"),
            "--batch-size",
            "4",
            "--seq-len",
            "64",
            "--tokens",
            "600",
            "--eval-every",
            "100",
            "--save-every",
            "100",
            "--no-bf16",
        ]
    )
    bar = capsys.readouterr().err
    assert "100.0/100%" in bar and "0.0/100%" in bar


def test_loader_refuses_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="not found"):
        load_denoiser(tmp_path / "nope")


def test_loader_refuses_pickled_weights(tmp_path: Path, tok_dir: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "pytorch_model.bin").write_bytes(b"\x80\x04pickle")
    with pytest.raises(ModelLoadError, match="pickled weights are refused"):
        load_denoiser(tmp_path)


def test_loader_refuses_corrupt_weights(tmp_path: Path, tok_dir: Path) -> None:
    from transformers import BertConfig

    BertConfig(
        vocab_size=400,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
    ).save_pretrained(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"not a safetensors file")
    (tmp_path / "tokenizer.json").write_text((tok_dir / "tokenizer.json").read_text())
    with pytest.raises(ModelLoadError, match="cannot load model"):
        load_denoiser(tmp_path)


def test_loader_takes_any_local_masked_lm(tmp_path: Path, tok_dir: Path) -> None:
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    BertForMaskedLM(
        BertConfig(
            vocab_size=400,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=96,
        )
    ).save_pretrained(tmp_path)
    (tmp_path / "tokenizer.json").write_text((tok_dir / "tokenizer.json").read_text())
    den = load_denoiser(tmp_path)
    assert den.max_length == 96
    (logits,) = den.logits([den.encode("x = 1\n") + [den.special.mask]], [[0, 1]])
    assert logits.shape == (2, 400)


def test_loader_explains_that_packed_weights_are_for_the_projects_modernbert(
    tmp_path: Path, tok_dir: Path
) -> None:
    from transformers import BertConfig, BertForMaskedLM

    from diffusion_infill.model.training import packing

    BertForMaskedLM(
        BertConfig(
            vocab_size=400,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
        )
    ).save_pretrained(tmp_path / "bert")
    packing.pack(tmp_path / "bert", tmp_path / "packed")
    (tmp_path / "packed" / "tokenizer.json").write_text((tok_dir / "tokenizer.json").read_text())
    with pytest.raises(ModelLoadError, match="packed int8 weights.*model.training.packing unpack"):
        load_denoiser(tmp_path / "packed")


def test_loader_keeps_remote_code_off_unless_asked(tmp_path: Path, tok_dir: Path) -> None:
    config = {
        "model_type": "llada_like",
        "auto_map": {"AutoConfig": "cfg.LConfig", "AutoModel": "modeling.LModel"},
        "vocab_size": 400,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "cfg.py").write_text("raise SystemExit('remote code must not run')\n")
    (tmp_path / "model.safetensors").write_bytes(b"")
    (tmp_path / "tokenizer.json").write_text((tok_dir / "tokenizer.json").read_text())
    with pytest.raises(ModelLoadError, match="trust_remote_code"):
        load_denoiser(tmp_path)


REMOTE_CONFIG = """
from transformers import PretrainedConfig


class TinyDiffConfig(PretrainedConfig):
    model_type = "tiny_diff"

    def __init__(self, vocab_size=400, hidden_size=8, max_position_embeddings=64, **kw):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.max_position_embeddings = max_position_embeddings
        super().__init__(**kw)
"""

REMOTE_MODEL = """
import torch
from transformers import PreTrainedModel
from transformers.modeling_outputs import MaskedLMOutput

from .configuration_tiny import TinyDiffConfig


class TinyDiffModel(PreTrainedModel):
    config_class = TinyDiffConfig

    def __init__(self, config):
        super().__init__(config)
        self.embed = torch.nn.Embedding(config.vocab_size, config.hidden_size)
        self.out = torch.nn.Linear(config.hidden_size, config.vocab_size)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, **kwargs):
        return MaskedLMOutput(logits=self.out(self.embed(input_ids)))
"""


def test_loader_runs_remote_code_models_only_when_the_user_opts_in(
    tmp_path: Path, tok_dir: Path
) -> None:
    """LLaDA / Dream ship their modelling code in the directory (AutoModel in auto_map)."""
    (tmp_path / "configuration_tiny.py").write_text(REMOTE_CONFIG)
    (tmp_path / "modeling_tiny.py").write_text(REMOTE_MODEL)
    config = {
        "model_type": "tiny_diff",
        "vocab_size": 400,
        "hidden_size": 8,
        "max_position_embeddings": 64,
        "auto_map": {
            "AutoConfig": "configuration_tiny.TinyDiffConfig",
            "AutoModel": "modeling_tiny.TinyDiffModel",
        },
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    from safetensors.torch import save_file

    torch.manual_seed(0)
    save_file(
        {
            "embed.weight": torch.randn(400, 8),
            "out.weight": torch.randn(400, 8),
            "out.bias": torch.zeros(400),
        },
        str(tmp_path / "model.safetensors"),
    )
    (tmp_path / "tokenizer.json").write_text((tok_dir / "tokenizer.json").read_text())
    with pytest.raises(ModelLoadError, match="trust_remote_code"):
        load_denoiser(tmp_path)
    den = load_denoiser(tmp_path, trust_remote_code=True)
    ids = den.encode("x = 1\n")
    (logits,) = den.logits([ids + [den.special.mask]], [[len(ids)]])
    assert logits.shape == (1, 400)


def test_hf_denoiser_leaves_a_prompt_to_block_model_to_its_adapter(
    tmp_path: Path, tok_dir: Path
) -> None:
    """DiffusionGemma loads through model.diffusion_gemma (tests/test_diffusion_gemma.py);
    HFDenoiser says so instead of loading it as a masked LM."""
    from transformers import DiffusionGemmaConfig

    from diffusion_infill.model.hf import HFDenoiser

    DiffusionGemmaConfig().save_pretrained(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"")
    (tmp_path / "tokenizer.json").write_text((tok_dir / "tokenizer.json").read_text())
    with pytest.raises(ModelLoadError, match="model.diffusion_gemma loads"):
        HFDenoiser.load(tmp_path)
