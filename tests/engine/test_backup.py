"""Backup and restore: checked archives, nothing written from a bad one, no re-embedding."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memmw import ConfigError, Memory, MemoryConfig
from memmw.embeddings.registry import register_provider, unregister_provider
from memmw.engine.backup import ArchiveError, read_archive
from memmw.testing import FakeEmbeddingProvider
from tests.conftest import write

from ..conftest import make_memory

CONFIG = MemoryConfig(provider="counting")


def _workspace(ws: Path, notes: int) -> Path:
    write(ws / "MEMORY.md", "# Memory\n\n- Ali is allergic to peanuts.\n- Prefers green tea.\n")
    write(ws / "USER.md", "# User\n\n- Name: Ali\n")
    write(ws / "memmw.toml", 'provider = "counting"\n')
    topics = ["hiking", "the budget", "a peanut recipe", "the garden", "tax forms", "Sam's visit"]
    for i in range(notes):
        day = f"2025-{i // 28 % 12 + 1:02d}-{i % 28 + 1:02d}"
        write(
            ws / "memory" / f"{day}-n{i}.md",
            f"# Note {i}\n\nTalked about {topics[i % len(topics)]} with friend {i % 37}.\n",
        )
    return ws


def _hits(mem: Memory, query: str) -> list[tuple[str, int, int, float, str]]:
    result = mem.search_result(query, max_results=8)
    assert result.mode == "hybrid", result.mode
    return [(h.path, h.start_line, h.end_line, round(h.score, 6), h.snippet) for h in result.hits]


def _files(ws: Path) -> dict[str, bytes]:
    return {p.relative_to(ws).as_posix(): p.read_bytes() for p in sorted(ws.rglob("*")) if p.is_file()}


def _roundtrip(tmp_path: Path, counting: FakeEmbeddingProvider, notes: int) -> None:
    ws = _workspace(tmp_path / "ws", notes)
    archive = tmp_path / "out" / "backup.tar.gz"
    queries = ["peanut allergy", "friend 12 hiking", "garden"]
    with make_memory(workspace=ws, state_dir=tmp_path / "st1", config=CONFIG) as mem:
        report = mem.backup(archive)
        original = [_hits(mem, q) for q in queries]
    assert report.files == notes + 3 and report.missing_vectors == 0 and report.vectors > 0
    counting.document_calls = 0
    restored = Memory.restore(archive, tmp_path / "copy", state_dir=tmp_path / "st2", config=CONFIG)
    assert restored.embedded == 0 and restored.from_cache > 0
    with make_memory(workspace=tmp_path / "copy", state_dir=tmp_path / "st2", config=CONFIG) as mem:
        copy = [_hits(mem, q) for q in queries]
    assert counting.document_calls == 0  # not one chunk embedded; query embeddings only
    assert copy == original
    assert _files(tmp_path / "copy") == _files(ws)


def test_restore_embeds_no_chunk_and_searches_alike(
    tmp_path: Path, counting: FakeEmbeddingProvider
) -> None:
    _roundtrip(tmp_path, counting, notes=40)


def test_restore_of_2000_notes_embeds_no_chunk(
    tmp_path: Path, counting: FakeEmbeddingProvider
) -> None:
    _roundtrip(tmp_path, counting, notes=2000)


@pytest.fixture(scope="module")
def small_archive(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    tmp = tmp_path_factory.mktemp("archive")
    ws = _workspace(tmp / "ws", 3)
    provider = FakeEmbeddingProvider(dims=8)
    register_provider("counting", lambda config: provider, replace=True)
    try:
        with make_memory(workspace=ws, state_dir=tmp / "st", config=CONFIG) as mem:
            mem.backup(tmp / "a.tar.gz")
    finally:
        unregister_provider("counting")
    return (tmp / "a.tar.gz").read_bytes()


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_a_damaged_archive_is_refused_and_nothing_is_written(
    small_archive: bytes, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    """Any flipped byte or cut tail: a clear ArchiveError before a single file is written.

    A flip the gzip container does not read (its header's time, OS or name fields) may
    leave the content intact; then the archive reads and equals the original.
    """
    raw = bytearray(small_archive)
    if data.draw(st.booleans(), label="truncate"):
        raw = raw[: data.draw(st.integers(0, len(raw) - 1), label="keep")]
    else:
        at = data.draw(st.integers(0, len(raw) - 1), label="at")
        raw[at] ^= data.draw(st.integers(1, 255), label="xor")
    tmp = tmp_path_factory.mktemp("bad")
    bad = tmp / "bad.tar.gz"
    bad.write_bytes(bytes(raw))
    target = tmp / "ws"
    try:
        read = read_archive(bad)
    except ArchiveError as exc:
        assert str(bad) in str(exc)
        with pytest.raises(ArchiveError):
            Memory.restore(bad, target, state_dir=tmp / "st", config=CONFIG)
        assert not target.exists() and not (tmp / "st").exists()
    else:
        good = tmp / "good.tar.gz"
        good.write_bytes(small_archive)
        expected = read_archive(good)
        assert (read.files, read.vectors) == (expected.files, expected.vectors)


def _rewrite(src: bytes, dst: Path, change: dict[str, bytes], manifest_too: bool = False) -> None:
    """Copy an archive with members replaced (and optionally the manifest's checksums)."""
    with tarfile.open(fileobj=io.BytesIO(src), mode="r:gz") as tar:
        members = {i.name: tar.extractfile(i).read() for i in tar}  # type: ignore[union-attr]
    manifest = json.loads(members["manifest.json"])
    for name, body in change.items():
        members[name] = body
        if manifest_too:
            manifest["members"][name] = {"sha256": hashlib.sha256(body).hexdigest(), "size": len(body)}
    members["manifest.json"] = json.dumps(manifest).encode()
    with tarfile.open(dst, "w:gz") as tar:
        for name, body in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))


