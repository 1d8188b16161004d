"""The framework-neutral middleware: pure decisions and lifecycle events."""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memmw import middleware as middleware_module
from memmw.config import FlushConfig, MemoryConfig
from memmw.engine.memory import Memory
from memmw.errors import ConfigError
from memmw.hooks import Event, HookContext
from memmw.middleware import (
    MemoryEngine,
    MemoryMiddleware,
    WiringError,
    auto_reset_reason,
    deliverable_text,
    is_context_overflow,
    parse_reset_command,
)
from memmw.text.tokens import TokenCounter

from .conftest import make_memory

NOW = dt.datetime(2026, 3, 10, 14, 5, tzinfo=dt.timezone.utc)


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n- curated fact\n")
    config = MemoryConfig(
        provider="none",
        user_timezone="Europe/Paris",
        flush=FlushConfig(
            context_window=3000, reserve_tokens_floor=1000, soft_threshold_tokens=500
        ),
    )
    mem = make_memory(workspace=ws, state_dir=tmp_path / "state", config=config)
    yield mem
    mem.close()


def make(memory: Memory, **kw: Any) -> MemoryMiddleware:
    kw.setdefault("clock", lambda: NOW)
    kw.setdefault("token_counter", TokenCounter(use_tiktoken=False))
    return MemoryMiddleware(memory, **kw)


@pytest.mark.parametrize(
    ("text", "cmd"),
    [("/new", "/new"), (" /RESET now", "/reset"), ("/news", None), ("new", None), ("", None)],
)
def test_parse_reset_command(text: str, cmd: str | None) -> None:
    assert parse_reset_command(text) == cmd


def test_is_context_overflow() -> None:
    class ContextOverflowError(Exception):
        pass

    assert is_context_overflow(ContextOverflowError("x"))
    assert is_context_overflow(ValueError("This model's maximum context length is 8192 tokens"))
    assert not is_context_overflow(TimeoutError("slow"))


def test_auto_reset_reason() -> None:
    last = dt.datetime(2026, 3, 10, 3, 0)
    assert auto_reset_reason(None, last, idle_minutes=1) is None
    assert auto_reset_reason(last, last + dt.timedelta(minutes=61), idle_minutes=60) == "idle"
    assert auto_reset_reason(last, last + dt.timedelta(minutes=59), idle_minutes=60) is None
    assert auto_reset_reason(last, dt.datetime(2026, 3, 10, 4, 30), daily_reset_hour=4) == "daily"
    assert auto_reset_reason(last, dt.datetime(2026, 3, 10, 3, 30), daily_reset_hour=4) is None


def test_deliverable_text() -> None:
    assert deliverable_text("NO_REPLY") is None
    assert deliverable_text({"content": " no_reply "}) is None
    assert deliverable_text("Done. NO_REPLY") == "Done."
    assert deliverable_text("hello") == "hello"


def test_session_resumes_after_restart(memory: Memory) -> None:
    first = make(memory).start_session("main")
    again = make(memory).start_session("main")
    assert again.session_id == first.session_id
    assert make(memory).start_session("main", resume=False).session_id != first.session_id


def test_system_prompt_only_with_tools(memory: Memory) -> None:
    mw = make(memory)
    session = mw.start_session("main")
    prompt = mw.system_prompt(session, "Base.")
    assert prompt.startswith("Base.\n\n## Memory Recall") and "curated fact" in prompt
    bare = mw.system_prompt(session, "Base.", tool_names=[])
    assert "## Memory Recall" not in bare and "curated fact" in bare


def test_flush_marker_persists_across_restart(memory: Memory) -> None:
    calls: list[int] = []

    def model(messages: list[dict[str, Any]]) -> str:
        calls.append(len(messages))
        return "NO_REPLY"

    mw = make(memory, flush_model=model)
    session = mw.start_session("main")
    big = [{"role": "user", "content": "x" * 8000}]
    assert mw.before_model(session, big).ran
    assert not mw.before_model(session, big).ran
    restarted = make(memory, flush_model=model)
    session2 = restarted.start_session("main")
    assert restarted.before_model(session2, big).decision.reason == "already-flushed"
    assert restarted.compaction(session2) == 1
    assert restarted.before_model(session2, big).ran
    assert len(calls) == 2


def test_failed_flush_never_blocks_and_is_retried_once(memory: Memory) -> None:
    attempts: list[int] = []

    def down(messages: Any) -> str:
        attempts.append(1)
        raise ConnectionError("model down")

    mw = make(memory, flush_model=down)
    session = mw.start_session("main")
    outcome = mw.before_model(session, [{"role": "user", "content": "x" * 8000}])
    assert outcome.ran and not outcome.ok and len(attempts) == 2
    state = json.loads(mw.flush_state.path.read_text())["sessions"][session.session_id]
    assert state["flushStatus"] == "failed" and state["flushedCycle"] == 0


