"""The archive-time extractor hook: proposed facts appended to the archive note, then indexed."""

from __future__ import annotations

from pathlib import Path

from memmw import MemoryConfig
from memmw.hooks.extractor import extractor_hook
from memmw.hooks.registry import Event, HookContext, HookRegistry

from ..conftest import make_memory


def test_archive_hook_appends_facts_and_survives_failures(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    archive = ws / "memory" / "2026-06-01-trip.md"
    archive.write_text("# Session: 2026-06-01\n\n## Conversation Summary\nuser: Dana moved to Oslo\n")
    seen: list[str] = []

    def extractor(text: str) -> list[dict[str, str]]:
        seen.append(text)
        return [{"entity": "Dana Lee", "key": "city", "value": "Oslo"}]

    with make_memory(workspace=ws, state_dir=tmp_path / "st", config=MemoryConfig(provider="none")) as mem:
        hooks = HookRegistry()
        hooks.on(Event.ARCHIVE, extractor_hook(mem, extractor))
        hooks.emit(HookContext(Event.ARCHIVE, "s1", "main", {"path": archive}))
        assert "Dana moved to Oslo" in seen[0]
        assert archive.read_text().endswith("\n## Dana Lee\n- city: Oslo\n")
        assert mem.facts("Where does Dana Lee live")[0].citation == "memory/2026-06-01-trip.md#L7"

        def broken(text: str) -> list[object]:
            raise RuntimeError("model down")

        before = archive.read_text()
        extractor_hook(mem, broken)(HookContext(Event.ARCHIVE, "s1", "main", {"path": archive}))
        extractor_hook(mem, extractor)(HookContext(Event.ARCHIVE, "s1", "main", {}))
        assert archive.read_text() == before
