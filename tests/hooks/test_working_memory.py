"""Working, identity and project memory loaded by the bootstrap; active-context.md overwrite."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memmw import Memory, MemoryConfig
from memmw.agent.tools import build_memory_tools, tools_by_name
from memmw.config import ActiveMemoryConfig
from memmw.hooks.bootstrap import run_bootstrap
from memmw.hooks.working_memory import working_files, working_memory_section
from memmw.workspace.active_context import write_active_context

from ..conftest import make_memory


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "MEMORY.md").write_text("# Memory\n- curated\n")
    (root / "SOUL.md").write_text("I am Tern, a careful assistant.\n")
    (root / "active-context.md").write_text("Now: migrating billing to Postgres.\n")
    (root / "project-atlas.md").write_text("# Atlas\nShared notes: launch on 2026-07-01.\n")
    (root / "project-borealis.md").write_text("# Borealis\n" + "x" * 5000 + "\nEND-OF-BOREALIS\n")
    return root


@pytest.fixture()
def mem(ws: Path, tmp_path: Path) -> Iterator[Memory]:
    config = MemoryConfig(provider="none", active_memory=ActiveMemoryConfig(edit_tools=True))
    m = make_memory(tmp_path, workspace=ws, config=config)
    yield m
    m.close()


def test_private_sessions_load_soul_context_and_projects(mem: Memory) -> None:
    ctx = run_bootstrap(mem, session_key="main", warm_sync=False)
    text = ctx.text
    assert "## Working Memory" in text and "I am Tern" in text
    assert "migrating billing to Postgres" in text and "launch on 2026-07-01" in text
    assert text.index("### SOUL.md") < text.index("### active-context.md") < text.index("### project-atlas.md")
    assert "- curated" in text  # the regular bootstrap is still there


def test_group_sessions_get_identity_only(mem: Memory) -> None:
    text = run_bootstrap(mem, session_key="agent:main:slack:channel:1", warm_sync=False).text
    assert "I am Tern" in text
    assert "migrating billing" not in text and "Atlas" not in text and "- curated" not in text


def test_budgets_truncate_visibly(ws: Path) -> None:
    config = ActiveMemoryConfig(project_max_chars=1000, soul_max_chars=64)
    text, loaded, truncated = working_memory_section(ws, config, private=True)
    assert truncated and "read them directly" in text
    assert "project-borealis.md" in loaded
    assert text.count("x") < 1000  # cut to what the project budget had left (75% head, 25% tail)
    assert len(text) < 2000
    off, _loaded, _t = working_memory_section(ws, ActiveMemoryConfig(working_memory=False), private=True)
    assert off == ""


def test_shared_project_folder(ws: Path, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "project-zephyr.md").write_text("Zephyr notes shared by all agents.\n")
    files = working_files(ws, ActiveMemoryConfig(project_dir=str(shared)), private=True)
    labels = [label for label, _p, _b in files]
    assert labels[-1].endswith("project-zephyr.md") and "project-atlas.md" not in labels


def test_active_context_is_overwritten_never_appended(mem: Memory, ws: Path) -> None:
    write_active_context(ws, "Now: writing the release notes.")
    assert (ws / "active-context.md").read_text() == "Now: writing the release notes.\n"
    tool = tools_by_name(build_memory_tools(mem))["memory_set_context"]
    assert tool.invoke({"content": "Now: on holiday."}) == {
        "status": "ok",
        "path": "active-context.md",
        "chars": len("Now: on holiday.\n"),
    }
    assert (ws / "active-context.md").read_text() == "Now: on holiday.\n"
    assert tool.invoke({})["status"] == "error"
    assert "memory_set_context" not in tools_by_name(build_memory_tools(mem, read_only=True))


def test_active_context_refuses_symlinks(ws: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.md"
    target.write_text("keep me\n")
    (ws / "active-context.md").unlink()
    (ws / "active-context.md").symlink_to(target)
    with pytest.raises(Exception, match="symlink"):
        write_active_context(ws, "overwrite")
    assert target.read_text() == "keep me\n"
