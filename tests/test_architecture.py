"""Architecture: imports point down the layers, and ``import memmw`` stays light."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import memmw

PACKAGE = Path(memmw.__file__).resolve().parent

#: Layer of each module, lowest first (ARCHITECTURE.md "Layers"). A module may import its
#: own layer and the layers below it, never one above. Sub-packages take their parent's
#: layer unless listed.
LAYERS: dict[str, int] = {
    # values
    "memmw.errors": 0,
    "memmw.config": 0,
    "memmw.types": 0,
    "memmw.timeutil": 0,
    "memmw.chat_type": 0,
    "memmw.redaction": 0,
    "memmw.statedir": 0,
    "memmw.observability": 0,
    # text and the workspace
    "memmw.text": 1,
    "memmw.workspace": 1,
    # knowledge graph: the pure parser, provenance and telemetry sit low (sync uses them)
    "memmw.graph.syntax": 1,
    "memmw.graph.provenance": 1,
    "memmw.graph.telemetry": 1,
    # the derived index
    "memmw.store": 2,
    # embeddings (memmw.testing re-exports the fake provider for tests)
    "memmw.embeddings": 3,
    "memmw.testing": 3,
    # search
    "memmw.search": 4,
    "memmw.graph": 4,
    # engine
    "memmw.engine": 5,
    # agent surface and lifecycle hooks
    "memmw.agent": 6,
    "memmw.hooks": 6,
    # consolidation: reads telemetry, asks a model, gates and writes notes, syncs the engine
    "memmw.consolidation": 6,
    # integration (the package root re-exports the engine, so only these may import it)
    "memmw.middleware": 7,
    "memmw.adapters": 7,
    "memmw.cli": 7,
    "memmw.__main__": 7,
    "memmw": 7,
}

HEAVY = ("opentelemetry", "langchain", "langchain_core", "openai", "google.genai", "llama_cpp", "psycopg", "pgvector")


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(name: str) -> int | None:
    parts = name.split(".")
    while parts:
        key = ".".join(parts)
        if key in LAYERS:
            return LAYERS[key]
        parts.pop()
    return None


def is_type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and (
        (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
        or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")
    )


def runtime_imports(tree: ast.Module, current: str, is_package: bool) -> list[tuple[int, str]]:
    """``(line, module)`` of every memmw import outside ``if TYPE_CHECKING:`` blocks."""
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST) -> None:
        if is_type_checking_block(node):
            for child in node.orelse:  # type: ignore[attr-defined]
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "memmw")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = current.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target.split(".")[0] != "memmw":
                return
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                # "from memmw import config" imports the submodule memmw.config.
                is_module = (PACKAGE.parent / Path(*sub.split("."))).with_suffix(".py").exists() or (
                    PACKAGE.parent / Path(*sub.split("."))
                ).is_dir()
                found.append((node.lineno, sub if is_module else target))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def all_modules() -> list[tuple[str, Path]]:
    return sorted((module_name(p), p) for p in PACKAGE.rglob("*.py"))


def test_every_module_has_a_layer() -> None:
    unknown = [name for name, _ in all_modules() if layer_of(name) is None]
    assert unknown == [], f"add these modules to LAYERS in {Path(__file__).name}: {unknown}"


def test_imports_point_down_only() -> None:
    violations: list[str] = []
    for name, path in all_modules():
        own = layer_of(name)
        assert own is not None
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, target in runtime_imports(tree, name, path.name == "__init__.py"):
            if target == name or target.startswith(name + "."):
                continue  # a package importing its own submodules
            theirs = layer_of(target)
            if theirs is None or theirs > own:
                violations.append(f"{name}:{line} imports {target} (layer {theirs} > {own})")
    assert violations == []


def test_only_the_store_package_touches_sqlite() -> None:
    """The engine, graph, search and CLI reach the index through ``memmw.store.protocol``.

    Outside ``memmw.store`` no module imports ``sqlite3`` or a SQLite store module (the
    store factory is the one place that picks the SQLite package).
    """
    violations: list[str] = []
    for name, path in all_modules():
        if name == "memmw.store" or name.startswith("memmw.store."):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                targets = [node.module or ""]
            violations.extend(
                f"{name}:{node.lineno} imports {t}"
                for t in targets
                if t == "sqlite3" or t.startswith("memmw.store.sqlite")
            )
    assert violations == []


def test_production_code_never_imports_the_test_helpers() -> None:
    users = [
        f"{name}:{line}"
        for name, path in all_modules()
        if name != "memmw.testing"
        for line, target in runtime_imports(
            ast.parse(path.read_text(encoding="utf-8")), name, path.name == "__init__.py"
        )
        if target == "memmw.testing"
    ]
    assert users == []


def test_the_layer_checker_catches_an_upward_import() -> None:
    tree = ast.parse(
        "from memmw.engine.memory import Memory\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from memmw.cli import main\n"
        "def f():\n    import memmw.agent.tools\n"
        "from .. import search\n"
    )
    found = runtime_imports(tree, "memmw.text.chunking", False)
    assert found == [(1, "memmw.engine.memory"), (6, "memmw.agent.tools"), (7, "memmw.search")]
    assert [layer_of(t) for _, t in found] == [5, 6, 4]
    assert layer_of("memmw.store.sqlite.store") == 2
    assert layer_of("memmw.embeddings.openai") == 3


def test_import_memmw_does_not_load_frameworks_or_providers() -> None:
    code = (
        "import json, sys\n"
        "import memmw\n"
        "mem = memmw.MemoryConfig(provider='none')\n"
        f"heavy = {HEAVY!r}\n"
        "print(json.dumps(sorted(m for m in sys.modules if m in heavy or m.startswith(tuple(h + '.' for h in heavy)))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=PACKAGE.parent,
    )
    assert json.loads(out.stdout) == []
