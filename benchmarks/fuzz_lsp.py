"""Random LSP sessions against `infill-lsp` over stdio, with invariants checked on every
answer (issue 14).

    python -m benchmarks.fuzz_lsp --sessions 10000 --seed 1          # the fake worker
    python -m benchmarks.fuzz_lsp --sessions 200 --worker unix:PATH  # a running worker

Each *server run* starts `python -m lsp.server`, initializes it with a random position
encoding (UTF-8, UTF-16 or UTF-32) and random client capabilities (resolve, documentChanges,
inline completion, applyEdit), and drives `--sessions-per-server` sessions through it. A
session opens documents (unicode, CRLF and lone CR, form feeds, lone surrogates, hole
markers good and malformed, in odd places; percent-escaped URIs), changes them (whole and
incremental), asks for code actions on random ranges and resolves some of them (stale
ones too), inline completion and completion at random positions, cancels requests in
flight, closes documents, asks about documents never opened, and sends malformed params.
Some requests are left in flight while the session goes on.

The worker is `tests/lsp_fake_worker.py` (a fast deterministic fake model; its `SLOW`
targets keep a request in flight for ~2 s) unless `--worker` names one.

Invariants, on every answer:
- an answer to every request within `--deadline` seconds, never an internal error;
- an edit is for the version the client had when it asked (else ContentModified), its
  ranges are valid positions of that version's text in the negotiated encoding, they do not
  overlap, and they stay inside the asked region (the selection for rewrite and fix, the
  holes for fill);
- the text after applying the edits has no U+FFFD that was not there before;
- the server process is alive at the end of each run and wrote no traceback.

Exit status 0 when nothing was violated. Figures go to stdout (and `--out` as JSON).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
ENCODINGS = ("utf-8", "utf-16", "utf-32")
# error codes an answer may carry: bad params, method not found, cancelled, content
# modified, request failed (the worker or the engine said no)
ALLOWED_ERRORS = {-32602, -32601, -32800, -32801, -32803}
PIECES = ["x = 1", "first = <mask>", "total = <mask>", "<mask:3>", "<mask:0>", "<mask",
          "<<mask>>", "def f(a):\n    return a\n", "def g():\n    ", "é", "中文", "😀",
          "\r\n", "\r", "\n", "\n", "\t", "\x0c", "\u2028", "\udbff", "\udc00", "SLOW = <mask>",
          "'''", '"""', "class C:\n    pass\n", "y = x - 1", "value = ", "  ", "name = ",
          "result = old_value", "\ufffd", "x = fo"]
NAMES = ["a.py", "café.py", "中文 dir/b.py", "emoji😀.py", "plain.txt", "with space.py"]
LINE_BREAK = re.compile(r"\r\n|\r|\n")
SURROGATE = re.compile("[\ud800-\udfff]")


def same_offsets(text: str) -> bool:
    """Whether the server's str offsets are the client's: JSON joins a high and a low
    surrogate sent one after the other into one character, and the server keeps a lone
    surrogate as U+FFFD, so around surrogates the counts differ (UTF-16 units do not)."""
    return not SURROGATE.search(text)


def units(ch: str, enc: str) -> int:
    if enc == "utf-8":
        return len(ch.encode("utf-8", "surrogatepass"))
    if enc == "utf-16":
        return 2 if ord(ch) > 0xFFFF else 1
    return 1


def line_spans(text: str) -> list[tuple[int, int]]:
    """(start, end without the line break) of each line, split the LSP way."""
    out, pos = [], 0
    for m in LINE_BREAK.finditer(text):
        out.append((pos, m.start()))
        pos = m.end()
    return out + [(pos, len(text))]


def position(text: str, offset: int, enc: str) -> dict[str, int]:
    for n, (a, b) in enumerate(line_spans(text)):
        if a <= offset <= b:
            return {"line": n, "character": sum(units(c, enc) for c in text[a:offset])}
    raise ValueError(offset)


def offset(text: str, pos: Any, enc: str) -> int | None:
    """The str offset of an LSP position, None unless it is exact (a real line, a column
    on a character boundary, not past the line's end)."""
    try:
        line, col = pos["line"], pos["character"]
    except (TypeError, KeyError):
        return None
    spans = line_spans(text)
    if not (isinstance(line, int) and isinstance(col, int) and 0 <= line < len(spans)):
        return None
    a, b = spans[line]
    k = 0
    for i in range(a, b + 1):
        if k == col:
            return i
        if i == b or k > col:
            return None
        k += units(text[i], enc)
    return None


