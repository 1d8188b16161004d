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
    flush_points,
    flush_threshold,
    run_flush_chunked,
    run_flush_turn,
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
    kw: dict[str, Any] = {
        "decision": d,
        "system_prompt": "s",
        "user_prompt": "u",
        "tools": [],
        "budget": 1000,
        "count": lambda m: 1,
        "is_overflow": lambda exc: False,
    }
    ok = run_flush_chunked(flaky, [], [], **kw)
    assert ok.ok and ok.attempts == 2 and ok.result is not None and ok.result.silent

    def down(messages: Any) -> str:
        raise ConnectionError("down")

    bad = run_flush_chunked(down, [], [], **kw)
    assert bad.ran and not bad.ok and bad.attempts == 2 and "ConnectionError" in (bad.error or "")


def test_flush_points_window_reserve_compaction_and_threshold() -> None:
    points = flush_points(FlushConfig(), context_window=32_000)
    assert (points.context_window, points.reserve, points.compact_at, points.flush_at) == (
        32_000,
        16_000,
        16_000,
        12_000,
    )
    assert flush_points(FlushConfig()).context_window == 200_000
    # A summarizer's own trigger is the compaction point; the flush fires before it.
    by_trigger = flush_points(FlushConfig(), compact_at=150_000)
    assert (by_trigger.compact_at, by_trigger.flush_at) == (150_000, 146_000)
    for window in (1, 2, 1000, 16_000, 40_000, 200_000):
        assert flush_points(FlushConfig(), context_window=window).flush_at == flush_threshold(
            FlushConfig(), context_window=window
        )


# -- the watermark: message keys, delta flush conversations, turns that fit ---------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from memmw.hooks.flush import (  # noqa: E402
    SessionFlushState,
    fit_message,
    message_keys,
    plan_flush_chunks,
    with_tool_pairs,
)


def _count(message: Any) -> int:
    return len(str(message.get("content", ""))) // 4 + 4


@st.composite
def conversations(draw: Any) -> list[dict[str, Any]]:
    """Chat messages with tool calls answered right after, like a real agent loop."""
    out: list[dict[str, Any]] = []
    for n in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["user", "assistant", "call"]))
        text = draw(st.sampled_from(["ok", "yes", "x " * 50, "the gateway port"]))
        if kind == "call":
            ids = [f"c{n}-{i}" for i in range(draw(st.integers(1, 2)))]
            out.append({
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": i, "name": "memory_search", "args": {}} for i in ids],
            })
            out.extend({"role": "tool", "tool_call_id": i, "content": text} for i in ids)
        else:
            out.append({"role": kind, "content": text})
    return out


@settings(max_examples=150, deadline=None)
@given(conversations(), conversations())
def test_message_keys_are_stable_prefix_keys_and_tell_repeats_apart(
    head: list[dict[str, Any]], tail: list[dict[str, Any]]
) -> None:
    keys = message_keys(head + tail)
    assert keys[: len(head)] == message_keys(head)  # a restart recomputes the same keys
    assert message_keys([dict(m) for m in head + tail]) == keys
    assert message_keys([{"role": "user", "content": "x", "id": "m1"}]) == ["id:m1"]


def test_identical_messages_in_different_places_get_different_keys() -> None:
    msgs = [
        {"role": "user", "content": "ok"},
        {"role": "assistant", "content": "first"},
        {"role": "user", "content": "ok"},
    ]
    keys = message_keys(msgs)
    assert keys[0] != keys[2]


@settings(max_examples=150, deadline=None)
@given(conversations(), st.data())
def test_a_delta_conversation_keeps_every_tool_call_with_its_results(
    msgs: list[dict[str, Any]], data: Any
) -> None:
    chosen = data.draw(st.sets(st.integers(0, max(0, len(msgs) - 1))) if msgs else st.just(set()))
    picked = with_tool_pairs(msgs, chosen)
    assert set(chosen) <= set(picked) and picked == sorted(set(picked))
    in_pick = [msgs[i] for i in picked]
    call_ids = {c["id"] for m in in_pick for c in m.get("tool_calls") or ()}
    result_ids = {m["tool_call_id"] for m in in_pick if m["role"] == "tool"}
    assert call_ids == result_ids


