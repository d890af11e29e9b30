"""Worker faults, through the worker's socket and the client: a spawned worker
exits 0 on SIGTERM, an oversized request is refused before it is sent and hurts no other
request, a partial frame followed by silence is closed, and closing a client while it
waits for its spawned worker to listen is a clean error. (kill -9 mid-request:
tests/test_client.py::test_kill_9_fails_pending_requests_at_once_and_the_next_one_...)"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest
from worker_fake_main import HERE, WorkerFake, running

from diffusion_infill.infill.serve.client import UNAVAILABLE, WorkerClient, WorkerError
from diffusion_infill.infill.serve.protocol import TOO_LARGE, Hello, Limits, Result, pack
from diffusion_infill.infill.serve.worker import Worker


@pytest.fixture
def sock():
    d = tempfile.mkdtemp(prefix="wf-")
    yield f"{d}/w.sock"
    shutil.rmtree(d, ignore_errors=True)


def _run(coro, timeout=30):
    return asyncio.run(asyncio.wait_for(coro, timeout))


def test_a_spawned_worker_exits_0_on_sigterm(sock):
    cmd = [sys.executable, str(HERE), "--socket", sock, "--exit-with-stdin"]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    try:

        async def go():
            async with WorkerClient(sock, connect_timeout=20) as c:
                return await c.fill("a = <mask>\n")

        deadline = time.monotonic() + 20
        while not os.path.exists(sock) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert isinstance(_run(go()), Result)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err.decode(errors="replace")
    assert b"Fatal Python error" not in err


def test_an_oversized_request_is_refused_before_it_is_sent(sock):
    with running(Worker(denoiser=WorkerFake(delay=0.002, confidence=0.5)), sock):

        async def go():
            async with WorkerClient(sock) as c:
                stepping = asyncio.Event()
                slow = asyncio.create_task(
                    c.fill("slow = <mask>\n", on_step=lambda _: stepping.set())
                )
                await asyncio.wait_for(stepping.wait(), 10)  # the worker is running it
                text = "中" * 1_500_000 + "\nx = <mask>\n"  # under max_text, over 4 MiB
                with pytest.raises(WorkerError) as big:
                    await c.fill(text)
                after = await c.fill("a = <mask>\n")
                return big.value, await slow, after

        big, slow, after = _run(go())
    assert big.code == TOO_LARGE and "frame limit" in big.message
    assert isinstance(slow, Result) and slow.text.startswith("slow = x")
    assert isinstance(after, Result)


def test_a_partial_frame_then_silence_is_closed_after_the_idle_timeout(sock):
    with running(Worker(denoiser=WorkerFake(), limits=Limits(frame_idle=0.5)), sock):
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(10)
        s.connect(sock)
        s.sendall(pack(Hello()))
        assert s.recv(65536)  # the welcome
        s.sendall(b"\x00\x00")  # half a length prefix, then nothing
        started = time.monotonic()
        assert s.recv(65536) == b""  # closed by the worker
        assert time.monotonic() - started < 5
        s.close()


def test_closing_a_client_while_its_worker_starts_is_a_clean_error(sock):
    never_listens = [sys.executable, "-c", "import time; time.sleep(30)"]

    async def go():
        client = WorkerClient(sock, spawn=never_listens, connect_timeout=20)
        connecting = asyncio.create_task(client.connect())
        while client.process is None:  # until the worker is spawned, waiting for its socket
            await asyncio.sleep(0.01)  # a polling interval, not a wait for the event
        await client.close()
        with pytest.raises(WorkerError) as failed:
            await connecting
        return failed.value

    err = _run(go())
    assert err.code == UNAVAILABLE


def test_kill_9_mid_request_fails_in_flight_requests_within_1s_and_recovers_in_10s(sock):
    cmd = [sys.executable, str(HERE), "--socket", sock, "--delay", "0.005"]

    async def go():
        client = WorkerClient(f"unix:{sock}", spawn=cmd, connect_timeout=30)
        try:
            events = [asyncio.Event() for _ in range(3)]
            tasks = [
                asyncio.create_task(client.fill("slow = <mask>\n", on_step=lambda _, e=e: e.set()))
                for e in events
            ]
            for e in events:
                await asyncio.wait_for(e.wait(), 10)
            os.kill(client.process.pid, signal.SIGKILL)
            killed = time.monotonic()
            outcomes = await asyncio.gather(*tasks, return_exceptions=True)
            failed = time.monotonic() - killed
            after = await client.fill("a = <mask>\n")
            return outcomes, failed, time.monotonic() - killed, after
        finally:
            await client.close()

    outcomes, failed, recovered, after = _run(go())
    assert all(isinstance(o, WorkerError) and o.code == UNAVAILABLE for o in outcomes)
    assert failed < 1.0, failed
    assert isinstance(after, Result) and recovered < 10.0, recovered


@pytest.mark.slow
def test_a_spawned_worker_with_the_shipped_model_exits_0_on_sigterm(sock):
    """With torch loaded the old stdin watcher aborted the interpreter at exit (-6)."""
    from diffusion_infill.model.loading import default_model_dir

    if not (default_model_dir() / "config.json").exists():
        pytest.skip("no shipped model")
    cmd = [
        sys.executable,
        "-m",
        "diffusion_infill.infill.serve.worker",
        "--socket",
        sock,
        "--exit-with-stdin",
        "--device",
        "cpu",
    ]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not os.path.exists(sock):  # listening: the model is loaded
            assert proc.poll() is None and time.monotonic() < deadline, "the worker never listened"
            time.sleep(0.1)  # a polling interval, not a wait for the event
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err.decode(errors="replace")
