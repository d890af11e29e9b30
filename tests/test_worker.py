"""The worker over real sockets: batching, cancellation, limits, bad frames, shutdown."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import msgpack
import pytest
from fakes import CTX_BASE, FILL_BASE
from worker_fake_main import HERE, Raw, WorkerFake, running

from diffusion_infill.infill import SamplerOptions, Span, fill_text, prepare_fill
from diffusion_infill.infill.core.spans import find_holes
from diffusion_infill.infill.serve.client import WorkerClient
from diffusion_infill.infill.serve.protocol import (
    BAD_REQUEST,
    CANCELLED,
    DEADLINE,
    INPUT,
    MODEL,
    PROTOCOL_VERSION,
    SHUTTING_DOWN,
    TOO_LARGE,
    UNAUTHORIZED,
    VERSION,
    Cancel,
    Error,
    FillRequest,
    FixRequest,
    Hello,
    InfoRequest,
    Limits,
    Result,
    ScoreRequest,
    Scores,
    Step,
    WorkerInfo,
)
from diffusion_infill.infill.serve.scheduler import Scheduler
from diffusion_infill.infill.serve.sockets import WorkerSetupError, bind_unix
from diffusion_infill.infill.serve.worker import Worker

TEXTS = ["a = <mask>\n", "b = <mask>\nz = 0\n", "c = <mask>\n"]
FILLED = ["a = 1 + 2\n", "b = 'xyz'\nz = 0\n", "c = [1, 2, 3]\n"]


@pytest.fixture
def sock():
    """A short socket path (AF_UNIX paths are limited to ~107 bytes)."""
    d = tempfile.mkdtemp(prefix="iw-")
    yield f"{d}/w.sock"
    shutil.rmtree(d, ignore_errors=True)


def _context(fake: WorkerFake, canvas: list[int]) -> str:
    return fake.decode([t for t in canvas if CTX_BASE <= t < FILL_BASE])


def _fill_all(address: str, texts: list[str], **kw) -> list[Result]:
    async def go():
        clients = [WorkerClient(address) for _ in texts]
        try:
            return await asyncio.gather(
                *(c.fill(t, **kw) for c, t in zip(clients, texts, strict=True))
            )
        finally:
            for c in clients:
                await c.close()

    return asyncio.run(go())


# -- batching -------------------------------------------------------------------------


def test_concurrent_clients_get_correct_results_from_shared_forward_passes(sock):
    fake = WorkerFake(confidence=0.5, delay=0.001)
    with running(Worker(denoiser=fake), sock) as w:
        results = _fill_all(sock, TEXTS)
        assert w.scheduler is not None and w.scheduler.shared > 0
        assert len(w.scheduler) == 0
    assert [r.text for r in results] == FILLED
    assert max(len(canvases) for canvases, _ in fake.calls) > 1  # steps were batched
    for text, r in zip(TEXTS, results, strict=True):  # the same as filling in-process
        local = fill_text(text, denoiser=WorkerFake(confidence=0.5))
        assert (r.edits, r.fills, r.stats.steps) == (local.edits, local.fills, local.stats.steps)


def test_no_batching_runs_one_request_per_forward_pass(sock):
    fake = WorkerFake(confidence=0.5, delay=0.001)
    with running(Worker(denoiser=fake, batching=False), sock) as w:
        results = _fill_all(sock, TEXTS)
        assert w.scheduler is not None and w.scheduler.shared == 0
    assert [r.text for r in results] == FILLED
    assert {len(canvases) for canvases, _ in fake.calls} == {1}


def _jobs(fake, texts):
    return [
        prepare_fill(t, find_holes(t), denoiser=fake, options=SamplerOptions(), rewrite=False).job
        for t in texts
    ]


@pytest.mark.parametrize(
    ("batching", "max_batch", "widths"), [(True, 32, {3}), (True, 2, {2, 1}), (False, 32, {1})]
)
def test_scheduler_batches_round_robin_up_to_max_batch(batching, max_batch, widths):
    fake = WorkerFake(confidence=0.5)

    async def go():
        with ThreadPoolExecutor(1) as pool:
            s = Scheduler(fake, pool, batching=batching, max_batch=max_batch)
            jobs = _jobs(fake, TEXTS)
            runs = [asyncio.ensure_future(s.denoise(j)) for j in jobs]
            loop = asyncio.create_task(s.serve())
            await asyncio.gather(*runs)
            loop.cancel()
            return jobs, s

    jobs, s = asyncio.run(go())
    assert all(j.done for j in jobs)
    first_widths = {len(c) for c, _ in fake.calls[:3]}
    assert first_widths <= widths and max(first_widths) == max(widths)
    if not batching:  # round robin: a, b, c, a, b, c, ...
        order = [_context(fake, c[0])[0] for c, _ in fake.calls[:6]]
        assert order == ["a", "b", "c", "a", "b", "c"]
    assert s.passes == len(fake.calls) and s.canvases == sum(len(c) for c, _ in fake.calls)


# -- cancellation and deadlines ---------------------------------------------------------


def test_cancel_stops_a_request_mid_denoise_and_leaves_others_alone(sock):
    fake = WorkerFake(confidence=0.5, delay=0.002)
    with running(Worker(denoiser=fake), sock) as w:
        slow, other = Raw(sock), Raw(sock)
        slow.send(FillRequest(1, "slow = <mask>\n", stream=True))
        first = slow.recv()
        assert isinstance(first, Step) and first.id == 1 and "░" in first.spans[0][1]
        other.send(FillRequest(1, "c = <mask>\n"))  # the same id on another connection
        slow.send(Cancel(1))
        reply = slow.recv()
        while isinstance(reply, Step):
            reply = slow.recv()
        assert reply == Error(1, CANCELLED, "cancelled by the client")
        seen = len(fake.calls)
        done = other.recv()
        assert isinstance(done, Result) and done.text == "c = [1, 2, 3]\n"
        assert len(w.scheduler) == 0
        slow.send(InfoRequest(2))  # the connection is still good
        assert isinstance(slow.recv(), WorkerInfo)
    later = [
        c
        for canvases, _ in fake.calls[seen:]
        for c in canvases
        if _context(fake, c).startswith("slow")
    ]
    assert len(later) <= 1  # at most the pass that was already running
    total = sum(_context(fake, c).startswith("slow") for cs, _ in fake.calls for c in cs)
    assert total < 120  # it never finished


def test_a_request_past_its_deadline_ends_with_deadline(sock):
    with running(Worker(denoiser=WorkerFake(confidence=0.5, delay=0.002)), sock) as w:
        raw = Raw(sock)
        raw.send(FillRequest(4, "slow = <mask>\n", deadline=0.05))
        reply = raw.recv()
        assert isinstance(reply, Error) and (reply.id, reply.code) == (4, DEADLINE)
        assert "0.05 s" in reply.message
        assert len(w.scheduler) == 0


def test_a_closed_connection_cancels_its_requests(sock):
    fake = WorkerFake(confidence=0.5, delay=0.002)
    with running(Worker(denoiser=fake), sock) as w:
        raw = Raw(sock)
        raw.send(FillRequest(1, "slow = <mask>\n", stream=True))
        assert isinstance(raw.recv(), Step)
        raw.close()
        probe = Raw(sock)  # after the worker saw the close, the job is gone
        for _ in range(1000):
            probe.send(InfoRequest(1))
            info = probe.recv()
            if info.counters.active == 0:
                break
        assert info.counters.active == 0 and len(w.scheduler) == 0


# -- requests and errors --------------------------------------------------------------


def test_fill_spans_fix_score_and_info(sock):
    with running(Worker(denoiser=WorkerFake(["x + 1"], confidence=0.99)), sock):
        raw = Raw(sock)
        raw.send(FillRequest(1, "return x\n", spans=[]))
        assert raw.recv().code == INPUT
        raw.send(FixRequest(2, "y = x - 1\n"))
        fix = raw.recv()
        assert isinstance(fix, Result) and fix.id == 2 and fix.scores
        worst = max(fix.scores, key=lambda s: s.suspicion)
        assert (worst.text, worst.likely) == ("-", "+")
        raw.send(ScoreRequest(3, "y = x - 1\n", start=4, end=9))
        scores = raw.recv()
        assert isinstance(scores, Scores) and scores.scores == [
            s for s in fix.scores if s.start >= 4 and s.end <= 9
        ]
        raw.send(FixRequest(4, "y = x - 1\n", min_suspicion=1.0))
        nothing = raw.recv()
        assert (nothing.text, nothing.edits, nothing.fills, nothing.stats) == (
            "y = x - 1\n",
            [],
            [],
            None,
        )
        raw.send(InfoRequest(5))
        info = raw.recv()
        assert isinstance(info, WorkerInfo) and info.model == "fake"
        assert info.versions.protocol == PROTOCOL_VERSION and info.batching
        assert info.limits == Limits() and info.counters.requests == 4


def _fill_with_options(**options) -> bytes:
    """A fill frame's body with options as a client that does not check them sends them."""
    return msgpack.packb({**FillRequest(1, "x = <mask>\n").to_wire(), "options": options})


