"""The Memory facade: construction, get windows, status, payloads, lifecycle."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memmw import Memory, MemoryConfig, StoreConfig
from memmw.agent.tools import search_payload
from memmw.config import ReadConfig
from memmw.errors import ConfigError, IndexCorruptError, PathPolicyError

from ..conftest import KEYWORD_ONLY, make_memory, write


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    write(root / "MEMORY.md", "# Facts\n- The gateway runs on port 8080.\n")
    write(root / "memory" / "long.md", "".join(f"line {i}\n" for i in range(1, 301)))
    write(root / "memory" / "wide.md", "".join("w" * 99 + "\n" for _ in range(200)))
    write(root / "memory" / "huge-line.md", "h" * 20_000 + "\nsecond\n")
    return root


@pytest.fixture()
def mem(ws: Path, tmp_path: Path):
    with make_memory(tmp_path, workspace=ws) as m:
        yield m


# -- construction -----------------------------------------------------------------------


def test_construction_validates_inputs(ws: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="workspace folder not found"):
        Memory(workspace=tmp_path / "missing", state_dir=tmp_path, config=KEYWORD_ONLY)
    for bad in ("", "../x", "a/b", "-lead", "x" * 129):
        with pytest.raises(ConfigError, match="agent_id"):
            Memory(workspace=ws, state_dir=tmp_path, agent_id=bad, config=KEYWORD_ONLY)


def test_index_path_per_agent_and_template(ws: Path, tmp_path: Path) -> None:
    a = make_memory(workspace=ws, state_dir=tmp_path / "s", agent_id="ops.bot-1", config=KEYWORD_ONLY)
    assert a.db_path == tmp_path / "s" / "memory" / "ops.bot-1.sqlite"
    cfg = KEYWORD_ONLY.replace(store=StoreConfig(path=str(tmp_path / "idx" / "{agentId}.db")))
    b = make_memory(workspace=ws, state_dir=tmp_path / "s", agent_id="ops", config=cfg)
    assert b.db_path == tmp_path / "idx" / "ops.db"
    b.sync()
    assert (tmp_path / "idx" / "ops.db").exists()
    a.close()
    b.close()


def test_config_is_loaded_from_the_workspace(ws: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("MEMMW_PROVIDER", raising=False)
    write(ws / "memmw.toml", 'provider = "none"\n[read]\nmax_lines = 7\n')
    with Memory(workspace=ws, state_dir=tmp_path / "s") as m:
        assert m.config.provider == "none"
        assert m.get("memory/long.md").lines == 7


def test_environment_defaults(ws: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MEMMW_WORKSPACE", str(ws))
    monkeypatch.setenv("MEMMW_STATE_DIR", str(tmp_path / "envstate"))
    with Memory(config=KEYWORD_ONLY) as m:
        assert m.workspace == ws
        assert m.db_path == tmp_path / "envstate" / "memory" / "main.sqlite"


# -- get --------------------------------------------------------------------------------


def test_get_default_window_is_120_lines_with_continuation(mem: Memory) -> None:
    first = mem.get("memory/long.md")
    assert (first.status, first.from_line, first.lines, first.total_lines) == ("ok", 1, 120, 300)
    assert first.truncated and first.next_from == 121
    body, notice = first.text.split("\n\n")
    assert body.split("\n") == [f"line {i}" for i in range(1, 121)]
    assert "from=121" in notice
    second = mem.get("memory/long.md", from_line=first.next_from)
    assert (second.from_line, second.lines, second.next_from) == (121, 120, 241)
    third = mem.get("memory/long.md", from_line=second.next_from)
    assert (third.lines, third.truncated, third.next_from) == (60, False, None)
    assert third.text == "\n".join(f"line {i}" for i in range(241, 301))


def test_get_explicit_window(mem: Memory) -> None:
    got = mem.get("memory/long.md", from_line=5, lines=3)
    assert got.text.split("\n\n")[0] == "line 5\nline 6\nline 7"
    assert (got.from_line, got.lines, got.next_from) == (5, 3, 8)
    assert mem.get("memory/long.md", lines=1000).lines == 120  # capped
    past = mem.get("memory/long.md", from_line=400)
    assert (past.status, past.text, past.lines, past.truncated) == ("ok", "", 0, False)
    payload = got.to_payload()
    assert payload == {
        "status": "ok",
        "text": got.text,
        "path": "memory/long.md",
        "from": 5,
        "lines": 3,
        "truncated": True,
        "nextFrom": 8,
    }


def test_get_character_budget_is_12000(mem: Memory) -> None:
    got = mem.get("memory/wide.md")
    # 99 chars + newline per line: 120 lines would be 11999 + ... -> stops at the budget.
    body = got.text.split("\n\n")[0]
    assert len(body) <= 12_000
    assert got.lines == 120
    assert body == "\n".join(["w" * 99] * 120)
    narrow = make_memory(
        workspace=mem.workspace, state_dir=mem.state_dir,
        config=KEYWORD_ONLY.replace(read=ReadConfig(max_chars=1000)),
    )
    small = narrow.get("memory/wide.md")
    assert small.lines == 10  # 10*99 + 9 separators = 999
    assert small.next_from == 11
    narrow.close()


def test_get_hard_cuts_a_huge_line(mem: Memory) -> None:
    got = mem.get("memory/huge-line.md")
    assert got.lines == 1
    assert got.truncated
    assert got.text.split("\n\n")[0] == "h" * 12_000


def test_continuing_after_a_huge_line_makes_progress(mem: Memory) -> None:
    got = mem.get("memory/huge-line.md")
    assert got.next_from is not None and got.next_from > got.from_line


def test_get_missing_file_is_not_found(mem: Memory) -> None:
    got = mem.get("memory/2030-01-01.md")
    assert (got.status, got.text, got.path) == ("not_found", "", "memory/2030-01-01.md")
    assert got.to_payload() == {"status": "not_found", "text": "", "path": "memory/2030-01-01.md"}


@pytest.mark.parametrize(
    ("path", "needle"),
    [
        ("", "path is required"),
        ("../secret.md", "outside the workspace"),
        ("/etc/passwd", "outside the workspace"),
        ("memory/notes.txt", "only Markdown"),
        ("README.md", "not a memory file"),
    ],
)
def test_get_refuses_paths_outside_the_policy(mem: Memory, path: str, needle: str) -> None:
    with pytest.raises(PathPolicyError, match=needle):
        mem.get(path)


def test_get_refuses_symlinks_and_binary(mem: Memory, tmp_path: Path) -> None:
    outside = write(tmp_path / "outside.md", "secret\n")
    os.symlink(outside, mem.workspace / "memory" / "link.md")
    with pytest.raises(PathPolicyError, match="symlink"):
        mem.get("memory/link.md")
    (mem.workspace / "memory" / "bin.md").write_bytes(b"\x00\x01")
    with pytest.raises(PathPolicyError, match="binary"):
        mem.get("memory/bin.md")
    (mem.workspace / "memory" / "dir.md").mkdir()
    with pytest.raises(PathPolicyError, match="not a regular file"):
        mem.get("memory/dir.md")


def test_get_normalises_crlf_and_trailing_newline(mem: Memory) -> None:
    (mem.workspace / "memory" / "crlf.md").write_bytes(b"one\r\ntwo\r\n")
    got = mem.get("memory/crlf.md")
    assert (got.text, got.total_lines, got.truncated) == ("one\ntwo", 2, False)


# -- search, status, lifecycle ----------------------------------------------------------


def test_first_search_syncs(mem: Memory) -> None:
    assert not mem.db_path.exists()
    (hit,) = mem.search("gateway")
    assert hit.citation == "MEMORY.md#L1-L2"  # the entry with its section heading
    assert mem.db_path.exists()


def test_search_payload_keyword_only(mem: Memory) -> None:
    payload = search_payload(mem, "gateway port")
    assert payload["provider"] == "none"
    assert payload["model"] == "fts-only"
    assert payload["mode"] == "keyword-only"
    assert payload["citations"] == "on"
    (item,) = payload["results"]
    assert item["path"] == "MEMORY.md"
    assert (item["startLine"], item["endLine"]) == (1, 2)
    assert item["citation"] == "MEMORY.md#L1-L2"
    assert item["snippet"] == (
        "# Facts\n- The gateway runs on port 8080.\n\nSource: MEMORY.md#L1-L2"
    )
    assert "vectorScore" not in item
    plain = search_payload(mem, "gateway port", citations=False)["results"][0]
    assert plain["snippet"] == "# Facts\n- The gateway runs on port 8080."
    assert "citation" not in plain


def test_empty_and_disabled_search(ws: Path, tmp_path: Path, mem: Memory) -> None:
    assert mem.search("") == []
    assert mem.search("   ") == []
    off = make_memory(workspace=ws, state_dir=tmp_path / "off", config=KEYWORD_ONLY.replace(enabled=False))
    assert off.search("gateway") == []
    off.close()


def test_status(mem: Memory) -> None:
    before = mem.status()
    assert before.dirty and before.files == 0
    report = mem.sync()
    status = mem.status(deep=True)
    assert (status.files, status.chunks) == (4, report.chunks_total)
    assert not status.dirty
    assert status.mode == "keyword-only"
    assert (status.provider, status.model) == ("none", "fts-only")
    assert status.last_sync is not None
    data = status.to_dict()
    assert data["agentId"] == "main"
    assert data["files"] == 4
    assert data["sourceCounts"] == {"memory": {"files": 4, "chunks": report.chunks_total}}
    assert data["fts"]["available"] is True
    assert data["keywordMatrix"]["chunks"] == report.chunks_total
    assert data["vector"]["enabled"] is False


def test_closed_memory_refuses_work(ws: Path, tmp_path: Path) -> None:
    m = make_memory(workspace=ws, state_dir=tmp_path / "s", config=KEYWORD_ONLY)
    m.sync()
    m.close()
    with pytest.raises(ConfigError, match="closed"):
        m.search("gateway")


def test_two_agents_share_a_workspace_with_separate_indexes(ws: Path, tmp_path: Path) -> None:
    with (
        make_memory(workspace=ws, state_dir=tmp_path / "s", agent_id="a", config=KEYWORD_ONLY) as a,
        make_memory(workspace=ws, state_dir=tmp_path / "s", agent_id="b", config=KEYWORD_ONLY) as b,
    ):
        assert a.search("gateway")[0].citation == b.search("gateway")[0].citation
        assert a.db_path != b.db_path


def test_status_of_a_fresh_process_tells_whether_files_changed(ws: Path, tmp_path: Path) -> None:
    state = tmp_path / "state2"
    with make_memory(workspace=ws, state_dir=state, config=KEYWORD_ONLY) as first:
        first.sync()
    with make_memory(workspace=ws, state_dir=state, config=KEYWORD_ONLY) as fresh:
        assert fresh.status().dirty is False  # nothing changed since it was indexed
    target = next((ws / "memory").glob("*.md"))
    os.utime(target, (1_700_000_000, 1_700_000_000))  # touched, same content
    with make_memory(workspace=ws, state_dir=state, config=KEYWORD_ONLY) as fresh:
        assert fresh.status().dirty is True
        report = fresh.sync()
        assert report.files_changed == 0 and not report.changed  # content is the same
    with make_memory(workspace=ws, state_dir=state, config=KEYWORD_ONLY) as fresh:
        assert fresh.status().dirty is False  # the sync recorded the new stat
    write(ws / "memory" / "2026-05-05.md", "A new note.\n")
    with make_memory(workspace=ws, state_dir=state, config=KEYWORD_ONLY) as fresh:
        assert fresh.status().dirty is True


# -- self-healing and honest state (issue 9, item 6) --------------------------------------


def damage(db: Path) -> None:
    """Overwrite the index with garbage, the way a torn copy or a bad disk leaves it."""
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    db.write_bytes(b"this is not a database\n" * 512)


def test_a_damaged_index_is_moved_aside_and_rebuilt(ws: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    with make_memory(workspace=ws, state_dir=state, config=KEYWORD_ONLY) as first:
        first.sync()
        db = first.db_path
    damage(db)
    with make_memory(workspace=ws, state_dir=state, config=KEYWORD_ONLY) as mem:
        assert mem.search("gateway")[0].path == "MEMORY.md"
        assert mem.status().files == 4
    assert [p.name for p in db.parent.glob("*.corrupt-*")]  # kept for inspection


def test_a_live_process_heals_an_index_damaged_under_it(mem: Memory) -> None:
    mem.sync()
    mem.search("gateway")
    damage(mem.db_path)
    report = mem.sync()
    assert report.reason == "corrupt-index" and report.full_rebuild
    assert mem.search("gateway")[0].path == "MEMORY.md"


def test_an_index_that_cannot_be_healed_is_reported_as_damaged(
    mem: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memmw.agent.tools import build_memory_tools, tools_by_name
    from memmw.store.sqlite import sync as sync_mod

    mem.sync()
    damage(mem.db_path)

    def cannot_move(path: Path) -> Path:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(sync_mod, "quarantine", cannot_move)
    with pytest.raises(IndexCorruptError, match="memmw reset"):
        mem.sync()
    payload = tools_by_name(build_memory_tools(mem))["memory_search"].invoke({"query": "gateway"})
    assert payload["unavailable"] and "damaged" in payload["warning"]
    assert "memmw reset" in payload["action"] and "key" not in payload["action"]


def test_deleted_wal_and_shm_under_a_live_process(ws: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    with make_memory(workspace=ws, state_dir=state, config=KEYWORD_ONLY) as live:
        live.sync()
        assert live.search("gateway")
        for suffix in ("-wal", "-shm"):
            Path(f"{live.db_path}{suffix}").unlink(missing_ok=True)
        write(ws / "memory" / "2026-02-01.md", "The zeppelin hangar opens in May.\n")
        script = (
            "import sys; from memmw import Memory, MemoryConfig;"
            "m = Memory(workspace=sys.argv[1], state_dir=sys.argv[2],"
            " config=MemoryConfig(provider='none')); m.sync(); m.close()"
        )
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        subprocess.run([sys.executable, "-c", script, str(ws), str(state)], check=True, env=env)
        hits = live.search("zeppelin hangar")
        assert hits and hits[0].path == "memory/2026-02-01.md"


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to drop privileges"
)
def test_search_works_on_a_read_only_state_dir() -> None:
    import shutil
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="memmw-ro-", dir="/tmp"))
    try:
        ws, state = root / "ws", root / "state"
        write(ws / "MEMORY.md", "# Facts\n- The gateway runs on port 8080.\n")
        with make_memory(workspace=ws, state_dir=state, config=KEYWORD_ONLY) as mem:
            mem.sync()
        for path in [root, *root.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)  # readable, writable by root only
        script = (
            "import sys; from memmw import Memory, MemoryConfig;"
            "m = Memory(workspace=sys.argv[1], state_dir=sys.argv[2],"
            " config=MemoryConfig(provider='none'));"
            "print(m.search('gateway')[0].path); print(m.status().files)"
        )
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("setpriv (util-linux) is needed to drop privileges")
        nobody = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable]
        probe = subprocess.run(
            [*nobody, "-c", "import memmw"], env=env, capture_output=True, text=True
        )
        if probe.returncode != 0:
            pytest.skip(f"the unprivileged user cannot import memmw here: {probe.stderr[-200:]}")
        out = subprocess.run(
            [*nobody, "-c", script, str(ws), str(state)], env=env, capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.split() == ["MEMORY.md", "1"]
    finally:
        shutil.rmtree(root)


def test_shared_namespaces_are_searched_with_labelled_hits(tmp_path: Path) -> None:
    # A team folder indexed by the agent "team"; alice searches it alongside her own.
    team_ws, alice_ws, state = tmp_path / "team", tmp_path / "alice", tmp_path / "state"
    write(team_ws / "MEMORY.md", "# Team\n- The staging cluster is called heron.\n")
    write(alice_ws / "MEMORY.md", "# Alice\n- Alice waters the heron plants on Fridays.\n")
    plain = MemoryConfig(provider="none")
    shared = MemoryConfig(provider="none", store=StoreConfig(shared=("team", "ghost")))
    with make_memory(workspace=alice_ws, state_dir=state, agent_id="alice", config=shared) as alice:
        # "team" has no index yet (and "ghost" never will): alice's own hits only.
        assert [(h.namespace, h.path) for h in alice.search("heron")] == [("alice", "MEMORY.md")]
        with make_memory(workspace=team_ws, state_dir=state, agent_id="team", config=plain) as team:
            team.sync()
        found = {(h.namespace, h.snippet.splitlines()[1]) for h in alice.search("heron")}
        assert found == {
            ("alice", "- Alice waters the heron plants on Fridays."),
            ("team", "- The staging cluster is called heron."),
        }
        assert search_payload(alice, "staging cluster")["results"][0]["namespace"] == "team"
    # Without store.shared nothing changes: no label, no other agent's hits.
    with make_memory(workspace=alice_ws, state_dir=state, agent_id="alice", config=plain) as alone:
        assert [(h.namespace, h.path) for h in alone.search("heron")] == [(None, "MEMORY.md")]
    with pytest.raises(ConfigError, match=r"store\.shared"):
        StoreConfig(shared=("../etc",))