@dataclass
class Figures:
    runs: int = 0
    sessions: int = 0
    requests: int = 0
    answered: int = 0
    unanswered: int = 0
    crashes: int = 0
    internal_errors: int = 0
    violations: int = 0
    edits_checked: int = 0
    errors_by_code: dict[str, int] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def violate(self, what: str) -> None:
        self.violations += 1
        if len(self.examples) < 20:
            self.examples.append(what)


class Server:
    """`python -m lsp.server` over pipes: raw JSON-RPC, so anything can be sent."""

    def __init__(self, proc: asyncio.subprocess.Process, figures: Figures) -> None:
        self.proc = proc
        self.figures = figures
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.ids = itertools.count(1)
        self.last_id = 0
        self.stderr = b""
        self.reader = asyncio.ensure_future(self._read())
        self.err_reader = asyncio.ensure_future(self._read_stderr())

    def send(self, msg: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **msg}).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def notify(self, method: str, params: Any) -> None:
        self.send({"method": method, "params": params})

    def request(self, method: str, params: Any) -> tuple[int, asyncio.Future[dict[str, Any]]]:
        rid = next(self.ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[rid] = fut
        self.last_id = rid
        self.figures.requests += 1
        self.send({"id": rid, "method": method, "params": params})
        return rid, fut

    async def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = None
            while (line := await out.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if not line or length is None:
                return
            msg = json.loads(await out.readexactly(length))
            if "method" in msg and "id" in msg:  # a request from the server: answer it
                result = {"applied": False} if msg["method"] == "workspace/applyEdit" else None
                if msg["method"] == "workspace/configuration":
                    result = [None]
                self.send({"id": msg["id"], "result": result})
            elif "id" in msg and msg["id"] in self.pending:
                fut = self.pending.pop(msg["id"])
                if not fut.done():
                    fut.set_result(msg)

    async def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        self.stderr = await self.proc.stderr.read()


@dataclass
class Doc:
    uri: str
    versions: dict[int, str]
    version: int
    open: bool = True

    @property
    def text(self) -> str:
        return self.versions[self.version]


class Session:
    def __init__(self, server: Server, rng: random.Random, enc: str, caps: dict[str, bool],
                 deadline: float, figures: Figures) -> None:
        self.s, self.rng, self.enc, self.caps = server, rng, enc, caps
        self.deadline, self.figures = deadline, figures
        self.docs: list[Doc] = []
        self.flying: list[asyncio.Task[None]] = []
        self.actions: list[tuple[dict[str, Any], Doc, tuple[int, int]]] = []

    def comparable(self, text: str) -> bool:
        """Whether positions in `text` mean the same to client and server: JSON joins a
        high and a low surrogate sent one after the other into one character, which is two
        UTF-16 units as before but not the same count of UTF-8 bytes or UTF-32 units."""
        return self.enc == "utf-16" or same_offsets(text)

    def text(self) -> str:
        return "".join(self.rng.choice(PIECES) for _ in range(self.rng.randint(0, 25)))

    def range_in(self, text: str) -> tuple[int, int, dict[str, Any]]:
        a, b = sorted(self.rng.randint(0, len(text)) for _ in range(2))
        if self.rng.random() < 0.3:
            b = a
        while 0 < a < len(text) and "\udc00" <= text[a] <= "\udfff" and \
                "\ud800" <= text[a - 1] <= "\udbff":
            a -= 1  # never between the halves of a pair (a client never has such a cursor)
        b = max(a, b)
        a, b = (k - 1 if 0 < k < len(text) and text[k - 1:k + 1] == "\r\n" else k
                for k in (a, b))  # never inside a CRLF line break
        return a, b, {"start": position(text, a, self.enc), "end": position(text, b, self.enc)}

    async def answer(self, method: str, params: Any) -> dict[str, Any] | None:
        version = {d.uri: d.version for d in self.docs}
        rid, fut = self.s.request(method, params)
        try:
            msg = await asyncio.wait_for(fut, self.deadline)
        except TimeoutError:
            self.s.pending.pop(rid, None)
            self.figures.unanswered += 1
            self.figures.violate(f"no answer to {method} within {self.deadline} s")
            return None
        self.figures.answered += 1
        err = msg.get("error")
        if err is not None:
            code = err.get("code")
            self.figures.errors_by_code[str(code)] = self.figures.errors_by_code.get(
                str(code), 0) + 1
            if code not in ALLOWED_ERRORS:
                self.figures.internal_errors += 1
                self.figures.violate(f"{method}: error {code}: {err.get('message')!s:.300}")
            return None
        msg["asked_versions"] = version
        return msg

    # -- operations -------------------------------------------------------------------

    def open(self) -> None:
        name = self.rng.choice(NAMES)
        uri = f"file:///fuzz/{self.rng.randrange(10**9)}/{quote(name)}"
        text = self.text()
        doc = Doc(uri, {1: text}, 1)
        self.docs.append(doc)
        lang = "plaintext" if name.endswith(".txt") else "python"
        self.s.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": lang, "version": 1, "text": text}})

    def change(self, doc: Doc) -> None:
        old = doc.text
        if self.rng.random() < 0.3:
            new = self.text()
            change: dict[str, Any] = {"text": new}
        else:
            a, b, rng = self.range_in(old)
            ins = self.text()[: self.rng.randint(0, 12)]
            new = old[:a] + ins + old[b:]
            change = {"range": rng, "text": ins}
        doc.version += 1
        doc.versions[doc.version] = new
        self.s.notify("textDocument/didChange", {"textDocument": {
            "uri": doc.uri, "version": doc.version}, "contentChanges": [change]})

    async def code_actions(self, doc: Doc) -> None:
        asked_text = doc.text
        a, b, rng = self.range_in(asked_text)
        trigger = self.rng.choice([1, 2])
        msg = await self.answer("textDocument/codeAction", {
            "textDocument": {"uri": doc.uri}, "range": rng,
            "context": {"diagnostics": [], "triggerKind": trigger}})
        if msg is None or not isinstance(msg.get("result"), list):
            return
        for action in msg["result"]:
            data = action.get("data")
            if isinstance(data, dict) and data.get("op") in ("rewrite", "fix") and \
                    same_offsets(asked_text) and (data.get("start"), data.get("end")) != (a, b):
                self.figures.violate(f"action offered for {data} on a request for {a}-{b}")
            if "edit" in action:
                self.check_edit(action, doc, msg["asked_versions"].get(doc.uri), (a, b))
            elif "data" in action:
                self.actions.append((action, doc, (a, b)))

    async def resolve(self) -> None:
        action, doc, asked_range = self.rng.choice(self.actions)
        msg = await self.answer("codeAction/resolve", action)
        if msg is not None and isinstance(msg.get("result"), dict):
            self.check_edit(msg["result"], doc, msg["asked_versions"].get(doc.uri),
                            asked_range)

    async def complete(self, doc: Doc, method: str) -> None:
        a, _, rng = self.range_in(doc.text)
        params: dict[str, Any] = {"textDocument": {"uri": doc.uri}, "position": rng["start"]}
        if method == "textDocument/inlineCompletion":
            params["context"] = {"triggerKind": self.rng.choice([1, 2])}
        text, asked = doc.text, doc.version
        msg = await self.answer(method, params)
        if msg is None or msg.get("result") is None:
            return
        result = msg["result"]
        items = result.get("items", []) if isinstance(result, dict) else result
        for item in items if isinstance(items, list) else []:
            edit = item.get("textEdit") or ({"range": item["range"],
                                             "newText": item.get("insertText")}
                                            if "range" in item else None)
            if edit is None or doc.version != asked or not self.comparable(text):
                continue
            self.figures.edits_checked += 1
            s, e = (offset(text, edit["range"].get(k), self.enc) for k in ("start", "end"))
            if s is None or e is None or not s <= a <= e or "\n" in text[s:e]:
                self.figures.violate(f"{method}: range {edit['range']} not at the cursor {a} "
                                     f"({self.enc}, text {text!r:.300})")

    async def cancelled(self, doc: Doc) -> None:
        """A request cancelled at once: it must still be answered (a result or -32800)."""
        _, _, rng = self.range_in(doc.text)
        params = {"textDocument": {"uri": doc.uri}, "position": rng["start"],
                  "context": {"triggerKind": 2}}
        task = asyncio.ensure_future(self.answer("textDocument/inlineCompletion", params))
        await asyncio.sleep(0)  # the request is written
        self.s.notify("$/cancelRequest", {"id": self.s.last_id})
        await task

    async def malformed(self, doc: Doc | None) -> None:
        uri = doc.uri if doc else "file:///fuzz/none.py"
        method, params = self.rng.choice([
            ("textDocument/codeAction", [1, 2]),
            ("textDocument/codeAction", {"textDocument": {"uri": 5}}),
            ("textDocument/completion", {}),
            ("textDocument/inlineCompletion", {"textDocument": {"uri": uri}}),
            ("codeAction/resolve", {"title": "x", "data": {"op": "fill", "uri": uri}}),
            ("codeAction/resolve", {"title": "x", "data": [1]}),
            ("workspace/executeCommand", {"command": "infill.applyAction", "arguments": [7]}),
            ("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": {
                "start": {"line": -1, "character": 0}, "end": {"line": 0, "character": 0}},
                "context": {"diagnostics": []}}),
            ("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": {
                "start": {"line": 99, "character": 99}, "end": {"line": 0, "character": 0}},
                "context": {"diagnostics": []}}),
            ("textDocument/hover", {"textDocument": {"uri": uri},
                                    "position": {"line": 0, "character": 0}}),
        ])
        await self.answer(method, params)

    def check_edit(self, action: dict[str, Any], doc: Doc, asked: int | None,
                   selection: tuple[int, int]) -> None:
        """An edit: for the version asked about, exact ranges, inside the asked region."""
        data, edit = action.get("data") or {}, action.get("edit")
        if not isinstance(edit, dict):
            return
        self.figures.edits_checked += 1
        version = data.get("version")
        if version != asked:
            self.figures.violate(f"an edit for version {version} answered a request made "
                                 f"at version {asked}")
            return
        edits: list[Any] = []
        for uri, es in (edit.get("changes") or {}).items():
            edits += es if uri == doc.uri else [None]
        for dc in edit.get("documentChanges") or []:
            if dc["textDocument"]["uri"] != doc.uri or dc["textDocument"]["version"] != version:
                self.figures.violate(f"documentChanges for {dc['textDocument']}")
            edits += dc["edits"]
        text = doc.versions.get(version, "")
        if not self.comparable(text):
            return
        spans = []
        for e in edits:
            s, t = (offset(text, e["range"][k], self.enc) if e else None for k in ("start", "end"))
            if s is None or t is None or s > t:
                self.figures.violate(f"{data.get('op')}: invalid range {e}")
                return
            spans.append((s, t, e["newText"]))
        spans.sort()
        for (_, t, _), (s, _, _) in zip(spans, spans[1:], strict=False):
            if s < t:
                self.figures.violate(f"{data.get('op')}: overlapping edits {spans}")
        lo, hi = data.get("start", 0), data.get("end", len(text))
        if data.get("op") in ("rewrite", "fix"):
            lo, hi = selection  # the client's own offsets
        if data.get("op") in ("rewrite", "fix") or (data.get("op") == "fill"
                                                     and same_offsets(text)):
            for s, t, _ in spans:
                if not lo <= s <= t <= hi:
                    self.figures.violate(f"{data['op']}: edit {s}-{t} outside {lo}-{hi}")
        out, pos = [], 0
        for s, t, new in spans:
            out += [text[pos:s], new]
            pos = t
        after = "".join(out) + text[pos:]
        if "\ufffd" in after and "\ufffd" not in text and not SURROGATE.search(text):
            self.figures.violate(f"{data.get('op')}: U+FFFD written into the text")

    async def run(self, steps: int) -> None:
        self.open()
        for _ in range(steps):
            await self.step()
        if self.flying:
            await asyncio.gather(*self.flying)
        for doc in self.docs:
            if doc.open:
                self.s.notify("textDocument/didClose", {"textDocument": {"uri": doc.uri}})

    async def step(self) -> None:
        rng = self.rng
        open_docs = [d for d in self.docs if d.open]
        doc = rng.choice(open_docs) if open_docs else None
        r = rng.random()
        if doc is None or r < 0.08:
            self.open()
        elif r < 0.30:
            self.change(doc)
        elif r < 0.33:
            doc.open = False
            self.s.notify("textDocument/didClose", {"textDocument": {"uri": doc.uri}})
        elif r < 0.36:
            self.s.notify("textDocument/didChange", {"textDocument": {
                "uri": "file:///fuzz/never.py", "version": 3}, "contentChanges": [{"text": ""}]})
        else:
            job = rng.choice([
                lambda: self.code_actions(doc), lambda: self.code_actions(doc),
                lambda: self.resolve() if self.actions else self.code_actions(doc),
                lambda: self.resolve() if self.actions else self.code_actions(doc),
                lambda: self.complete(doc, "textDocument/inlineCompletion"),
                lambda: self.complete(doc, "textDocument/completion"),
                lambda: self.cancelled(doc), lambda: self.malformed(doc),
                lambda: self.code_actions(Doc("file:///fuzz/unknown.py", {1: "x"}, 1)),
            ])
            if rng.random() < 0.3:
                self.flying.append(asyncio.ensure_future(job()))
            else:
                await job()


