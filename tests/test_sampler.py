"""The sampler: options validation, strategy helpers, and the DenoiseJob state machine."""

# A bare marker at column 0 is a line hole (infill/core/line_holes.py); these tests are of
# the sampler, so `line_holes=False` keeps each a plain hole of exactly its slots.

from __future__ import annotations

import numpy as np
import pytest
from fakes import MASK, NULL, VOCAB, FixedDenoiser, TargetDenoiser

from diffusion_infill.infill import (
    STRATEGIES,
    DenoiseJob,
    DenoiserError,
    OptionError,
    SamplerOptions,
    denoise,
    fill_text,
)
from diffusion_infill.infill.core.canvas import Canvas, SpanSlots
from diffusion_infill.infill.core.scoring import choose, entropy, pick_tokens, softmax

# -- options ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"order": "random"}, "unknown order 'random'; choose one of"),
        ({"threshold": 1.5}, "threshold for order 'confidence' must be in"),
        ({"threshold": -0.1}, "threshold for order 'confidence' must be in"),
        ({"order": "margin", "threshold": 2.0}, "threshold for order 'margin'"),
        ({"order": "entropy", "threshold": -1.0}, "threshold for order 'entropy'"),
        ({"threshold": float("nan")}, "threshold must be a finite number"),
        ({"order": "left-to-right", "threshold": 0.5}, "takes no threshold"),
        ({"order": "left-to-right", "tokens_per_step": 2}, "tokens_per_step does not apply"),
        ({"order": "left-to-right", "remask_threshold": 0.1}, "remasking does not apply"),
        ({"threshold": 0.8, "tokens_per_step": 2}, "either threshold or tokens_per_step"),
        ({"tokens_per_step": 0}, "tokens_per_step must be >= 1"),
        ({"max_steps": 0}, "max_steps must be >= 1"),
        ({"max_steps": 2.5}, "max_steps must be an integer"),
        ({"temperature": -1.0}, "temperature must be >= 0"),
        ({"temperature": float("inf")}, "temperature must be a finite number"),
        ({"seed": -3}, "seed must be >= 0"),
        ({"remask_threshold": 0.0}, "remask_threshold must be in (0, 1)"),
        ({"remask_threshold": 0.95}, "must be below the commit threshold (0.9)"),
        ({"remask_budget": 4}, "remask_budget needs remask_threshold"),
        ({"remask_threshold": 0.2, "remask_budget": 0}, "remask_budget must be >= 1"),
        ({"default_span_tokens": 0}, "default_span_tokens must be >= 1"),
        ({"default_span_tokens": 32, "max_span_tokens": 8}, "exceeds max_span_tokens"),
        ({"grow": -1}, "grow must be >= 0"),
        ({"grow_cap": 0}, "grow_cap must be >= 1"),
        ({"exact_length": "yes"}, "exact_length must be true or false"),
        ({"window_tokens": 4}, "window_tokens must be >= 8"),
        ({"max_span_tokens": True}, "max_span_tokens must be an integer"),
    ],
)
def test_invalid_options_are_rejected_up_front(kwargs, message):
    with pytest.raises(OptionError) as err:
        SamplerOptions(**kwargs)
    assert message in str(err.value)


def test_unknown_option_name_is_rejected_by_fill_text():
    with pytest.raises(OptionError, match="unknown option 'treshold'"):
        fill_text("<mask>", line_holes=False, denoiser=TargetDenoiser(["x"]), treshold=0.5)


def test_option_errors_come_before_any_forward_pass():
    d = TargetDenoiser(["x"])
    with pytest.raises(OptionError):
        fill_text("<mask>", line_holes=False, denoiser=d, order="left-to-right", threshold=0.9)
    assert d.calls == []


def test_effective_threshold_defaults_per_order():
    assert SamplerOptions().effective_threshold == 0.9
    assert SamplerOptions(order="margin").effective_threshold == 0.8
    assert SamplerOptions(order="entropy").effective_threshold == 0.5
    assert SamplerOptions(order="left-to-right").effective_threshold is None
    assert SamplerOptions(tokens_per_step=3).effective_threshold is None
    assert SamplerOptions(remask_threshold=0.1).effective_remask_budget == 32
    assert SamplerOptions().effective_remask_budget == 0


def test_registry_names():
    assert set(STRATEGIES) == {"confidence", "margin", "entropy", "left-to-right", "entropy-bound"}
    assert STRATEGIES["left-to-right"].sequential


# -- pure helpers ----------------------------------------------------------------------


