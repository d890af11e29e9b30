"""The language server's tests: a real worker on a deterministic fake model, and a
pytest-lsp client driving `python -m diffusion_infill.lsp.server` over stdio.

The server is the production one; it reaches the fake only through its `workerAddress`
setting (a Unix socket served by `infill.serve.worker.Worker` on a thread of the test process),
so nothing in the server knows about tests. The fake fills a span with the target whose
key ends the text just before the span (`TARGETS`, then worker_fake_main.TARGETS), else
`FALLBACK`; it scores every context character as itself except `-` (it expects `+`); and
each forward pass over a canvas whose text holds `SLOW` takes `SLOW_PASS` seconds (or the
fake's `slow_pass`), so a request can be caught in flight. The worker records how each
model request ended (`RecordingWorker.ended`), so a test can wait for a job's cancellation.

    python tests/lsp_fake_worker.py --socket PATH [--slow-pass S]   # as a process
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import queue
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities
from pytest_lsp.client import make_test_lsp_client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fakes import CTX_BASE, FILL_BASE  # noqa: E402
from worker_fake_main import TARGETS as WORKER_TARGETS  # noqa: E402
from worker_fake_main import WorkerFake, running  # noqa: E402

from diffusion_infill.infill.serve.protocol import Limits, Message, Step  # noqa: E402
from diffusion_infill.infill.serve.requests import ModelRequest  # noqa: E402
from diffusion_infill.infill.serve.worker import Worker, serve_until_stopped  # noqa: E402
from diffusion_infill.model.denoiser import CacheHint  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FALLBACK = "pass"
SLOW_PASS = 0.05  # seconds per forward pass over a SLOW canvas
TARGETS = {
    # fill holes
    "total = ": "a + b",
    "first = ": "1",
    "second = ": "2",
    '"😀中文" + ': "'ok'",
    "plain ": "words",
    "deep_value = ": "42",
    "def run_hp():\n    return ": "hp.nope()",  # a member the sibling module hp lacks
    # rewrite selection
    "result = ": "new_value",
    "def scale(x):\n    ": "return 2 * x",  # a selected whole line: the engine indents
    # docstrings (the text before the empty docstring's body)
    'def greet(name):\n    """': "Say hello to name.",
    "def shout(text):\n    '''": "Shout the text.",
    'class Point:\n    """': "A point in the plane.",
    'def area(w, h):\n    """': "Return the area.\n\n    w times h, both in metres.\n    ",
    'def surface(self):\n        """': "Return the surface.\n\n        In square metres.\n        ",
    'def one():\n    """': "Return one.",
    '\tdef inner(self):\n\t\t"""': "Inner method.",
    # completion
    "value = ": "compute()\nextra = 1",
    "def multi():\n    ": "a = 1\n    return a",
    "def loop():\n    ": "log(x)\n    log(x)\n    log(x)",  # the model's loop
    "def block():\n    ": "a = 1\n    \n\n\n\n    b = 2",  # blank lines, then a guess
    "name = ": "'ada'",
    "x = f": "oo(1)",  # a completion inside a word takes its head (word_starts.py)
    "args = run(": "a, b)\nnext",  # writes the `)` after the cursor again
    "call = go(": "x, y)",  # the same `)`, and then it ends
    "SLOW = ": "x" * 40,  # 41 passes of SLOW_PASS seconds
    'SLOW_DOC():\n    """': "y" * 40,
}


class LspFake(WorkerFake):
    """`slow_pass`: seconds per pass over a SLOW canvas; `device`: the device the worker
    reports (unset: cpu)."""

    def __init__(
        self, *, slow_pass: float = SLOW_PASS, device: str | None = None, **kw: Any
    ) -> None:
        super().__init__({**TARGETS, **WORKER_TARGETS}, confidence=0.5, **kw)
        self.slow_pass = slow_pass
        self.slow_passes = 0  # passes over a SLOW canvas begun so far
        if device is not None:
            self.device = device

    def _target(self, canvas: Sequence[int], k: int, start: int) -> tuple[int, str]:
        try:
            return super()._target(canvas, k, start)
        except AssertionError:
            return -1, FALLBACK

    def logits(
        self,
        canvases: Sequence[Sequence[int]],
        positions: Sequence[Sequence[int]],
        hints: Sequence[CacheHint | None] | None = None,
    ) -> list[np.ndarray]:
        for canvas in canvases:
            if "SLOW" in self.decode([t for t in canvas if CTX_BASE <= t < FILL_BASE]):
                self.slow_passes += 1
                time.sleep(self.slow_pass)  # stands in for a slow network
                break
        return super().logits(canvases, positions, hints)