def test_flush_without_model_is_a_wiring_error(memory: Memory) -> None:
    """Upstream skipped it with a log line and lost the cycle; here the host learns why."""
    mw = make(memory)
    session = mw.start_session("main")
    with pytest.raises(WiringError, match="no model was given"):
        mw.before_model(session, [{"role": "user", "content": "x" * 8000}])
    # Not due: no model needed, no error.
    assert not mw.before_model(session, [{"role": "user", "content": "hi"}]).ran


def test_transcript_bytes_count_since_last_compaction(memory: Memory) -> None:
    """Past the limit, the size trigger fired right after every compaction (on the summary)."""
    memory.config = memory.config.replace(flush=FlushConfig(force_flush_transcript_bytes=1000))
    flushes: list[int] = []
    mw = make(memory, flush_model=lambda m: flushes.append(1) or "NO_REPLY")
    session = mw.start_session("main")
    short = [{"role": "user", "content": "short"}]
    for cycle in range(3):
        mw.record(session, {"role": "user", "content": "y" * 1200})
        out = mw.before_model(session, short)
        assert out.ran and out.decision.reason == "transcript-bytes" and out.decision.cycle == cycle
        mw.compaction(session)
        # Right after the compaction the transcript is still > 1000 bytes in total, but
        # nothing was written since: no flush on the summary.
        assert mw.before_model(session, short).decision.reason == "below-threshold"
    assert len(flushes) == 3


def test_transcript_growth_reindexes_without_watcher(memory: Memory) -> None:
    seen: list[str] = []
    memory.notify_transcript = lambda path: seen.append(str(path)) or False  # type: ignore[method-assign]
    mw = make(memory, watch=False)
    session = mw.start_session("main")
    mw.record(session, {"role": "user", "content": "hello"})
    assert seen == [str(mw.transcripts.path(session.session_id))]


