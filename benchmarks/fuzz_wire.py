"""The LSP fuzzer's client side (benchmarks/fuzz_lsp.py): raw JSON-RPC to the server
over pipes, LSP positions in every encoding computed here (independently of the server's
own conversions), the checks on an edit, and the figures."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

ENCODINGS = ("utf-8", "utf-16", "utf-32")
COMPLETIONS = ("textDocument/inlineCompletion", "textDocument/completion")
LATE_MS = 100.0  # how far past its deadline a completion's answer counts as late
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


def comparable(text: str, enc: str) -> bool:
    """Whether positions in `text` mean the same to client and server: JSON joins a high
    and a low surrogate sent one after the other into one character, which is two UTF-16
    units as before but not the same count of UTF-8 bytes or UTF-32 units."""
    return enc == "utf-16" or same_offsets(text)


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
    completion_deadline_ms: float = 0.0  # 0: none
    cut_completions: int = 0  # answered at or past the deadline (the deadline ended them)
    late_completions: int = 0  # answered past the deadline + LATE_MS
    completion_ms: dict[str, float] = field(default_factory=dict)  # answer latency summary
    latencies: list[float] = field(default_factory=list)  # ms, each completion's answer

    def violate(self, what: str) -> None:
        self.violations += 1
        if len(self.examples) < 20:
            self.examples.append(what)

    def answered_completion(self, method: str, ms: float) -> None:
        """A completion's answer came `ms` after it was asked."""
        self.latencies.append(ms)
        deadline = self.completion_deadline_ms
        self.cut_completions += bool(deadline) and ms >= deadline
        if deadline and ms > deadline + LATE_MS:
            self.late_completions += 1
            self.violate(f"{method} answered after {ms:.0f} ms (deadline {deadline:g} ms)")

    def summary(self) -> dict[str, Any]:
        """The figures as JSON, the completion latencies summarised."""
        ms = sorted(self.latencies)
        if ms:
            self.completion_ms = {
                "n": len(ms),
                "p50": ms[len(ms) // 2],
                "p95": ms[min(len(ms) - 1, int(len(ms) * 0.95))],
                "p99": ms[min(len(ms) - 1, int(len(ms) * 0.99))],
                "max": ms[-1],
            }
            self.completion_ms = {k: round(v, 1) for k, v in self.completion_ms.items()}
        out = asdict(self)
        del out["latencies"]
        return out


class Server:
    """`python -m diffusion_infill.lsp.server` over pipes: raw JSON-RPC, so anything can be sent."""

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


def check_edit(
    figures: Figures,
    enc: str,
    action: dict[str, Any],
    doc: Doc,
    asked: int | None,
    selection: tuple[int, int],
) -> None:
    """An edit: for the version asked about, exact ranges, inside the asked region."""
    data, edit = action.get("data") or {}, action.get("edit")
    if not isinstance(edit, dict):
        return
    figures.edits_checked += 1
    version = data.get("version")
    if version != asked:
        figures.violate(f"an edit for version {version} answered a request made at version {asked}")
        return
    edits: list[Any] = []
    for uri, es in (edit.get("changes") or {}).items():
        edits += es if uri == doc.uri else [None]
    for dc in edit.get("documentChanges") or []:
        if dc["textDocument"]["uri"] != doc.uri or dc["textDocument"]["version"] != version:
            figures.violate(f"documentChanges for {dc['textDocument']}")
        edits += dc["edits"]
    text = doc.versions.get(version, "")
    if not comparable(text, enc):
        return
    spans = []
    for e in edits:
        s, t = (offset(text, e["range"][k], enc) if e else None for k in ("start", "end"))
        if s is None or t is None or s > t:
            figures.violate(f"{data.get('op')}: invalid range {e}")
            return
        spans.append((s, t, e["newText"]))
    spans.sort()
    for (_, t, _), (s, _, _) in zip(spans, spans[1:], strict=False):
        if s < t:
            figures.violate(f"{data.get('op')}: overlapping edits {spans}")
    lo, hi = data.get("start", 0), data.get("end", len(text))
    if data.get("op") in ("rewrite", "fix"):
        lo, hi = selection  # the client's own offsets
    if data.get("op") in ("rewrite", "fix") or (data.get("op") == "fill" and same_offsets(text)):
        for s, t, _ in spans:
            if not lo <= s <= t <= hi:
                figures.violate(f"{data['op']}: edit {s}-{t} outside {lo}-{hi}")
    out, pos = [], 0
    for s, t, new in spans:
        out += [text[pos:s], new]
        pos = t
    after = "".join(out) + text[pos:]
    if "\ufffd" in after and "\ufffd" not in text and not SURROGATE.search(text):
        figures.violate(f"{data.get('op')}: U+FFFD written into the text")


def capabilities(enc: str, caps: dict[str, bool]) -> dict[str, Any]:
    td: dict[str, Any] = {
        "codeAction": {
            "codeActionLiteralSupport": {
                "codeActionKind": {"valueSet": ["", "quickfix", "refactor", "refactor.rewrite"]}
            }
        }
    }
    if caps["resolve"]:
        td["codeAction"]["resolveSupport"] = {"properties": ["edit"]}
    if caps["inline"]:
        td["inlineCompletion"] = {}
    td["completion"] = {"completionItem": {"snippetSupport": False}}
    return {
        "general": {"positionEncodings": [enc]},
        "textDocument": td,
        "window": {"workDoneProgress": caps["progress"]},
        "workspace": {
            "applyEdit": caps["apply"],
            "workspaceEdit": {"documentChanges": caps["changes"]},
        },
    }