@pytest.mark.parametrize(
    ("msg", "code", "needle"),
    [
        (FillRequest(1, "no holes\n"), INPUT, "no hole"),
        (FillRequest(1, "x = <mask:>\n"), INPUT, "1:5"),
        (_fill_with_options(threshold=3), INPUT, "threshold"),
        (_fill_with_options(colour=3), INPUT, "unknown option"),
        (FillRequest(1, "x\x00 = <mask>\n"), INPUT, "NUL"),
        (FillRequest(1, "x = 1\n", spans=[]), INPUT, ""),
        (FillRequest(1, "x = 1\n", spans=[Span(9, 10)]), INPUT, "range"),
        (FillRequest(1, "x" * 101), TOO_LARGE, "101 characters"),
        (FillRequest(1, "<mask>" * 5), TOO_LARGE, "5 holes"),
        (
            FillRequest(1, "x = <mask>\n", options=SamplerOptions(max_span_tokens=999)),
            TOO_LARGE,
            "max_span_tokens",
        ),
        (
            FillRequest(1, "x = <mask>\n", options=SamplerOptions(max_steps=10**6)),
            TOO_LARGE,
            "max_steps",
        ),
        (FixRequest(1, "x = 1\n", max_fixes=5), TOO_LARGE, "max_fixes"),
        (ScoreRequest(1, "x = 1\n", start=3, end=99), INPUT, "outside the text"),
    ],
)
def test_bad_requests_get_typed_errors(sock, msg, code, needle):
    limits = Limits(max_text=100, max_spans=4, max_span_tokens=300, max_steps=1000)
    with running(Worker(denoiser=WorkerFake(confidence=0.99), limits=limits), sock):
        raw = Raw(sock)
        if isinstance(msg, bytes):
            raw.send_body(msg)
        else:
            raw.send(msg)
        reply = raw.recv()
        assert isinstance(reply, Error) and (reply.id, reply.code) == (1, code), reply
        assert needle in reply.message


