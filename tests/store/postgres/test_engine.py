"""The engine on the PostgreSQL store: ``store.backend = "postgres"`` behaves like SQLite."""

from __future__ import annotations

from pathlib import Path

import pytest

from memmw import Memory, MemoryConfig, StoreConfig
from memmw.store.postgres import PostgresStore

from ...conftest import make_memory, write

NOTES = {
    "MEMORY.md": "# Memory\n- The gateway runs on port 8080 on host atlas.\n- Alice drinks green tea.\n",
    "memory/2026-01-02.md": "Kubernetes migration planned with Bob.\nThe gateway was rebooted.\n",
    "memory/2026-01-03.md": "Alice booked the flight to Lisbon.\nTea with Bob on Friday.\n",
}
QUERIES = ["gateway port", "alice tea", "kubernetes migration", "lisbon flight", "nothing here"]


def _workspace(root: Path) -> Path:
    for rel, text in NOTES.items():
        write(root / rel, text)
    return root


def _answers(mem: Memory) -> list[list[tuple[str, int, int, float, str]]]:
    return [
        [(h.path, h.start_line, h.end_line, round(h.score, 6), h.snippet) for h in mem.search(q)]
        for q in QUERIES
    ]


@pytest.mark.parametrize("provider", ["none", "fake"])
def test_memory_on_postgres_answers_like_sqlite(
    pg_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, provider: str
) -> None:
    monkeypatch.setenv("MEMMW_STORE_DSN", pg_database)
    ws = _workspace(tmp_path / "ws")
    answers = {}
    for backend in ("sqlite", "postgres"):
        config = MemoryConfig(provider=provider, store=StoreConfig(backend=backend))  # type: ignore[arg-type]
        with make_memory(
            workspace=ws, state_dir=tmp_path / backend, agent_id=f"parity-{provider}", config=config
        ) as mem:
            report = mem.sync()
            assert report.files_added == len(NOTES)
            answers[backend] = _answers(mem)
            status = mem.status()
            assert status.chunks > 0
    assert answers["postgres"] == answers["sqlite"]
    assert answers["sqlite"][0][0][0] == "MEMORY.md"