def test_softmax_is_stable_and_handles_minus_inf():
    x = np.array([[1000.0, 999.0, -np.inf], [-1e30, 0.0, 0.0]], dtype=np.float32)
    p = softmax(x)
    assert p.dtype == np.float32
    assert np.all(np.isfinite(p))
    np.testing.assert_allclose(p.sum(axis=-1), 1.0, rtol=1e-6)
    assert p[0, 2] == 0.0
    np.testing.assert_allclose(p[0, 0], 1 / (1 + np.exp(-1)), rtol=1e-6)


def test_entropy_in_nats():
    p = np.array([[1.0, 0.0, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25]], dtype=np.float32)
    np.testing.assert_allclose(entropy(p), [0.0, np.log(4)], rtol=1e-6)


def test_choose_threshold_at_least_one_and_top_k():
    scores = np.array([0.2, 0.95, 0.5, 0.97])
    assert choose(scores, cut=0.9).tolist() == [1, 3]
    assert choose(scores, cut=0.99).tolist() == [3]  # none passes: the best one
    assert choose(scores, k=2).tolist() == [1, 3]
    assert choose(np.array([0.5, 0.5, 0.5]), k=2).tolist() == [0, 1]  # ties: leftmost
    assert choose(np.zeros(0), cut=0.5).tolist() == []


def test_pick_tokens_argmax_and_seeded_sampling():
    logits = np.log(np.array([[0.1, 0.6, 0.3]] * 200, dtype=np.float32))
    assert pick_tokens(logits, 0.0, None).tolist() == [1] * 200
    a = pick_tokens(logits, 1.0, np.random.default_rng(7))
    b = pick_tokens(logits, 1.0, np.random.default_rng(7))
    assert a.tolist() == b.tolist()
    freq = np.bincount(a, minlength=3) / 200
    assert abs(freq[1] - 0.6) < 0.15 and freq[0] < 0.25
    with pytest.raises(ValueError):
        pick_tokens(logits, 1.0, None)


# -- the job state machine -------------------------------------------------------------


def _canvas(n_slots: int, *, exact: bool = False, budget: int = 64) -> Canvas:
    return Canvas(
        left=[10, 11],
        spans=[SpanSlots(0, [MASK] * n_slots, 8, exact)],
        gaps=[],
        right=[12],
        budget=budget,
    )


def _row(token: int, p: float) -> np.ndarray:
    row = np.full(VOCAB, np.log((1 - p) / (VOCAB - 1)), dtype=np.float32)
    row[token] = np.log(p)
    return row


def test_job_requests_masked_positions_and_advances():
    d = TargetDenoiser(["ab"])
    job = DenoiseJob([_canvas(3)], SamplerOptions(), special=d.special, vocab_size=VOCAB)
    (req,) = job.requests()
    assert req.canvas == [10, 11, MASK, MASK, MASK, 12]
    assert req.positions == [2, 3, 4]
    job.advance([np.stack([_row(500, 0.99), _row(501, 0.5), _row(NULL, 0.5)])])
    assert job.canvases[0].spans[0].ids == [500, MASK, MASK]
    (req,) = job.requests()
    assert req.positions == [3, 4]
    job.advance([np.stack([_row(NULL, 0.99), _row(501, 0.3)])])
    assert job.canvases[0].spans[0].ids == [500, NULL, NULL]  # null ends the span
    assert job.done and job.steps == 2 and job.nfe == 2 and job.scored == 5
    assert job.trace[1].committed == ((0, 1), (0, 2))


def test_job_protocol_errors():
    d = TargetDenoiser(["a"])
    job = DenoiseJob(
        [_canvas(1, exact=True)], SamplerOptions(), special=d.special, vocab_size=VOCAB
    )
    with pytest.raises(RuntimeError, match="without requests"):
        job.advance([np.zeros((1, VOCAB))])
    job.requests()
    with pytest.raises(DenoiserError, match="shape"):
        job.advance([np.zeros((2, VOCAB))])
    job.requests()
    with pytest.raises(DenoiserError, match="2 logit arrays for 1 canvases"):
        job.advance([np.zeros((1, VOCAB))] * 2)
    job.requests()
    job.advance([_row(500, 0.99)[None]])
    assert job.done and job.steps == 1 and job.nfe == 1
    with pytest.raises(RuntimeError, match="done"):
        job.requests()


def test_exact_span_never_gets_null():
    # The model prefers null everywhere; an exact span must take its best real token.
    row = _row(NULL, 0.9)
    row[505] = np.log(0.09)
    d = FixedDenoiser(row)
    job = DenoiseJob(
        [_canvas(2, exact=True)], SamplerOptions(), special=d.special, vocab_size=VOCAB
    )
    denoise(job, d)
    assert job.canvases[0].spans[0].ids == [505, 505]


