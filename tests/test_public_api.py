"""The public API pinned to ARCHITECTURE.md: names, call shapes and result fields."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from pathlib import Path

import pytest

import memmw

PUBLIC = {
    "ArchiveError",
    "BatchUnavailableError",
    "CircuitOpenError",
    "InvalidVectorError",
    "MissingApiKeyError",
    "QueryTimeoutError",
    "ActiveMemoryConfig",
    "BatchConfig",
    "BootstrapConfig",
    "CacheConfig",
    "ChunkingConfig",
    "ConfigError",
    "ConsolidationConfig",
    "ContentPolicyError",
    "ExtraPath",
    "FileBusyError",
    "FileIssue",
    "FileReadError",
    "FlushConfig",
    "ForgetError",
    "HybridConfig",
    "IndexBusyError",
    "IndexCorruptError",
    "IndexStoreError",
    "LocalConfig",
    "MMRConfig",
    "MemmwError",
    "Memory",
    "MemoryConfig",
    "MemoryMiddleware",
    "NoteEditError",
    "PathPolicyError",
    "ProviderError",
    "ProviderUnavailableError",
    "QueryConfig",
    "ReadConfig",
    "ReadResult",
    "RedactingFilter",
    "RemoteConfig",
    "SearchHit",
    "SearchResult",
    "Session",
    "SessionArchiveConfig",
    "SessionSyncConfig",
    "Status",
    "StoreConfig",
    "SyncConfig",
    "TracingConfig",
    "SyncReport",
    "TemporalDecayConfig",
    "ToolArgumentError",
    "WiringError",
    "__version__",
}

#: ``method -> [(name, default)]`` of the positional parameters ARCHITECTURE.md documents.
#: Any further parameter must be keyword-only so the documented calls keep working.
DOCUMENTED = {
    "__init__": [("workspace", None), ("state_dir", None), ("agent_id", "main"), ("config", None)],
    "sync": [("force", False)],
    "search": [("query", inspect.Parameter.empty), ("max_results", None), ("min_score", None)],
    "get": [("path", inspect.Parameter.empty), ("from_line", None), ("lines", None)],
    "status": [("deep", False)],
    "close": [],
}


def test_public_names_are_pinned() -> None:
    assert set(memmw.__all__) == PUBLIC
    assert len(memmw.__all__) == len(PUBLIC)
    for name in PUBLIC:
        assert hasattr(memmw, name), name
    assert isinstance(memmw.__version__, str)


def test_memory_call_shapes() -> None:
    for method, expected in DOCUMENTED.items():
        params = list(inspect.signature(getattr(memmw.Memory, method)).parameters.values())[1:]
        positional = [p for p in params if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
        assert [(p.name, p.default) for p in positional] == expected, method
        extra = [p for p in params if p.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD]
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in extra), method
    assert hasattr(memmw.Memory, "__enter__") and hasattr(memmw.Memory, "__exit__")


def test_result_fields() -> None:
    hit_fields = {f.name for f in dataclasses.fields(memmw.SearchHit)}
    assert {"path", "start_line", "end_line", "score", "snippet", "source", "citation"} <= hit_fields
    read_fields = {f.name for f in dataclasses.fields(memmw.ReadResult)}
    assert {"text", "path", "status", "from_line", "lines", "truncated", "next_from"} <= read_fields
    report_fields = {f.name for f in dataclasses.fields(memmw.SyncReport)}
    assert {"files_added", "files_changed", "files_removed", "chunks_total", "seconds"} <= report_fields
    assert callable(memmw.Status.to_dict)


def test_exception_tree() -> None:
    for name in ("ConfigError", "IndexStoreError", "IndexBusyError", "PathPolicyError",
                 "ProviderError", "ProviderUnavailableError"):
        assert issubclass(getattr(memmw, name), memmw.MemmwError), name
    assert issubclass(memmw.IndexBusyError, memmw.IndexStoreError)
    assert issubclass(memmw.ProviderUnavailableError, memmw.ProviderError)


def test_documented_example_runs(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "2026-01-02.md").write_text("# Jan 2\nThe query is answered here.\n", encoding="utf-8")
    mem = memmw.Memory(
        workspace=str(ws), state_dir=str(tmp_path / "state"), agent_id="main",
        config=memmw.MemoryConfig(provider="none"),
    )
    with mem:
        report = mem.sync(force=False)
        assert isinstance(report, memmw.SyncReport) and report.files_added == 1
        hits = mem.search("query", max_results=6, min_score=None)
        (hit,) = hits
        assert isinstance(hit, memmw.SearchHit)
        assert (hit.path, hit.start_line, hit.end_line, hit.source) == ("memory/2026-01-02.md", 1, 2, "memory")
        assert hit.citation == "memory/2026-01-02.md#L1-L2"
        assert hit.snippet == "# Jan 2\nThe query is answered here."
        got = mem.get("memory/2026-01-02.md", from_line=1, lines=40)
        assert isinstance(got, memmw.ReadResult)
        assert (got.path, got.text) == ("memory/2026-01-02.md", "# Jan 2\nThe query is answered here.")
        status = mem.status(deep=False)
        assert isinstance(status, memmw.Status) and status.to_dict()["files"] == 1
    mem.close()  # closing twice is harmless


#: The public modules; everything else under memmw is internal (no ``__all__``).
PUBLIC_MODULES = (
    "memmw",
    "memmw.extensions",
    "memmw.middleware",
    "memmw.testing",
    "memmw.adapters.custom_loop",
    "memmw.adapters.langchain",
    "memmw.adapters.langchain_no_reply",
    "memmw.adapters.mcp",
    "memmw.consolidation",
)


def isort_order(names: list[str]) -> list[str]:
    """Sorted as ruff's RUF022 sorts ``__all__``: CONSTANTS, then Classes, then the rest."""

    def key(name: str) -> tuple[int, str]:
        if len(name) > 1 and name.isupper():
            return 0, name
        return (1 if name[:1].isupper() else 2), name

    return sorted(names, key=key)


