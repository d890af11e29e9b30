"""One random LSP client session of the fuzzer (benchmarks/fuzz_lsp.py) against a running server:
documents opened (random pieces of text, odd names), changed (whole and incremental) and
closed; code actions asked and resolved, stale ones too; inline completion and completion;
requests cancelled at once and malformed ones; some requests left in flight while the
session goes on. Every answer is checked as it comes (benchmarks/fuzz_wire.py)."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any
from urllib.parse import quote

from benchmarks.fuzz_wire import (
    COMPLETIONS,
    Doc,
    Figures,
    Server,
    check_edit,
    comparable,
    offset,
    position,
    same_offsets,
)

# error codes an answer may carry: bad params, method not found, cancelled, content
# modified, request failed (the worker or the engine said no)
ALLOWED_ERRORS = {-32602, -32601, -32800, -32801, -32803}
PIECES = [
    "x = 1",
    "first = <mask>",
    "total = <mask>",
    "<mask:3>",
    "<mask:0>",
    "<mask",
    "<<mask>>",
    "def f(a):\n    return a\n",
    "def g():\n    ",
    "é",
    "中文",
    "😀",
    "\r\n",
    "\r",
    "\n",
    "\n",
    "\t",
    "\x0c",
    "\u2028",
    "\udbff",
    "\udc00",
    "SLOW = <mask>",
    "'''",
    '"""',
    "class C:\n    pass\n",
    "y = x - 1",
    "value = ",
    "  ",
    "name = ",
    "result = old_value",
    "\ufffd",
    "x = fo",
]
NAMES = ["a.py", "café.py", "中文 dir/b.py", "emoji😀.py", "plain.txt", "with space.py"]


class Session:
    def __init__(
        self,
        server: Server,
        rng: random.Random,
        enc: str,
        caps: dict[str, bool],
        deadline: float,
        figures: Figures,
    ) -> None:
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
        while (
            0 < a < len(text)
            and "\udc00" <= text[a] <= "\udfff"
            and "\ud800" <= text[a - 1] <= "\udbff"
        ):
            a -= 1  # never between the halves of a pair (a client never has such a cursor)
        b = max(a, b)
        a, b = (
            k - 1 if 0 < k < len(text) and text[k - 1 : k + 1] == "\r\n" else k for k in (a, b)
        )  # never inside a CRLF line break
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
            self.figures.errors_by_code[str(code)] = (
                self.figures.errors_by_code.get(str(code), 0) + 1
            )
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
        self.s.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": lang, "version": 1, "text": text}},
        )

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
        self.s.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": doc.uri, "version": doc.version}, "contentChanges": [change]},
        )

    async def code_actions(self, doc: Doc) -> None:
        asked_text = doc.text
        a, b, rng = self.range_in(asked_text)
        trigger = self.rng.choice([1, 2])
        msg = await self.answer(
            "textDocument/codeAction",
            {
                "textDocument": {"uri": doc.uri},
                "range": rng,
                "context": {"diagnostics": [], "triggerKind": trigger},
            },
        )
        if msg is None or not isinstance(msg.get("result"), list):
            return
        for action in msg["result"]:
            data = action.get("data")
            if (
                isinstance(data, dict)
                and data.get("op") in ("rewrite", "fix")
                and same_offsets(asked_text)
                and (data.get("start"), data.get("end")) != (a, b)
            ):
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
            edit = item.get("textEdit") or (
                {"range": item["range"], "newText": item.get("insertText")}
                if "range" in item
                else None
            )
            if edit is None or doc.version != asked or not comparable(text, self.enc):
                continue
            self.figures.edits_checked += 1
            s, e = (offset(text, edit["range"].get(k), self.enc) for k in ("start", "end"))
            if s is None or e is None or not s <= a <= e or "\n" in text[s:e]:
                self.figures.violate(
                    f"{method}: range {edit['range']} not at the cursor {a} "
                    f"({self.enc}, text {text!r:.300})"
                )

    async def cancelled(self, doc: Doc) -> None:
        """A request cancelled at once: it must still be answered (a result or -32800)."""
        _, _, rng = self.range_in(doc.text)
        params = {
            "textDocument": {"uri": doc.uri},
            "position": rng["start"],
            "context": {"triggerKind": 2},
        }
        task = asyncio.ensure_future(self.answer("textDocument/inlineCompletion", params))
        await asyncio.sleep(0)  # the request is written
        self.s.notify("$/cancelRequest", {"id": self.s.last_id})
        await task

    async def malformed(self, doc: Doc | None) -> None:
        uri = doc.uri if doc else "file:///fuzz/none.py"
        method, params = self.rng.choice(
            [
                ("textDocument/codeAction", [1, 2]),
                ("textDocument/codeAction", {"textDocument": {"uri": 5}}),
                ("textDocument/completion", {}),
                ("textDocument/inlineCompletion", {"textDocument": {"uri": uri}}),
                ("codeAction/resolve", {"title": "x", "data": {"op": "fill", "uri": uri}}),
                ("codeAction/resolve", {"title": "x", "data": [1]}),
                ("workspace/executeCommand", {"command": "infill.applyAction", "arguments": [7]}),
                (
                    "textDocument/codeAction",
                    {
                        "textDocument": {"uri": uri},
                        "range": {
                            "start": {"line": -1, "character": 0},
                            "end": {"line": 0, "character": 0},
                        },
                        "context": {"diagnostics": []},
                    },
                ),
                (
                    "textDocument/codeAction",
                    {
                        "textDocument": {"uri": uri},
                        "range": {
                            "start": {"line": 99, "character": 99},
                            "end": {"line": 0, "character": 0},
                        },
                        "context": {"diagnostics": []},
                    },
                ),
                (
                    "textDocument/hover",
                    {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}},
                ),
            ]
        )
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
            self.s.notify(
                "textDocument/didChange",
                {
                    "textDocument": {"uri": "file:///fuzz/never.py", "version": 3},
                    "contentChanges": [{"text": ""}],
                },
            )
        else:
            job = rng.choice(
                [
                    lambda: self.code_actions(doc),
                    lambda: self.code_actions(doc),
                    lambda: self.resolve() if self.actions else self.code_actions(doc),
                    lambda: self.resolve() if self.actions else self.code_actions(doc),
                    lambda: self.complete(doc, "textDocument/inlineCompletion"),
                    lambda: self.complete(doc, "textDocument/completion"),
                    lambda: self.cancelled(doc),
                    lambda: self.malformed(doc),
                    lambda: self.code_actions(Doc("file:///fuzz/unknown.py", {1: "x"}, 1)),
                ]
            )
            if rng.random() < 0.3:
                self.flying.append(asyncio.ensure_future(job()))
            else:
                await job()
