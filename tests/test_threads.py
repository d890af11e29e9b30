"""The CPU threads of a pass (model/threads.py): one fewer while another process holds a
core, tried again later, never below one nor above what was asked for."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from diffusion_infill.model import threads
from diffusion_infill.model.threads import Reading, ThreadGovernor

CALM = Reading(wall=0.010, cpu=0.019, switches=0)  # both threads ran the whole pass
CROWDED = Reading(wall=0.040, cpu=0.040, switches=30)  # one thread's worth missing


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def governor(most: int = 2) -> tuple[ThreadGovernor, list[int], Clock]:
    applied: list[int] = []
    clock = Clock()
    return ThreadGovernor(most, applied.append, read=lambda: None, clock=clock), applied, clock


def test_two_crowded_passes_in_a_row_drop_a_thread_one_does_not() -> None:
    g, applied, _ = governor()
    g.observe(CROWDED)
    g.observe(CALM)
    g.observe(CROWDED)
    assert (g.threads, applied) == (2, [])
    g.observe(CROWDED)
    assert (g.threads, applied) == (1, [1])
    g.observe(CROWDED)  # one thread: nothing to read, nothing lower
    assert (g.threads, applied) == (1, [1])


@pytest.mark.parametrize(
    "reading",
    [
        Reading(wall=0.010, cpu=0.018, switches=12),  # preempted, but the CPU time is there
        Reading(wall=0.010, cpu=0.010, switches=1),  # a thread slept between products
        Reading(wall=0.001, cpu=0.001, switches=20),  # too short to tell
    ],
)
def test_passes_that_do_not_show_a_core_taken_keep_the_threads(reading: Reading) -> None:
    g, applied, _ = governor()
    for _ in range(5):
        g.observe(reading)
    assert (g.threads, applied) == (2, [])


def test_a_thread_is_tried_again_later_and_kept_where_the_pass_is_calm(caplog) -> None:
    caplog.set_level(logging.INFO, logger="diffusion_infill.model.threads")
    g, applied, clock = governor()
    g.observe(CROWDED)
    g.observe(CROWDED)
    clock.now += threads.PROBE_SECONDS / 2
    g.run(lambda: None)
    assert g.threads == 1  # not yet
    clock.now += threads.PROBE_SECONDS / 2
    g.run(lambda: None)
    assert (g.threads, applied) == (2, [1, 2])
    g.observe(CALM)
    clock.now += 100
    g.run(lambda: None)
    assert (g.threads, applied) == (2, [1, 2])  # all it was given: nothing more to try
    said = [r.getMessage() for r in caplog.records]
    assert said[0].startswith("1 CPU threads: another process holds a core (1.00 threads'")
    assert said[1:] == ["2 CPU threads: the cores are free again"]


def test_a_crowded_try_goes_back_and_the_next_waits_twice_as_long() -> None:
    g, applied, clock = governor()
    g.observe(CROWDED)
    g.observe(CROWDED)
    waits = []
    for _ in range(8):
        start = clock.now
        while g.threads == 1:
            clock.now += 0.25
            g.run(lambda: None)
        waits.append(clock.now - start)
        g.observe(CROWDED)  # the try: one crowded pass sends it back
        assert g.threads == 1
    assert waits[:4] == [k * threads.PROBE_SECONDS for k in (1, 2, 4, 8)]
    assert max(waits) == threads.PROBE_MOST_SECONDS
    assert applied[:4] == [1, 2, 1, 2]


def test_a_short_pass_on_a_tried_thread_leaves_the_judgement_to_the_next() -> None:
    g, _, clock = governor()
    g.observe(CROWDED)
    g.observe(CROWDED)
    clock.now += threads.PROBE_SECONDS
    g.run(lambda: None)
    g.observe(Reading(wall=0.001, cpu=0.001, switches=9))
    assert g.probing and g.threads == 2
    g.observe(CROWDED)
    assert g.threads == 1


def test_of_four_threads_one_is_dropped_where_one_core_is_taken() -> None:
    g, applied, _ = governor(most=4)
    busy = Reading(wall=0.020, cpu=0.060, switches=25)  # three threads' worth of time
    g.observe(busy)
    g.observe(busy)
    assert (g.threads, applied) == (3, [3])
    g.observe(busy)  # three threads' time on three threads: not crowded
    g.observe(busy)
    assert g.threads == 3


def test_one_thread_asked_for_or_no_readings_leave_the_count_alone() -> None:
    calls = []
    g = ThreadGovernor(1, calls.append, read=lambda: (0.0, 0.0, 99), clock=Clock())
    assert g.run(lambda: "done") == "done" and calls == [] and not g.active
    g = ThreadGovernor(2, calls.append, read=lambda: None, clock=Clock())
    for _ in range(3):
        assert g.run(lambda: 7) == 7
    assert calls == [] and g.threads == 2


def test_this_platform_reads_the_process() -> None:
    reading = threads.read_process()
    assert reading is not None
    wall, cpu, switches = reading
    assert wall > 0 and cpu > 0 and switches >= 0


def test_a_cpu_denoiser_reads_each_pass(tiny_model_dir: Path, monkeypatch) -> None:
    """The denoiser's passes go through its governor, which drops a thread where they
    are crowded (readings made up; torch's own count is left as it was)."""
    from diffusion_infill.model.loading import load_denoiser

    monkeypatch.setenv("INFILL_THREADS", "2")
    den = load_denoiser(tiny_model_dir, device="cpu")
    assert den.threads is not None and den.threads.most == 2
    applied: list[int] = []
    den.threads.set_threads = applied.append
    ticks = iter(range(1000))

    def read() -> tuple[float, float, int]:  # each pass 40 ms, one thread's CPU, preempted
        t = next(ticks)
        return t * 0.040, t * 0.040, t * 30

    den.threads.read = read
    canvas = den.encode("def f(x):\n    return x\n")
    den.logits([canvas], [[0, 1]])
    den.logits([canvas], [[0, 1]])
    assert applied == [1] and den.threads.threads == 1
