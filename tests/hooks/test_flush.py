"""Flush decision, the persisted per-cycle marker, and the silent flush turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memmw.agent.tools import MemoryTool
from memmw.config import FlushConfig
from memmw.hooks.flush import (
    FlushDecision,
    FlushStateStore,
    decide_flush,
    effective_reserve,
    flush_threshold,
    run_flush_turn,
    run_flush_with_retry,
    soft_threshold,
    threshold_below_trigger,
)

CFG = FlushConfig(context_window=10_000, reserve_tokens_floor=2_000, soft_threshold_tokens=1_000)


def test_threshold_formula() -> None:
    assert flush_threshold(CFG) == 7_000
    assert flush_threshold(CFG, context_window=200_000) == 197_000
    # Defaults (reserve 20000, soft 4000): the original's numbers from 40k up ...
    assert flush_threshold(FlushConfig()) == 176_000
    assert flush_threshold(FlushConfig(), context_window=40_000) == 16_000
    # ... and below, the reserve is at most half the window and soft half the rest, where
    # the original gave 32k a threshold of 8000 and 16k (or less) 0: never a flush.
    assert flush_threshold(FlushConfig(), context_window=32_000) == 12_000
    assert flush_threshold(FlushConfig(), context_window=16_000) == 4_000
    assert flush_threshold(FlushConfig(), context_window=1000) == 250
    assert effective_reserve(FlushConfig(), 16_000) == 8_000
    assert effective_reserve(FlushConfig(), 200_000) == 20_000


def test_soft_threshold_clamp_and_trigger_derived_threshold() -> None:
    assert soft_threshold(FlushConfig(), 6_000) == 3_000
    assert soft_threshold(FlushConfig(), 100_000) == 4_000
    assert threshold_below_trigger(FlushConfig(), 150_000) == 146_000
    assert threshold_below_trigger(FlushConfig(), 3_000) == 1_500
    assert threshold_below_trigger(FlushConfig(), 1) == 1


def decide(**kw: Any) -> FlushDecision:
    args: dict[str, Any] = {"tokens": 7_000, "cycle": 0, "flushed_cycle": None}
    args.update(kw)
    return decide_flush(CFG, **args)


def test_fires_at_threshold_even_with_zero_counters() -> None:
    d = decide()
    assert d.run and d.reason == "tokens" and d.threshold == 7_000 and d.cycle == 0
    assert decide(tokens=6_999).reason == "below-threshold"


@pytest.mark.parametrize(
    ("kw", "reason"),
    [
        ({"flushed_cycle": 0}, "already-flushed"),
        ({"read_only": True}, "read-only"),
        ({"heartbeat": True}, "heartbeat"),
    ],
)
def test_skips(kw: dict[str, Any], reason: str) -> None:
    d = decide(**kw)
    assert not d.run and d.reason == reason


def test_disabled_and_no_threshold() -> None:
    assert (
        decide_flush(FlushConfig(enabled=False), tokens=10**9, cycle=0, flushed_cycle=None).reason
        == "disabled"
    )
    tiny = FlushConfig(context_window=100, force_flush_transcript_bytes=0)
    assert decide_flush(tiny, tokens=10**9, cycle=0, flushed_cycle=None).reason == "tokens"
    none = decide_flush(tiny, tokens=10**9, cycle=0, flushed_cycle=None, threshold=0)
    assert none.reason == "no-threshold"


def test_transcript_bytes_trigger() -> None:
    cfg = FlushConfig(force_flush_transcript_bytes=1000)
    d = decide_flush(cfg, tokens=10, cycle=2, flushed_cycle=1, transcript_bytes=1000)
    assert d.run and d.reason == "transcript-bytes"
    off = FlushConfig(force_flush_transcript_bytes=0)
    assert not decide_flush(off, tokens=10, cycle=0, flushed_cycle=None, transcript_bytes=10**9).run


def test_every_cycle_flushes_exactly_once(tmp_path: Path) -> None:
    """Upstream flushed every other cycle (#12590) or never at 0/0 (#47143)."""
    store = FlushStateStore(tmp_path, "main")
    flushed: list[int] = []
    for _cycle in range(10):
        for _turn in range(5):  # several turns above the threshold in each cycle
            state = store.load("s1")
            d = decide_flush(
                CFG, tokens=9_000, cycle=state.cycle, flushed_cycle=state.flushed_cycle
            )
            if d.run:
                flushed.append(d.cycle)
                store.mark_flushed("s1", d.cycle)
        store.record_compaction("s1")
    assert flushed == list(range(10))


def test_marker_survives_restart_and_compaction_markers_dedupe(tmp_path: Path) -> None:
    FlushStateStore(tmp_path, "main").mark_flushed("s1", 0)
    again = FlushStateStore(tmp_path, "main")  # a new process
    state = again.load("s1")
    assert state.flushed_cycle == 0 and state.flushed_at and state.flush_status == "ok"
    assert not decide_flush(CFG, tokens=9_000, cycle=state.cycle, flushed_cycle=0).run
    assert again.record_compaction("s1", marker="sum-1").cycle == 1
    assert again.record_compaction("s1", marker="sum-1").cycle == 1  # same summary
    assert again.record_compaction("s1", marker="sum-2").cycle == 2
    assert FlushStateStore(tmp_path, "main").load("s1").cycle == 2
    assert again.load("other").cycle == 0
    again.forget("s1")
    assert again.load("s1").flushed_cycle is None


def test_corrupt_state_file_starts_fresh(tmp_path: Path) -> None:
    store = FlushStateStore(tmp_path, "main")
    store.path.parent.mkdir(parents=True)
    store.path.write_text("{not json")
    assert store.load("s1").cycle == 0
    store.mark_flushed("s1", 0)
    assert store.load("s1").flushed_cycle == 0


def _append_tool(log: list[dict[str, Any]]) -> MemoryTool:
    def handler(args: Any) -> dict[str, Any]:
        log.append(dict(args))
        return {"status": "ok", "path": "memory/2026-03-10.md", "appended": 3}

    return MemoryTool("memory_append", "d", {"type": "object"}, handler)


def test_flush_turn_runs_tools_and_detects_silence() -> None:
    writes: list[dict[str, Any]] = []
    seen: list[list[dict[str, Any]]] = []

    def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        seen.append(messages)
        assert [t["function"]["name"] for t in tools] == ["memory_append"]
        if messages[-1]["role"] == "tool":
            return "NO_REPLY"
        return {
            "content": "",
            "tool_calls": [
                {"id": "1", "name": "memory_append", "args": {"content": "- x"}},
                {"id": "2", "name": "write_file", "args": {}},
            ],
        }

    conversation = [{"role": "system", "content": "orig"}, {"role": "user", "content": "hi"}]
    result = run_flush_turn(
        model,
        conversation,
        system_prompt="FLUSH SYS",
        user_prompt="FLUSH USER",
        tools=[_append_tool(writes)],
    )
    assert result.silent and result.writes == ("memory/2026-03-10.md",)
    assert result.tool_calls == ("memory_append", "write_file") and result.steps == 2
    first = seen[0]
    assert first[0] == {"role": "system", "content": "FLUSH SYS"}
    assert first[1]["content"] == "hi" and first[-1]["content"] == "FLUSH USER"
    assert "not available" in seen[1][-1]["content"]
    assert conversation == [
        {"role": "system", "content": "orig"},
        {"role": "user", "content": "hi"},
    ]


def test_retry_once_then_give_up_without_raising() -> None:
    calls = {"n": 0}

    def flaky(messages: Any) -> str:
        calls["n"] += 1
        if calls["n"] == 1:
            raise TimeoutError("slow")
        return "NO_REPLY"

    d = FlushDecision(run=True, reason="tokens")
    ok = run_flush_with_retry(flaky, [], decision=d, system_prompt="s", user_prompt="u", tools=[])
    assert ok.ok and ok.attempts == 2 and ok.result is not None and ok.result.silent

    def down(messages: Any) -> str:
        raise ConnectionError("down")

    bad = run_flush_with_retry(down, [], decision=d, system_prompt="s", user_prompt="u", tools=[])
    assert bad.ran and not bad.ok and bad.attempts == 2 and "ConnectionError" in (bad.error or "")
