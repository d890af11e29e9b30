"""The names that exist at a position of Python code, as jedi (the library Python editors
complete with) infers them; and whether jedi knows the base of an attribute whole.

    at = names_at(text, offset)            # NamesAt, or None when jedi could not say
    at.position                            # "member" (after `.`), "argument", "visible"
    {n.name for n in at.names}             # the members, keyword arguments or names
    at.known                               # the base is a module or class jedi sees whole

    missing = missing_members(text, [(start, end)])   # what a fill names that does not exist

- after `.`: the members of the inferred type of the base (a module's members and
  submodules, an instance's or a class's attributes through its bases);
- inside a call's arguments: the keyword arguments the called function takes (with the
  visible names, which an argument may also be);
- elsewhere: the visible names (locals, module members, imports, builtins).

*Known whole* (`known`) is what lets a caller say a name does not exist: a base or callee
whose type jedi does not guess and whose members it sees whole (infill/core/jedi_known.py).
Anything else is not known, and callers fall back to what the text spells.

What jedi runs: it parses and infers the text statically and never executes it, nor any
Python source of the project or its environment. It reads source and typeshed stubs, and
for *compiled* modules (C extensions without stubs) it starts a subprocess of the target
environment's interpreter (`jedi.get_default_environment()`: the active virtual
environment, else this interpreter) which imports them to list their members. The
project is a `jedi.Project` with `load_unsafe_extensions=False`: compiled modules inside
the user's project are never imported. jedi's in-process `InterpreterEnvironment` (which
would import them here) is not used.

Costs are bounded: texts over MAX_CHARS or nested deeper than MAX_DEPTH are not handed
to jedi; each `JediBudget` (one per request) stops calling jedi once it has spent its
seconds; answers are cached per text hash and position. The first call in a process
loads jedi's stubs of the builtins; a use judged in a new text costs a parse of it
(benchmarks/results/names/jedi_latency.json). When jedi is absent, raises, or is over its
budget, the functions return None and log why on the `diffusion_infill.names`
logger (stderr), once per reason.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from diffusion_infill.infill.core.jedi_known import (
    callee_why,
    dynamic_members,
    line_col,
    untrusted_base,
    untrusted_callee,
    why_unknown,
    word_start,
)
from diffusion_infill.infill.core.jedi_scripts import (
    MAX_DEPTH,
    Where,
    digest,
    forget_scripts,
    script_for,
    too_deep,
)

log = logging.getLogger("diffusion_infill.names")

MAX_CHARS = 200_000  # characters of a text handed to jedi at most
DEFAULT_BUDGET_S = 3.0  # seconds of jedi per request (the first call loads the stubs)
CACHE_SIZE = 512  # answers kept (text hash, position)
MEMBER, ARGUMENT, VISIBLE = "member", "argument", "visible"


@dataclass(frozen=True)
class Name:
    name: str
    kind: str  # jedi's type: module, class, instance, function, param, statement, keyword, ...
    type: str | None = None  # the inferred type's name, where jedi gave one cheaply


@dataclass(frozen=True)
class NamesAt:
    position: str  # MEMBER, ARGUMENT or VISIBLE
    names: tuple[Name, ...]
    known: bool  # jedi sees the base (MEMBER) or the callee (ARGUMENT) whole
    base: str | None = None  # the base's or callee's full name, where jedi knows it
    why: str = ""  # why it is not known

    def has(self, word: str) -> bool:
        return any(n.name == word for n in self.names)


@dataclass(frozen=True)
class Missing:
    range: int  # index of the fill range the name is in
    word: str
    message: str  # for people: "'str' has no attribute 'upperr'"


@dataclass
class JediBudget:
    """Seconds of jedi one request may spend; once spent, calls return None."""

    seconds: float = DEFAULT_BUDGET_S
    spent: float = 0.0
    skipped: int = 0  # calls not made because the budget was spent
    _said: set[str] = field(default_factory=set)

    def left(self) -> float:
        return self.seconds - self.spent

    def say(self, why: str) -> None:
        """Log `why` once per budget (per request)."""
        if why not in self._said:
            self._said.add(why)
            log.warning("jedi names skipped: %s", why)


_lock = threading.RLock()  # jedi's inference state is not thread-safe; nor are the caches
_answers: OrderedDict[tuple[str, Where, str, int, int], Any] = OrderedDict()
_failed: set[str] = set()  # reasons logged once per process


def _say_once(why: str) -> None:
    if why not in _failed:
        _failed.add(why)
        log.warning("jedi names unavailable: %s", why)


def _guarded(
    what: str,
    text: str,
    budget: JediBudget | None,
    call: Any,
) -> Any:
    """`call()` under the lock, within the budget; None (and a log line) when the text is
    not for jedi, jedi is absent or raises, or the budget is spent."""
    if budget is not None and budget.left() <= 0:
        budget.skipped += 1
        budget.say(f"the request's {budget.seconds:g} s of jedi are spent")
        return None
    if len(text) > MAX_CHARS:
        _note(budget, f"the text is over {MAX_CHARS} characters")
        return None
    if too_deep(text):
        _note(budget, f"the text nests deeper than {MAX_DEPTH} levels")
        return None
    wait = budget.left() if budget is not None else DEFAULT_BUDGET_S
    if not _lock.acquire(timeout=max(0.0, wait)):
        _note(budget, "jedi is busy with another request")
        return None
    t0 = time.perf_counter()
    try:
        return call()
    except ImportError:
        _say_once("jedi is not installed")
        return None
    except RecursionError:
        _note(budget, f"{what}: jedi ran out of recursion")
        return None
    except Exception as exc:  # jedi's own errors: the fill goes on without it
        _note(budget, f"{what}: jedi raised {type(exc).__name__}: {str(exc)[:120]}")
        return None
    finally:
        _lock.release()
        if budget is not None:
            budget.spent += time.perf_counter() - t0


def _note(budget: JediBudget | None, why: str) -> None:
    if budget is not None:
        budget.say(why)
    else:
        _say_once(why)


# -- names at a position -------------------------------------------------------------------


def _to_names(completions: Sequence[Any]) -> tuple[Name, ...]:
    out = []
    for c in completions:
        name = c.name[:-1] if c.type == "param" and c.name.endswith("=") else c.name
        out.append(Name(name, c.type))
    return tuple(out)


def _member_at(script: Any, text: str, dot: int, path: str | None) -> NamesAt:
    """The members of the base ending at `dot` (the offset of the `.`)."""
    line, col = line_col(text, dot)
    inferred = script.infer(line, col)
    completions = script.complete(line, col + 1)
    why = untrusted_base(script, text, dot) or why_unknown(
        inferred, path, line_col(text, len(text))[0]
    )
    if why is None and dynamic_members(completions):
        why = "the base defines __getattr__ or __getattribute__"
    base = inferred[0].full_name if inferred else None
    return NamesAt(MEMBER, _to_names(completions), why is None, base, why or "")


def _callee_at(script: Any, text: str, offset: int, path: str | None) -> NamesAt | None:
    """The keyword arguments of the call whose argument list holds `offset`; None where
    no call's signature is there."""
    line, col = line_col(text, offset)
    signatures = script.get_signatures(line, col)
    if not signatures:
        return None
    names: list[Name] = []
    why = ""
    for sig in signatures:
        for p in sig.params:
            kind = p.kind.name
            if kind == "VAR_KEYWORD":
                why = "the callee takes **kwargs"
            elif kind in ("POSITIONAL_OR_KEYWORD", "KEYWORD_ONLY"):
                names.append(Name(p.name, "param"))
    base = signatures[0].full_name
    if not why:
        why = untrusted_callee(script, text, signatures[0].bracket_start) or ""
    if not why:
        why = callee_why(script, text, signatures, path) or ""
    return NamesAt(ARGUMENT, tuple(names), not why, base, why)


