"""Every message a compaction removes was seen by a flush of its cycle, in both adapters.

The rigs of ``benchmarks/flush_coverage.py`` drive the custom loop (``MemoryAgent``) and
LangChain's ``create_agent`` with the README wiring, with scripted models: every message
carries a unique label, the flush model records the labels each flush turn was shown, and
an eviction is what a compaction removes (the custom loop's summarizer gets exactly those;
in LangChain a label that left the agent state). A hypothesis state machine generates
conversations: message sizes, pastes, tool calls, invoke/stream/async, streaming models,
restarts at any point (new objects over the same state folder and checkpointer) and flush
models that fail.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import shutil
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

ROOT = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "bench_flush_coverage", ROOT / "benchmarks" / "flush_coverage.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


fc = _load()


def chat(rig: Any, tokens: int = 40, *, mode: str | None = None, kind: str = "chat") -> None:
    label = rig.label("u")
    if kind == "paste":
        text = f"{label} paste: {fc.words(__import__('random').Random(tokens), tokens)}"
    elif kind == "tool":
        text = f"{label} [tool] which port does the gateway use?"
    else:
        text = f"{label} {fc.words(__import__('random').Random(tokens), tokens)}"
    if mode is None:
        rig.send(text)
    else:
        rig.send(text, mode=mode)


def daily_notes(rig: Any) -> str:
    return "".join(p.read_text(encoding="utf-8") for p in (rig.ws / "memory").glob("*.md"))


# -- the listed cases ---------------------------------------------------------------------


def test_chatty_custom_loop_evicts_nothing_a_flush_did_not_see(tmp_path: Path) -> None:
    """Messages arriving between the flush and the compaction point used to be evicted
    unsaved (13 of 86 in the issue)."""
    rig = fc.LoopRig(tmp_path, keep=4)
    try:
        for i in range(40):
            chat(rig, 20 + (i * 13) % 41)
        assert rig.stats.compactions >= 2
        assert rig.stats.evicted > 0 and rig.stats.evicted_unseen == 0
        assert rig.stats.delta_flushes >= 1
    finally:
        rig.close()


def test_streaming_model_flush_is_read_to_the_end(tmp_path: Path) -> None:
    """A model returning an iterator: the flush used to write nothing (the iterator's repr
    was its "reply") and still count as done."""
    rig = fc.LoopRig(tmp_path, stream=True, keep=4)
    try:
        for i in range(30):
            chat(rig, 20 + (i * 13) % 41, mode="plain" if i % 2 else "delta")
        assert rig.stats.compactions >= 1 and rig.stats.evicted_unseen == 0
        notes = daily_notes(rig)
        assert "flush note" in notes and "iterator" not in notes
        outcomes = rig.agent.flushes
        assert outcomes and all(o.result is not None and o.result.writes for o in outcomes)
        assert all("iterator object" not in (o.result.reply if o.result else "") for o in outcomes)
    finally:
        rig.close()


def test_custom_loop_restart_after_the_flush_keeps_the_watermark(tmp_path: Path) -> None:
    """Restarted after the cycle's flush: the first compaction used to evict what arrived
    since the restart unsaved (the state said "flushed this cycle")."""
    rig = fc.LoopRig(tmp_path, keep=4)
    try:
        while rig.stats.flushes == 0:
            chat(rig, 60)
        assert rig.stats.compactions == 0
        rig.restart()
        while rig.stats.compactions == 0:
            chat(rig, 60)
        assert rig.stats.evicted > 0 and rig.stats.evicted_unseen == 0
    finally:
        rig.close()


def test_chatty_langchain_readme_wiring_evicts_nothing_a_flush_did_not_see(
    tmp_path: Path,
) -> None:
    """The README wiring (memmw owns the summarizer): 19 unsaved messages per summary in
    the issue."""
    rig = fc.LangChainRig(tmp_path, keep=2)
    try:
        for i in range(30):
            chat(rig, 20 + (i * 13) % 41, mode="invoke")
        assert rig.stats.compactions >= 2
        assert rig.stats.evicted > 0 and rig.stats.evicted_unseen == 0
        assert rig.stats.failed_turns == 0
    finally:
        rig.close()


def test_langchain_restart_with_a_window_just_above_the_trigger(tmp_path: Path) -> None:
    """Window 300 tokens above the trigger, restart, then a turn past the trigger: the flush
    used to overflow twice, the user's turn failed and the next summary evicted unsaved."""
    rig = fc.LangChainRig(tmp_path, keep=2, window_margin=300)
    try:
        for _ in range(4):
            chat(rig, 60, mode="invoke")  # below the flush threshold
        assert rig.stats.flushes == 0
        rig.restart()
        chat(rig, 1400, kind="paste", mode="invoke")  # past the trigger and the window
        chat(rig, 40, mode="invoke")
        chat(rig, 40, mode="invoke")
        assert rig.stats.failed_turns == 0
        assert rig.stats.compactions >= 1 and rig.stats.evicted > 0
        assert rig.stats.evicted_unseen == 0
        assert rig.stats.failed_flushes == 0
    finally:
        rig.close()


