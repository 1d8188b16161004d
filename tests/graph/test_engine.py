"""Forget (visible retraction in the Markdown), activation bookkeeping, the facts tool."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from memmw import Memory
from memmw.agent.tools import build_memory_tools, tools_by_name
from memmw.config import ActiveMemoryConfig
from memmw.errors import PathPolicyError
from memmw.graph.engine import ForgetError
from memmw.graph.telemetry import summarize_telemetry, telemetry_path


def test_forget_by_citation_strikes_the_line_and_search_and_facts_skip_it(mem: Memory, ws: Path) -> None:
    assert mem.facts("Where does Alice live")[0].value == "Lisbon"
    result = mem.forget("memory/2026-05-01.md#L3", reason="wrong city")
    assert result.retracted == ("memory/2026-05-01.md#L3",)
    line = (ws / "memory" / "2026-05-01.md").read_text().split("\n")[2]
    assert line.startswith("- ~~city: Lisbon~~ (retracted ") and line.endswith(": wrong city)")
    # The older value is current again; the retracted one is never returned.
    hits = mem.facts("Where does Alice live", include_history=True)
    assert hits[0].value == "Berlin" and "Lisbon" not in [h.value for h in hits]
    assert all("city: Lisbon" not in h.snippet for h in mem.search("Lisbon city", min_score=0))


def test_forget_by_entity_and_key_retracts_every_value(mem: Memory, ws: Path) -> None:
    result = mem.forget(entity="Ali", key="City")
    assert sorted(result.retracted) == ["MEMORY.md#L5", "memory/2026-05-01.md#L3"]
    assert [h for h in mem.facts("Where does Alice live", include_history=True) if h.key == "city"] == []
    assert (ws / "MEMORY.md").read_text().count("~~city: Berlin~~ (retracted") == 1


def test_forget_errors_lose_nothing(mem: Memory, ws: Path) -> None:
    before = (ws / "MEMORY.md").read_text()
    with pytest.raises(ForgetError):
        mem.forget("MEMORY.md#L1")  # a heading, not an entry
    with pytest.raises(ForgetError):
        mem.forget("MEMORY.md#L999")
    with pytest.raises(ForgetError):
        mem.forget("not a citation")
    with pytest.raises(ForgetError):
        mem.forget(entity="Nobody", key="city")
    with pytest.raises(PathPolicyError):
        mem.forget("../outside.md#L1")
    assert (ws / "MEMORY.md").read_text() == before  # failed attempts change nothing
    mem.forget("MEMORY.md#L5")
    with pytest.raises(ForgetError):
        mem.forget("MEMORY.md#L5")  # already retracted
    after = (ws / "MEMORY.md").read_text().split("\n")
    assert after[4].startswith("- ~~city: Berlin~~ (retracted ")
    assert [line for i, line in enumerate(after) if i != 4] == [
        line for i, line in enumerate(before.split("\n")) if i != 4
    ]


def test_tools_facts_and_forget(mem: Memory, ws: Path) -> None:
    tools = tools_by_name(build_memory_tools(mem))
    payload = tools["memory_facts"].invoke({"query": "where does Ali live", "maxResults": 3})
    top = payload["results"][0]
    assert top["value"] == "Lisbon" and top["citation"] == "memory/2026-05-01.md#L3" and top["current"]
    assert tools["memory_facts"].invoke({})["error"]
    history = tools["memory_facts"].invoke({"query": "Alice city", "history": True})["results"]
    assert {"Berlin", "Lisbon"} <= {r["value"] for r in history}
    bad = tools["memory_forget"].invoke({"citation": "MEMORY.md#L1"})
    assert bad["status"] == "error" and "list entries" in bad["error"]
    ok = tools["memory_forget"].invoke({"citation": "memory/2026-05-01.md#L3", "reason": "moved"})
    assert ok == {"status": "ok", "retracted": ["memory/2026-05-01.md#L3"], "reason": "moved"}
    group = tools_by_name(build_memory_tools(mem, session_key="agent:main:telegram:group:1"))
    mem.config = dataclasses.replace(mem.config, active_memory=ActiveMemoryConfig())
    assert set(tools_by_name(build_memory_tools(mem))) == {
        "memory_search",
        "memory_get",
        "memory_append",
        "memory_facts",
    }  # the editing tools are opt-in (active_memory.edit_tools)
    assert "memory_forget" not in group and "memory_set_context" not in group
    results = group["memory_facts"].invoke({"query": "Alice employer city", "maxResults": 20})["results"]
    values = {r["value"] for r in results}
    assert "Acme Corp" not in values and "Berlin" not in values  # MEMORY.md is private
    assert "Lisbon" not in values  # retracted above
    assert all("citation" not in r for r in results)  # citations off in groups (auto)
    assert group["memory_facts"].invoke({"query": "gateway port"})["results"][0]["value"] == "8443"


def test_activation_rises_with_access_and_telemetry_is_logged(mem: Memory) -> None:
    first = mem.facts("Where does Alice live")[0]
    again = mem.facts("Where does Alice live")[0]
    assert again.activation > first.activation
    for _ in range(3):
        mem.facts("Where does Alice live")
    assert mem.facts("Where does Alice live")[0].tier == "hot"
    mem.search("Lisbon")  # a memory_search hit showing the line raises it too
    path = telemetry_path(mem.state_dir, mem.agent_id)
    events = [json.loads(line)["event"] for line in path.read_text().splitlines()]
    assert events.count("facts") == 6 and events.count("search") == 1
    summary = summarize_telemetry(path)
    assert summary["by_event"]["facts"]["count"] == 6
    assert summary["by_event"]["facts"]["hit_rate"] == 1.0
    assert summary["by_event"]["facts"]["p95_ms"] >= summary["by_event"]["facts"]["p50_ms"]


def test_activation_and_telemetry_degrade_on_a_read_only_state(mem: Memory, monkeypatch, caplog, store_backend) -> None:  # type: ignore[no-untyped-def]
    if store_backend != "sqlite":
        pytest.skip("simulates a read-only SQLite file")
    import sqlite3

    from memmw.store.sqlite import backend as engine_mod

    def readonly(*args: object, **kwargs: object) -> sqlite3.Connection:
        raise sqlite3.OperationalError("attempt to write a readonly database")

    mem.facts("Where does Alice live")
    monkeypatch.setattr(engine_mod, "connect", readonly)
    first = mem.facts("Where does Alice live")[0]
    second = mem.facts("Where does Alice live")[0]
    assert second.activation > first.activation  # kept in memory, no error
    assert mem.graph_engine._can_write is False
    log = mem.graph_engine.telemetry
    log.path = log.path.parent  # a directory: every append fails
    with caplog.at_level("WARNING"):
        mem.facts("Alice")
        mem.facts("Alice")
    assert sum("telemetry disabled" in r.getMessage() for r in caplog.records) == 1
