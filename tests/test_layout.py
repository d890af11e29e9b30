"""The layout shows the data flow: editor -> lsp -> infill -> model, no arrow back, no
circle, and serving apart from training (docs/ARCHITECTURE.md, "Layout"). Read from the
code's own imports. The folders lsp/, infill/ and model/ install as diffusion_infill.lsp,
diffusion_infill.infill and diffusion_infill.model (pyproject.toml)."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NAMESPACE = "diffusion_infill"
FOLDERS = ("lsp", "infill", "model")  # each installs as NAMESPACE.<folder>
LSP, INFILL, MODEL = (f"{NAMESPACE}.{f}" for f in FOLDERS)
TRAINING = f"{MODEL}.training"


def _module(path: Path) -> str:
    parts = [NAMESPACE, *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every module `path` imports, at the top or inside a function."""
    found: set[str] = set()
    package = _module(path) if path.name == "__init__.py" else _module(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1]
                    + ([base] if base else [])
                )
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return found


def _sources() -> dict[str, Path]:
    return {_module(p): p for pkg in FOLDERS for p in sorted((ROOT / pkg).rglob("*.py"))}


SOURCES = _sources()
GRAPH = {m: {i for i in _imports(p) if i in SOURCES and i != m} for m, p in SOURCES.items()}


def _within(module: str, *prefixes: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


# (importing layer, layers or libraries it must not import, why)
RULES = [
    (MODEL, (INFILL, LSP), "the network knows nothing of the engine or the editor"),
    (INFILL, (LSP,), "the engine and its worker know nothing of LSP"),
    (
        f"{INFILL}.core",
        (
            f"{INFILL}.serve",
            f"{INFILL}.cli",
            "torch",
            "transformers",
            "asyncio",
            "socket",
            "subprocess",
            "msgpack",
        ),
        "the engine is pure: no I/O, no torch",
    ),
    (f"{INFILL}.serve", (f"{INFILL}.cli",), "serving does not depend on the command line"),
    (LSP, (MODEL, "torch", "transformers", "numpy"), "the server only talks to a worker"),
    (
        TRAINING,
        (LSP, f"{INFILL}.serve", f"{INFILL}.cli", f"{INFILL}.context"),
        "training fits the engine's tables with the engine's own features (infill/core), "
        "and knows nothing of serving, the command, the user's repository or the editor",
    ),
]
# the parts of a layer that a rule of the layer does not hold (the rule of their own does)
SPARED = {MODEL: (TRAINING,)}


@pytest.mark.parametrize(
    ("layer", "banned", "why"), RULES, ids=[r[0].removeprefix(NAMESPACE + ".") for r in RULES]
)
def test_no_import_runs_back_up(layer: str, banned: tuple[str, ...], why: str) -> None:
    wrong = sorted(
        f"{m} imports {i}"
        for m, p in SOURCES.items()
        if _within(m, layer) and not _within(m, *SPARED.get(layer, ()))
        for i in _imports(p)
        if _within(i, *banned)
    )
    assert not wrong, f"{why}: {wrong}"


def test_serving_never_imports_training() -> None:
    """What the worker and the command need to run a model (model/ outside model/training,
    the engine, the server) never reaches corpus building, noising, training or packing."""
    wrong = sorted(
        f"{m} imports {i}"
        for m, p in SOURCES.items()
        if not _within(m, TRAINING)
        for i in _imports(p)
        if _within(i, TRAINING)
    )
    assert not wrong, wrong


def test_installed_code_never_imports_the_repository_only_folders() -> None:
    """benchmarks/ and tests/ are not installed (pyproject.toml): a module of lsp/, infill/
    or model/ that imports them works from a checkout and fails after `pip install`."""
    wrong = sorted(
        f"{m} imports {i}"
        for m, p in SOURCES.items()
        for i in _imports(p)
        if i.split(".")[0] in ("benchmarks", "tests")
    )
    assert not wrong, wrong


def test_every_import_names_the_installed_package() -> None:
    """`import model` would find the folder only from the repository root, and load a second
    copy of a module beside the installed one."""
    wrong = sorted(
        f"{m} imports {i}"
        for m, p in SOURCES.items()
        for i in _imports(p)
        if i.split(".")[0] in FOLDERS
    )
    assert not wrong, wrong


def test_every_package_folder_is_installed() -> None:
    """pyproject.toml lists the packages by hand (a folder maps to a name under the
    namespace): every folder with an __init__.py is listed, and nothing else."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {
        _module(p.parent / "__init__.py")
        for pkg in FOLDERS
        for p in (ROOT / pkg).rglob("__init__.py")
    }
    assert set(setuptools["packages"]) == folders
    assert setuptools["package-dir"] == {f"{NAMESPACE}.{f}": f for f in FOLDERS}


def test_no_module_imports_itself_in_a_circle() -> None:
    done: set[str] = set()

    def visit(m: str, path: list[str]) -> None:
        if m in path:
            raise AssertionError("import circle: " + " -> ".join(path[path.index(m) :] + [m]))
        if m in done:
            return
        for n in sorted(GRAPH[m]):
            visit(n, [*path, m])
        done.add(m)

    for m in sorted(GRAPH):
        visit(m, [])


def test_the_language_server_starts_without_torch_transformers_or_numpy() -> None:
    """Every lsp module imported and the server built: no heavy import on the way (the
    model lives in the worker process)."""
    code = (
        "import importlib, pkgutil, sys\n"
        "from diffusion_infill import lsp\n"
        "from diffusion_infill.lsp import server\n"
        "server.create_server()\n"
        "for m in pkgutil.iter_modules(lsp.__path__):\n"
        "    importlib.import_module('diffusion_infill.lsp.' + m.name)\n"
        "loaded = {m.split('.')[0] for m in sys.modules}\n"
        "heavy = sorted({'torch', 'transformers', 'numpy'} & loaded)\n"
        "sys.exit(f'imported {heavy}' if heavy else 0)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr


def _long_functions(path: Path, limit: int) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    return [
        f"{path.relative_to(ROOT)}:{n.lineno} {n.name} ({n.end_lineno - n.lineno + 1} lines)"
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        and n.end_lineno - n.lineno + 1 > limit
    ]


# Every Python file outside tests/ is held to the file rule: the packages, the benchmarks,
# the editors' tools and the examples (installed or fetched tools under dot folders and
# node_modules are not ours).
SOURCE_FOLDERS = (*FOLDERS, "benchmarks", "editors", "examples")


def _python_files(folder: str) -> list[Path]:
    return sorted(
        p
        for p in (ROOT / folder).rglob("*.py")
        if not any(
            part.startswith(".") or part == "node_modules" for part in p.relative_to(ROOT).parts
        )
    )


@pytest.mark.parametrize("folder", SOURCE_FOLDERS)
def test_every_source_file_has_at_most_400_lines(folder: str) -> None:
    files = _python_files(folder)
    assert files
    assert not [
        f"{p.relative_to(ROOT)} ({n} lines)"
        for p in files
        if (n := len(p.read_text().splitlines())) > 400
    ]


@pytest.mark.parametrize("folder", [f for f in SOURCE_FOLDERS if f != "examples"])
def test_every_source_function_has_at_most_60_lines(folder: str) -> None:
    """The language server, the engine, the worker, the model, training, the benchmarks
    and the editors' tools: no function or method over 60 lines (the examples hold hole
    markers: they are not Python until filled)."""
    assert not [f for p in _python_files(folder) for f in _long_functions(p, 60)]