def test_special_ids_are_never_committed():
    row = np.zeros(VOCAB, dtype=np.float32)
    row[MASK] = 100.0
    row[0] = 90.0  # pad
    row[NULL] = 80.0
    row[600] = 1.0
    d = FixedDenoiser(row)
    job = DenoiseJob(
        [_canvas(2, exact=True)], SamplerOptions(), special=d.special, vocab_size=VOCAB
    )
    denoise(job, d)
    assert job.canvases[0].spans[0].ids == [600, 600]


@pytest.mark.parametrize("order", ["confidence", "margin", "entropy", "left-to-right"])
def test_every_order_fills_correctly(order):
    d = TargetDenoiser(["return x"], confidence=0.99)
    r = fill_text("def f(x):\n    <mask:8>\n", denoiser=d, order=order)
    assert r.text == "def f(x):\n    return x\n"


def test_confidence_threshold_commits_all_sure_positions_in_parallel():
    conf = {0: 0.99, 1: 0.5, 2: 0.97, 3: 0.3}
    d = TargetDenoiser(["abcd"], confidence=lambda k, j, c: conf.get(j, 0.99))
    r = fill_text("<mask:4>", line_holes=False, denoiser=d, exact_length=True)
    assert r.trace[0].committed == ((0, 0), (0, 2))
    assert r.trace[1].committed == ((0, 1),)  # none passes: only the best (0.5 > 0.3)
    assert r.trace[2].committed == ((0, 3),)
    assert r.stats.steps == 3 and r.stats.nfe == 3 and r.text == "abcd"


def test_lower_threshold_commits_more_per_step():
    conf = [0.99, 0.85, 0.8, 0.6]
    d = TargetDenoiser(["abcd"], confidence=lambda k, j, c: conf[j])
    r = fill_text("<mask:4>", line_holes=False, denoiser=d, exact_length=True, threshold=0.75)
    assert r.trace[0].committed == ((0, 0), (0, 1), (0, 2))
    assert r.stats.steps == 2


def test_margin_order_uses_top1_minus_top2():
    # With the fake, top2 is tiny, so margin ~ p: same schedule as confidence at 0.8.
    conf = [0.99, 0.85, 0.5]
    d = TargetDenoiser(["abc"], confidence=lambda k, j, c: conf[j])
    r = fill_text("<mask:3>", line_holes=False, denoiser=d, exact_length=True, order="margin")
    assert r.trace[0].committed == ((0, 0), (0, 1))
    assert r.stats.steps == 2


def test_entropy_order_commits_low_entropy_positions():
    conf = [0.999, 0.6, 0.999]
    d = TargetDenoiser(["abc"], confidence=lambda k, j, c: conf[j])
    r = fill_text(
        "<mask:3>", line_holes=False, denoiser=d, exact_length=True, order="entropy", threshold=0.1
    )
    assert r.trace[0].committed == ((0, 0), (0, 2))
    assert r.text == "abc"


def test_tokens_per_step_commits_exactly_k_best():
    conf = [0.5, 0.9, 0.7, 0.99, 0.6]
    d = TargetDenoiser(["abcde"], confidence=lambda k, j, c: conf[j])
    r = fill_text("<mask:5>", line_holes=False, denoiser=d, exact_length=True, tokens_per_step=2)
    assert r.trace[0].committed == ((0, 1), (0, 3))
    assert r.trace[1].committed == ((0, 2), (0, 4))
    assert r.trace[2].committed == ((0, 0),)
    assert r.stats.steps == 3


def test_left_to_right_commits_exactly_one_leftmost_per_step_and_scores_only_it():
    d = TargetDenoiser(["ab", "c"], confidence=0.99)
    r = fill_text("x = <mask:3>; y = <mask:2>", denoiser=d, order="left-to-right", grow=0)
    assert r.text == "x = ab; y = c"
    committed = [t.committed for t in r.trace]
    # a, b, null (ends span 0 at once), c, null
    assert committed == [((0, 0),), ((0, 1),), ((0, 2),), ((1, 0),), ((1, 1),)]
    assert all(len(p[0]) == 1 for _, p in d.calls)  # one position scored per pass
    assert r.stats.nfe == 5


def test_max_steps_commits_everything_in_the_last_step():
    d = TargetDenoiser(["abcdef"], confidence=0.3)
    r = fill_text("<mask:6>", line_holes=False, denoiser=d, max_steps=2, exact_length=True)
    assert r.stats.steps == 2
    assert len(r.trace[0].committed) == 1 and len(r.trace[1].committed) == 5
    assert r.text == "abcdef"