def test_requests_in_flight_per_connection_are_limited_and_ids_unique(sock):
    limits = Limits(max_requests=1)
    with running(Worker(denoiser=WorkerFake(confidence=0.5, delay=0.002), limits=limits), sock):
        raw = Raw(sock)
        raw.send(FillRequest(1, "slow = <mask>\n", stream=True))
        assert isinstance(raw.recv(), Step)
        raw.send(FillRequest(1, "a = <mask>\n"))
        raw.send(FillRequest(2, "a = <mask>\n"))
        replies = [raw.recv() for _ in range(2)]
        errors = [m for m in replies if isinstance(m, Error)]
        while len(errors) < 2:
            m = raw.recv()
            if isinstance(m, Error):
                errors.append(m)
        assert errors[0].code == BAD_REQUEST and "already in flight" in errors[0].message
        assert errors[1].code == TOO_LARGE and "limit 1" in errors[1].message


class _Broken(WorkerFake):
    def logits(self, canvases, positions, hints=None):
        if any("boom" in _context(self, c) for c in canvases):
            raise RuntimeError("CUDA out of memory")
        return super().logits(canvases, positions, hints)


def test_a_failing_forward_pass_is_a_model_error_and_the_worker_goes_on(sock):
    with running(Worker(denoiser=_Broken(confidence=0.99)), sock):
        raw = Raw(sock)
        raw.send(FillRequest(1, "boom = <mask>\n"))
        reply = raw.recv()
        assert (reply.code, reply.message) == (
            MODEL,
            "the forward pass failed: RuntimeError: CUDA out of memory",
        )
        raw.send(FillRequest(2, "a = <mask>\n"))
        assert raw.recv().text == "a = 1 + 2\n"


# -- malformed frames, oversized frames, authentication -----------------------------


def _wire(**fields):
    return msgpack.packb({"v": PROTOCOL_VERSION, **fields})


