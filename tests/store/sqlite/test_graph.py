"""Graph tables: populated by sync, cascaded with their file, supersession, activation, decay."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from memmw import Memory
from memmw.notes.provenance import provenance_for
from memmw.store.sqlite import graph as graph_index
from memmw.store.sqlite.db import connect, transaction

from ...conftest import make_memory, write


def rows(db: Path, sql: str, *args: object) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    write(root / "MEMORY.md", "## Alice Martin (Ali)\n- city: Berlin\n- employer: Acme\n\n## People\n- Bob Stone (Bobby): CFO\n")
    write(root / "memory" / "2026-05-01.md", "# May 1\n## Alice Martin\n- city: Lisbon\nAlice and Bob met at the Lisbon office.\n")
    write(root / "memory" / "2026-03-01.md", "## Alice Martin\n- city: Porto\n")
    return root


@pytest.fixture()
def mem(ws: Path, tmp_path: Path):
    m = make_memory(tmp_path, workspace=ws, sync=True)
    yield m
    m.close()


def test_sync_fills_the_graph_tables_with_provenance(mem: Memory) -> None:
    facts = rows(
        mem.db_path,
        "SELECT path, line, entity, key, value, origin, session_kind, private, current"
        " FROM graph_facts ORDER BY path, line",
    )
    assert ("MEMORY.md", 2, "Alice Martin", "city", "Berlin", "owner", "unknown", 1, 0) in facts
    assert ("memory/2026-05-01.md", 3, "Alice Martin", "city", "Lisbon", "agent", "interactive", 1, 1) in facts
    assert ("memory/2026-03-01.md", 2, "Alice Martin", "city", "Porto", "agent", "interactive", 1, 0) in facts
    aliases = rows(mem.db_path, "SELECT entity_key, alias FROM graph_aliases ORDER BY alias")
    # "Bob Stone (Bobby): CFO at Acme": the nickname, and the role as a name (issue 22).
    assert aliases == [("alice martin", "Ali"), ("bob stone", "Bobby"), ("bob stone", "CFO")]
    co = rows(mem.db_path, "SELECT a_key, b_key FROM graph_cooccurrences")
    assert ("alice martin", "bob stone") in co


def test_supersession_newest_dated_value_is_current_history_kept(mem: Memory, ws: Path) -> None:
    current = rows(mem.db_path, "SELECT value FROM graph_facts WHERE key='city' AND current=1")
    assert current == [("Lisbon",)]
    # A later note supersedes; an explicit "(since ...)" date orders values too.
    write(ws / "MEMORY.md", "## Alice Martin (Ali)\n- city: Madrid (since 2026-06-10)\n")
    mem.sync()
    current = rows(mem.db_path, "SELECT value FROM graph_facts WHERE key='city' AND current=1")
    assert current == [("Madrid",)]
    assert rows(mem.db_path, "SELECT COUNT(*) FROM graph_facts WHERE key='city'") == [(3,)]


def test_rows_follow_their_file(mem: Memory, ws: Path) -> None:
    (ws / "memory" / "2026-05-01.md").unlink()
    mem.sync()
    assert rows(mem.db_path, "SELECT value FROM graph_facts WHERE key='city' AND current=1") == [("Porto",)]
    assert rows(mem.db_path, "SELECT COUNT(*) FROM graph_cooccurrences") == [(0,)]


def test_activation_survives_a_forced_rebuild_and_decays_daily(mem: Memory) -> None:
    key = rows(mem.db_path, "SELECT stable_key FROM graph_facts WHERE value='Lisbon'")[0][0]
    assert rows(mem.db_path, "SELECT activation FROM graph_activation WHERE stable_key=?", key) == [(1.0,)]
    mem.graph_engine.touch([key], amount=2.0)
    assert rows(mem.db_path, "SELECT activation FROM graph_activation WHERE stable_key=?", key) == [(3.0,)]
    mem.sync(force=True)
    assert rows(mem.db_path, "SELECT activation FROM graph_activation WHERE stable_key=?", key) == [(3.0,)]
    conn = connect(mem.db_path)
    try:
        with transaction(conn):
            assert not graph_index.decay_activation(conn, now=time.time() + 3600)  # same day
            assert graph_index.decay_activation(conn, now=time.time() + 2 * 86_400 + 60)
            assert not graph_index.decay_activation(conn, now=time.time() + 2 * 86_400 + 120)
        value = conn.execute(
            "SELECT activation FROM graph_activation WHERE stable_key=?", (key,)
        ).fetchone()[0]
    finally:
        conn.close()
    assert value == pytest.approx(3.0 * graph_index.DECAY_PER_DAY**2)


def test_retracted_lines_are_not_searchable_but_stay_in_the_file(mem: Memory, ws: Path) -> None:
    write(ws / "memory" / "2026-03-01.md", "## Alice Martin\n- ~~city: Porto~~ (retracted 2026-06-01)\n")
    mem.sync()
    assert mem.search("Porto", min_score=0) == []
    assert "Porto" in (ws / "memory" / "2026-03-01.md").read_text()
    assert rows(mem.db_path, "SELECT retracted, current FROM graph_facts WHERE value='Porto'") == [(1, 0)]


def test_graph_is_derived_for_an_index_built_before_the_graph_existed(mem: Memory) -> None:
    conn = connect(mem.db_path)
    try:
        with transaction(conn):
            conn.execute("DELETE FROM graph_facts")
            conn.execute("DELETE FROM meta WHERE key='graph_version'")
    finally:
        conn.close()
    mem.sync()
    assert rows(mem.db_path, "SELECT COUNT(*) FROM graph_facts") == [(5,)]


@pytest.mark.parametrize(
    ("path", "source", "origin", "private"),
    [
        ("MEMORY.md", "memory", "owner", True),
        ("USER.md", "memory", "owner", True),
        ("memory/2026-01-02.md", "memory", "agent", True),
        ("memory/topics/x.md", "memory", "agent", False),
        ("../shared/notes.md", "memory", "untrusted", True),
        ("notes/import.md", "memory", "untrusted", True),
        ("sessions/a.jsonl", "sessions", "untrusted", True),
    ],
)
def test_provenance_comes_from_the_file_kind(path: str, source: str, origin: str, private: bool) -> None:
    prov = provenance_for(path, source)
    assert (prov.origin, prov.private) == (origin, private)
    assert prov.injectable == (origin in ("owner", "agent"))


def test_sync_runs_the_decay_step_at_most_daily(mem: Memory, ws: Path) -> None:
    key = rows(mem.db_path, "SELECT stable_key FROM graph_facts WHERE value='Lisbon'")[0][0]
    conn = connect(mem.db_path)
    try:
        with transaction(conn):
            conn.execute(
                "UPDATE meta SET value=? WHERE key='graph_decay_at'", (repr(time.time() - 3.5 * 86_400),)
            )
    finally:
        conn.close()
    mem.sync()
    mem.sync()  # the second sync the same day does not decay again
    (value,) = rows(mem.db_path, "SELECT activation FROM graph_activation WHERE stable_key=?", key)[0]
    assert value == pytest.approx(graph_index.DECAY_PER_DAY**3)


def test_observations_accumulate_instead_of_superseding(mem: Memory, ws: Path) -> None:
    write(ws / "memory" / "prefs.md", "## Bob Stone\n- [preference] green tea\n- [preference] jazz\n- drink: tea\n- drink: coffee\n")
    mem.sync()
    got = rows(mem.db_path, "SELECT key, value, current FROM graph_facts WHERE path='memory/prefs.md' ORDER BY line")
    assert got == [("preference", "green tea", 1), ("preference", "jazz", 1), ("drink", "tea", 0), ("drink", "coffee", 1)]


def test_cooccurrences_scan_only_new_chunks_while_names_are_unchanged(mem: Memory, ws: Path) -> None:
    conn = connect(mem.db_path)
    try:
        with transaction(conn):
            assert graph_index.refresh_cooccurrences(conn) == 0  # nothing new since the sync
        write(ws / "memory" / "2026-05-02.md", "Ali called Bobby about the budget.\n")
        mem.sync()
        assert ("alice martin", "bob stone") in rows(
            mem.db_path,
            "SELECT a_key, b_key FROM graph_cooccurrences g JOIN chunks c ON c.rowid=g.chunk_rowid"
            " WHERE c.path='memory/2026-05-02.md'",
        )
        with transaction(conn):
            conn.execute("UPDATE meta SET value='changed' WHERE key='graph_names'")
            assert graph_index.refresh_cooccurrences(conn) == rows(
                mem.db_path, "SELECT COUNT(*) FROM chunks WHERE source='memory'"
            )[0][0]
    finally:
        conn.close()