@dataclass(frozen=True)
class Ended:
    """How one model request ended in the worker."""

    text: str  # the request's text
    outcome: str  # "answered", "cancelled" or "failed"
    slow_passes: int  # the fake's SLOW passes begun by then


class RecordingWorker(Worker):
    """The production worker, recording how each model request ended."""

    def __init__(self, denoiser: LspFake, **kw: Any) -> None:
        super().__init__(denoiser=denoiser, **kw)
        self.fake = denoiser
        self.ended: queue.Queue[Ended] = queue.Queue()

    async def answer(
        self, msg: ModelRequest, on_step: Callable[[Step], None] | None = None
    ) -> Message:
        outcome = "failed"
        try:
            reply = await super().answer(msg, on_step)
            outcome = "answered"
            return reply
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        finally:
            self.ended.put(Ended(getattr(msg, "text", ""), outcome, self.fake.slow_passes))

    async def wait_ended(self, want: Callable[[Ended], bool], timeout: float = 20) -> Ended:
        """The next request to end that `want` accepts (the others are passed over)."""
        until = time.monotonic() + timeout
        while True:
            left = until - time.monotonic()
            try:
                e = await asyncio.to_thread(self.ended.get, timeout=max(left, 0.001))
            except queue.Empty:
                raise AssertionError(f"no such request ended within {timeout:g} s") from None
            if want(e):
                return e


@contextlib.contextmanager
def watched_worker(denoiser: LspFake | None = None) -> Iterator[tuple[str, RecordingWorker]]:
    """A fake worker on a thread (serving `denoiser`, a new LspFake by default); yields its
    address and the worker."""
    d = tempfile.mkdtemp(prefix="lspw-")
    address = f"unix:{d}/w.sock"
    worker = RecordingWorker(denoiser or LspFake(), limits=Limits(grace=1.0))
    try:
        with running(worker, address):
            yield address, worker
    finally:
        shutil.rmtree(d, ignore_errors=True)


@contextlib.contextmanager
def fake_worker(denoiser: LspFake | None = None) -> Iterator[str]:
    """`watched_worker`'s address alone."""
    with watched_worker(denoiser) as (address, _):
        yield address


def capabilities(
    *,
    encodings: Sequence[str] | None = None,
    document_changes: bool = False,
    inline: bool = True,
    resolve: bool = True,
    progress: bool = True,
) -> types.ClientCapabilities:
    """VS Code's recorded capabilities, adjusted: inline completion (not recorded by
    pytest-lsp), position encodings, documentChanges, code action resolve, progress."""
    caps = client_capabilities("visual-studio-code")
    td = caps.text_document
    assert td is not None and caps.workspace is not None and caps.window is not None
    td.inline_completion = types.InlineCompletionClientCapabilities() if inline else None
    if not inline:
        td.completion = td.completion or types.CompletionClientCapabilities()
    caps.general = types.GeneralClientCapabilities(
        position_encodings=list(encodings) if encodings is not None else None
    )
    caps.workspace.workspace_edit = types.WorkspaceEditClientCapabilities(
        document_changes=document_changes
    )
    assert td.code_action is not None
    td.code_action.resolve_support = (
        types.ClientCodeActionResolveOptions(properties=["edit"]) if resolve else None
    )
    caps.window.work_done_progress = progress
    return caps


