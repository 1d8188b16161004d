"""A secret deleted from a note leaves no bytes in the index file or its WAL (issue 20)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from memmw import MemoryConfig, StoreConfig

from ...conftest import make_memory, write


def _index_bytes(db_path: Path) -> bytes:
    """The raw bytes of the database file and every sidecar (WAL, SHM, journal)."""
    out = b""
    for suffix in ("", "-wal", "-shm", "-journal"):
        path = Path(f"{db_path}{suffix}")
        if path.exists():
            out += path.read_bytes()
    return out


@pytest.mark.parametrize("keyword_backend", ["memory", "fts5"])
@pytest.mark.parametrize("how", ["delete-note", "edit-note", "rebuild"])
def test_a_deleted_secret_leaves_no_bytes_in_the_index(
    tmp_path: Path, keyword_backend: str, how: str
) -> None:
    secret = f"zq{uuid.uuid4().hex}zq"  # unique, one token, never redacted (no key shape)
    ws = tmp_path / "ws"
    write(ws / "MEMORY.md", "# Facts\n- The gateway runs on port 8080.\n")
    note = ws / "memory" / "2026-03-01.md"
    write(note, f"# Notes\n- the vault code word is {secret}\n- lunch at noon\n")
    config = MemoryConfig(
        provider="none", store=StoreConfig(keyword_backend=keyword_backend)  # type: ignore[arg-type]
    )
    with make_memory(workspace=ws, state_dir=tmp_path / "state", config=config) as mem:
        mem.sync()
        assert mem.search_result(secret).hits  # indexed (and a reader connection is open)
        assert secret.encode() in _index_bytes(mem.db_path)
        if how == "delete-note":
            note.unlink()
            mem.sync()
        elif how == "edit-note":
            write(note, "# Notes\n- lunch at noon\n")
            mem.sync()
        else:
            note.unlink()
            mem.sync(force=True)
        assert not mem.search_result(secret).hits
        raw = _index_bytes(mem.db_path)
    assert secret.encode() not in raw
    assert secret.encode() not in _index_bytes(mem.db_path)