def test_transcript_delta_thresholds_request_a_sync(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    config = MemoryConfig(provider="none", sources=("memory", "sessions"))
    with make_memory(workspace=ws, state_dir=tmp_path / "state", config=config) as mem:
        mw = make(mem, watch=False)
        session = mw.start_session("main")
        assert mem.wait_for_sync(30)
        assert mem.search("zebras") == []
        for i in range(60):  # past sync.sessions.delta_messages (50)
            mw.record(session, {"role": "user", "content": f"message number {i} about zebras"})
        assert mem.wait_for_sync(30)
        assert any(h.source == "sessions" for h in mem.search("zebras"))


def test_transcript_bytes_force_flush(memory: Memory) -> None:
    cfg = memory.config.replace(flush=FlushConfig(force_flush_transcript_bytes=100))
    memory.config = cfg
    mw = make(memory, flush_model=lambda m: "NO_REPLY")
    session = mw.start_session("main")
    mw.record(session, {"role": "user", "content": "y" * 200})
    out = mw.before_model(session, [{"role": "user", "content": "short"}])
    assert out.ran and out.decision.reason == "transcript-bytes"


def test_auto_reset_archives_with_reason(memory: Memory) -> None:
    events: list[HookContext] = []
    mw = make(memory)
    for ev in Event:
        mw.hooks.on(ev, events.append)
    session = mw.start_session("main")
    mw.record(session, {"role": "user", "content": "remember the blue door"})
    mw.record(session, {"role": "assistant", "content": "noted"})
    fresh = mw.check_auto_reset(session, idle_minutes=0)
    assert fresh.session_id != session.session_id
    assert fresh.previous_archive is not None
    text = fresh.previous_archive.read_text()
    assert fresh.previous_archive.name == "2026-03-10-1505.md"
    assert "- **Reason**: idle" in text and 'user: "remember the blue door"' in text
    kinds = [e.event for e in events]
    assert Event.AUTO_RESET in kinds and Event.ARCHIVE in kinds and Event.SESSION_END in kinds
    # The new session bootstraps the archive written a moment ago.
    assert "2026-03-10-1505.md" in mw.system_prompt(fresh)


def test_command_ignores_other_text(memory: Memory) -> None:
    mw = make(memory)
    session = mw.start_session("main")
    assert mw.command(session, "hello") is None


def test_after_model_records_and_filters(memory: Memory) -> None:
    mw = make(memory)
    session = mw.start_session("main")
    assert mw.after_model(session, "NO_REPLY") is None
    assert mw.after_model(session, {"content": "", "tool_calls": [{"name": "memory_get"}]}) is None
    assert mw.after_model(session, "visible") == "visible"
    roles = [m.role for m in mw.transcripts.read(session.session_id)]
    assert roles == ["assistant", "assistant", "assistant"]


def test_read_only_workspace_detection(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    mw = make(memory)
    assert not mw.is_read_only()
    monkeypatch.setattr("memmw.agent.tools.os.access", lambda *a, **k: False)
    assert mw.is_read_only()
    session = mw.start_session("main")
    out = mw.before_model(session, [{"role": "user", "content": "x" * 8000}])
    assert out.decision.reason == "read-only"
    assert make(memory, read_only=False).is_read_only() is False


def test_context_window_must_be_positive(memory: Memory) -> None:
    with pytest.raises(ConfigError, match="context_window"):
        make(memory, context_window=0)
    assert make(memory, context_window=8000).flush_points().context_window == 8000
    assert make(memory).flush_points().context_window == 3000  # config.flush.context_window


def test_the_middleware_declares_what_it_uses_of_the_engine() -> None:
    # MemoryEngine lists every engine method the middleware calls: no getattr probing.
    source = Path(middleware_module.__file__).read_text(encoding="utf-8")
    assert "getattr(self.memory" not in source
    for name in ("start_watching", "sync_in_background", "notify_transcript", "notify_compaction"):
        assert callable(getattr(MemoryEngine, name)) and callable(getattr(Memory, name))


def test_system_prompt_rereads_the_bootstrap_only_when_its_files_change(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import time

    mw = make(memory)
    session = mw.start_session("main")
    memory_md = Path(memory.workspace) / "MEMORY.md"
    past = time.time() - 3600
    os.utime(memory_md, (past, past))
    reads: list[int] = []
    real = middleware_module.run_bootstrap

    def counting(*args: Any, **kwargs: Any) -> Any:
        reads.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(middleware_module, "run_bootstrap", counting)
    mw.system_prompt(session)  # the start-up stamp may be racy: one re-read at most
    reads.clear()
    for _ in range(5):
        assert "curated fact" in mw.system_prompt(session)
    assert reads == []  # a stat check per call, no read
    memory_md.write_text("# Memory\n- edited fact\n")
    assert "edited fact" in mw.system_prompt(session) and reads == [1]


def test_check_prompt_room_names_window_reserve_and_sizes(memory: Memory) -> None:
    mw = make(memory)
    mw.check_prompt_room(100)
    with pytest.raises(ConfigError, match=r"context window 3000 with reserve 1000 leaves 2000"):
        mw.check_prompt_room(2500)


CALL = {"id": "c1", "name": "memory_search", "args": {}}


def test_eviction_flushes_exactly_the_unseen_messages_first(memory: Memory) -> None:
    shown: list[list[dict[str, Any]]] = []

    def model(messages: list[dict[str, Any]], tools: Any = None) -> Any:
        if messages[-1]["role"] == "tool":
            return "NO_REPLY"
        shown.append(messages[1:-1])
        return {"content": "", "tool_calls": [{"id": "w", "name": "memory_append",
                                                "args": {"content": "- noted"}}]}  # fmt: skip

    mw = make(memory, flush_model=model)
    session = mw.start_session("main")
    convo: list[dict[str, Any]] = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "one"},
    ]
    assert mw.before_model(session, convo, force=True).ran  # the cycle's flush saw these
    convo += [
        {"role": "user", "content": "look it up"},
        {"role": "assistant", "content": "", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "c1", "content": "port 8443"},
        {"role": "assistant", "content": "8443"},
        {"role": "user", "content": "kept"},
    ]
    # Evict everything but the last message; indices 3..4 arrive as a tool pair.
    outcome = mw.flush_before_eviction(session, convo, range(4), model=model)
    assert outcome is not None and outcome.ok and outcome.decision.reason == "delta"
    assert [m["content"] for m in shown[-1]] == ["look it up", "", "port 8443"]
    # Seen now: a second eviction of the same messages flushes nothing.
    assert mw.flush_before_eviction(session, convo, range(4), model=model) is None
    # After a restart too (the watermark is in the state file).
    again = make(memory, flush_model=model)
    assert again.flush_before_eviction(again.start_session("main"), convo, range(6)) is not None
    assert [m["content"] for m in shown[-1]] == ["8443"]
    assert memory.status().details["flush"]["unsavedEvictions"] == 0


def test_eviction_after_a_failed_flush_is_counted(memory: Memory) -> None:
    def down(messages: Any, tools: Any = None) -> Any:
        raise ConnectionError("down")

    mw = make(memory, flush_model=down)
    session = mw.start_session("main")
    convo = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    outcome = mw.flush_before_eviction(session, convo, range(2))
    assert outcome is not None and not outcome.ok and len(outcome.missed) == 2
    flush = memory.status().details["flush"]
    assert flush["unsavedEvictions"] == 2 and flush["sessions"] == [session.session_id]


def test_missing_watchdog_warns_only_when_watching_was_asked_for(
    memory: Memory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def no_watchdog() -> str:
        raise ConfigError("file watching needs watchdog: pip install 'memmw[watch]'")

    monkeypatch.setattr(memory, "start_watching", no_watchdog)
    caplog.set_level(logging.INFO, logger="memmw.middleware")
    assert memory.config.sync.watch  # the default: the user asked for nothing
    MemoryMiddleware(memory, token_counter=TokenCounter(use_tiktoken=False))
    records = [r for r in caplog.records if "file watcher not started" in r.getMessage()]
    assert [r.levelno for r in records] == [logging.INFO]
    caplog.clear()
    MemoryMiddleware(memory, token_counter=TokenCounter(use_tiktoken=False), watch=True)
    records = [r for r in caplog.records if "file watcher not started" in r.getMessage()]
    assert [r.levelno for r in records] == [logging.WARNING]
