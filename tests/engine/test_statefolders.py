"""State folders: list, prune (never one in use), and a moved workspace that does not re-embed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memmw import ConfigError, Memory, MemoryConfig
from memmw.embeddings.registry import register_provider, unregister_provider
from memmw.engine.statefolders import (
    list_state_folders,
    prune_state_folders,
    workspaces_root,
)
from memmw.statedir import default_state_dir
from memmw.testing import FakeEmbeddingProvider
from memmw.workspace.locks import exclusive_lock, lock_path_for
from tests.conftest import write

from ..conftest import make_memory


@pytest.fixture
def state_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private user state root; no ``MEMMW_STATE_DIR`` (default per-workspace folders)."""
    monkeypatch.delenv("MEMMW_STATE_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "memmw"


def _notes(ws: Path, n: int = 12) -> Path:
    write(ws / "MEMORY.md", "# Memory\n\n- Ali is allergic to peanuts.\n- Prefers tea.\n")
    for i in range(n):
        write(ws / "memory" / f"2026-01-{i + 1:02d}.md", f"# Day {i}\n\nMet Sam about project {i}.\n")
    return ws


def _hits(mem: Memory, query: str) -> list[tuple[str, int, float]]:
    return [(h.path, h.start_line, round(h.score, 6)) for h in mem.search(query, max_results=6)]


def test_a_moved_workspace_reuses_the_old_folders_cache(
    tmp_path: Path, state_root: Path, counting: FakeEmbeddingProvider
) -> None:
    ws = _notes(tmp_path / "ws")
    config = MemoryConfig(provider="counting")
    with Memory(workspace=ws, config=config) as mem:
        mem.sync()
        before = _hits(mem, "peanut allergy")
        old_state = mem.state_dir
    assert counting.document_calls > 0
    moved = tmp_path / "elsewhere" / "ws"
    moved.parent.mkdir()
    shutil.move(ws, moved)
    counting.document_calls = 0
    with Memory(workspace=moved, config=config) as mem:
        assert mem.state_dir != old_state  # a new folder: its own cache starts empty
        report = mem.sync()
        after = _hits(mem, "peanut allergy")
        with mem.store.read() as reader:
            pending = reader.pending_count()
    assert counting.document_calls == 0
    assert report.embedded == 0
    assert pending == 0  # every chunk has its vector, from the old folder's cache
    assert [(p, line) for p, line, _ in after] == [(p, line) for p, line, _ in before]
    assert after == before


def test_a_new_workspace_still_embeds(
    tmp_path: Path, state_root: Path, counting: FakeEmbeddingProvider
) -> None:
    """The sibling lookup only serves what other caches hold: new text is embedded."""
    _notes(tmp_path / "a")
    with Memory(workspace=tmp_path / "a", config=MemoryConfig(provider="counting")) as mem:
        mem.sync()
    write(tmp_path / "b" / "MEMORY.md", "# Memory\n\n- Something nobody wrote before.\n")
    counting.document_calls = 0
    with Memory(workspace=tmp_path / "b", config=MemoryConfig(provider="counting")) as mem:
        assert mem.sync().embedded > 0
    assert counting.document_calls > 0


def test_list_names_every_folder_and_its_workspace(tmp_path: Path, state_root: Path) -> None:
    live = _notes(tmp_path / "live", 2)
    gone = _notes(tmp_path / "gone", 2)
    for ws in (live, gone):
        with Memory(workspace=ws, config=MemoryConfig(provider="none")) as mem:
            mem.sync()
    with Memory(workspace=live, agent_id="helper", config=MemoryConfig(provider="none")) as mem:
        mem.sync()
    shutil.rmtree(gone)
    folders = {f.path: f for f in list_state_folders()}
    assert set(folders) == {default_state_dir(live), default_state_dir(tmp_path / "gone")}
    one = folders[default_state_dir(live)]
    assert one.workspace == str(live.resolve())
    assert one.workspace_exists and not one.orphan
    assert one.agents == ("helper", "main")
    assert one.size > 0 and one.last_sync is not None
    other = folders[default_state_dir(tmp_path / "gone")]
    assert other.orphan


def test_prune_is_dry_by_default_and_removes_only_orphans(tmp_path: Path, state_root: Path) -> None:
    live = _notes(tmp_path / "live", 2)
    gone = _notes(tmp_path / "gone", 2)
    for ws in (live, gone):
        with Memory(workspace=ws, config=MemoryConfig(provider="none")) as mem:
            mem.sync()
    stray = workspaces_root() / "no-index-here"
    stray.mkdir()
    gone_state = default_state_dir(gone)
    shutil.rmtree(gone)
    dry = prune_state_folders()
    assert [f.path for f in dry.removed] == [gone_state] and dry.dry_run
    assert gone_state.is_dir()  # nothing removed
    done = prune_state_folders(dry_run=False)
    assert [f.path for f in done.removed] == [gone_state]
    assert not gone_state.exists()
    assert default_state_dir(live).is_dir() and stray.is_dir()


def test_prune_never_touches_a_folder_in_use(tmp_path: Path, state_root: Path) -> None:
    gone = _notes(tmp_path / "gone", 2)
    with Memory(workspace=gone, config=MemoryConfig(provider="none")) as mem:
        mem.sync()
        db = mem.db_path
    state = default_state_dir(gone)
    shutil.rmtree(gone)
    with exclusive_lock(lock_path_for(db)):  # what an index writer holds
        report = prune_state_folders(dry_run=False)
    assert not report.removed
    assert [f.path for f, _ in report.skipped] == [state]
    assert "in use" in report.skipped[0][1]
    assert state.is_dir()


_WORDS = st.sampled_from(
    ["peanut", "tea", "Sam", "garden", "budget", "hike", "tax", "Berlin", "piano", "dog"]
)
_NOTE = st.lists(_WORDS, min_size=1, max_size=12).map(lambda ws: " ".join(ws) + ".\n")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    notes=st.dictionaries(
        st.from_regex(r"[a-z]{1,8}", fullmatch=True), st.lists(_NOTE, min_size=1, max_size=6),
        min_size=1, max_size=6,
    ),
    query=st.lists(_WORDS, min_size=1, max_size=3).map(" ".join),
)
def test_any_moved_workspace_embeds_nothing_and_answers_alike(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    notes: dict[str, list[str]],
    query: str,
) -> None:
    """Whatever the notes, a moved workspace's new state folder embeds no chunk again."""
    tmp = tmp_path_factory.mktemp("move")
    monkeypatch.delenv("MEMMW_STATE_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp / "xdg"))
    provider = FakeEmbeddingProvider(dims=16)
    register_provider("counting", lambda config: provider, replace=True)
    try:
        ws = tmp / "ws"
        for name, lines in notes.items():
            write(ws / "memory" / f"{name}.md", "".join(lines))
        config = MemoryConfig(provider="counting")
        with Memory(workspace=ws, config=config) as mem:
            mem.sync()
            before = _hits(mem, query)
        moved = tmp / "moved"
        shutil.move(ws, moved)
        provider.document_calls = 0
        with Memory(workspace=moved, config=config) as mem:
            mem.sync()
            after = _hits(mem, query)
        assert provider.document_calls == 0
        assert after == before
    finally:
        unregister_provider("counting")


def test_prune_keeps_session_transcripts_unless_told(tmp_path: Path, state_root: Path) -> None:
    gone = _notes(tmp_path / "gone", 1)
    with Memory(workspace=gone, config=MemoryConfig(provider="none")) as mem:
        mem.sync()
    state = default_state_dir(gone)
    write(state / "agents" / "main" / "sessions" / "s1.jsonl", '{"role":"user"}\n')
    shutil.rmtree(gone)
    report = prune_state_folders(dry_run=False)
    assert not report.removed and "transcripts" in report.skipped[0][1]
    assert state.is_dir()
    report = prune_state_folders(dry_run=False, include_transcripts=True)
    assert [f.path for f in report.removed] == [state] and not state.exists()


def test_an_explicit_state_folder_follows_a_moved_workspace(
    tmp_path: Path, counting: FakeEmbeddingProvider
) -> None:
    """Same state folder, the workspace moved (old folder gone): no refusal, no re-embedding."""
    ws = _notes(tmp_path / "ws")
    config = MemoryConfig(provider="counting")
    with make_memory(workspace=ws, state_dir=tmp_path / "st", config=config) as mem:
        mem.sync()
        before = _hits(mem, "peanut allergy")
    shutil.move(ws, tmp_path / "moved")
    counting.document_calls = 0
    with make_memory(workspace=tmp_path / "moved", state_dir=tmp_path / "st", config=config) as mem:
        assert _hits(mem, "peanut allergy") == before  # a search before any sync works
        report = mem.sync()
        with mem.store.read() as reader:
            assert reader.get_meta("workspace") == str((tmp_path / "moved").resolve())
    assert counting.document_calls == 0 and report.embedded == 0
    assert report.files_added == 0 and report.files_changed == 0


def test_an_index_of_a_workspace_that_still_exists_is_still_refused(tmp_path: Path) -> None:
    a, b = _notes(tmp_path / "a", 1), _notes(tmp_path / "b", 1)
    with make_memory(workspace=a, state_dir=tmp_path / "st", config=MemoryConfig(provider="none")) as m:
        m.sync()
    other = make_memory(workspace=b, state_dir=tmp_path / "st", config=MemoryConfig(provider="none"))
    with other, pytest.raises(ConfigError, match="was built for the workspace"):
        other.sync()


def test_a_postgres_namespace_follows_a_moved_workspace(
    pg_database: str, tmp_path: Path, counting: FakeEmbeddingProvider
) -> None:
    import uuid

    from memmw import StoreConfig

    config = MemoryConfig(provider="counting", store=StoreConfig(backend="postgres", dsn=pg_database))
    agent = f"m{uuid.uuid4().hex[:8]}"
    ws = _notes(tmp_path / "ws")
    with make_memory(workspace=ws, state_dir=tmp_path / "st", agent_id=agent, config=config) as mem:
        mem.sync()
        before = _hits(mem, "peanut allergy")
    shutil.move(ws, tmp_path / "moved")
    counting.document_calls = 0
    moved = make_memory(workspace=tmp_path / "moved", state_dir=tmp_path / "st2", agent_id=agent, config=config)
    with moved:
        report = moved.sync()
        assert _hits(moved, "peanut allergy") == before
    assert counting.document_calls == 0 and report.embedded == 0
