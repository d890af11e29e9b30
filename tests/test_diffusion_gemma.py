"""DiffusionGemma through the entry points users use, on tiny random models of the real
architecture (transformers' DiffusionGemmaConfig) built here: no weights, no network.

Nothing here says anything about fill quality (the weights are random); it checks the
mechanics: loading, one encoder pass per request, the code after a hole conditioning the
fill, exact lengths, the context byte for byte, repeatability, transformers' own sampler
reproduced token for token, batching and cancellation in the worker, and clear errors.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
from worker_fake_main import Raw, running

from benchmarks.bench_diffusion_gemma import gemma_tokenizer, tiny_config
from diffusion_infill.infill import SamplerOptions, fill_text
from diffusion_infill.infill.cli import main
from diffusion_infill.infill.core.canvas import Canvas, SpanSlots
from diffusion_infill.infill.core.errors import OptionError
from diffusion_infill.infill.core.sampler import DenoiseJob, denoise
from diffusion_infill.infill.serve.client import WorkerClient
from diffusion_infill.infill.serve.protocol import (
    CANCELLED,
    Cancel,
    Error,
    FillRequest,
    Result,
    Step,
)
from diffusion_infill.infill.serve.worker import Worker
from diffusion_infill.model import footprint
from diffusion_infill.model.denoiser import CacheHint, ModelLoadError
from diffusion_infill.model.loading import load_denoiser

CANVAS = 16  # the tiny model's canvas_length (256 in the released model)
EB = {"order": "entropy-bound", "max_steps": 8}  # 48 by default; fewer keep tests fast
TEXT = "def add(a, b):\n\treturn <mask:4>  \r\n\nx = add(1, 2)\nprint(x)\n"


def build(out: Path) -> Path:
    """A 2-layer DiffusionGemma (4 experts, vocabulary 512) and a local BPE tokenizer with
    Gemma's special-token names, saved as the released model is (safetensors)."""
    from transformers import DiffusionGemmaForBlockDiffusion

    torch.manual_seed(0)
    DiffusionGemmaForBlockDiffusion(tiny_config(CANVAS)).save_pretrained(out)
    gemma_tokenizer().save(str(out / "tokenizer.json"))
    return out


@pytest.fixture(scope="module")
def dg_dir(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("diffusion_gemma"))


@pytest.fixture(scope="module")
def den(dg_dir: Path):
    return load_denoiser(dg_dir, device="cpu")


# -- loading ------------------------------------------------------------------------


def test_the_directory_loads_offline_without_remote_code(den, dg_dir: Path) -> None:
    cfg = json.loads((dg_dir / "config.json").read_text())
    assert cfg["model_type"] == "diffusion_gemma" and "auto_map" not in cfg
    assert type(den).__name__ == "DiffusionGemmaDenoiser"
    assert (den.special.mask, den.special.null, den.special.pad) == (4, 1, 0)
    assert den.vocab_size == 512 and den.device.type == "cpu"
    assert den.decode(den.encode(TEXT)) == TEXT


def test_infill_fill_model_dir_fills_with_the_context_byte_for_byte(dg_dir, tmp_path, capsys):
    f = tmp_path / "m.py"
    f.write_bytes(TEXT.encode())
    assert (
        main(
            [
                "fill",
                "--model",
                str(dg_dir),
                "--device",
                "cpu",
                "--order",
                "entropy-bound",
                "--steps",
                "8",
                "--no-checks",
                "--exact-length",
                "--json",
                str(f),
            ]
        )
        == 0
    )
    obj = json.loads(capsys.readouterr().out)
    before, after = TEXT.split("<mask:4>")
    assert obj["text"].startswith(before) and obj["text"].endswith(after)
    assert obj["stats"]["tokens"] == 4 and "<mask" not in obj["text"]
    assert f.read_bytes() == TEXT.encode()  # not --in-place


def test_the_memory_needed_comes_from_the_safetensors_headers(dg_dir) -> None:
    params, stored = footprint.weights(dg_dir)
    assert stored == params * 4  # saved in fp32
    assert footprint.needed_bytes(dg_dir, torch.bfloat16) == int(params * 2 * footprint.HEADROOM)
    assert footprint.needed_bytes(dg_dir, torch.bfloat16, "4bit") < params


# -- infilling in the model's own terms ------------------------------------------------


