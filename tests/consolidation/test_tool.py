"""``memory_consolidate``: direct sessions only; candidates, a background run, last, undo."""

from __future__ import annotations

from pathlib import Path

from memmw.consolidation.schedule import consolidate_after_archive
from memmw.consolidation.tool import consolidation_tools
from memmw.engine.memory import Memory

from .conftest import scripted


def test_group_sessions_get_no_consolidation_tool(mem: Memory) -> None:
    assert consolidation_tools(mem, session_key="agent:main:telegram:group:42") == []
    assert [t.name for t in consolidation_tools(mem)] == ["memory_consolidate"]


def test_candidates_run_last_and_undo(mem: Memory, ws: Path) -> None:
    model = scripted(
        {
            "op": "update",
            "file": "MEMORY.md",
            "line": 4,
            "text": "Deploy target: production",
            "sources": ["memory/2026-11-28.md#L2"],
        }
    )
    (tool,) = consolidation_tools(mem, model=model)
    found = tool.invoke({"action": "candidates"})
    assert found["candidates"][0]["citation"] == "memory/2026-11-28.md#L2"
    before = (ws / "MEMORY.md").read_bytes()
    started = tool.invoke({"action": "run"})
    assert started["status"] == "started"
    import threading

    for t in threading.enumerate():
        if t.name == "memmw-consolidate":
            t.join(30)
    assert tool.invoke({"action": "last"})["state"] == "applied"
    assert tool.invoke({"action": "undo"})["status"] == "undone"
    assert (ws / "MEMORY.md").read_bytes() == before
    assert "error" in tool.invoke({"action": "explode"})


def test_a_run_needs_a_model(mem: Memory) -> None:
    (tool,) = consolidation_tools(mem)
    assert "no chat model" in tool.invoke({"action": "run"})["error"]


def test_the_archive_hook_runs_in_the_background(mem: Memory, ws: Path) -> None:
    from memmw import MemoryMiddleware
    from memmw.hooks.registry import Event, HookContext

    mw = MemoryMiddleware(mem)
    calls: list[int] = []
    import threading

    gate = threading.Event()

    def slow_model(messages: object) -> str:
        gate.wait(10)  # the hook must have returned before the model answers
        calls.append(1)
        return '{"edits": []}'

    consolidate_after_archive(mw, slow_model)
    mw.hooks.emit(HookContext(Event.ARCHIVE, "s1", "main", {"path": ws / "memory" / "x.md"}))
    assert calls == []  # returned at once: the turn is not held up
    gate.set()
    for t in threading.enumerate():
        if t.name == "memmw-consolidate":
            t.join(30)
    assert calls == [1]
