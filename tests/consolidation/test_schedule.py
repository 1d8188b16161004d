"""When consolidation runs: after a /new archive with the agent's own model (custom loop),
in the background; on a schedule in a long-running host."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from memmw.adapters.custom_loop import MemoryAgent
from memmw.consolidation import ConsolidationScheduler
from memmw.consolidation.journal import runs

from .conftest import GOOD_EDIT, make_memory, record_recalls


def _join_background() -> None:
    for t in threading.enumerate():
        if t.name == "memmw-consolidate":
            t.join(30)


def test_after_new_the_agent_s_own_model_consolidates_in_the_background(
    ws: Path, tmp_path: Path
) -> None:
    mem = make_memory(ws, tmp_path, after_archive=True)
    record_recalls(mem, "memory/2026-11-28.md", 2, ["a", "b", "c"])
    asked: list[str] = []

    def model(messages: list[dict[str, Any]], **_: Any) -> str:
        system = str(messages[0].get("content", "")) if messages else ""
        if system.startswith("You consolidate"):
            asked.append("consolidate")
            return json.dumps({"edits": [GOOD_EDIT]})
        return "Noted."

    agent = MemoryAgent(model, mem)
    agent.chat("We deploy to production now.")
    agent.new_session()
    _join_background()
    assert asked == ["consolidate"]
    assert "Deploy target: production (source: memory/2026-11-28.md#L2)" in (
        ws / "MEMORY.md"
    ).read_text(encoding="utf-8")
    mem.close()


def test_the_scheduler_runs_on_its_interval_and_stops(ws: Path, tmp_path: Path) -> None:
    mem = make_memory(ws, tmp_path)
    record_recalls(mem, "memory/2026-11-28.md", 2, ["a", "b", "c"])
    scheduler = ConsolidationScheduler(
        mem, lambda m: json.dumps({"edits": [GOOD_EDIT]}), interval_hours=0.05 / 3600
    ).start()
    deadline = time.monotonic() + 20
    while scheduler.last is None and time.monotonic() < deadline:
        time.sleep(0.02)
    scheduler.stop(timeout=30)
    # The first run applies; later ones find the candidate promoted and change nothing.
    assert scheduler.last is not None and scheduler.last.status in ("applied", "nothing")
    assert len([r for r in runs(mem.state_dir) if r.data["state"] == "applied"]) == 1
    mem.close()


def test_a_schedule_needs_an_interval(mem: object) -> None:
    with pytest.raises(ValueError):
        ConsolidationScheduler(mem, lambda m: "{}")  # type: ignore[arg-type]


def test_the_langchain_middleware_consolidates_with_the_agent_s_model(
    ws: Path, tmp_path: Path
) -> None:
    pytest.importorskip("langchain")
    import importlib.util
    import sys

    from memmw.adapters.langchain import LangChainMemoryMiddleware
    from memmw.consolidation import consolidate
    from memmw.hooks.registry import Event, HookContext

    spec = importlib.util.spec_from_file_location(
        "lc_fakes", Path(__file__).parents[1] / "adapters" / "lc_fakes.py"
    )
    assert spec is not None and spec.loader is not None
    fakes = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("lc_fakes", fakes)
    spec.loader.exec_module(fakes)
    model = fakes.ScriptedChatModel(policy=lambda messages: json.dumps({"edits": [GOOD_EDIT]}))
    mem = make_memory(ws, tmp_path, after_archive=True)
    record_recalls(mem, "memory/2026-11-28.md", 2, ["a", "b", "c"])
    mw = LangChainMemoryMiddleware(mem, flush_model=model)
    assert json.loads(mw.consolidation_model([{"role": "user", "content": "x"}])) == {
        "edits": [GOOD_EDIT]
    }
    mw.core.hooks.emit(HookContext(Event.ARCHIVE, "s", "k", {"path": ws / "memory" / "a.md"}))
    _join_background()
    assert "(superseded " in (ws / "MEMORY.md").read_text(encoding="utf-8")
    assert consolidate(mem, mw.consolidation_model).status == "nothing"
    mem.close()