def test_one_encoder_pass_per_request_however_many_steps_and_lengths(den) -> None:
    before = den.encoder_passes, den.decoder_passes
    r = fill_text("y = <mask>\nz = y\n", denoiser=den, lengths=3, **EB)
    assert den.encoder_passes - before[0] == 1
    assert den.decoder_passes - before[1] == r.stats.steps > 1  # 3 lengths share passes
    assert r.stats.nfe > r.stats.steps


def test_the_code_after_the_hole_conditions_the_hole(den) -> None:
    ids = den.encode("def f(a, b):\n    return ")
    suffix = den.encode(" + b\n\nprint(f(1, 2))\n")
    slots = list(range(len(ids), len(ids) + 4))

    def hole_logits(tail: list[int]) -> np.ndarray:
        hint = CacheHint(key=object(), active=tuple(slots), refresh=True, seed=3)
        (arr,) = den.logits([ids + [den.special.mask] * 4 + tail], [slots], [hint])
        return arr

    base = hole_logits(suffix)
    near = list(suffix)
    near[2] = den.encode("z")[0]  # inside the decoder canvas (16 tokens)
    finite = np.isfinite(base)  # the ids a fill never takes are -inf
    assert np.abs(hole_logits(near)[finite] - base[finite]).max() > 1e-3
    far = suffix + den.encode("\n# one more line after the canvas ends\n")
    np.testing.assert_array_equal(hole_logits(far), base)  # past the canvas: not read


def test_the_code_after_the_hole_is_never_noised_and_self_conditioning_is_fed_back(den):
    seen: list[dict] = []
    forward = den.model.forward

    def spy(*args, **kw):
        seen.append({k: kw.get(k) for k in ("decoder_input_ids", "self_conditioning_logits")})
        return forward(*args, **kw)

    den.model.forward = spy
    try:
        text = "q = <mask:3> * 2\n"
        fill_text(text, denoiser=den, exact_length=True, **EB)
    finally:
        del den.model.forward
    tail = den.encode(" * 2\n")
    assert len(seen) > 2
    for step in seen:
        assert step["decoder_input_ids"][0, 3:].tolist() == tail
    assert seen[0]["self_conditioning_logits"] is None
    assert all(s["self_conditioning_logits"] is not None for s in seen[1:])


@pytest.mark.parametrize(
    "options",
    [dict(EB, exact_length=True), dict(exact_length=True), dict(EB, lengths=4, exact_length=True)],
)
def test_exact_lengths(den, options) -> None:
    r = fill_text("s = <mask:5>\nt = s\n", denoiser=den, **options)
    assert [f.tokens for f in r.fills] == [5]


def test_a_raced_hole_takes_one_of_the_raced_lengths(den) -> None:
    # not cut at its statement's end (a random model may write a line break), so the
    # fill's tokens are the length it raced
    r = fill_text("s = <mask:4>\nt = s\n", denoiser=den, lengths=3, statement_ends=False, **EB)
    assert r.fills[0].tokens in (8, 4, 2)
    assert r.text.startswith("s = ") and r.text.endswith("\nt = s\n")


def test_the_same_seed_gives_the_same_fill(den) -> None:
    runs = [fill_text(TEXT, denoiser=den, seed=s, **EB).text for s in (7, 7, 8)]
    assert runs[0] == runs[1] and runs[0] != runs[2]


def test_threshold_decoding_and_a_chat_prompt_fill_too(dg_dir, caplog) -> None:
    with caplog.at_level(logging.INFO, logger="diffusion_infill.model.diffusion_gemma"):
        chat = load_denoiser(dg_dir, device="cpu", prompt="chat")
    assert any("the weights need" in r.getMessage() for r in caplog.records)
    for den, options in [(chat, EB), (chat, {"exact_length": True})]:
        r = fill_text(TEXT, denoiser=den, **options)
        before, after = TEXT.split("<mask:4>")
        assert r.text.startswith(before) and r.text.endswith(after)
    hint = CacheHint(key="k", active=(3, 4), refresh=True)
    prompt = chat._prompt(chat.encode("ab = cd\n"), [3, 4], 8)
    assert prompt[:2] == (chat.bos, chat._turn[0]) and chat._turn[1] in prompt
    assert chat.decode(list(prompt[2:])).count("<|hole|>") == 2  # instruction + the hole
    assert hint.seed is None