def names_at(
    text: str,
    offset: int,
    *,
    path: str | None = None,
    root: str | None = None,
    environment: str | None = None,
    budget: JediBudget | None = None,
) -> NamesAt | None:
    """The names that resolve at character `offset` of `text` (see the module docstring);
    None when jedi could not say (absent, raised, over budget: logged).

    Args:
        path: the file's path (relative imports, the project's folder); need not exist.
        root: the project's root (default: the file's folder, else the working directory).
        environment: a Python environment's folder or interpreter to read libraries from
            (default: jedi's, the active virtual environment or this interpreter).
    """
    if not 0 <= offset <= len(text):
        raise ValueError(f"offset {offset} outside the text (0..{len(text)})")
    key = (digest(text), (path, root, environment), "at", offset, 0)
    known, answer = _recalled(key)
    if known:
        return answer

    def ask() -> NamesAt:
        script = script_for(text, path, root, environment)
        j = word_start(text, offset)
        k = j
        while k > 0 and text[k - 1] in " \t":
            k -= 1
        if k > 0 and text[k - 1] == ".":
            return _member_at(script, text, k - 1, path)
        line, col = line_col(text, offset)
        visible = _to_names(script.complete(line, col))
        call = _callee_at(script, text, offset, path)
        if call is not None:
            params = {n.name for n in call.names}
            rest = tuple(n for n in visible if n.name not in params)
            return NamesAt(ARGUMENT, call.names + rest, call.known, call.base, call.why)
        return NamesAt(VISIBLE, visible, False, None, "visible names are never all known")

    found = _guarded("names at a position", text, budget, ask)
    if found is not None:
        _remember(key, found)
    return found


