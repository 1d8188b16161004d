"""The one note reader and its cap table."""

from __future__ import annotations

from pathlib import Path

import pytest

from memmw import MemoryConfig
from memmw.errors import FileReadError, PathPolicyError
from memmw.workspace import reading
from memmw.workspace.files import MAX_NOTE_BYTES
from memmw.workspace.reading import CAPS, ReadCaps, read_markdown, read_prompt_bytes

from ..conftest import make_memory, write


def test_the_cap_table_holds_every_readers_limit() -> None:
    assert ReadCaps(index=MAX_NOTE_BYTES, prompt=2 * 1024 * 1024, startup=16_384) == CAPS


def test_prompt_reads_take_the_first_bytes_and_never_follow_a_symlink(tmp_path: Path) -> None:
    note = write(tmp_path / "a.md", "0123456789")
    assert read_prompt_bytes(note, 4) == (b"0123", True)
    assert read_prompt_bytes(note) == (b"0123456789", False)
    (tmp_path / "link.md").symlink_to(note)
    assert read_prompt_bytes(tmp_path / "link.md", 4) is None
    assert read_prompt_bytes(tmp_path, 4) is None  # a folder


def test_one_index_cap_for_indexing_and_memory_get(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "ws"
    write(ws / "memory" / "big.md", "gateway " * 20 + "\n")
    write(ws / "memory" / "small.md", "gateway\n")
    monkeypatch.setattr(reading, "CAPS", ReadCaps(index=64))
    with pytest.raises(FileReadError, match="larger than"):
        read_markdown(ws / "memory" / "big.md")
    with make_memory(workspace=ws, state_dir=tmp_path / "state", config=MemoryConfig(provider="none")) as mem:
        report = mem.sync()
        assert [i.path for i in report.issues] == ["memory/big.md"]
        assert [h.path for h in mem.search("gateway")] == ["memory/small.md"]
        with pytest.raises(PathPolicyError, match="larger than"):
            mem.get("memory/big.md")
