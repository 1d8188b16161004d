"""Issue 20: memory_get of a hit from a shared namespace reads that namespace's file, and
bad paths and agent ids get clear errors that never show the workspace's absolute path."""

from __future__ import annotations

from pathlib import Path

import pytest

from memmw import ConfigError, Memory, MemoryConfig, PathPolicyError, StoreConfig
from memmw.agent.tools import build_memory_tools, get_tool_payload, search_payload, tools_by_name

from ..conftest import make_memory, write


def test_a_shared_hit_reads_the_namespaces_file_not_the_agents_own(tmp_path: Path) -> None:
    team_ws, alice_ws, state = tmp_path / "team", tmp_path / "alice", tmp_path / "state"
    write(team_ws / "MEMORY.md", "# Team\n- The staging cluster is called heron.\n")
    write(alice_ws / "MEMORY.md", "# Alice\n- Alice waters the plants on Fridays.\n")
    with make_memory(workspace=team_ws, state_dir=state, agent_id="team", config=MemoryConfig(provider="none")) as team:
        team.sync()
    shared = MemoryConfig(provider="none", store=StoreConfig(shared=("team",)))
    with make_memory(workspace=alice_ws, state_dir=state, agent_id="alice", config=shared) as alice:
        hit = search_payload(alice, "staging cluster")["results"][0]
        assert (hit["namespace"], hit["path"]) == ("team", "MEMORY.md")
        tools = tools_by_name(build_memory_tools(alice))
        assert "namespace" in tools["memory_get"].parameters["properties"]
        got = tools["memory_get"].invoke({"path": hit["path"], "namespace": hit["namespace"]})
        assert "staging cluster is called heron" in got["text"] and got["namespace"] == "team"
        own = tools["memory_get"].invoke({"path": "MEMORY.md"})
        assert "waters the plants" in own["text"] and "namespace" not in own
        assert "waters the plants" in alice.get("MEMORY.md", namespace="alice").text
        refused = get_tool_payload(alice, {"path": "MEMORY.md", "namespace": "bob"})
        assert "not shared with this agent" in refused["error"]
        bad = get_tool_payload(alice, {"path": "MEMORY.md", "namespace": "../team"})
        assert "namespace must be" in bad["error"]
        with pytest.raises(PathPolicyError):
            alice.get("../alice/MEMORY.md", namespace="team")  # the namespace's read policy
    # Without store.shared the schema has no namespace argument.
    with make_memory(workspace=alice_ws, state_dir=state, agent_id="alice", config=MemoryConfig(provider="none")) as alone:
        assert "namespace" not in tools_by_name(build_memory_tools(alone))["memory_get"].parameters["properties"]


@pytest.mark.parametrize("agent_id", ["main\n", "a/b", "", " main", "x" * 129, "é"])
def test_agent_ids_outside_the_documented_set_are_refused(tmp_path: Path, agent_id: str) -> None:
    (tmp_path / "ws").mkdir()
    with pytest.raises(ConfigError, match="agent_id must be"):
        Memory(tmp_path / "ws", tmp_path / "state", agent_id=agent_id)
    with pytest.raises(ConfigError, match=r"store\.shared entries must be"):
        StoreConfig(shared=(agent_id,))
    assert not (tmp_path / "state").exists() or not any((tmp_path / "state").rglob("main\n*"))


def test_an_over_long_path_is_a_clear_error_without_the_workspace_path(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws / "MEMORY.md", "# M\n")
    with make_memory(workspace=ws, state_dir=tmp_path / "state", config=MemoryConfig(provider="none")) as mem:
        tools = tools_by_name(build_memory_tools(mem))
        for path in ("memory/" + "a" * 300 + ".md", "memory/" + "b/" * 2100 + "x.md"):
            with pytest.raises(PathPolicyError, match="too long"):
                mem.get(path)
            for payload in (
                tools["memory_get"].invoke({"path": path}),
                tools["memory_append"].invoke({"path": path, "content": "x"}),
            ):
                assert "too long" in payload["error"]
                assert str(tmp_path) not in payload["error"]
        # A file used as a folder: the reason, not an absolute path.
        payload = tools["memory_get"].invoke({"path": "MEMORY.md/x.md"})
        assert str(tmp_path) not in str(payload)


def test_write_failures_name_the_note_not_the_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    import memmw.agent.tools as tools_module
    from memmw.config import ActiveMemoryConfig
    from memmw.graph import engine as graph_engine

    ws = tmp_path / "ws"
    write(ws / "memory" / "2026-01-01.md", "- city: Oslo\n")
    config = MemoryConfig(provider="none", active_memory=ActiveMemoryConfig(edit_tools=True))
    with make_memory(workspace=ws, state_dir=tmp_path / "state", config=config) as mem:
        mem.sync()

        def denied(path: Path, *args: object, **kwargs: object) -> int:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))

        monkeypatch.setattr(tools_module, "append_text", denied)
        monkeypatch.setattr(graph_engine, "write_note", denied)
        tools = tools_by_name(build_memory_tools(mem))
        appended = tools["memory_append"].invoke({"content": "x", "path": "memory/2026-01-01.md"})
        forgot = tools["memory_forget"].invoke({"citation": "memory/2026-01-01.md#L1"})
        for payload in (appended, forgot):
            assert "memory/2026-01-01.md" in payload["error"] and "Permission denied" in payload["error"]
            assert str(tmp_path) not in payload["error"]