def test_max_steps_with_left_to_right_scores_all_in_the_last_step():
    d = TargetDenoiser(["abcd"], confidence=0.99)
    r = fill_text(
        "<mask:4>",
        line_holes=False,
        denoiser=d,
        order="left-to-right",
        max_steps=2,
        exact_length=True,
    )
    assert [len(p[0]) for _, p in d.calls] == [1, 3]
    assert r.text == "abcd"


def test_max_steps_one_is_one_forward_pass():
    d = TargetDenoiser(["hello"], confidence=0.2)
    r = fill_text("s = <mask>", denoiser=d, max_steps=1)
    assert r.stats.nfe == 1 and r.text == "s = hello"


def test_temperature_sampling_is_seeded():
    def fill(seed):
        d = TargetDenoiser(["abcdefgh"], confidence=0.4)
        return fill_text(
            "<mask:8>", line_holes=False, denoiser=d, temperature=1.0, seed=seed, exact_length=True
        ).text

    assert fill(3) == fill(3)
    assert len({fill(s) for s in range(4)}) > 1
    assert all(len(t) == 8 for t in (fill(1), fill(2)))


def test_temperature_zero_ignores_seed():
    d = TargetDenoiser(["abc"], confidence=0.4)
    a = fill_text("<mask>", line_holes=False, denoiser=d, seed=1).text
    b = fill_text("<mask>", line_holes=False, denoiser=d, seed=2).text
    assert a == b == "abc"


def test_remasking_corrects_a_token_whose_confidence_fell():
    # Pass 1 commits a wrong "X" at slot 0; from pass 2 on the model is sure of "a".
    def script(span, slot, call):
        return ("X", 0.99) if (slot == 0 and call == 1) else None

    d = TargetDenoiser(["abc"], confidence=lambda k, j, c: 0.99 if c == 1 else 0.95, script=script)
    r = fill_text("<mask:3>", line_holes=False, denoiser=d, remask_threshold=0.2, exact_length=True)
    assert r.text == "abc"
    assert r.trace[1].remasked == ((0, 0),)
    assert r.stats.remasks == 1
    # Step 2 scored the committed slots too; the last pass found the fill stable.
    assert r.trace[1].scored == 3
    assert r.trace[-1].committed == () and r.trace[-1].remasked == ()


def test_remask_budget_limits_remasks():
    def script(span, slot, call):
        return ("X", 0.99) if call == 1 else None

    d = TargetDenoiser(["abc"], confidence=0.95, script=script)
    r = fill_text(
        "<mask:3>",
        line_holes=False,
        denoiser=d,
        remask_threshold=0.2,
        remask_budget=1,
        exact_length=True,
    )
    assert r.stats.remasks == 1
    assert r.text.count("X") == 2


def test_without_remasking_committed_positions_are_never_scored():
    d = TargetDenoiser(["abcd"], confidence=lambda k, j, c: 0.99 if j < 2 else 0.5)
    fill_text("<mask:4>", line_holes=False, denoiser=d, exact_length=True)
    (_, p1), (_, p2), *_ = d.calls
    assert p1 == [[0, 1, 2, 3]]
    assert p2 == [[2, 3]]


def test_remasking_costs_one_verification_pass_when_nothing_changes():
    plain = fill_text(
        "<mask:3>", line_holes=False, denoiser=TargetDenoiser(["abc"]), exact_length=True
    )
    checked = fill_text(
        "<mask:3>",
        line_holes=False,
        denoiser=TargetDenoiser(["abc"]),
        exact_length=True,
        remask_threshold=0.5,
    )
    assert checked.stats.nfe == plain.stats.nfe + 1
    assert checked.text == plain.text == "abc"


# -- context reuse hints -----------------------------------------------------------------


def test_no_hints_unless_asked():
    d = TargetDenoiser(["ab"])
    fill_text("<mask:2>", line_holes=False, denoiser=d)
    assert d.hints and all(h is None for h in d.hints) and d.forgotten == []


def test_cache_hints_refresh_every_k_steps():
    conf = [0.99, 0.5, 0.4, 0.3, 0.2]
    d = TargetDenoiser(["abcde"], confidence=lambda k, j, c: conf[j])
    r = fill_text("x = <mask:5>;", denoiser=d, exact_length=True, cache_refresh=2, language=None)
    assert r.text == "x = abcde;" and r.stats.steps == 5
    hints = [h for (h,) in d.hints]
    assert [h.refresh for h in hints] == [True, False, True, False, True]
    assert len({h.key for h in hints}) == 1
    for h, (_, (pos,)) in zip(hints, d.calls, strict=True):
        assert h.active == (4, 5, 6, 7, 8)
        assert set(pos) <= set(h.active)
    assert d.forgotten == [hints[0].key]