@contextlib.asynccontextmanager
async def lsp(
    address: str | None,
    settings: dict[str, Any] | None = None,
    *,
    caps: types.ClientCapabilities | None = None,
) -> AsyncIterator[tuple[LanguageClient, types.InitializeResult]]:
    """A started, initialized server using the worker at `address`."""
    client = make_test_lsp_client()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    await client.start_io(
        sys.executable, "-m", "diffusion_infill.lsp.server", env=env, cwd=str(ROOT)
    )
    steps: list[Any] = []
    client.feature("infill/denoiseStep")(lambda _client, params: steps.append(params))
    client.steps = steps  # type: ignore[attr-defined]
    options = {"workerAddress": address, "progressDelay": 0, **(settings or {})}
    try:
        result = await asyncio.wait_for(
            client.initialize_session(
                types.InitializeParams(
                    capabilities=caps or capabilities(),
                    initialization_options=options,
                    root_uri=ROOT.as_uri(),
                )
            ),
            60,
        )
        yield client, result
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.shutdown_session(), 20)
        server = client._server  # pygls's handle on the process: stop() waits for its exit
        if server is not None and server.returncode is None:
            server.kill()
        await client.stop()


def open_in_workspace(client: LanguageClient, doc: Path, text: str) -> str:
    """Add `doc`'s folder as a workspace folder, then open `doc` (Python) with `text`; its uri."""
    client.workspace_did_change_workspace_folders(
        types.DidChangeWorkspaceFoldersParams(
            types.WorkspaceFoldersChangeEvent(
                added=[types.WorkspaceFolder(doc.parent.as_uri(), "pkg")], removed=[]
            )
        )
    )
    uri = doc.as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", 1, text))
    )
    return uri


def open_doc(
    client: LanguageClient, name: str, text: str, language: str = "python", version: int = 1
) -> str:
    uri = f"file:///infill-test-documents/{name}"  # no such folder: no repository to read
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=uri, language_id=language, version=version, text=text
            )
        )
    )
    return uri


async def raw_request(client: LanguageClient, method: str, params: Any, timeout: float = 10) -> Any:
    """Send a request with params as given (untyped: malformed ones too) and await its
    answer: the result, or the error as a JsonRpcException."""
    msg_id = f"raw-{next(_raw_ids)}"
    future = asyncio.get_running_loop().create_future()
    client.protocol._request_futures[msg_id] = future
    client.protocol._send_data({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
    return await asyncio.wait_for(future, timeout)


_raw_ids = itertools.count(1)
CONTENT_MODIFIED = -32801
REQUEST_CANCELLED = -32800


def run(coro: Any, timeout: float = 90) -> Any:
    """Run a test's coroutine, bounded: a hung server fails the test instead of CI."""
    return asyncio.run(asyncio.wait_for(coro, timeout))


def whole(text: str) -> types.Range:
    lines = text.split("\n")
    return types.Range(
        start=types.Position(line=0, character=0),
        end=types.Position(line=len(lines) - 1, character=len(lines[-1])),
    )


def at(text: str, needle: str, length: int = 0) -> types.Range:
    """The UTF-16 range of `needle` (ASCII-only tests) in text."""
    i = text.index(needle)
    line = text.count("\n", 0, i)
    col = i - (text.rfind("\n", 0, i) + 1)
    end = col + (length or len(needle))
    return types.Range(
        start=types.Position(line=line, character=col), end=types.Position(line=line, character=end)
    )


async def actions(
    client: LanguageClient, uri: str, rng: types.Range, **context: Any
) -> list[types.CodeAction]:
    got = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=rng,
            context=types.CodeActionContext(diagnostics=context.pop("diagnostics", []), **context),
        )
    )
    return list(got or [])


def pick(found: list[types.CodeAction], kind: str) -> types.CodeAction:
    matches = [a for a in found if a.kind == kind]
    assert len(matches) == 1, [a.title for a in found]
    return matches[0]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--socket", required=True)
    p.add_argument(
        "--slow-pass",
        type=float,
        default=SLOW_PASS,
        help="seconds per forward pass over a canvas that holds SLOW",
    )
    args = p.parse_args(argv)
    return serve_until_stopped(
        Worker(denoiser=LspFake(slow_pass=args.slow_pass), limits=Limits(grace=1.0)),
        f"unix:{args.socket}",
    )


if __name__ == "__main__":
    sys.exit(main())
