"""Architecture: imports point down the layers, and ``import memmw`` stays light."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType

import pytest

import memmw

from .conftest import make_memory, write

PACKAGE = Path(memmw.__file__).resolve().parent

#: Layer of each folder (and top-level module), lowest first (docs/architecture.md
#: "Layers"). A module may import its own layer and the layers below it, never one above.
#: One layer per folder: a key names a top-level unit (``memmw.<name>``) only, never a
#: module inside a folder (``test_one_layer_per_folder``).
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
    # text, the workspace and the Markdown grammar of notes (the store depends on it)
    "memmw.text": 1,
    "memmw.workspace": 1,
    "memmw.notes": 1,
    # the derived index
    "memmw.store": 2,
    # embeddings (memmw.testing re-exports the fake provider for tests)
    "memmw.embeddings": 3,
    "memmw.testing": 3,
    # search and the knowledge graph
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
    "memmw.extensions": 7,
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


def unit_of(name: str) -> str:
    """The folder or top-level module ``name`` belongs to (``memmw.store.sqlite.db`` ->
    ``memmw.store``); the package root is its own unit."""
    parts = name.split(".")
    return ".".join(parts[:2])


def layer_of(name: str, layers: dict[str, int] = LAYERS) -> int | None:
    return layers.get(unit_of(name))


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


def import_graph() -> dict[str, set[tuple[str, int]]]:
    """``module -> {(imported memmw module, line)}`` at run time (``TYPE_CHECKING`` skipped)."""
    graph: dict[str, set[tuple[str, int]]] = {}
    for name, path in all_modules():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        graph[name] = {
            (target, line)
            for line, target in runtime_imports(tree, name, path.name == "__init__.py")
            if not (target == name or target.startswith(name + "."))  # a package's own parts
        }
    return graph


def upward_imports(
    graph: dict[str, set[tuple[str, int]]], layers: dict[str, int] = LAYERS
) -> list[str]:
    """Every import of a higher layer (or of a module with no layer)."""
    found: list[str] = []
    for name, targets in sorted(graph.items()):
        own = layer_of(name, layers)
        for target, line in sorted(targets, key=lambda t: (t[1], t[0])):
            theirs = layer_of(target, layers)
            if own is None or theirs is None or theirs > own:
                found.append(f"{name}:{line} imports {target} (layer {theirs} > {own})")
    return found


def unit_cycles(graph: dict[str, set[tuple[str, int]]]) -> list[list[str]]:
    """The import cycles between folders: strongly connected sets of more than one unit.

    Each module's imports become edges between the units (folders or top-level modules)
    of importer and imported; the package root is left out (it only re-exports).
    """
    edges: dict[str, set[str]] = {}
    for name, targets in graph.items():
        src = unit_of(name)
        edges.setdefault(src, set())
        for target, _line in targets:
            dst = unit_of(target)
            if dst != src and "memmw" not in (src, dst):
                edges[src].add(dst)
                edges.setdefault(dst, set())
    # Tarjan's strongly connected components (iterative-free: the graph is small).
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def split_folders(layers: dict[str, int]) -> list[str]:
    """Keys of ``layers`` naming a module inside a folder (a folder given two layers)."""
    return sorted(key for key in layers if key != unit_of(key))


def test_one_layer_per_folder() -> None:
    assert split_folders(LAYERS) == []


def test_imports_point_down_only() -> None:
    assert upward_imports(import_graph()) == []


def test_no_import_cycle_between_folders() -> None:
    assert unit_cycles(import_graph()) == []


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
    graph = {"memmw.text.chunking": {(t, line) for line, t in found}}
    assert upward_imports(graph) == [
        "memmw.text.chunking:1 imports memmw.engine.memory (layer 5 > 1)",
        "memmw.text.chunking:6 imports memmw.agent.tools (layer 6 > 1)",
        "memmw.text.chunking:7 imports memmw.search (layer 4 > 1)",
    ]


def test_the_checkers_catch_a_split_folder_and_a_cycle() -> None:
    """The two rules this file added fail when broken (they are not vacuous)."""
    # A folder given two layers (as graph/ once was: its parser low, its search high).
    assert split_folders({**LAYERS, "memmw.graph.syntax": 1}) == ["memmw.graph.syntax"]
    # The cycle agent/tools -> hooks/working_memory -> hooks/bootstrap -> agent/tools.
    graph = {
        "memmw.agent.tools": {("memmw.hooks.working_memory", 950)},
        "memmw.hooks.working_memory": {("memmw.hooks.bootstrap", 61)},
        "memmw.hooks.bootstrap": {("memmw.agent.tools", 13)},
        "memmw.store.graphrows": {("memmw.notes.syntax", 16)},
    }
    assert unit_cycles(graph) == [["memmw.agent", "memmw.hooks"]]
    # graph/ and store/ importing each other, over three modules.
    graph = {
        "memmw.store.graphrows": {("memmw.graph.syntax", 16)},
        "memmw.graph.engine": {("memmw.store.protocol", 22)},
        "memmw.search.searcher": {("memmw.store.protocol", 1)},
    }
    assert unit_cycles(graph) == [["memmw.graph", "memmw.store"]]
    assert unit_cycles({"memmw.graph.engine": {("memmw.store.protocol", 22)}}) == []


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


# -- the walk of a search: from the agent tool to the store and back -----------------------

#: Rooms above the one that owns the query (``search/``): the agent surface and the engine.
SEARCH_LAYER = LAYERS["memmw.search"]


def room_of(filename: str) -> str | None:
    """The folder a frame's file belongs to when it is a working room (layer 2 and up);
    values, text and workspace helpers (layers 0-1) are leaves, seen through."""
    path = Path(filename)
    try:
        rel = path.resolve().relative_to(PACKAGE.parent)
    except ValueError:
        return None
    if rel.suffix != ".py":
        return None
    name = module_name(PACKAGE.parent / rel)
    layer = layer_of(name)
    return unit_of(name) if layer is not None and layer >= 2 else None


def search_walk(run: Callable[[], object]) -> list[str]:
    """The rooms control passes through while ``run`` runs, in order (repeats collapsed)."""
    walk: list[str] = []

    def room(frame: FrameType | None) -> str | None:
        while frame is not None:
            found = room_of(frame.f_code.co_filename)
            if found is not None:
                return found
            frame = frame.f_back
        return None

    def profile(frame: FrameType, event: str, _arg: object) -> None:
        if event not in ("call", "return"):
            return
        here = room(frame if event == "call" else frame.f_back)
        if here is not None and (not walk or walk[-1] != here):
            walk.append(here)

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return walk


def climbs_back_up(walk: list[str]) -> list[str]:
    """Each time the walk comes back up above ``search/`` and then goes down somewhere new.

    A climb back up: control returns from a room into the engine or the agent surface and
    then descends into a different room (consecutive calls into one room are one visit;
    the final return to the caller is not a climb). ``search/`` owning the whole query
    leaves at most: the engine readying the store, the query, the graph's bookkeeping.
    """
    found: list[str] = []
    for i in range(1, len(walk) - 1):
        came_from, here, goes_to = walk[i - 1], walk[i], walk[i + 1]
        up = LAYERS[here] > SEARCH_LAYER and LAYERS[came_from] < LAYERS[here]
        down = LAYERS[goes_to] < LAYERS[here]
        if up and down and goes_to != came_from:
            found.append(f"{came_from} -> {here} -> {goes_to}")
    return found


def test_the_walk_checker_counts_climbs_back_up() -> None:
    walk = ["memmw.agent", "memmw.engine", "memmw.store", "memmw.engine", "memmw.store",
            "memmw.engine", "memmw.search", "memmw.store", "memmw.search", "memmw.engine",
            "memmw.embeddings", "memmw.engine", "memmw.graph", "memmw.engine", "memmw.agent"]
    assert climbs_back_up(walk) == [
        "memmw.store -> memmw.engine -> memmw.search",
        "memmw.search -> memmw.engine -> memmw.embeddings",
        "memmw.embeddings -> memmw.engine -> memmw.graph",
    ]
    assert climbs_back_up(["memmw.agent", "memmw.engine", "memmw.search", "memmw.engine",
                           "memmw.agent"]) == []


@pytest.mark.parametrize("shared", [False, True], ids=["own-index", "with-shared-namespace"])
def test_a_search_from_the_agent_tool_climbs_back_up_at_most_twice(
    tmp_path: Path, shared: bool
) -> None:
    """Hybrid search through ``memory_search``: the query goes down once through
    ``search/`` (embedding, every index, the shared namespaces) and comes back up."""
    from memmw import MemoryConfig, StoreConfig
    from memmw.agent.tools import search_tool_payload

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "2026-01-02.md").write_text("The gateway runs on port 8080.\n")
    (tmp_path / "team" / "memory").mkdir(parents=True)
    (tmp_path / "team" / "memory" / "2026-01-02.md").write_text("The team gateway is eu-1.\n")
    config = MemoryConfig(
        provider="fake", store=StoreConfig(shared=("team",) if shared else ())
    )
    with make_memory(workspace=tmp_path / "team", state_dir=tmp_path / "state", agent_id="team", config=config) as team:
        team.sync()
    with make_memory(workspace=ws, state_dir=tmp_path / "state", config=config) as mem:
        mem.sync()
        first = search_tool_payload(mem, {"query": "gateway port"}, citations=True)
        walks = [search_walk(lambda q=q: search_tool_payload(mem, {"query": q}, citations=True))
                 for q in ("gateway port", "which port")]
    assert first["mode"] == "hybrid" and first["results"]
    for walk in walks:
        assert walk[0] == "memmw.agent" and walk[-1] == "memmw.agent"
        assert {"memmw.store", "memmw.search", "memmw.embeddings"} <= set(walk)
        assert len(climbs_back_up(walk)) <= 2, climbs_back_up(walk)
        # Between entering search/ for the query and coming back, the engine never runs:
        # it holds no search or embedding step.
        first_search = walk.index("memmw.search")
        back = next(i for i in range(first_search, len(walk)) if walk[i] == "memmw.engine")
        assert "memmw.search" not in walk[back:], walk


def test_memory_holds_no_search_or_embedding_logic() -> None:
    """``engine/memory.py`` wires services: it ranks nothing, embeds no query, reads no
    vector, and never branches on the store backend or probes a provider's attributes."""
    path = PACKAGE / "engine" / "memory.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = {t for _, t in runtime_imports(tree, "memmw.engine.memory", False)}
    assert "numpy" not in {a.name for n in ast.walk(tree) if isinstance(n, ast.Import)
                           for a in n.names}
    forbidden = ("memmw.search.searcher", "memmw.search.keyword", "memmw.search.ranking",
                 "memmw.search.snippets", "memmw.store.vectorsearch.VectorIndex",
                 "memmw.embeddings.query.QueryEmbedder", "memmw.embeddings.breaker.CircuitBreaker")
    assert sorted(t for t in imported if t.startswith(forbidden)) == []
    probes = [
        f"{node.lineno}: getattr(..., {node.args[1].value!r})"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        and node.func.id == "getattr" and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and node.args[1].value in ("generation", "fallback_from", "fallback_reason", "close", "dims")
    ]
    assert probes == []
    backend_branches = [
        f"{node.lineno}" for node in ast.walk(tree)
        if isinstance(node, ast.Compare)
        and any(isinstance(c, ast.Constant) and c.value in ("postgres", "sqlite", "sqlite-vec")
                for c in [node.left, *node.comparators])
    ]
    assert backend_branches == []