@pytest.mark.slow
def test_reproduces_transformers_generate_token_for_token(den, monkeypatch) -> None:
    """With no code after the hole the adapter and entropy-bound order are transformers'
    generate(). Where they differ, by design: (1) the candidate draw. generate() calls
    torch.multinomial on its global generator; the engine draws from its own numpy
    Generator (inverse CDF), so here torch.multinomial is replaced by the engine's draw
    rule over the same seed; the uniform noise comes from torch on both sides, in the same
    order. (2) The ids a fill never takes (special tokens) get -inf in the adapter's logits;
    generate() gets the same through a logits processor. Then every token matches."""
    from transformers import LogitsProcessor, LogitsProcessorList
    from transformers.models.diffusion_gemma.generation_diffusion_gemma import (
        EntropyBoundSamplerConfig,
    )

    seed, bound = 5, 2.5  # a random model is unsure: a wide bound accepts several per step
    prompt = den.encode("def add(a, b):\n    return a")
    canvas = Canvas(
        list(prompt), [SpanSlots(0, [den.special.mask] * CANVAS, CANVAS, True)], [], [], 4096
    )
    job = DenoiseJob(
        [canvas],
        SamplerOptions(order="entropy-bound", seed=seed, threshold=bound, max_steps=12),
        special=den.special,
        vocab_size=den.vocab_size,
    )
    denoise(job, den)
    ours = canvas.spans[0].ids

    draws = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0, 0)))

    def multinomial(probs, num_samples):  # the engine's pick_tokens, on torch's probs
        cdf = np.cumsum(probs.numpy().astype(np.float64), axis=-1)
        u = draws.random(len(cdf))[:, None] * cdf[:, -1:]
        return torch.from_numpy(np.minimum((cdf < u).sum(-1), cdf.shape[-1] - 1))[:, None]

    class Ban(LogitsProcessor):
        def __call__(self, input_ids, scores):
            return scores.index_fill(-1, torch.tensor(den.banned), float("-inf"))

    monkeypatch.setattr(torch, "multinomial", multinomial)
    torch.manual_seed(seed)
    out = den.model.generate(
        torch.tensor([[den.bos, *prompt]]),
        max_new_tokens=CANVAS,
        max_denoising_steps=12,
        sampler_config=EntropyBoundSamplerConfig(entropy_bound=bound),
        t_min=0.4,
        t_max=0.8,
        stability_threshold=1,
        confidence_threshold=0.005,
        logits_processor=LogitsProcessorList([Ban()]),
    )
    assert out.sequences[0, len(prompt) + 1 :].tolist() == ours
    assert job.steps == 12 and len(set(ours)) > 1


# -- the worker -------------------------------------------------------------------------


@pytest.fixture
def sock():
    d = tempfile.mkdtemp(prefix="idg-")
    yield f"{d}/w.sock"
    shutil.rmtree(d, ignore_errors=True)


TEXTS = ["a = <mask:3>\n", "b = <mask:3>\nz = 0\n", "c = <mask:3> + 1\n", "d = <mask:2>\n"]


def test_the_worker_batches_concurrent_requests_and_they_fill_as_in_process(dg_dir, den, sock):
    options = {"exact_length": True, "max_steps": 4}  # the worker picks entropy-bound

    async def go(address: str) -> list[Result]:
        clients = [WorkerClient(address) for _ in TEXTS]
        try:
            return await asyncio.gather(
                *(c.fill(t, options=options) for c, t in zip(clients, TEXTS, strict=True))
            )
        finally:
            for c in clients:
                await c.close()

    with running(Worker(model_dir=dg_dir, device="cpu"), sock) as w:
        results = asyncio.run(go(sock))
        assert w.scheduler is not None and w.scheduler.shared > 0
        assert w.denoiser.encoder_passes == len(TEXTS)
        assert not w.denoiser._states  # every canvas's state forgotten
    for text, r in zip(TEXTS, results, strict=True):
        local = fill_text(text, denoiser=den, order="entropy-bound", **options)
        assert r.text == local.text and r.stats.steps == local.stats.steps


def test_a_cancelled_request_stops_and_the_worker_goes_on(dg_dir, sock) -> None:
    with running(Worker(model_dir=dg_dir, device="cpu"), sock) as w:
        raw = Raw(sock)
        raw.send(
            FillRequest(
                1,
                "slow = <mask:8>\n",
                stream=True,
                options=SamplerOptions(order="entropy-bound", exact_length=True),
            )
        )
        assert isinstance(raw.recv(), Step)
        raw.send(Cancel(1))
        reply = raw.recv()
        while isinstance(reply, Step):
            reply = raw.recv()
        assert reply == Error(1, CANCELLED, "cancelled by the client")
        raw.send(
            FillRequest(
                2,
                "ok = <mask:2>\n",
                options=SamplerOptions(order="entropy-bound", exact_length=True, max_steps=4),
            )
        )
        done = raw.recv()
        while isinstance(done, Step):
            done = raw.recv()
        assert isinstance(done, Result) and done.text.startswith("ok = ")
        assert len(w.scheduler) == 0