def test_an_eviction_after_a_failed_flush_is_never_silent(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rig = fc.LoopRig(tmp_path, keep=4, telemetry=True)
    rig.flush_fail = True
    try:
        with caplog.at_level(logging.ERROR, logger="memmw.middleware"):
            for i in range(30):
                chat(rig, 20 + (i * 13) % 41)
        assert rig.stats.failed_turns == 0  # the user's turns never fail
        assert rig.stats.compactions >= 1 and rig.stats.evicted_unseen > 0
        assert any("failed to save them" in r.message for r in caplog.records)
        status = rig.memory.status().details["flush"]
        assert status["unsavedEvictions"] >= rig.stats.evicted_unseen
        assert status["sessions"] == [rig.agent.session.session_id]
        telemetry = (rig.state / "telemetry" / "main.jsonl").read_text(encoding="utf-8")
        events = [json.loads(line)["event"] for line in telemetry.splitlines()]
        assert "flush_unsaved_eviction" in events
    finally:
        rig.close()


# -- the invariant, over generated conversations -------------------------------------------


class _Machine(RuleBasedStateMachine):
    """Shared rules; subclasses choose the adapter and its modes."""

    modes: tuple[str, ...] = ()

    def __init__(self) -> None:
        super().__init__()
        shm = Path("/dev/shm")  # tmpfs where there is one: fsyncs cost nothing
        self.tmp = Path(tempfile.mkdtemp(prefix="flush-sm-", dir=shm if shm.is_dir() else None))
        self.rig: Any = None
        self.failing = False

    def make_rig(self, **kwargs: Any) -> Any:
        raise NotImplementedError

    @precondition(lambda self: self.rig is not None)
    @rule(tokens=st.integers(20, 60), mode=st.integers(0, 9))
    def chatty(self, tokens: int, mode: int) -> None:
        chat(self.rig, tokens, mode=self.modes[mode % len(self.modes)])

    @precondition(lambda self: self.rig is not None)
    @rule(tokens=st.integers(150, 500), mode=st.integers(0, 9))
    def paste(self, tokens: int, mode: int) -> None:
        chat(self.rig, tokens, kind="paste", mode=self.modes[mode % len(self.modes)])

    @precondition(lambda self: self.rig is not None)
    @rule(mode=st.integers(0, 9))
    def tool_call(self, mode: int) -> None:
        chat(self.rig, kind="tool", mode=self.modes[mode % len(self.modes)])

    @precondition(lambda self: self.rig is not None)
    @rule()
    def restart(self) -> None:
        self.rig.restart()

    @precondition(lambda self: self.rig is not None)
    @rule(fail=st.booleans())
    def flush_model_health(self, fail: bool) -> None:
        self.rig.flush_fail = fail
        self.failing = self.failing or fail

    @invariant()
    def every_evicted_message_was_seen_by_a_flush(self) -> None:
        if self.rig is None:
            return
        stats = self.rig.stats
        assert stats.failed_turns == 0
        if not self.failing:
            assert stats.evicted_unseen == 0, stats.unseen_examples
        else:  # a flush failed: what it could not save is counted, never silent
            recorded = sum(
                s.get("unsavedEvictions", 0)
                for s in self.rig.core.flush_state._read_all().values()
            )
            assert recorded >= stats.evicted_unseen

    def teardown(self) -> None:
        if self.rig is not None:
            self.rig.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


class LoopMachine(_Machine):
    modes = ("plain", "delta")

    @precondition(lambda self: self.rig is None)
    @rule(stream=st.booleans(), keep=st.sampled_from([1, 2, 4, 6]))
    def start(self, stream: bool, keep: int) -> None:
        self.rig = fc.LoopRig(self.tmp, stream=stream, keep=keep)


class LangChainMachine(_Machine):
    modes = ("invoke", "stream", "ainvoke")

    @precondition(lambda self: self.rig is None)
    @rule(keep=st.sampled_from([2, 4, 8]), margin=st.sampled_from([None, 300]))
    def start(self, keep: int, margin: int | None) -> None:
        self.rig = fc.LangChainRig(self.tmp, keep=keep, window_margin=margin)


LoopMachine.TestCase.settings = settings(
    max_examples=30, stateful_step_count=30, deadline=None
)
LangChainMachine.TestCase.settings = settings(
    max_examples=12, stateful_step_count=25, deadline=None
)
TestLoopFlushCoverage = LoopMachine.TestCase
TestLangChainFlushCoverage = pytest.mark.optional(LangChainMachine.TestCase)