def resolutions_of_count_and_threshold(package: Path = PACKAGE) -> list[str]:
    """Where a module of ``package`` calls ``results_wanted`` or ``check_min_score``."""
    found = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("results_wanted", "check_min_score")):
                found.append(f"{path.relative_to(package).as_posix()}:{node.func.attr}")
    return found


def test_count_and_threshold_are_resolved_in_the_search_alone(tmp_path: Path) -> None:
    """The search resolves a query's count and threshold (``AgentSearch.resolve``); the
    agent tool parses and renders, and a session's gate reaches the search as its
    ``Visibility`` (the over-fetch for hidden hits is the search's)."""
    assert resolutions_of_count_and_threshold() == [
        "search/retriever.py:results_wanted", "search/retriever.py:check_min_score"]
    tools = ast.parse((PACKAGE / "agent" / "tools.py").read_text(encoding="utf-8"))
    names = {n.id for n in ast.walk(tools) if isinstance(n, ast.Name)}
    assert not names & {"OVERFETCH_FACTOR", "OVERFETCH_MAX", "asks", "wanted"}
    # The checker sees a resolution elsewhere.
    write(tmp_path / "agent" / "tools.py", "def f(config):\n    config.query.check_min_score(2)\n")
    assert resolutions_of_count_and_threshold(tmp_path) == ["agent/tools.py:check_min_score"]


