"""The public API pinned to ARCHITECTURE.md: names, call shapes and result fields."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import memmw

PUBLIC = {
    "ChunkingConfig",
    "ConfigError",
    "ExtraPath",
    "FileIssue",
    "HybridConfig",
    "IndexBusyError",
    "IndexStoreError",
    "MMRConfig",
    "MemmwError",
    "Memory",
    "MemoryConfig",
    "PathPolicyError",
    "ProviderError",
    "ProviderUnavailableError",
    "QueryConfig",
    "ReadResult",
    "SearchHit",
    "Status",
    "StoreConfig",
    "SyncConfig",
    "SyncReport",
    "TemporalDecayConfig",
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