def capabilities(enc: str, caps: dict[str, bool]) -> dict[str, Any]:
    td: dict[str, Any] = {"codeAction": {"codeActionLiteralSupport": {"codeActionKind": {
        "valueSet": ["", "quickfix", "refactor", "refactor.rewrite"]}}}}
    if caps["resolve"]:
        td["codeAction"]["resolveSupport"] = {"properties": ["edit"]}
    if caps["inline"]:
        td["inlineCompletion"] = {}
    td["completion"] = {"completionItem": {"snippetSupport": False}}
    return {"general": {"positionEncodings": [enc]}, "textDocument": td,
            "window": {"workDoneProgress": caps["progress"]},
            "workspace": {"applyEdit": caps["apply"],
                          "workspaceEdit": {"documentChanges": caps["changes"]}}}


async def server_run(args: argparse.Namespace, address: str, run: int, sessions: int,
                     figures: Figures) -> None:
    seed = args.seed * 100_003 + run
    rng = random.Random(seed)
    enc = ENCODINGS[run % len(ENCODINGS)]  # every encoding in any three runs
    caps = {k: rng.random() < 0.5 for k in ("resolve", "inline", "progress", "apply",
                                              "changes")}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "lsp.server", cwd=str(ROOT), env=env,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    server = Server(proc, figures)
    figures.runs += 1
    init = Session(server, rng, enc, caps, args.deadline, figures)
    await init.answer("initialize", {"processId": None, "rootUri": None,
                                     "capabilities": capabilities(enc, caps),
                                     "initializationOptions": {"workerAddress": address,
                                                               "progressDelay": 0}})
    server.notify("initialized", {})
    for _ in range(sessions):
        session = Session(server, rng, enc, caps, args.deadline, figures)
        await session.run(rng.randint(3, args.steps))
        figures.sessions += 1
    if proc.returncode is not None:
        figures.crashes += 1
        figures.violate(f"the server exited ({proc.returncode}) during run {seed}")
    await init.answer("shutdown", None)
    server.notify("exit", None)
    try:
        await asyncio.wait_for(proc.wait(), 10)
        await asyncio.wait_for(server.err_reader, 5)
    except TimeoutError:
        proc.kill()
        figures.violate(f"the server did not exit after shutdown/exit (run {seed})")
    if b"Traceback" in server.stderr or b"Fatal Python error" in server.stderr:
        figures.crashes += 1
        figures.violate(f"run {seed}: stderr: {server.stderr.decode(errors='replace')[-800:]}")