#: The two words that name an index source; anywhere else they are a named constant.
SOURCE_WORDS = frozenset({"memory", "sessions"})


def bare_source_literals(package: Path = PACKAGE) -> list[str]:
    """Where a module of ``package`` spells ``"memory"`` or ``"sessions"`` as a bare string.

    Allowed: the ``Source`` members (``memmw.config.Source``), a module constant
    (``UPPER_CASE = "memory"``: a folder, a setting's value, a JSON key, each named for
    what it means), a ``Literal[...]`` of a setting's values, and docstrings.
    """
    found = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        allowed: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                allowed.add(id(node.value))  # a docstring
            elif isinstance(node, ast.ClassDef) and node.name == "Source":
                allowed |= {id(n) for n in ast.walk(node)}
            elif (isinstance(node, (ast.Assign, ast.AnnAssign)) and node in tree.body
                  and all(isinstance(t, ast.Name) and t.id.isupper()
                          for t in (node.targets if isinstance(node, ast.Assign)
                                    else [node.target]))):
                allowed |= {id(n) for n in ast.walk(node)}
            elif (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
                  and node.value.id == "Literal"):
                allowed |= {id(n) for n in ast.walk(node.slice)}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and node.value in SOURCE_WORDS
                    and id(node) not in allowed):
                found.append(f"{path.relative_to(package).as_posix()}:{node.lineno}")
    return found


def test_sources_are_a_typed_value_not_bare_strings(tmp_path: Path) -> None:
    """``memmw.config.Source`` is the one spelling of an index source ("memory" and the
    transcripts' "sessions"); every other "memory" or "sessions" in the code is a named
    constant saying which other thing it means (a folder, a backend, a JSON key)."""
    assert bare_source_literals() == []
    write(tmp_path / "a.py", 'MEMORY_DIR = "memory"\n\ndef f(source):\n'
          '    """Reads "memory"."""\n    return source == "sessions"\n')
    assert bare_source_literals(tmp_path) == ["a.py:5"]
