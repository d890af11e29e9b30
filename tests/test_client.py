"""The worker client over real sockets: requests, streaming, cancel, timeouts, a worker
killed with SIGKILL and restarted, the blocking wrapper, and `infill fill --worker`."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
from pathlib import Path

import pytest
from fakes import TargetDenoiser
from test_confidence import CALIBRATED
from worker_fake_main import HERE, WorkerFake, running

from diffusion_infill.infill import InfillError, SamplerOptions, Span, fill_text
from diffusion_infill.infill.cli import main as cli_main
from diffusion_infill.infill.core.repair import fix_text
from diffusion_infill.infill.core.results import TokenScore
from diffusion_infill.infill.serve.client import TIMEOUT, UNAVAILABLE, WorkerClient, WorkerError
from diffusion_infill.infill.serve.protocol import (
    CANCELLED,
    INPUT,
    UNAUTHORIZED,
    Result,
    Step,
    Welcome,
)
from diffusion_infill.infill.serve.sockets import default_socket_path
from diffusion_infill.infill.serve.sync_client import SyncWorkerClient
from diffusion_infill.infill.serve.worker import Worker
from diffusion_infill.model import loading


@pytest.fixture
def sock():
    d = tempfile.mkdtemp(prefix="ic-")
    yield f"{d}/w.sock"
    shutil.rmtree(d, ignore_errors=True)


def _run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


def _scores(scores: list[TokenScore]) -> list[tuple]:
    """Scores to compare across fakes: the fake's runners-up tie (1 - p spread evenly), so
    which of them is `likely` depends on the order its vocabulary was filled in; `likely`
    is compared only where one replacement stands out (p_likely: to float32's last bits,
    which follow the batch's summation order)."""
    return [
        (
            s.start,
            s.end,
            s.text,
            s.suspicion,
            round(s.p_likely, 5),
            s.likely if s.p_likely > 0.5 else None,
        )
        for s in scores
    ]


@pytest.mark.parametrize("calibrated", [True, False])
def test_the_welcome_says_whether_the_fills_carry_a_confidence(sock, calibrated):
    den = WorkerFake(confidence=0.5)
    den.calibration = CALIBRATED if calibrated else None
    with running(Worker(denoiser=den), sock):

        async def go():
            async with WorkerClient(sock) as c:
                return c.welcome

        welcome = asyncio.run(go())
    assert welcome is not None and welcome.confidence is calibrated


def test_fill_fix_score_info_match_the_in_process_engine(sock):
    with running(Worker(denoiser=WorkerFake(confidence=0.5)), sock):

        async def go():
            async with WorkerClient(sock) as c:
                assert isinstance(c.welcome, Welcome) and c.welcome.model == "fake"
                return await asyncio.gather(
                    c.fill("a = <mask>\nb = <mask>\n"),
                    c.fill(
                        "x = 1\nreturn y\n",
                        spans=[Span(13, 14)],
                        language=None,
                        options=SamplerOptions(threshold=0.4),
                    ),
                    c.fix("y = x - 1\n", max_fixes=1),
                    c.score("y = x - 1\n", start=4),
                    c.info(),
                )

        holes, spans, fix, scores, info = _run(go())
    local = fill_text("a = <mask>\nb = <mask>\n", denoiser=WorkerFake(confidence=0.5))
    assert (holes.text, holes.edits, holes.fills) == (local.text, local.edits, local.fills)
    assert spans.text == "x = 1\nreturn x + 1\n"
    local_fix, local_scores = fix_text("y = x - 1\n", denoiser=WorkerFake(confidence=0.5))
    assert (fix.text, fix.edits) == (local_fix.text, local_fix.edits)
    assert _scores(fix.scores) == _scores(local_scores)
    assert fix.text == "y = x + 1\n"
    assert _scores(scores) == _scores([s for s in local_scores if s.start >= 4])
    assert info.counters.requests == 4


def test_on_step_streams_the_canvas_settling(sock):
    steps: list[Step] = []
    with running(Worker(denoiser=WorkerFake(confidence=0.5)), sock):

        async def go():
            async with WorkerClient(sock) as c:
                return await c.fill("c = <mask>\n", on_step=steps.append)

        result = _run(go())
    assert [s.step for s in steps] == list(range(1, result.stats.steps + 1))
    assert steps[0].spans == [(0, "[" + "░" * 15)]
    assert steps[-1].spans[0][1].rstrip("∅") == "[1, 2, 3]"


def test_cancelling_the_caller_cancels_the_request_in_the_worker(sock):
    fake = WorkerFake(confidence=0.5, delay=0.002)
    with running(Worker(denoiser=fake), sock) as w:

        async def go():
            async with WorkerClient(sock) as c:
                started = asyncio.Event()
                task = asyncio.create_task(
                    c.fill("slow = <mask>\n", on_step=lambda _: started.set())
                )
                await started.wait()
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                info = await c.info()  # sent after the cancel on the same connection
                return info, await c.fill("a = <mask>\n")

        info, after = _run(go())
        assert info.counters.active == 0 and len(w.scheduler) == 0
        assert after.text == "a = 1 + 2\n"


def test_a_request_timeout_is_a_timeout_error_and_cancels_the_request(sock):
    with running(Worker(denoiser=WorkerFake(confidence=0.5, delay=0.002)), sock) as w:

        async def go():
            async with WorkerClient(sock) as c:
                with pytest.raises(WorkerError) as info:
                    await c.fill("slow = <mask>\n", timeout=0.05)
                return info.value, await c.info()

        error, info = _run(go())
        assert error.code == TIMEOUT and "0.05 s" in error.message
        assert info.counters.active == 0 and len(w.scheduler) == 0


def test_worker_errors_are_worker_errors_with_the_code(sock):
    with running(Worker(denoiser=WorkerFake(), token="t"), sock):

        async def go():
            async with WorkerClient(sock, token="t") as c:
                with pytest.raises(WorkerError) as bad:
                    await c.fill("no holes")
                return bad.value

        error = _run(go())
        assert (error.code, error.message) == (INPUT, "no holes: the text has no '<mask>' marker")
        with pytest.raises(WorkerError) as refused:
            _run(WorkerClient(sock, token="nope").connect())
        assert refused.value.code == UNAUTHORIZED


def test_no_worker_fails_fast(sock):
    with pytest.raises(WorkerError) as missing:
        _run(WorkerClient(sock, connect_timeout=5).fill("a = <mask>"))
    assert missing.value.code == UNAVAILABLE and "cannot connect" in missing.value.message
    crash = [sys.executable, "-c", "raise SystemExit(3)"]
    client = WorkerClient(sock, spawn=crash, connect_timeout=30)
    with pytest.raises(WorkerError) as died:
        _run(client.connect())
    assert died.value.code == UNAVAILABLE and "exit status 3" in died.value.message


def test_kill_9_fails_pending_requests_at_once_and_the_next_one_restarts_the_worker(sock):
    cmd = [sys.executable, str(HERE), "--socket", sock, "--delay", "0.005"]

    async def go():
        client = WorkerClient(f"unix:{sock}", spawn=cmd, connect_timeout=30)
        try:
            events = [asyncio.Event() for _ in range(3)]
            tasks = [
                asyncio.create_task(client.fill("slow = <mask>\n", on_step=lambda _, e=e: e.set()))
                for e in events
            ]
            for e in events:  # every request is in the middle of its denoising
                await asyncio.wait_for(e.wait(), 10)
            first = client.process.pid
            os.kill(first, signal.SIGKILL)
            outcomes = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 5)
            after = await client.fill("a = <mask>\n")
            return first, client.process.pid, outcomes, after
        finally:
            await client.close()

    first, second, outcomes, after = _run(go())
    for outcome in outcomes:
        assert isinstance(outcome, WorkerError) and outcome.code == UNAVAILABLE, outcome
        assert "killed by signal 9" in outcome.message or "closed" in outcome.message
    assert second != first
    assert isinstance(after, Result) and after.text == "a = 1 + 2\n"