def _remember(key: tuple[str, str | None, str, int, int], value: Any) -> None:
    with _lock:
        _answers[key] = value
        while len(_answers) > CACHE_SIZE:
            _answers.popitem(last=False)


def _recalled(key: tuple[str, str | None, str, int, int]) -> tuple[bool, Any]:
    with _lock:
        return (True, _answers[key]) if key in _answers else (False, None)


# -- what a fill names that does not exist ----------------------------------------------------


@dataclass(frozen=True)
class Use:
    """A name a fill uses that jedi can judge: an attribute after a `.` (`dot`: the
    offset of the dot) or a keyword argument of a call (`dot` is None)."""

    word: str
    start: int  # character offset of the word
    dot: int | None


def missing_members(
    text: str,
    uses: Sequence[tuple[int, Use]],
    *,
    path: str | None = None,
    root: str | None = None,
    environment: str | None = None,
    budget: JediBudget | None = None,
) -> list[Missing] | None:
    """Of `uses` (each with the index of the fill range it is in), those jedi shows do not
    exist: an attribute missing from a base it knows whole, a keyword argument a callee
    it knows whole (without **kwargs) does not take. None when jedi could not judge at
    all (logged); a use it cannot judge is not reported."""
    if not uses:
        return []
    out: list[Missing] = []
    judged = False
    hashed, where = digest(text), (path, root, environment)
    for i, use in uses:
        at = use.dot if use.dot is not None else use.start
        key = (hashed, where, "use", at, use.start)
        known, verdict = _recalled(key)
        if not known:
            verdict = _guarded(
                "a fill's names",
                text,
                budget,
                lambda u=use: _judge(text, u, path, root, environment),
            )
            if verdict is None:
                continue
            _remember(key, verdict)
        judged = True
        if verdict:
            out.append(Missing(i, use.word, verdict))
    return out if judged else None


def _judge(text: str, use: Use, path: str | None, root: str | None, environment: str | None) -> str:
    """The message when `use` does not exist, "" when it does or jedi cannot tell."""
    script = script_for(text, path, root, environment)
    if use.dot is not None:
        at = _member_at(script, text, use.dot, path)
        if at.known and not at.has(use.word):
            return f"{at.base or 'the object'} has no attribute {use.word!r}"
        return ""
    call = _callee_at(script, text, use.start, path)
    if call is not None and call.known and not call.has(use.word):
        return f"{call.base or 'the callee'} takes no keyword argument {use.word!r}"
    return ""


def clear_caches() -> None:
    """Forget parsed texts and answers (tests; a long-lived process that wants memory)."""
    with _lock:
        forget_scripts()
        _answers.clear()
