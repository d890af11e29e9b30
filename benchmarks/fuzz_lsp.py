"""Random LSP sessions against `infill-lsp` over stdio, with invariants checked on every
answer.

    python -m benchmarks.fuzz_lsp --sessions 10000 --seed 1          # the fake worker
    python -m benchmarks.fuzz_lsp --sessions 200 --worker unix:PATH  # a running worker
    python -m benchmarks.fuzz_lsp --slow-pass 0.25 --out benchmarks/results/fuzz_lsp_deadline.json

Each *server run* starts `python -m diffusion_infill.lsp.server`, initializes it with a random
position encoding (UTF-8, UTF-16 or UTF-32) and random client capabilities (resolve,
documentChanges, inline completion, applyEdit), and drives `--sessions-per-server` sessions
through it. A session opens documents (unicode, CRLF and lone CR, form feeds, lone surrogates,
hole markers good and malformed, in odd places; percent-escaped URIs), changes them (whole and
incremental), asks for code actions on random ranges and resolves some of them (stale ones too),
inline completion and completion at random positions, cancels requests in flight, closes
documents, asks about documents never opened, and sends malformed params. Some requests are left
in flight while the session goes on.

The worker is `tests/lsp_fake_worker.py` (a fast deterministic fake model; a forward pass
over a canvas that holds `SLOW` takes `--slow-pass` seconds, so such requests stay in
flight, and a completion there runs past its deadline) unless `--worker` names one. The
server gets `completionDeadline` = `--completion-deadline`.

Invariants, on every answer:
- an answer to every request within `--deadline` seconds, never an internal error;
- an inline completion or completion answered (items, nothing, or an error) within its
  deadline (`--completion-deadline`) + 100 ms; the answer latencies are summarised;
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
import json
import os
import random
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from benchmarks.fuzz_wire import (
    COMPLETIONS,
    ENCODINGS,
    Doc,
    Figures,
    Server,
    capabilities,
    check_edit,
    comparable,
    offset,
    position,
    same_offsets,
)
from benchmarks.results_file import write_results

ROOT = Path(__file__).resolve().parent.parent
# error codes an answer may carry: bad params, method not found, cancelled, content
# modified, request failed (the worker or the engine said no)
ALLOWED_ERRORS = {-32602, -32601, -32800, -32801, -32803}
PIECES = ["x = 1", "first = <mask>", "total = <mask>", "<mask:3>", "<mask:0>", "<mask",
          "<<mask>>", "def f(a):\n    return a\n", "def g():\n    ", "é", "中文", "😀",
          "\r\n", "\r", "\n", "\n", "\t", "\x0c", "\u2028", "\udbff", "\udc00", "SLOW = <mask>",
          "'''", '"""', "class C:\n    pass\n", "y = x - 1", "value = ", "  ", "name = ",
          "result = old_value", "\ufffd", "x = fo"]
NAMES = ["a.py", "café.py", "中文 dir/b.py", "emoji😀.py", "plain.txt", "with space.py"]


class Session:
    def __init__(self, server: Server, rng: random.Random, enc: str, caps: dict[str, bool],
                 deadline: float, figures: Figures) -> None:
        self.s, self.rng, self.enc, self.caps = server, rng, enc, caps
        self.deadline, self.figures = deadline, figures
        self.docs: list[Doc] = []
        self.flying: list[asyncio.Task[None]] = []
        self.actions: list[tuple[dict[str, Any], Doc, tuple[int, int]]] = []

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
        asked = time.monotonic()
        try:
            msg = await asyncio.wait_for(fut, self.deadline)
        except TimeoutError:
            self.s.pending.pop(rid, None)
            self.figures.unanswered += 1
            self.figures.violate(f"no answer to {method} within {self.deadline} s")
            return None
        self.figures.answered += 1
        if method in COMPLETIONS:
            self.figures.answered_completion(method, (time.monotonic() - asked) * 1000)
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
                asked = msg["asked_versions"].get(doc.uri)
                check_edit(self.figures, self.enc, action, doc, asked, (a, b))
            elif "data" in action:
                self.actions.append((action, doc, (a, b)))

    async def resolve(self) -> None:
        action, doc, asked_range = self.rng.choice(self.actions)
        msg = await self.answer("codeAction/resolve", action)
        if msg is not None and isinstance(msg.get("result"), dict):
            asked = msg["asked_versions"].get(doc.uri)
            check_edit(self.figures, self.enc, msg["result"], doc, asked, asked_range)

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
            if edit is None or doc.version != asked or not comparable(text, self.enc):
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


async def server_run(args: argparse.Namespace, address: str, run: int, sessions: int,
                     figures: Figures) -> None:
    seed = args.seed * 100_003 + run
    rng = random.Random(seed)
    enc = ENCODINGS[run % len(ENCODINGS)]  # every encoding in any three runs
    caps = {k: rng.random() < 0.5 for k in ("resolve", "inline", "progress", "apply",
                                              "changes")}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "diffusion_infill.lsp.server", cwd=str(ROOT), env=env,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    server = Server(proc, figures)
    figures.runs += 1
    init = Session(server, rng, enc, caps, args.deadline, figures)
    options = {"workerAddress": address, "progressDelay": 0,
               "completionDeadline": args.completion_deadline}
    await init.answer("initialize", {"processId": None, "rootUri": None,
                                     "capabilities": capabilities(enc, caps),
                                     "initializationOptions": options})
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
    figures = Figures(completion_deadline_ms=args.completion_deadline)
    started = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="fuzz-")
    worker = None
    address = args.worker
    try:
        if address is None:
            sock = f"{tmp}/w.sock"
            worker = await asyncio.create_subprocess_exec(
                sys.executable, str(ROOT / "tests" / "lsp_fake_worker.py"), "--socket", sock,
                *(["--slow-pass", str(args.slow_pass)] if args.slow_pass is not None else []),
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
                    print(json.dumps(figures.summary()), flush=True)

        await asyncio.gather(*(lane() for _ in range(args.jobs)))
    finally:
        if worker is not None:
            worker.terminate()
            await worker.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    figures.seconds = round(time.monotonic() - started, 1)
    return figures


def command(argv: list[str]) -> str:
    """The command line that ran, for the results file (its --note stored apart)."""
    at = argv.index("--note") if "--note" in argv else len(argv)
    shown = [a for a in argv[:at] + argv[at + 2:] if not a.startswith("--note=")]
    return shlex.join(["python", "-m", "benchmarks.fuzz_lsp", *shown])


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
    p.add_argument("--completion-deadline", type=int, default=600, metavar="MS",
                   help="the server's completionDeadline; an answer later than it + 100 ms "
                   "is a violation (0: no deadline, no check)")
    p.add_argument("--worker", help="a running worker's address (default: the fake)")
    p.add_argument("--slow-pass", type=float, metavar="S",
                   help="the fake worker's seconds per forward pass over a canvas that "
                   "holds SLOW (default: the fake's 0.05)")
    p.add_argument("--note", help="stored with the figures (the machine, its load)")
    p.add_argument("--out", type=Path, help="write the figures here as JSON")
    p.add_argument("-v", "--verbose", action="store_true", help="figures after each run")
    args = p.parse_args(argv)
    figures = asyncio.run(fuzz(args))
    results = figures.summary()
    print(json.dumps(results, indent=1))
    if args.out is not None:
        head = {"command": command(sys.argv[1:] if argv is None else argv)}
        write_results("fuzz_lsp", None, {**head, **({"note": args.note} if args.note else {}),
                                         **results}, args.out)
    return 0 if figures.violations == 0 and figures.crashes == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