def test_the_sync_client(sock):
    with (
        running(Worker(denoiser=WorkerFake(confidence=0.9)), sock),
        SyncWorkerClient(f"unix:{sock}") as c,
    ):
        assert c.fill("b = <mask>\n").text == "b = 'xyz'\n"
        assert c.info().model == "fake"
        assert c.score("a")[0].text == "a"
        with pytest.raises(InfillError) as info:  # refused before it is sent
            c.fill("b = <mask>\n", options={"order": "sideways"})
        assert info.value.code == INPUT and "unknown order 'sideways'" in info.value.message


def test_cancelled_error_code_reaches_a_client_that_awaits_the_reply(sock):
    """A cancel from elsewhere (e.g. another component holding the id) is reported."""
    with running(Worker(denoiser=WorkerFake(confidence=0.5, delay=0.002)), sock):

        async def go():
            async with WorkerClient(sock) as c:
                started = asyncio.Event()
                task = asyncio.create_task(
                    c.fill("slow = <mask>\n", on_step=lambda _: started.set())
                )
                await started.wait()
                c._cancel(1)  # the request's id: the first on this client
                with pytest.raises(WorkerError) as info:
                    await task
                return info.value

        assert _run(go()).code == CANCELLED


# -- infill fill --worker ---------------------------------------------------------------

