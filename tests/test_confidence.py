"""A fill's confidence, its gate and its runner-ups: through `fill_text`, the `infill`
command, the worker's wire format, and the confidence weights beside a model."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence

import numpy as np
import pytest
from fakes import NULL, TargetDenoiser, is_slot

from diffusion_infill.infill.cli import main
from diffusion_infill.infill.core.confidence import Calibrator
from diffusion_infill.infill.core.engine import fill_spans, fill_text
from diffusion_infill.infill.core.errors import DenoiserError, OptionError
from diffusion_infill.infill.core.results import RunnerUp, SpanFill
from diffusion_infill.infill.core.spans import Span
from diffusion_infill.infill.serve.wire import FILLS
from diffusion_infill.model import loading
from diffusion_infill.model.calibration import (
    CALIBRATION,
    Calibration,
    load_calibration,
    parse_calibration,
    save_calibration,
)
from diffusion_infill.model.denoiser import CacheHint

# confidence = sigmoid(2 + 4 * mean log p): 0.88 for tokens the model gives 0.99, 0.32 for 0.5
CALIBRATED = Calibration("fake", ("mean log p",), (0.0,), (1.0,), (4.0,), 2.0)


def sigmoid(z: float) -> float:
    return 1 / (1 + math.exp(-z))


class Seconds(TargetDenoiser):
    """TargetDenoiser that also puts a second token at some slots: `seconds` maps a slot
    (of every span) to (the character, or None for a null, and its probability)."""

    def __init__(
        self, targets, *, seconds: dict[int, tuple[str | None, float]], calibrated=True, **kw
    ):
        super().__init__(targets, **kw)
        self.seconds = seconds
        self.calibration = CALIBRATED if calibrated else None

    def logits(
        self,
        canvases: Sequence[Sequence[int]],
        positions: Sequence[Sequence[int]],
        hints: Sequence[CacheHint | None] | None = None,
    ) -> list[np.ndarray]:
        out = super().logits(canvases, positions, hints)
        for canvas, pos, rows in zip(canvases, positions, out, strict=True):
            for r, p in enumerate(pos):
                start = p
                while start > 0 and is_slot(canvas[start - 1]):
                    start -= 1
                if is_slot(canvas[p]) and p - start in self.seconds:
                    ch, prob = self.seconds[p - start]
                    rows[r, NULL if ch is None else self.tok.fill_id(ch)] = math.log(prob)
        return out


def calibrated(targets, confidence=0.99) -> TargetDenoiser:
    den = TargetDenoiser(targets, confidence=confidence)
    den.calibration = CALIBRATED  # type: ignore[attr-defined]
    return den


# -- the engine --------------------------------------------------------------------------


def test_a_fill_has_no_confidence_without_confidence_weights():
    r = fill_text("def f(x):\n    return <mask>\n", denoiser=TargetDenoiser(["x + 1"]))
    assert r.fills[0].confidence is None
    assert r.to_dict()["fills"][0]["confidence"] is None


def test_the_confidence_follows_the_models_probabilities():
    sure = fill_text("y = <mask>\n", denoiser=calibrated(["x + 1"], 0.99)).fills[0]
    unsure = fill_text("y = <mask>\n", denoiser=calibrated(["x + 1"], 0.5)).fills[0]
    assert sure.text == unsure.text == "x + 1"
    assert sure.confidence == pytest.approx(sigmoid(2 + 4 * math.log(0.99)), abs=0.02)
    assert unsure.confidence == pytest.approx(sigmoid(2 + 4 * math.log(0.5)), abs=0.02)


def test_a_fill_with_a_null_between_its_tokens_has_a_confidence_and_no_cut_runner_up():
    # the model is least sure of a null at the second slot, which comes after the tokens
    # beyond it: the fill reads on across it
    def null_second(span: int, slot: int, call: int) -> tuple[str | None, float] | None:
        return (None, 0.6) if slot == 1 else None

    den = TargetDenoiser(["xz + 1"], confidence=0.99, script=null_second)
    den.calibration = CALIBRATED  # type: ignore[attr-defined]
    fill = fill_text("y = <mask>\n", denoiser=den, runner_ups=2).fills[0]
    assert fill.text == "x + 1"
    assert fill.confidence == pytest.approx(sigmoid(2 + 4 * math.log(0.99)), abs=0.02)
    assert all(r.text != "x" for r in fill.runner_ups)  # the tokens before the null


def test_a_fill_below_min_confidence_is_held_back():
    text = "a = <mask>\nb = <mask>\n"
    den = calibrated({"a = ": "1", "b = ": "2"}, 0.5)
    r = fill_text(text, denoiser=den, min_confidence=0.9)
    assert r.text == text and r.edits == []
    for f in r.fills:
        assert f.text == "<mask>" and f.tokens == 0
        assert f.rejected == f"its confidence {f.confidence:.2f} is below the minimum 0.9"
    assert r.stats.rejected == 2
    assert fill_text(text, denoiser=den, min_confidence=0.1).text == "a = 1\nb = 2\n"


def test_min_confidence_needs_confidence_weights():
    with pytest.raises(OptionError, match="min_confidence needs a model with confidence weights"):
        fill_text("y = <mask>\n", denoiser=TargetDenoiser(["1"]), min_confidence=0.5)


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"min_confidence": 1.5}, "min_confidence must be a number from 0 to 1, got 1.5"),
        ({"min_confidence": -0.1}, "min_confidence must be a number from 0 to 1"),
        ({"min_confidence": "high"}, "min_confidence must be a finite number, got 'high'"),
        ({"min_confidence": math.nan}, "min_confidence must be a finite number"),
        ({"runner_ups": -1}, "runner_ups must be >= 0"),
        ({"runner_ups": 9}, "runner_ups must be <= 8"),
        ({"runner_ups": 1.5}, "runner_ups must be an integer"),
    ],
)
def test_bad_confidence_options_are_clear_errors(options, needle):
    with pytest.raises(OptionError, match=needle.replace("(", r"\(")):
        fill_text("y = <mask>\n", denoiser=calibrated(["1"]), **options)


def test_runner_ups_are_the_tokens_second_at_the_least_sure_slots():
    # "x + 1": at slot 2 the model also sees "-", at slot 4 the fill could end
    den = Seconds(["x + 1"], confidence=0.9, seconds={2: ("-", 0.3), 4: (None, 0.2)})
    r = fill_text("y = <mask>\n", denoiser=den, runner_ups=3)
    (f,) = r.fills
    assert f.text == "x + 1"
    assert sorted(u.text for u in f.runner_ups) == ["x + ", "x - 1"]  # ends before "1"
    assert all(0 < u.confidence < 1 for u in f.runner_ups)
    assert f.runner_ups[0].confidence >= f.runner_ups[1].confidence  # surest first
    assert fill_text("y = <mask>\n", denoiser=den).fills[0].runner_ups == ()  # not asked


def test_runner_ups_pass_the_checks_as_the_fill_did():
    # `y = x ) 1` and `y = x +` do not parse: with the parse check neither is offered
    den = Seconds(["x + 1"], confidence=0.9, seconds={2: (")", 0.3), 4: (None, 0.2)})
    unchecked = fill_text("y = <mask>\n", denoiser=den, runner_ups=3).fills[0]
    assert sorted(u.text for u in unchecked.runner_ups) == ["x ) 1", "x + "]
    checked = fill_text("y = <mask>\n", denoiser=den, runner_ups=3, checks="parse").fills[0]
    assert checked.text == "x + 1" and checked.runner_ups == ()


def test_a_fill_cut_where_it_echoes_the_code_after_it_has_runner_ups_of_what_is_kept():
    # the fake writes `a)` and ends (a null second to `c`): the `)` is the one after the
    # hole, so the fill is `a`, and its runner-ups are of `a` alone (`b` second at slot 0)
    den = Seconds(["a)"], confidence=0.9, seconds={0: ("b", 0.3), 2: ("c", 0.3)})
    (f,) = fill_text("y = f(<mask>)\n", denoiser=den, runner_ups=3).fills
    assert f.text == "a" and 0 < f.confidence < 1
    assert [u.text for u in f.runner_ups] == ["b"]


def test_a_token_second_by_little_is_no_runner_up():
    den = Seconds(["x + 1"], confidence=0.9, seconds={2: ("-", 0.01)})
    assert fill_text("y = <mask>\n", denoiser=den, runner_ups=3).fills[0].runner_ups == ()


def test_runner_ups_without_confidence_weights_come_by_the_models_probabilities():
    den = Seconds(["x + 1"], confidence=0.9, seconds={2: ("-", 0.3)}, calibrated=False)
    (f,) = fill_spans("y = 0\n", [Span(4, 5)], denoiser=den, runner_ups=2).fills
    assert f.confidence is None
    assert f.runner_ups == (RunnerUp("x - 1", None),)


# -- the command -------------------------------------------------------------------------


@pytest.fixture
def seconds_model(monkeypatch):
    """The model loader returns a `Seconds` fake with confidence weights."""

    def load(model_dir=None, **kw):
        return Seconds({"return ": "z + 1"}, confidence=0.9, seconds={2: ("-", 0.3)})

    monkeypatch.setattr(loading, "load_denoiser", load)


def test_json_shows_each_fills_confidence_and_runner_ups(tmp_path, capsys, seconds_model):
    f = tmp_path / "m.py"
    f.write_text("def f(z):\n    return <mask>\n")
    assert main(["fill", "--json", "--lengths", "1", "--runner-ups", "2", str(f)]) == 0
    (fill,) = json.loads(capsys.readouterr().out)["fills"]
    assert fill["text"] == "z + 1" and 0 < fill["confidence"] < 1
    assert [u["text"] for u in fill["runner_ups"]] == ["z - 1"]
    assert 0 < fill["runner_ups"][0]["confidence"] < fill["confidence"]


def test_min_confidence_leaves_the_hole_with_one_line_on_stderr(tmp_path, capsys, seconds_model):
    f = tmp_path / "m.py"
    f.write_text("def f(z):\n    return <mask>\n")
    assert main(["fill", "--in-place", "--min-confidence", "0.99", str(f)]) == 0
    assert f.read_text() == "def f(z):\n    return <mask>\n"
    err = capsys.readouterr().err.strip().splitlines()
    (left,) = [line for line in err if "left as it was" in line]
    assert left.startswith(f"infill: {f}:2:12: left as it was: its confidence 0.")
    assert left.endswith("is below --min-confidence 0.99")
    assert main(["fill", "--in-place", "--min-confidence", "0.1", str(f)]) == 0
    assert f.read_text() == "def f(z):\n    return z + 1\n"


@pytest.mark.parametrize(("flag", "needle"), [("9", "runner_ups must be <= 8"), ("-1", ">= 0")])
def test_bad_runner_ups_are_usage_errors(tmp_path, capsys, seconds_model, flag, needle):
    f = tmp_path / "m.py"
    f.write_text("def f(z):\n    return <mask>\n")
    assert main(["fill", "--json", "--runner-ups", flag, str(f)]) == 2
    assert needle in capsys.readouterr().err


@pytest.mark.parametrize("value", ["abc", "1.5", "-0.1", "nan", ""])
@pytest.mark.parametrize("command", ["fill", "fix"])
def test_a_bad_min_confidence_is_a_usage_error(tmp_path, capsys, seconds_model, value, command):
    f = tmp_path / "m.py"
    f.write_text("y = <mask>\n")
    assert main([command, "--min-confidence", value, str(f)]) == 2
    err = capsys.readouterr().err
    assert f"--min-confidence must be a number from 0 to 1, got {value!r}" in err
    assert "Traceback" not in err


def test_min_confidence_with_a_model_without_weights_is_a_clear_error(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr(loading, "load_denoiser", lambda *a, **kw: TargetDenoiser({"= ": "1"}))
    f = tmp_path / "m.py"
    f.write_text("y = <mask>\n")
    assert main(["fill", "--min-confidence", "0.5", str(f)]) == 1
    err = capsys.readouterr().err
    assert "min_confidence needs a model with confidence weights" in err
    assert "Traceback" not in err


# -- the wire ----------------------------------------------------------------------------


def test_fills_carry_confidence_and_runner_ups_over_the_wire():
    fills = [
        SpanFill(Span(0, 6), "x + 1", 5, None, 0.75, (RunnerUp("x - 1", 0.2),)),
        SpanFill(Span(9, 15), "<mask>", 0, "its confidence 0.10 is below the minimum 0.5", 0.1),
        SpanFill(Span(20, 26), "y", 1),
    ]
    rows = FILLS.dump(fills)
    assert rows[2] == [20, 26, "y", 1]  # as a worker before these fields wrote it
    assert FILLS.check(json.loads(json.dumps(rows)), "fills") == fills
    old = FILLS.check([[0, 6, "x", 1, None]], "fills")[0]
    assert old.confidence is None and old.runner_ups == ()


# -- the weights beside a model ----------------------------------------------------------


def test_confidence_weights_round_trip_and_name_their_network(tmp_path, caplog):
    save_calibration(CALIBRATED, tmp_path)
    assert load_calibration(tmp_path, "fake") == CALIBRATED
    with caplog.at_level(logging.WARNING):
        assert load_calibration(tmp_path, "other") is None
    assert "was fitted on other weights (fake, these are other): no confidence" in caplog.text
    assert load_calibration(tmp_path / "none", "fake") is None


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ("not json", "cannot be read as confidence weights"),
        ('{"format": 2}', "is not confidence weights of format 1"),
        ('{"format": 1, "features": "x"}', "`features` must be a list of names"),
        (
            '{"format": 1, "features": ["a"], "mean": [0], "scale": [0], "weights": [1],'
            ' "bias": 0, "network": "fake"}',
            "`scale` must be above 0",
        ),
        (
            '{"format": 1, "features": ["a"], "mean": [0, 1], "scale": [1], "weights": [1],'
            ' "bias": 0, "network": "fake"}',
            "`mean` must be 1 finite numbers",
        ),
    ],
)
def test_unreadable_confidence_weights_are_clear_errors(tmp_path, data, needle):
    (tmp_path / CALIBRATION).write_text(data)
    with pytest.raises(ValueError, match=needle.replace("(", r"\(")):
        load_calibration(tmp_path, "fake")


def test_weights_that_name_a_feature_the_engine_lacks_are_refused():
    weights = parse_calibration({**CALIBRATED.to_json(), "features": ["no such"]}, "w")
    with pytest.raises(DenoiserError, match="'no such'"):
        Calibrator(weights)