async def fuzz(args: argparse.Namespace) -> Figures:
    figures = Figures()
    started = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="fuzz-")
    worker = None
    address = args.worker
    try:
        if address is None:
            sock = f"{tmp}/w.sock"
            worker = await asyncio.create_subprocess_exec(
                sys.executable, str(ROOT / "tests" / "lsp_fake_worker.py"), "--socket", sock,
                stdin=asyncio.subprocess.DEVNULL)
            while not os.path.exists(sock):
                await asyncio.sleep(0.05)
            address = f"unix:{sock}"
        runs = iter(range(-(-args.sessions // args.sessions_per_server)))

        async def lane() -> None:  # one of `--jobs` servers driven side by side
            for run in runs:
                if time.monotonic() - started > args.max_seconds:
                    return
                n = min(args.sessions_per_server,
                        args.sessions - run * args.sessions_per_server)
                await server_run(args, address, run, n, figures)
                if args.verbose:
                    print(json.dumps(asdict(figures)), flush=True)

        await asyncio.gather(*(lane() for _ in range(args.jobs)))
    finally:
        if worker is not None:
            worker.terminate()
            await worker.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    figures.seconds = round(time.monotonic() - started, 1)
    return figures


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=int, default=200, help="sessions in all")
    p.add_argument("--sessions-per-server", type=int, default=50,
                   help="sessions per server process (each run: one encoding, one client)")
    p.add_argument("--steps", type=int, default=20, help="most operations per session")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--jobs", type=int, default=1, help="servers driven at once")
    p.add_argument("--deadline", type=float, default=30.0, help="seconds an answer may take")
    p.add_argument("--max-seconds", type=float, default=float("inf"),
                   help="stop starting server runs after this long")
    p.add_argument("--worker", help="a running worker's address (default: the fake)")
    p.add_argument("--out", type=Path, help="write the figures here as JSON")
    p.add_argument("-v", "--verbose", action="store_true", help="figures after each run")
    args = p.parse_args(argv)
    figures = asyncio.run(fuzz(args))
    print(json.dumps(asdict(figures), indent=1))
    if args.out is not None:
        args.out.write_text(json.dumps(asdict(figures), indent=1) + "\n")
    return 0 if figures.violations == 0 and figures.crashes == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