# -- clear errors -------------------------------------------------------------------------


def test_cuda_without_a_gpu_is_refused(dg_dir, monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ModelLoadError, match="no CUDA GPU is available"):
        load_denoiser(dg_dir, device="cuda")


def test_too_little_memory_is_refused_before_loading(dg_dir, monkeypatch) -> None:
    monkeypatch.setattr(footprint, "free_bytes", lambda device: 1000)
    with pytest.raises(ModelLoadError, match=r"needs about .* GiB on cpu, but only"):
        load_denoiser(dg_dir, device="cpu")


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"dtype": "int8"}, "unsupported dtype 'int8'"),
        ({"quantize": "4bit"}, "need a CUDA device"),
        ({"quantize": "3bit"}, "unknown quantisation '3bit'"),
        ({"prompt": "xml"}, "unknown prompt layout 'xml'"),
    ],
)
def test_bad_load_options_are_refused(dg_dir, kw, needle) -> None:
    with pytest.raises(ModelLoadError, match=needle):
        load_denoiser(dg_dir, device="cpu", **kw)


def test_quantised_weights_need_bitsandbytes() -> None:
    with pytest.raises(ModelLoadError, match="bitsandbytes package, which is not installed"):
        footprint.quantization("8bit", torch.device("cuda"))


def test_a_corrupt_safetensors_header_is_refused(dg_dir, tmp_path) -> None:
    for f in dg_dir.iterdir():
        shutil.copy(f, tmp_path / f.name)
    (tmp_path / "model.safetensors").write_bytes(b"\xff" * 16)
    with pytest.raises(ModelLoadError, match="corrupt safetensors file"):
        load_denoiser(tmp_path, device="cpu")


def test_diffusion_gemma_options_are_refused_for_other_models(tiny_model_dir) -> None:
    with pytest.raises(ModelLoadError, match="are for DiffusionGemma models"):
        load_denoiser(tiny_model_dir, quantize="8bit")


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"temperature": 0.5}, "its own temperature schedule"),
        ({"tokens_per_step": 2}, "tokens_per_step does not apply"),
        ({"remask_threshold": 0.1}, "remasking does not apply"),
        ({"threshold": 0.0}, "must be > 0"),
    ],
)
def test_illegal_entropy_bound_options_are_refused(kw, needle) -> None:
    with pytest.raises(OptionError, match=needle):
        SamplerOptions(order="entropy-bound", **kw)


def test_the_worker_command_line_names_a_bad_quantisation(dg_dir) -> None:
    from diffusion_infill.infill.serve.worker import main as worker_main

    with pytest.raises(SystemExit) as exc:
        worker_main(["--model", str(dg_dir), "--quantize", "2bit"])
    assert exc.value.code == 2


@pytest.mark.slow
def test_the_speed_benchmark_runs_on_a_tiny_model(run_benchmark, tmp_path) -> None:
    out = tmp_path / "dg.json"
    done = run_benchmark(
        "bench_diffusion_gemma",
        "--tiny",
        "--device",
        "cpu",
        "--steps",
        "2",
        "--spans",
        "line,64",
        "--concurrency",
        "1,2",
        "--socket",
        str(tmp_path / "w.sock"),
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    res = json.loads(out.read_text())
    assert res["size"] == "tiny" and res["weights"] == "random" and res["steps"] == 2
    for span, tokens in (("line", 16), ("64", 64)):
        for n in (1, 2):
            row = res["rows"][span][str(n)]
            assert row["tokens"] == tokens * n and row["ms_per_step"] > 0
            assert row["encoder_passes"] <= n  # a prompt seen before is not encoded again


@pytest.mark.slow
def test_the_speed_benchmark_refuses_the_full_model_without_a_gpu(run_benchmark) -> None:
    done = run_benchmark("bench_diffusion_gemma", "--device", "cpu")
    assert done.returncode != 0 and "needs a CUDA GPU" in done.stderr