@settings(max_examples=150, deadline=None)
@given(conversations(), st.integers(10, 200))
def test_flush_turns_cover_every_message_once_and_fit_the_budget(
    msgs: list[dict[str, Any]], budget: int
) -> None:
    runs = plan_flush_chunks(msgs, budget, _count)
    assert [i for run in runs for i in run] == list(range(len(msgs)))
    for run in runs:
        size = sum(_count(msgs[i]) for i in run)
        starts_with_result = msgs[run[0]]["role"] == "tool"
        assert size <= budget or len(run) == 1 or starts_with_result or any(
            msgs[i]["role"] == "tool" for i in run[1:]
        )
    for run in runs[1:]:
        assert msgs[run[0]]["role"] != "tool" or msgs[run[0] - 1]["role"] == "tool"
    big = fit_message({"role": "user", "content": "word " * 2000}, 100, _count)
    assert _count(big) <= 100 and "trimmed to fit the flush window" in big["content"]


class ContextOverflowError(Exception):
    pass


def test_a_flush_that_overflows_is_split_until_it_fits() -> None:
    shown: list[list[str]] = []

    def model(messages: list[dict[str, Any]], tools: Any = None) -> Any:
        body = messages[1:-1]
        if sum(_count(m) for m in body) > 120:
            raise ContextOverflowError("prompt is too long")
        if messages[-1]["role"] == "tool":
            return "NO_REPLY"
        shown.append([m["content"] for m in body])
        return {"content": "", "tool_calls": [{"id": "w", "name": "memory_append", "args": {}}]}

    msgs = [{"role": "user", "content": f"m{i} " + "y" * 200} for i in range(6)]
    keys = message_keys(msgs)
    writes: list[dict[str, Any]] = []
    outcome = run_flush_chunked(
        model,
        msgs,
        keys,
        decision=FlushDecision(run=True, reason="delta"),
        system_prompt="s",
        user_prompt="u",
        tools=[_append_tool(writes)],
        budget=10_000,  # the estimate says it fits; the model says it does not
        count=_count,
        is_overflow=lambda exc: isinstance(exc, ContextOverflowError),
    )
    assert outcome.ok and set(outcome.seen) == set(keys) and not outcome.missed
    assert outcome.turns > 1 and sorted(c for turn in shown for c in turn) == sorted(
        m["content"] for m in msgs
    )


def test_a_failed_flush_reports_what_it_missed() -> None:
    def down(messages: Any, tools: Any = None) -> Any:
        raise ConnectionError("down")

    msgs = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    keys = message_keys(msgs)
    outcome = run_flush_chunked(
        down,
        msgs,
        keys,
        decision=FlushDecision(run=True, reason="delta"),
        system_prompt="s",
        user_prompt="u",
        tools=[],
        budget=1000,
        count=_count,
        is_overflow=lambda exc: False,
    )
    assert outcome.ran and not outcome.ok and set(outcome.missed) == set(keys)
    assert outcome.seen == () and "ConnectionError" in (outcome.error or "")


def test_watermark_and_unsaved_count_survive_a_restart(tmp_path: Path) -> None:
    store = FlushStateStore(tmp_path, "main")
    store.mark_flushed("s1", 0, seen=["h:a", "h:b"])
    store.mark_flushed("s1", 0, seen=["h:b", "h:c"])
    store.record_unsaved("s1", 3)
    again = FlushStateStore(tmp_path, "main").load("s1")
    assert again.seen == ("h:a", "h:b", "h:c") and again.unsaved_evictions == 3
    assert again.last_unsaved_at is not None
    assert SessionFlushState.from_dict({"seen": "bad", "unsavedEvictions": -1}).seen == ()