@pytest.mark.parametrize(
    ("body", "rid", "code"),
    [
        (b"", None, BAD_REQUEST),
        (b"\xc1\xc1\xc1", None, BAD_REQUEST),
        (msgpack.packb([1, 2, 3]), None, BAD_REQUEST),
        (msgpack.packb("fill"), None, BAD_REQUEST),
        (b"\x91" * 50_000 + b"\xc0", None, BAD_REQUEST),
        (_wire(type="fill", id="x", text="a"), None, BAD_REQUEST),
        (_wire(type="fill", id=3, text=5), 3, BAD_REQUEST),
        (_wire(type="fill", id=3, text="a", spans=[["a", 1]]), 3, BAD_REQUEST),
        (_wire(type="launch", id=4), 4, BAD_REQUEST),
        (_wire(type="result", id=4, text="", edits=[], fills=[], stats=None), 4, BAD_REQUEST),
        (msgpack.packb({"v": 2, "type": "info", "id": 5}), 5, VERSION),
        (_wire(type="hello"), None, BAD_REQUEST),
    ],
)
def test_malformed_frames_get_an_error_and_the_connection_goes_on(sock, body, rid, code):
    with running(Worker(denoiser=WorkerFake()), sock):
        raw = Raw(sock)
        raw.send_body(body)
        reply = raw.recv()
        assert isinstance(reply, Error) and (reply.id, reply.code) == (rid, code)
        raw.send(FillRequest(9, "a = <mask>\n"))
        assert raw.recv().text == "a = 1 + 2\n"


def test_an_oversized_frame_is_refused_and_the_connection_closed(sock):
    with running(Worker(denoiser=WorkerFake(), limits=Limits(max_frame=1000)), sock):
        raw = Raw(sock)
        raw.sock.sendall(struct.pack(">I", 1001) + b"x" * 10)
        reply = raw.recv()
        assert isinstance(reply, Error) and reply.code == TOO_LARGE and reply.id is None
        assert raw.recv() is None  # closed
        half = Raw(sock)
        half.sock.sendall(struct.pack(">I", 50) + b"abc")  # a truncated frame, then gone
        half.close()
        big = Raw(sock)  # a frame just under the limit is fine
        big.send(FillRequest(1, "a = <mask>" + " " * 900))
        assert big.recv().text == "a = 1 + 2" + " " * 900


def test_tcp_needs_the_token(sock):
    with pytest.raises(WorkerSetupError, match="needs a token"):
        asyncio.run(Worker(denoiser=WorkerFake()).serve("tcp:127.0.0.1:0"))
    with running(Worker(denoiser=WorkerFake(), token="s3cret"), "tcp:127.0.0.1:0") as w:
        address = str(w.address)
        assert w.address.port > 0
        for hello in (Hello("wrong"), Hello(None), InfoRequest(1)):
            raw = Raw(address, hello=False)
            raw.send(hello)
            reply = raw.recv()
            assert isinstance(reply, Error) and reply.code == UNAUTHORIZED
            assert raw.recv() is None  # and the connection is closed
        old = Raw(address, hello=False)
        old.send_body(msgpack.packb({"v": 0, "type": "hello", "token": "s3cret"}))
        assert old.recv().code == VERSION and old.recv() is None
        good = Raw(address, token="s3cret")
        good.send(FillRequest(1, "a = <mask>\n"))
        assert good.recv().text == "a = 1 + 2\n"
        good.send(Hello("s3cret"))
        assert good.recv().code == BAD_REQUEST


def test_a_unix_worker_with_a_token_checks_it_too(sock):
    with running(Worker(denoiser=WorkerFake(), token="t"), sock):
        raw = Raw(sock, hello=False)
        raw.send(Hello(None))
        assert raw.recv().code == UNAUTHORIZED
        Raw(sock, token="t")


# -- the socket file ------------------------------------------------------------------


def test_the_socket_is_0600_in_a_0700_directory_and_removed_at_stop(sock):
    path = Path(sock).parent / "new" / "w.sock"
    with running(Worker(denoiser=WorkerFake()), str(path)):
        assert stat.S_ISSOCK(path.lstat().st_mode)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert not path.exists()


def test_stale_socket_is_replaced_and_a_live_one_refused(sock):
    stale = bind_unix(Path(sock))  # bound, never listening: like a killed worker's file
    stale.close()
    with (
        running(Worker(denoiser=WorkerFake()), sock),
        pytest.raises(WorkerSetupError, match="already listening"),
    ):
        bind_unix(Path(sock))
    Path(sock).write_text("not a socket")
    with pytest.raises(WorkerSetupError, match="not a socket"):
        bind_unix(Path(sock))