def defined_here(module: object, name: str) -> set[str]:
    """Public functions, classes and constants defined in module ``name`` itself."""
    found = set()
    source = inspect.getsource(module)  # type: ignore[arg-type]
    for attr, obj in vars(module).items():
        if attr.startswith("_") or inspect.ismodule(obj) or attr in ("TYPE_CHECKING", "log"):
            continue
        if inspect.isclass(obj) or inspect.isfunction(obj):
            if obj.__module__ == name:
                found.add(attr)
        elif f"\n{attr} = " in source or f"\n{attr}: " in source:
            found.add(attr)  # a constant or type alias assigned here
    return found


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_all_lists_exactly_what_each_public_module_exports(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert exported == isort_order(exported), f"{name}.__all__ is not sorted"
    assert len(set(exported)) == len(exported)
    missing = [attr for attr in exported if not hasattr(module, attr)]
    assert missing == [], f"{name}.__all__ names what it does not have"
    unlisted = sorted(defined_here(module, name) - set(exported))
    assert unlisted == [], f"{name} defines public names missing from __all__"


def test_the_package_exports_exactly_its_all() -> None:
    # As httpx does: every public attribute of the package is in __all__ and vice versa.
    public = sorted(
        attr
        for attr, obj in vars(memmw).items()
        if (not attr.startswith("_") or attr == "__version__") and not inspect.ismodule(obj)
    )
    assert memmw.__all__ == isort_order(public)


def test_every_config_section_and_error_is_importable_from_the_package() -> None:
    from memmw import config, errors

    sections = {n for n, o in vars(config).items() if inspect.isclass(o) and n.endswith("Config")}
    sections |= {"ExtraPath"}
    assert sections - {"_Section"} <= set(memmw.__all__)
    errs = {n for n, o in vars(errors).items() if inspect.isclass(o) and issubclass(o, Exception)}
    assert errs <= set(memmw.__all__)
    assert memmw.MemoryMiddleware is importlib.import_module("memmw.middleware").MemoryMiddleware


def test_internal_modules_have_no_all() -> None:
    package = Path(memmw.__file__).resolve().parent
    with_all = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent).with_suffix("")
        parts = [p for p in rel.parts if p != "__init__"]
        name = ".".join(parts)
        if name in PUBLIC_MODULES:
            continue
        if "\n__all__" in path.read_text(encoding="utf-8"):
            with_all.append(name)
    assert with_all == []


def test_the_extension_module_names_what_the_readme_points_to() -> None:
    from memmw import extensions
    from memmw.embeddings import registry
    from memmw.hooks import extractor
    from memmw.workspace import active_context

    assert extensions.__all__ == [
        "EmbeddingProvider",
        "ProviderFactory",
        "available_providers",
        "extractor_hook",
        "register_provider",
        "unregister_provider",
        "write_active_context",
    ]
    assert extensions.register_provider is registry.register_provider
    assert extensions.extractor_hook is extractor.extractor_hook
    assert extensions.write_active_context is active_context.write_active_context