def test_cache_hints_refresh_after_growth():
    d = TargetDenoiser(["abcdef"], confidence=0.99)
    r = fill_text("<mask:2>", line_holes=False, denoiser=d, grow=2, cache_refresh=100)
    assert r.text == "abcdef"
    grew = [bool(t.grown) for t in r.trace]
    refresh = [h.refresh for (h,) in d.hints]
    assert refresh[0] and refresh[1:] == grew[:-1]  # a pass after growth is a full one
    assert [len(h.active) for (h,) in d.hints] == [2, 4, 6, 8]


def test_a_carry_key_names_what_each_request_leaves_for_the_next():
    conf = [0.99, 0.5, 0.4, 0.3, 0.2]
    d = TargetDenoiser(["abcde"], confidence=lambda k, j, c: conf[j])
    for _ in range(2):  # two keystrokes' requests under one name
        fill_text(
            "x = <mask:5>;",
            denoiser=d,
            exact_length=True,
            cache_refresh=2,
            carry_key="doc",
            language=None,
        )
    hints = [h for (h,) in d.hints]
    # only a request's first pass may start from the last request's entries, all by name
    assert [h.carry is not None for h in hints] == [True, False, False, False, False] * 2
    assert hints[0].carry == hints[5].carry == ("carry", "doc", 0)
    assert [h.refresh for h in hints] == [True, False, True, False, True] * 2
    # each request's own entries are its own, and dropped when it ends; the named ones stay
    assert hints[0].key != hints[5].key
    assert d.forgotten == [hints[0].key, hints[5].key]


@pytest.mark.parametrize(
    "options, message",
    [
        ({"carry_key": "doc"}, "carry_key needs cache_refresh"),
        ({"carry_key": "doc", "cache_refresh": 4, "lengths": 5}, "lengths must be 1"),
        ({"carry_key": "x" * 5000, "cache_refresh": 4}, "at most 4096 characters"),
        ({"carry_key": 7, "cache_refresh": 4}, "carry_key must be a string"),
    ],
)
def test_bad_carry_keys_are_refused(options, message):
    with pytest.raises(OptionError, match=message):
        SamplerOptions(**options)


def test_cache_refresh_must_not_be_negative():
    with pytest.raises(OptionError, match="cache_refresh must be >= 0"):
        SamplerOptions(cache_refresh=-1)


# -- where a fill ends (eager_ends) ----------------------------------------------------


def _passes(target: str, confidence, **options) -> tuple[str, int]:
    d = TargetDenoiser([target], confidence=confidence)
    result = fill_text("x = <mask:6>\n", denoiser=d, grow=0, **options)
    return result.fills[0].text, result.stats.nfe


def test_no_pass_is_spent_on_nulls_alone():
    # The null tail is the most confident part (p 0.99 vs 0.5): the old sampler spends
    # its first pass committing only nulls; now that pass also commits a content token.
    def sure_of_the_end(span: int, slot: int, call: int) -> float:
        return 0.99 if slot >= 3 else 0.5

    assert _passes("abc", sure_of_the_end, eager_ends=False) == ("abc", 4)
    assert _passes("abc", sure_of_the_end) == ("abc", 3)


def test_a_span_whose_slots_all_predict_null_is_closed_in_the_same_pass():
    # Nothing is confident: one commit per pass; after "b" every masked slot predicts
    # null, so the span ends in that pass rather than in one more.
    assert _passes("ab", 0.5, eager_ends=False) == ("ab", 3)
    assert _passes("ab", 0.5) == ("ab", 2)


def test_eager_ends_never_commits_content_a_chosen_null_ends():
    # The first slot is a confident null: the span is empty, whatever the other slots say.
    def null_first(span: int, slot: int, call: int) -> tuple[str | None, float] | None:
        return (None, 0.99) if slot == 0 else None

    d = TargetDenoiser(["abc"], confidence=0.5, script=null_first)
    result = fill_text("x = <mask:6>\n", denoiser=d, grow=0)
    assert result.fills[0].text == "" and result.stats.nfe == 1


def test_eager_ends_is_validated():
    with pytest.raises(OptionError, match="eager_ends must be true or false"):
        SamplerOptions(eager_ends="yes")