TARGETS = {"= ": "42", "return ": "x + 1"}


@pytest.fixture
def local_model(monkeypatch):
    monkeypatch.setattr(
        loading, "load_denoiser", lambda *a, **kw: TargetDenoiser(TARGETS, confidence=0.99)
    )


def _cli(args, capsys):
    status = cli_main(args)
    out, err = capsys.readouterr()
    return status, out, err


def test_cli_fill_through_a_worker_prints_what_the_in_process_path_prints(
    sock, tmp_path, capsys, local_model
):
    a, b, bad = tmp_path / "a.py", tmp_path / "b.txt", tmp_path / "bad.py"
    a.write_text("def f(x):\n    return <mask>\n\ny = <mask>\n")
    b.write_text("total = <mask>\r\n")
    bad.write_text("x = <mask:999>\n")
    files = [str(a), str(b), str(bad)]
    with running(Worker(denoiser=TargetDenoiser(TARGETS, confidence=0.99)), sock):
        remote = _cli(["fill", "--worker", f"unix:{sock}", *files], capsys)
        remote_json = _cli(["fill", "--json", "--worker", sock, *files], capsys)
    local = _cli(["fill", *files], capsys)
    local_json = _cli(["fill", "--json", *files], capsys)
    assert remote[0] == local[0] == 1  # bad.py fails alone, the others are filled
    assert remote[1] == local[1] and "+    return x + 1\n" in remote[1]
    ms = re.compile(r"\d+ ms")
    assert ms.sub("ms", remote[2]) == ms.sub("ms", local[2])
    assert "bad.py:1:5: the span asks for 999 tokens" in remote[2]

    def without_ms(out):
        rows = [json.loads(line) for line in out.splitlines()]
        for r in rows:
            r["stats"].pop("ms")
        return rows

    assert without_ms(remote_json[1]) == without_ms(local_json[1])


def test_cli_uses_a_worker_running_on_the_default_socket(tmp_path, capsys, monkeypatch):
    runtime = tempfile.mkdtemp(prefix="rt-")  # short: AF_UNIX paths are ~107 bytes at most
    monkeypatch.setenv("XDG_RUNTIME_DIR", runtime)
    monkeypatch.delenv("INFILL_WORKER")

    def no_model(*a, **kw):
        raise loading.ModelLoadError("not loaded: the worker has it")

    monkeypatch.setattr(loading, "load_denoiser", no_model)
    f = tmp_path / "a.py"
    f.write_text("y = <mask>\n")
    try:
        status, _, err = _cli(["fill", str(f)], capsys)  # no worker: in process
        assert status == 1 and "not loaded" in err
        (Path(runtime) / "infill").mkdir(mode=0o700)
        stale = socket.socket(socket.AF_UNIX)  # bound, never listening: a killed worker's
        stale.bind(str(default_socket_path()))
        stale.close()
        assert _cli(["fill", str(f)], capsys)[0] == 1
        with running(
            Worker(denoiser=TargetDenoiser(TARGETS, confidence=0.99)), str(default_socket_path())
        ):
            status, out, _ = _cli(["fill", str(f)], capsys)
            assert status == 0 and "+y = 42" in out
            for asked in (["--model", str(tmp_path)], ["--trace"], ["--device", "cpu"]):
                assert _cli(["fill", *asked, str(f)], capsys)[0] == 1  # in process
            monkeypatch.setenv("INFILL_WORKER", "off")
            assert _cli(["fill", str(f)], capsys)[0] == 1
    finally:
        shutil.rmtree(runtime, ignore_errors=True)


def test_cli_worker_errors(sock, tmp_path, capsys):
    f = tmp_path / "a.py"
    f.write_text("x = <mask>\n")
    status, out, err = _cli(["fill", "--worker", f"unix:{sock}", str(f)], capsys)
    assert status == 1 and out == "" and err.startswith("infill: worker: cannot connect")
    status, _, err = _cli(["fill", "--worker", "tcp:nope", str(f)], capsys)
    assert status == 2 and "bad TCP address" in err
    status, _, err = _cli(["fill", "--worker", sock, "--trace", str(f)], capsys)
    assert status == 2 and "--trace is not available with --worker" in err
    status, _, err = _cli(["fill", "--worker", sock, "--model", "m", str(f)], capsys)
    assert status == 2 and "--worker spawn" in err
