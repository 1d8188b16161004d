"""The workspace layout: memory files, daily note and session archive names in one place."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

from memmw.workspace.layout import (
    archive_path,
    curated_files,
    daily_note_path,
    dated_notes,
    file_date,
    is_curated,
    is_dreams,
    is_memory_path,
    is_private_path,
)

from ..conftest import write

DAY = dt.date(2026, 3, 10)


def test_daily_note_and_archive_names() -> None:
    assert daily_note_path(DAY) == "memory/2026-03-10.md"
    assert file_date(daily_note_path(DAY)) == (2026, 3, 10)
    assert file_date("memory/2026-03-10-team-sync.md") == (2026, 3, 10)
    assert file_date("memory/2026-02-30.md") is None
    assert file_date("2026-03-10.md") is None


def test_archive_path_never_reuses_a_name(tmp_path: Path) -> None:
    first = archive_path(tmp_path, DAY, "sync")
    assert first.name == "2026-03-10-sync.md" and file_date(f"memory/{first.name}")
    write(first)
    assert archive_path(tmp_path, DAY, "sync").name == "2026-03-10-sync-2.md"


def test_which_files_are_memory() -> None:
    assert is_curated("MEMORY.md") and is_curated("memory.md") and is_curated("USER.md")
    assert not is_curated("memory/MEMORY.md")
    assert is_dreams("DREAMS.md") and is_dreams("dreams.md")
    assert is_memory_path("memory/topics/a.md") and is_memory_path("DREAMS.md")
    assert not is_memory_path("notes/a.md")
    assert is_private_path("memory/2026-03-10.md") and is_private_path("active-context.md")
    assert not is_private_path("memory/topics/a.md")
    assert is_private_path("x.jsonl", source="sessions")


def test_curated_files_prefer_memory_md(tmp_path: Path) -> None:
    assert curated_files(tmp_path) == []
    write(tmp_path / "memory.md")
    write(tmp_path / "USER.md")
    assert curated_files(tmp_path) == ["memory.md", "USER.md"]
    write(tmp_path / "MEMORY.md")
    names = set(os.listdir(tmp_path))
    if "memory.md" in names and "MEMORY.md" in names:  # case-sensitive file system
        assert curated_files(tmp_path) == ["MEMORY.md", "USER.md"]


def test_dated_notes_newest_archives_first(tmp_path: Path) -> None:
    assert dated_notes(tmp_path, DAY, 4) == []
    write(tmp_path / daily_note_path(DAY))
    for i, slug in enumerate(["a", "b", "c"]):
        path = write(tmp_path / "memory" / f"2026-03-10-{slug}.md")
        os.utime(path, (1_000 + i, 1_000 + i))
    write(tmp_path / "memory" / "2026-03-09.md")
    assert dated_notes(tmp_path, DAY, 2) == [
        "memory/2026-03-10.md",
        "memory/2026-03-10-c.md",
        "memory/2026-03-10-b.md",
    ]