def test_two_agents_share_one_database_without_seeing_each_other(
    pg_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMMW_STORE_DSN", pg_database)
    config = MemoryConfig(provider="none", store=StoreConfig(backend="postgres"))
    ws_a = _workspace(tmp_path / "a")
    ws_b = tmp_path / "b"
    write(ws_b / "MEMORY.md", "# Memory\n- The zeppelin hangar opens in May.\n")
    with (
        make_memory(workspace=ws_a, state_dir=tmp_path / "sa", agent_id="alpha", config=config) as a,
        make_memory(workspace=ws_b, state_dir=tmp_path / "sb", agent_id="beta", config=config) as b,
    ):
        a.sync()
        b.sync()
        assert [h.path for h in b.search("zeppelin hangar")] == ["MEMORY.md"]
        assert b.search("gateway port") == []
        assert a.search("zeppelin hangar") == []
        # A forced rebuild of one agent never empties the other's search.
        a.sync(force=True)
        assert [h.path for h in b.search("zeppelin hangar")] == ["MEMORY.md"]
        a.reset()
        assert not a.store.published()  # alpha's rows are gone...
        assert [h.path for h in b.search("zeppelin hangar")] == ["MEMORY.md"]
    # ...and Markdown stays the source of truth: the dropped agent rebuilds from its files.
    with make_memory(workspace=ws_a, state_dir=tmp_path / "sa", agent_id="alpha", config=config) as a:
        a.sync()
        assert a.search("gateway port")[0].path == "MEMORY.md"
    store = PostgresStore(pg_database, agent_id="alpha")
    try:
        assert store.published()
    finally:
        store.close()


def test_an_index_reset_by_another_process_is_rebuilt_by_the_search_that_finds_it(
    pg_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search knows the index was built without asking (``published`` remembers it);
    once another process resets it, the snapshot that finds it empty makes that search
    rebuild it from the notes and answer from the rebuilt index."""
    monkeypatch.setenv("MEMMW_STORE_DSN", pg_database)
    config = MemoryConfig(provider="none", store=StoreConfig(backend="postgres"))
    ws = _workspace(tmp_path / "ws")
    with (
        make_memory(workspace=ws, state_dir=tmp_path / "a", agent_id="reset", config=config) as a,
        make_memory(workspace=ws, state_dir=tmp_path / "b", agent_id="reset", config=config) as b,
    ):
        a.sync()
        before = _answers(a)
        assert before[0][0][0] == "MEMORY.md"
        b.reset()
        assert _answers(a) == before


def test_a_shared_namespace_is_searched_alongside_the_agents_own(
    pg_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The team folder is indexed by the agent "team" (its owner's host); "ops" on another
    # host (another state folder) searches it alongside its own memory, hits labelled.
    monkeypatch.setenv("MEMMW_STORE_DSN", pg_database)
    write(tmp_path / "team" / "MEMORY.md", "# Team\n- project-atlas ships on Monday.\n")
    write(tmp_path / "ops" / "MEMORY.md", "# Ops\n- atlas backups run nightly.\n")
    owner = MemoryConfig(provider="none", store=StoreConfig(backend="postgres"))
    reader = MemoryConfig(
        provider="none", store=StoreConfig(backend="postgres", shared=("team",))
    )
    with make_memory(workspace=tmp_path / "team", state_dir=tmp_path / "host1", agent_id="team", config=owner) as team:
        team.sync()
    with make_memory(workspace=tmp_path / "ops", state_dir=tmp_path / "host2", agent_id="ops", config=reader) as ops:
        found = {(h.namespace, h.snippet.splitlines()[1]) for h in ops.search("atlas")}
    assert found == {
        ("ops", "- atlas backups run nightly."),
        ("team", "- project-atlas ships on Monday."),
    }


def test_a_large_namespace_answers_the_vector_leg_from_hnsw_without_reading_vectors(
    pg_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``HNSW_MIN_VECTORS`` the server's HNSW index answers (no vector enters the
    process); calibrated against the centroid, the hits are SQLite's with close scores."""
    import memmw.store.vectorsearch as vectorsearch_module
    from memmw.store.postgres.store import PostgresReader

    monkeypatch.setenv("MEMMW_STORE_DSN", pg_database)
    ws = _workspace(tmp_path / "ws")
    answers = {}
    for backend in ("sqlite", "postgres"):
        config = MemoryConfig(provider="fake", store=StoreConfig(backend=backend))  # type: ignore[arg-type]
        with make_memory(workspace=ws, state_dir=tmp_path / backend, agent_id="hnsw",
                    config=config) as mem:
            mem.sync()
            if backend == "postgres":
                monkeypatch.setattr(vectorsearch_module, "HNSW_MIN_VECTORS", 1)

                def no_full_read(*_args: object, **_kwargs: object) -> None:
                    raise AssertionError("the vector leg read every vector")

                monkeypatch.setattr(PostgresReader, "vector_rows", no_full_read)
            answers[backend] = _answers(mem)
    for pg, lite in zip(answers["postgres"], answers["sqlite"], strict=True):
        assert {h[:3] for h in pg} == {h[:3] for h in lite}
        assert all(0.0 <= h[3] <= 1.0 for h in pg)
    assert answers["postgres"][0][0][0] == "MEMORY.md"


def test_a_bad_transcript_line_on_postgres_is_a_listed_skip(
    pg_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from memmw.workspace.transcripts import transcripts_dir

    monkeypatch.setenv("MEMMW_STORE_DSN", pg_database)
    ws = _workspace(tmp_path / "ws")
    state = tmp_path / "state"
    folder = transcripts_dir(state, "bad-lines")
    folder.mkdir(parents=True)
    good = {"type": "message", "message": {"role": "user", "content": "the\u2028okapi plan"}}
    (folder / "s1.jsonl").write_bytes(
        b"[" * 2000 + b"]" * 2000 + b"\n" + json.dumps(good, ensure_ascii=False).encode() + b"\n"
    )
    config = MemoryConfig(
        provider="none", sources=("memory", "sessions"), store=StoreConfig(backend="postgres")
    )
    with make_memory(workspace=ws, state_dir=state, agent_id="bad-lines", config=config) as mem:
        for _ in range(2):  # listed again by the sync that does not re-read the file
            mem.sync()
            assert [(i.path, i.line) for i in mem.status().issues] == [("sessions/s1.jsonl", 1)]
        (hit,) = mem.search("okapi")
        assert (hit.path, hit.start_line, hit.end_line) == ("sessions/s1.jsonl", 2, 2)


def test_memory_get_of_a_shared_hit_reads_that_namespaces_file(
    pg_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 20: a hit from a shared namespace read the caller's own file of the same path."""
    from memmw.agent.tools import get_tool_payload, search_payload

    monkeypatch.setenv("MEMMW_STORE_DSN", pg_database)
    write(tmp_path / "team" / "MEMORY.md", "# Team\n- project-atlas ships on Monday.\n")
    write(tmp_path / "ops" / "MEMORY.md", "# Ops\n- atlas backups run nightly.\n")
    owner = MemoryConfig(provider="none", store=StoreConfig(backend="postgres"))
    reader = MemoryConfig(provider="none", store=StoreConfig(backend="postgres", shared=("crew",)))
    with make_memory(workspace=tmp_path / "team", state_dir=tmp_path / "host1", agent_id="crew", config=owner) as team:
        team.sync()
    with make_memory(workspace=tmp_path / "ops", state_dir=tmp_path / "host2", agent_id="ops2", config=reader) as ops:
        hit = next(
            h for h in search_payload(ops, "project-atlas ships")["results"] if h["namespace"] == "crew"
        )
        got = get_tool_payload(ops, {"path": hit["path"], "namespace": hit["namespace"]})
        assert "project-atlas ships on Monday" in got["text"] and got["namespace"] == "crew"
        assert "backups" in get_tool_payload(ops, {"path": "MEMORY.md"})["text"]
        # The namespace's workspace is on another host (not here): a clear error.
        (tmp_path / "team").rename(tmp_path / "moved")
        away = get_tool_payload(ops, {"path": "MEMORY.md", "namespace": "crew"})
        assert "not readable from here" in away["error"] and "backups" not in str(away)