def test_a_tampered_member_is_named(small_archive: bytes, tmp_path: Path) -> None:
    bad = tmp_path / "t.tar.gz"
    _rewrite(small_archive, bad, {"workspace/MEMORY.md": b"# Memory\n\n- forged\n"})
    with pytest.raises(ArchiveError, match=r"checksum mismatch for 'workspace/MEMORY.md'"):
        Memory.restore(bad, tmp_path / "ws", state_dir=tmp_path / "st", config=CONFIG)
    assert not (tmp_path / "ws").exists()


@pytest.mark.parametrize("name", ["workspace/../evil.md", "/etc/evil.md", "other/evil.md"])
def test_a_member_outside_the_workspace_is_refused(
    small_archive: bytes, tmp_path: Path, name: str
) -> None:
    bad = tmp_path / "t.tar.gz"
    _rewrite(small_archive, bad, {name: b"x\n"}, manifest_too=True)
    with pytest.raises(ArchiveError, match="unsafe member name"):
        Memory.restore(bad, tmp_path / "ws", state_dir=tmp_path / "st", config=CONFIG)
    assert not (tmp_path / "ws").exists() and not (tmp_path / "evil.md").exists()


def test_not_an_archive(tmp_path: Path) -> None:
    (tmp_path / "x.tar.gz").write_bytes(b"hello")
    with pytest.raises(ArchiveError, match="not a readable backup archive"):
        read_archive(tmp_path / "x.tar.gz")
    with pytest.raises(ArchiveError, match="no backup archive"):
        read_archive(tmp_path / "missing.tar.gz")


def test_a_non_empty_target_needs_force(
    small_archive: bytes, tmp_path: Path, counting: FakeEmbeddingProvider
) -> None:
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(small_archive)
    keep = write(tmp_path / "ws" / "notes.txt", "mine\n")
    with pytest.raises(ConfigError, match="not empty"):
        Memory.restore(archive, tmp_path / "ws", state_dir=tmp_path / "st", config=CONFIG)
    assert sorted(p.name for p in (tmp_path / "ws").iterdir()) == ["notes.txt"]
    report = Memory.restore(
        archive, tmp_path / "ws", state_dir=tmp_path / "st", config=CONFIG, force=True
    )
    assert report.files == 6 and keep.read_text() == "mine\n"
    assert (tmp_path / "ws" / "MEMORY.md").is_file()


def test_another_provider_embeds_again_and_says_why(
    small_archive: bytes, tmp_path: Path
) -> None:
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(small_archive)
    report = Memory.restore(
        archive, tmp_path / "ws", state_dir=tmp_path / "st", config=MemoryConfig(provider="fake")
    )
    assert report.warning is not None and "embedded again" in report.warning
    assert report.vectors_imported > 0 and report.embedded > 0


def test_postgres_backup_and_restore_embed_nothing(
    pg_database: str, tmp_path: Path, counting: FakeEmbeddingProvider
) -> None:
    """The archive goes through the store protocol: PostgreSQL namespaces work alike."""
    import uuid

    from memmw import StoreConfig

    def pg(agent: str) -> tuple[MemoryConfig, str]:
        store = StoreConfig(backend="postgres", dsn=pg_database)
        return MemoryConfig(provider="counting", store=store), agent

    ws = _workspace(tmp_path / "ws", 30)
    config, first = pg(f"a{uuid.uuid4().hex[:8]}")
    with make_memory(workspace=ws, state_dir=tmp_path / "st1", agent_id=first, config=config) as mem:
        report = mem.backup(tmp_path / "pg.tar.gz")
        original = _hits(mem, "peanut allergy")
    assert report.vectors > 0 and report.missing_vectors == 0
    counting.document_calls = 0
    _, second = pg(f"b{uuid.uuid4().hex[:8]}")
    restored = Memory.restore(
        tmp_path / "pg.tar.gz", tmp_path / "copy", tmp_path / "st2", agent_id=second, config=config
    )
    assert restored.embedded == 0
    with make_memory(
        workspace=tmp_path / "copy", state_dir=tmp_path / "st2", agent_id=second, config=config
    ) as mem:
        assert _hits(mem, "peanut allergy") == original
    assert counting.document_calls == 0


def test_force_never_writes_through_a_symlinked_folder(
    small_archive: bytes, tmp_path: Path
) -> None:
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(small_archive)
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "memory").symlink_to(outside)
    with pytest.raises(ConfigError, match="outside"):
        Memory.restore(archive, tmp_path / "ws", state_dir=tmp_path / "st", config=CONFIG, force=True)
    assert list(outside.iterdir()) == [] and not (tmp_path / "ws" / "MEMORY.md").exists()
