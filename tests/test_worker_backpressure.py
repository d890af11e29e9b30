"""What a worker sends to a client that does not read, over real sockets: its step events
pause, past `max_queued` its requests end with `slow_reader`, and it is closed when it
still does not read, the worker's memory bounded and given back while other clients are
served; and a frame over `max_frame` gets its `too_large` reply whatever its real size."""

from __future__ import annotations

import asyncio
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from worker_fake_main import HERE, Raw, WorkerFake, running

from diffusion_infill.infill.serve.client import UNAVAILABLE, WorkerClient, WorkerError
from diffusion_infill.infill.serve.protocol import (
    SLOW_READER,
    TOO_LARGE,
    Error,
    FillRequest,
    InfoRequest,
    Limits,
    Message,
    Result,
    Step,
    WorkerInfo,
)
from diffusion_infill.infill.serve.worker import Worker

MIB = 1024 * 1024
FLOOD_TEXT = 512 * 1024  # a never-reading client's texts (and results)


@pytest.fixture
def sock():
    d = tempfile.mkdtemp(prefix="wb-")
    yield f"{d}/w.sock"
    shutil.rmtree(d, ignore_errors=True)


def _padded(head: str, size: int) -> str:
    """`head`, then comment lines up to `size` characters (a big text, a big result)."""
    line = "# a line that only makes the text long\n"
    return head + line * (size // len(line))


def _settled(address: str, requests: int, timeout: float = 30.0) -> None:
    """Wait until the worker has received `requests` requests and runs none (asked on a
    connection of its own)."""
    probe = Raw(address)
    deadline = time.monotonic() + timeout
    try:
        while True:
            probe.send(InfoRequest(1))
            info = probe.recv()
            assert isinstance(info, WorkerInfo)
            if info.counters.requests >= requests and info.counters.active == 0:
                return
            assert time.monotonic() < deadline, f"still running: {info.counters}"
            threading.Event().wait(0.02)
    finally:
        probe.close()


def _replies(raw: Raw, ids: set[int]) -> tuple[dict[int, Result | Error], list[Message]]:
    """Read until every id in `ids` has its reply: (reply by id, every message read)."""
    replies: dict[int, Result | Error] = {}
    read: list[Message] = []
    while set(replies) != ids:
        msg = raw.recv()
        assert msg is not None, f"closed; replies for {sorted(replies)} only"
        read.append(msg)
        if not isinstance(msg, Step):
            assert isinstance(msg, Result | Error) and msg.id in ids and msg.id not in replies
            replies[msg.id] = msg
    return replies, read


def _steps(read: list[Message], rid: int) -> int:
    return sum(isinstance(m, Step) and m.id == rid for m in read)


def test_step_events_pause_while_the_client_does_not_read_and_resume_after(sock):
    with running(Worker(denoiser=WorkerFake(confidence=0.5, delay=0.005)), sock):
        raw = Raw(sock)
        raw.send(FillRequest(1, "slow = <mask:120>\n", stream=True))  # 120 steps
        assert isinstance(raw.recv(), Step)  # it runs
        big = _padded("a = <mask>\n", 1_900_000)  # a 1.9 MB result: more than a socket takes
        raw.send(FillRequest(2, big, language=None))
        _settled(sock, 2)  # not reading meanwhile
        replies, read = _replies(raw, {1, 2})
        assert isinstance(replies[2], Result) and len(replies[2].text) > 1_800_000
        assert isinstance(replies[1], Result) and replies[1].text.startswith("slow = xxx")
        after_big = read[read.index(replies[2]) :]
        assert _steps(after_big, 1) == 0  # skipped while the big result waited
        assert replies[1].stats.steps >= 100 and _steps(read, 1) < 50
        raw.send(FillRequest(3, "slow = <mask:120>\n", stream=True))  # it reads now
        replies, read = _replies(raw, {3})
        assert _steps(read, 3) == replies[3].stats.steps  # every step again


def test_past_max_queued_requests_end_with_slow_reader_and_a_reader_goes_on(sock):
    limits = Limits(max_queued=256 * 1024, send_grace=60.0)
    with running(Worker(denoiser=WorkerFake(confidence=0.5, delay=0.01), limits=limits), sock):
        raw = Raw(sock)
        slow = {1, 2, 3}  # 64 steps of 10 ms each: running when the client falls behind
        for rid in slow:
            raw.send(FillRequest(rid, "slow = <mask>\n", stream=True))
        big = set(range(4, 14))  # 10 results of 150 KB: far past what the socket takes
        for rid in big:
            raw.send(FillRequest(rid, _padded("a = <mask>\n", 150_000), language=None))
        _settled(sock, len(slow | big))
        replies, _ = _replies(raw, slow | big)  # reading within send_grace: kept open
        refused = {rid for rid, r in replies.items() if isinstance(r, Error)}
        assert {replies[rid].code for rid in refused} == {SLOW_READER}
        assert slow <= refused and big & refused and big - refused
        assert "did not read its replies" in replies[1].message
        assert "max_queued" in replies[1].message
        raw.send(FillRequest(20, "a = <mask>\n"))
        replies, _ = _replies(raw, {20})
        assert replies[20].text == "a = 1 + 2\n"


def test_a_client_that_sends_bad_frames_and_never_reads_is_closed(sock):
    """Each bad frame gets an error reply: those wait for the client like any reply."""
    limits = Limits(max_queued=64 * 1024, send_grace=0.5)
    with running(Worker(denoiser=WorkerFake(), limits=limits), sock):
        raw = Raw(sock)
        bad = struct.pack(">I", 1) + b"\xc1"  # not msgpack: a bad_request error each
        started = time.monotonic()
        with pytest.raises(OSError):  # the worker stops reading, then closes
            raw.sock.sendall(bad * 200_000)
        assert time.monotonic() - started < 8
        first = raw.recv()  # what had reached the socket is still there to read
        assert isinstance(first, Error) and first.code == "bad_request"


# -- a client that never reads, against a worker process --------------------------------


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _flood(address: str, outcome: dict[str, object]) -> None:
    """Send streamed fills of big texts and never read, until the worker closes the
    connection (or 1.6 GB were sent)."""
    raw = Raw(address)
    raw.sock.settimeout(60)
    text = _padded("a = <mask>\n", FLOOD_TEXT)
    started = time.monotonic()
    try:
        for rid in range(1, 3200):
            raw.send(FillRequest(rid, text, language=None, stream=True))
        outcome["closed"] = False
    except OSError:
        outcome["closed"] = True
    outcome["seconds"] = time.monotonic() - started
    raw.close()


async def _fill_times(address: str, flooding: threading.Thread | None, n: int) -> list[float]:
    """Seconds of each fill of one client: `n` of them, or as many as fit while
    `flooding` runs."""
    times: list[float] = []
    async with WorkerClient(address) as client:
        while len(times) < n or (flooding is not None and flooding.is_alive()):
            started = time.monotonic()
            result = await client.fill("a = <mask>\n")
            times.append(time.monotonic() - started)
            assert result.text == "a = 1 + 2\n"
            if flooding is not None and len(times) > 5000:
                break
    return times


def _wait_for_socket(path: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while not Path(path).exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the worker did not start"
        threading.Event().wait(0.02)


@pytest.mark.slow
def test_a_client_that_never_reads_is_closed_and_the_memory_comes_back(sock):
    cmd = [sys.executable, str(HERE), "--socket", sock, "--max-queued", str(MIB)]
    proc = subprocess.Popen([*cmd, "--send-grace", "1"])
    try:
        _wait_for_socket(sock, proc)
        calm = asyncio.run(_fill_times(sock, None, 40))  # also warms the worker up
        before = _rss_mb(proc.pid)
        outcome: dict[str, object] = {}
        flooding = threading.Thread(target=_flood, args=(sock, outcome))
        peak = before
        sampler_done = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not sampler_done.wait(0.01):
                peak = max(peak, _rss_mb(proc.pid))

        sampler = threading.Thread(target=sample)
        sampler.start()
        flooding.start()
        busy = asyncio.run(_fill_times(sock, flooding, 5))
        flooding.join(60)
        sampler_done.set()
        sampler.join()
        deadline = time.monotonic() + 20
        while (after := _rss_mb(proc.pid)) > before + 16 and time.monotonic() < deadline:
            threading.Event().wait(0.05)
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    assert outcome["closed"], f"the worker kept reading a client that never reads ({outcome})"
    assert outcome["seconds"] < 20, outcome
    assert peak - before <= 64, (before, peak, after)
    assert after - before <= 16, (before, peak, after)
    # the other client's fills: as quick as without the flood, give or take a scheduler turn
    assert statistics.median(busy) <= statistics.median(calm) + 0.25, (calm, busy)
    assert max(busy) <= max(calm) + 1.0, (calm, busy)


# -- frames over max_frame ----------------------------------------------------------------


def _token_worker(address: str) -> Worker:
    return Worker(denoiser=WorkerFake(), token="t" if address.startswith("tcp") else None)


@pytest.mark.parametrize("address", ["unix", "tcp:127.0.0.1:0"])
def test_a_real_5_mib_frame_gets_its_too_large_reply(sock, address):
    address = sock if address == "unix" else address
    with running(_token_worker(address), address) as w:
        raw = Raw(str(w.address), token="t" if address.startswith("tcp") else None)
        body = b"\x81" + b"x" * (5 * MIB)  # over the default limit of 4 MiB
        raw.sock.sendall(struct.pack(">I", len(body)) + body)  # the whole frame goes out
        reply = raw.recv()
        assert isinstance(reply, Error) and (reply.id, reply.code) == (None, TOO_LARGE)
        assert f"a frame of {len(body)} bytes exceeds the limit of {4 * MIB}" in reply.message
        assert raw.recv() is None  # and the connection ends
        after = Raw(str(w.address), token="t" if address.startswith("tcp") else None)
        after.send(FillRequest(1, "a = <mask>\n"))
        assert after.recv().text == "a = 1 + 2\n"


def test_a_frame_claiming_more_than_it_sends_gets_the_reply_and_the_end_at_once(sock):
    with running(Worker(denoiser=WorkerFake()), sock):
        raw = Raw(sock)
        raw.sock.sendall(struct.pack(">I", 2**32 - 1) + b"x" * 1000)  # then nothing
        started = time.monotonic()
        reply = raw.recv()
        assert isinstance(reply, Error) and reply.code == TOO_LARGE and reply.id is None
        assert raw.recv() is None
        assert time.monotonic() - started < 5  # the reply and the end do not wait for it


def test_a_client_told_a_bigger_limit_than_the_workers_gets_too_large(sock):
    with running(Worker(denoiser=WorkerFake(), limits=Limits(max_frame=4096)), sock):

        async def go():
            async with WorkerClient(sock) as client:  # assumes the default 4 MiB
                with pytest.raises(WorkerError) as refused:
                    await client.fill(_padded("a = <mask>\n", 8192), language=None)
                again = await client.fill("a = <mask>\n")  # a fresh connection
                return refused.value, again

        refused, again = asyncio.run(asyncio.wait_for(go(), 30))
    assert refused.code == TOO_LARGE and "exceeds the limit of 4096 bytes" in refused.message
    assert again.text == "a = 1 + 2\n"


def test_other_requests_on_a_connection_closed_for_a_big_frame_are_unavailable(sock):
    limits = Limits(max_frame=4096)
    with running(Worker(denoiser=WorkerFake(confidence=0.5, delay=0.01), limits=limits), sock):

        async def go():
            async with WorkerClient(sock) as client:
                steps = asyncio.Event()
                slow = asyncio.create_task(
                    client.fill("slow = <mask>\n", on_step=lambda _: steps.set())
                )
                await asyncio.wait_for(steps.wait(), 10)
                big = client.fill(_padded("a = <mask>\n", 8192), language=None)
                return await asyncio.gather(slow, big, return_exceptions=True)

        slow, big = asyncio.run(asyncio.wait_for(go(), 30))
    assert isinstance(big, WorkerError) and big.code == TOO_LARGE
    assert isinstance(slow, WorkerError) and slow.code == UNAVAILABLE
    assert "refused a frame" in slow.message


def test_the_queue_limits_are_checked(tmp_path):
    for flag, value in (("--max-queued", "0"), ("--send-grace", "-1")):
        run = subprocess.run(
            [sys.executable, "-m", "diffusion_infill.infill.serve.worker", flag, value],
            capture_output=True,
            text=True,
            timeout=60,
        )
        name = flag[2:].replace("-", "_")
        assert run.returncode == 2 and f"limit {name} must be a positive number" in run.stderr
    with pytest.raises(ValueError, match="max_queued must be a positive number"):
        Limits(max_queued=-5)


def test_a_worker_tells_its_queue_limits(sock):
    limits = Limits(max_queued=12345, send_grace=2.5)
    with running(Worker(denoiser=WorkerFake(), limits=limits), sock):
        raw = Raw(sock)
        raw.send(InfoRequest(7))
        info = raw.recv()
    assert isinstance(info, WorkerInfo)
    assert (info.limits.max_queued, info.limits.send_grace) == (12345, 2.5)


def test_the_pause_does_not_hold_a_connection_that_reads(sock):
    """A reading client gets every step of a streamed fill (the pause is for a client
    that lets bytes wait, not for one that keeps up)."""
    with running(Worker(denoiser=WorkerFake(confidence=0.5)), sock):
        raw = Raw(sock)
        raw.send(FillRequest(1, "slow = <mask>\n", stream=True))
        replies, read = _replies(raw, {1})
    assert isinstance(replies[1], Result) and _steps(read, 1) == replies[1].stats.steps