def test_the_default_directory_must_be_private(monkeypatch, sock):
    runtime = Path(sock).parent
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    (runtime / "infill").mkdir(mode=0o777)
    os.chmod(runtime / "infill", 0o777)
    with pytest.raises(WorkerSetupError, match="mode 0700"):
        bind_unix(runtime / "infill" / "worker.sock")


def test_stopping_fails_requests_still_running_after_the_grace_period(sock):
    fake = WorkerFake(confidence=0.5, delay=0.002)
    with running(Worker(denoiser=fake, limits=Limits(grace=0.05)), sock) as w:
        raw = Raw(sock)
        raw.send(FillRequest(1, "slow = <mask>\n", stream=True))
        assert isinstance(raw.recv(), Step)
        w.stop()
        reply = raw.recv()
        while isinstance(reply, Step):
            reply = raw.recv()
        assert reply == Error(1, SHUTTING_DOWN, "the worker is shutting down")
        assert raw.recv() is None
    assert not Path(sock).exists()


# -- the process: SIGTERM -------------------------------------------------------------


def test_sigterm_finishes_requests_in_flight_then_exits_cleanly(sock):
    cmd = [sys.executable, str(HERE), "--socket", sock, "--delay", "0.002"]

    async def go():
        client = WorkerClient(f"unix:{sock}", spawn=cmd, connect_timeout=30)
        try:
            started = asyncio.Event()
            fill = asyncio.create_task(
                client.fill("slow = <mask:120>\n", on_step=lambda _: started.set())
            )
            await asyncio.wait_for(started.wait(), 10)
            client.process.send_signal(signal.SIGTERM)
            result = await asyncio.wait_for(fill, 10)
            status = await asyncio.get_running_loop().run_in_executor(None, client.process.wait, 10)
            return result, status
        finally:
            await client.close()

    result, status = asyncio.run(go())
    assert result.text == "slow = " + "x" * 120 + "\n"
    assert status == 0
    assert not Path(sock).exists()


def test_the_worker_command_line(tmp_path):
    env = {**os.environ, "INFILL_WORKER_TOKEN": ""}
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "diffusion_infill.infill.serve.worker",
            "--listen",
            "tcp:127.0.0.1:0",
            "--model",
            str(tmp_path / "missing"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert run.returncode == 1 and "needs a token" in run.stderr
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "diffusion_infill.infill.serve.worker",
            "--socket",
            str(tmp_path / "w.sock"),
            "--model",
            str(tmp_path / "missing"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 1
    assert "cannot load the model: model directory not found" in run.stderr
    run = subprocess.run(
        [sys.executable, "-m", "diffusion_infill.infill.serve.worker", "--max-batch", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2 and "max_batch must be a positive number" in run.stderr


def test_a_worker_computes_in_the_precision_it_is_given(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    from diffusion_infill.infill.serve.client import spawn_command

    sock = Path(tempfile.mkdtemp(prefix="infill-t-")) / "w.sock"
    log = tmp_path / "worker.log"
    client = WorkerClient(
        f"unix:{sock}",
        spawn=spawn_command(sock, model=tiny_model_dir, args=["--dtype", "int8"]),
        connect_timeout=60,
        log=log,
    )

    async def ask() -> str:
        try:
            return (await client.info()).device
        finally:
            await client.close()

    assert asyncio.run(ask()) == "cpu"
    assert " in int8 (requested=int8)" in log.read_text()
    run = subprocess.run(
        [sys.executable, "-m", "diffusion_infill.infill.serve.worker", "--dtype", "int4"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2 and "invalid choice: 'int4'" in run.stderr


def test_a_spawned_worker_ends_with_its_parent(tiny_model_dir: Path) -> None:
    """The client spawns workers with --exit-with-stdin: when the parent's end of the stdin
    pipe closes (the parent exited or was killed), the worker stops cleanly."""
    from diffusion_infill.infill.serve.client import spawn_command

    sock = Path(tempfile.mkdtemp(prefix="infill-t-")) / "w.sock"
    cmd = spawn_command(sock, model=tiny_model_dir)
    assert "--exit-with-stdin" in cmd
    client = WorkerClient(f"unix:{sock}", spawn=cmd, connect_timeout=60)

    async def ask() -> str:
        return (await client.info()).device

    assert asyncio.run(ask()) == "cpu"
    proc = client.process
    assert proc is not None and proc.stdin is not None
    try:
        proc.stdin.close()  # what the OS does when the parent dies
        assert proc.wait(timeout=30) == 0
        assert not sock.exists()
    finally:
        if proc.poll() is None:
            proc.kill()
