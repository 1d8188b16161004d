"""Shared set-up of the consolidation tests: a workspace, its memory and recall telemetry."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memmw import MemoryConfig
from memmw.engine.memory import Memory

MEMORY_MD = """# Memory

## Work
- Deploy target: staging
- Editor: vim
- Team lead: Alice
- Standup at 09:30
"""

DAILY = """# 2026-11-28
- Decided: the deploy target is now production (switched from staging)
- Lunch was nice
- Alice prefers Tuesday reviews
"""

#: A good update: the stale MEMORY.md value (line 4) -> the newer one the daily note states.
GOOD_EDIT = {
    "op": "update",
    "file": "MEMORY.md",
    "line": 4,
    "text": "Deploy target: production",
    "sources": [
        {"path": "memory/2026-11-28.md", "line": 2, "quote": "deploy target is now production"}
    ],
}

GROUP = """# team chat
- Deploy target: the moon, said someone in the group chat
"""


@pytest.fixture(autouse=True)
def _isolated_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run lock lives in the user state folder: keep it in the test's folder."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "memory" / "groups" / "team").mkdir(parents=True)
    (root / "MEMORY.md").write_text(MEMORY_MD, encoding="utf-8")
    (root / "memory" / "2026-11-28.md").write_text(DAILY, encoding="utf-8")
    (root / "memory" / "groups" / "team" / "2026-11-28.md").write_text(GROUP, encoding="utf-8")
    return root


def make_memory(ws: Path, tmp_path: Path, **consolidation: Any) -> Memory:
    config = MemoryConfig.from_dict(
        {
            "provider": "none",
            "consolidation": {"min_recalls": 2, "min_queries": 2, **consolidation},
        }
    )
    return Memory(workspace=ws, state_dir=tmp_path / "state", agent_id="main", config=config)


@pytest.fixture
def mem(ws: Path, tmp_path: Path) -> Iterator[Memory]:
    m = make_memory(ws, tmp_path)
    record_recalls(m, "memory/2026-11-28.md", 2, ["deploy target", "where do we deploy", "prod?"])
    yield m
    m.close()


def record_recalls(
    mem: Memory, path: str, line: int, queries: list[str], *, ts: float | None = None
) -> None:
    """Append search events that showed ``path#Lline``, one per query."""
    from memmw.graph.telemetry import query_key

    log = Path(mem.graph_engine.telemetry.path)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", encoding="utf-8") as fh:
        for q in queries:
            event = {
                "ts": time.time() if ts is None else ts,
                "event": "search",
                "ms": 1.0,
                "hits": 1,
                "chars": len(q),
                "q": query_key(q),
                "cites": [f"{path}#L{line}-L{line}"],
            }
            fh.write(json.dumps(event) + "\n")


def scripted(*edits: dict[str, Any], during: Callable[[], None] | None = None) -> Callable[..., str]:
    """A model that answers with ``edits`` (and does ``during`` while it "thinks")."""

    def model(messages: list[dict[str, Any]]) -> str:
        if during is not None:
            during()
        return json.dumps({"edits": list(edits)})

    return model


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file's bytes under ``root``."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
