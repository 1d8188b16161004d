"""Acceptance scenarios through the custom-loop adapter with a scripted tool-calling model."""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memmw.adapters.custom_loop import NEW_SESSION_REPLY, MemoryAgent
from memmw.agent.prompts import visible_text
from memmw.config import FlushConfig, MemoryConfig
from memmw.errors import ConfigError
from memmw.hooks.registry import Event, HookContext
from memmw.middleware import MemoryMiddleware
from memmw.text.tokens import TokenCounter

from ..agent.noreply_strategies import chunked, mixed_replies, ordinary_sentences, silent_forms
from ..conftest import make_memory
from .conftest import (
    FILLER,
    NO_REPLY_FORMS,
    TODAY,
    Scenario,
    fixed_clock,
    make_workspace,
    scripted_reply,
)


def make_agent(sc: Scenario, **kwargs: Any) -> MemoryAgent:
    def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> Any:
        return scripted_reply(sc, messages)

    kwargs.setdefault("keep_messages", 2)
    return MemoryAgent(
        model, sc.memory, middleware=sc.middleware, system_prompt="You help.", **kwargs
    )


def test_recall_search_returns_snippets_and_prompt_has_section(scenario_factory) -> None:
    sc = scenario_factory()
    agent = make_agent(sc)
    answer = agent.chat("Which port does the gateway use?")
    assert answer is not None and "8443" in answer
    tool_msgs = [m for m in agent.messages if m["role"] == "tool"]
    payload = json.loads(tool_msgs[0]["content"])
    assert payload["results"][0]["path"] == "MEMORY.md"
    assert "Source: MEMORY.md#L" in payload["results"][0]["snippet"]
    system = sc.main_calls[0][0]
    assert system["role"] == "system" and "## Memory Recall" in system["content"]
    assert "SECRET-CURATED-FACT" in system["content"]  # direct session: MEMORY.md bootstrapped


def test_flush_runs_once_per_compaction_cycle(scenario_factory) -> None:
    sc = scenario_factory()
    agent = make_agent(sc)
    turns = 0
    while agent.compactions < 3 and turns < 60:
        agent.chat(f"turn {turns}: {FILLER}")
        turns += 1
    agent.chat("one more short message")
    assert agent.compactions == 3
    flushed_cycles = [e.data["outcome"].decision.cycle for e in sc.flush_events()]
    # Cycles 0, 1 and 2 each ended with exactly one flush before their compaction.
    assert flushed_cycles[:3] == [0, 1, 2]
    assert len(flushed_cycles) == len(set(flushed_cycles))
    order = [e.event.value for e in sc.events if e.event.value in ("flush", "compaction")]
    assert order[:6] == ["flush", "compaction"] * 3
    daily = (sc.workspace / "memory" / f"{TODAY}.md").read_text(encoding="utf-8")
    assert daily.startswith("# Daily\n\n- Deployed the billing service.\n")
    assert "flush note 1" in daily and "flush note 3" in daily
    state = json.loads((sc.state_dir / "agents" / "main" / "flush-state.json").read_text())
    entry = state["sessions"][agent.session.session_id]
    assert entry["cycle"] == 3


def test_no_reply_never_reaches_user(scenario_factory) -> None:
    sc = scenario_factory()
    agent = make_agent(sc)
    replies = [agent.chat(f"turn {i}: {FILLER}") for i in range(4)]
    assert sc.flush_events(), "the flush should have run"
    assert all(r is None or "NO_REPLY" not in r for r in replies)
    assert all("NO_REPLY" not in str(m.get("content")) for m in agent.messages)
    assert agent.chat("please stay quiet") is None


def test_new_writes_archive(scenario_factory) -> None:
    sc = scenario_factory()
    agent = make_agent(sc)
    agent.chat("Which port does the gateway use?")
    agent.chat("please stay quiet")
    agent.chat("Thanks, remember that I like tea")
    old_id = agent.session.session_id
    assert agent.chat("/new") == NEW_SESSION_REPLY
    archive = sc.workspace / "memory" / f"{TODAY}-1505.md"
    text = archive.read_text(encoding="utf-8")
    assert text.startswith("# Session: 2026-03-10 15:05:30 CET\n")
    assert "- **Session Key**: main" in text and f"- **Session ID**: {old_id}" in text
    assert "- **Source**: /new" in text
    assert 'user: "Which port does the gateway use?"' in text
    assert 'assistant: "From memory:' in text
    assert 'user: "Thanks, remember that I like tea"' in text
    assert "NO_REPLY" not in text and "/new" not in text.split("## Conversation Summary")[1]
    assert agent.session.session_id != old_id and agent.messages == []
    # The old transcript was rotated only after the archive read it.
    sessions = sc.state_dir / "agents" / "main" / "sessions"
    assert any(".reset." in p.name for p in sessions.iterdir())
    # A second /new on the same minute with content collides and gets -2.
    agent.chat("something else")
    agent.chat("/reset")
    assert (sc.workspace / "memory" / f"{TODAY}-1505-2.md").exists()


def test_empty_session_new_writes_no_file(scenario_factory) -> None:
    sc = scenario_factory()
    agent = make_agent(sc)
    agent.chat("/new")
    assert sorted(p.name for p in (sc.workspace / "memory").iterdir()) == [f"{TODAY}.md"]


def test_group_session_never_sees_memory_md(scenario_factory) -> None:
    sc = scenario_factory()
    agent = make_agent(sc, session_key="agent:main:telegram:group:42")
    agent.chat("Which port does the gateway use?")
    system = sc.main_calls[0][0]["content"]
    assert "SECRET-CURATED-FACT" not in system and "Name: Ada" not in system
    assert "### MEMORY.md" not in system
    assert "Do not mention file paths" in system  # citations auto => off in groups
    tool_text = next(m for m in agent.messages if m["role"] == "tool")["content"]
    # memory_search in a group never returns the private MEMORY.md (nor cites anything).
    assert "8443" not in tool_text and "SECRET-CURATED-FACT" not in tool_text
    payload = json.loads(tool_text)
    assert all(r["path"] != "MEMORY.md" and "citation" not in r for r in payload["results"])


def test_read_only_workspace_skips_flush(scenario_factory) -> None:
    sc = scenario_factory(read_only=True)
    agent = make_agent(sc)
    for i in range(6):
        agent.chat(f"turn {i}: {FILLER}")
    assert sc.flush_events() == []
    decisions = [e.data["decision"] for e in sc.events if e.event.value == "before_model"]
    assert any(d.reason == "read-only" for d in decisions)
    daily = (sc.workspace / "memory" / f"{TODAY}.md").read_text(encoding="utf-8")
    assert "flush note" not in daily


def test_failing_slug_falls_back_to_hhmm(scenario_factory) -> None:
    def broken_slug(text: str) -> str:
        raise RuntimeError("model down")

    sc = scenario_factory(slug_fn=broken_slug)
    agent = make_agent(sc)
    agent.chat("hello there")
    agent.chat("/new")
    assert (sc.workspace / "memory" / f"{TODAY}-1505.md").exists()


def test_llm_slug_is_cleaned(scenario_factory) -> None:
    sc = scenario_factory(slug_fn=lambda text: "  Gateway Port!! ")
    agent = make_agent(sc)
    agent.chat("hello there")
    agent.chat("/new")
    assert (sc.workspace / "memory" / f"{TODAY}-gateway-port.md").exists()


def test_overflow_error_flushes_then_retries(scenario_factory) -> None:
    sc = scenario_factory()
    calls = {"n": 0}

    class ContextOverflowError(Exception):
        pass

    def model(messages: list[dict[str, Any]], tools: Any = None) -> Any:
        system = messages[0]["content"]
        if "Memory flush before compaction" not in system:
            calls["n"] += 1
            if calls["n"] == 2:
                raise ContextOverflowError("prompt is too long")
        return scripted_reply(sc, messages)

    agent = MemoryAgent(model, sc.memory, middleware=sc.middleware, keep_messages=1)
    assert agent.chat("first") == "ack 1"
    assert agent.chat("second") is not None  # overflow -> flush -> compact -> retry
    assert [e.data["outcome"].decision.reason for e in sc.flush_events()] == ["context-overflow"]
    assert agent.compactions == 1


def test_example_runs_offline() -> None:
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "examples" / "custom_loop.py"
    out = subprocess.run(
        [sys.executable, "-W", "error", str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "studio.local" in out.stdout and "[flush] cycle 0" in out.stdout
    assert "archive: memory/" in out.stdout


# -- windows, streaming, privacy, startup context ---------------------------------------


def window_agent(tmp_path: Path, window: int, events: list[HookContext]) -> MemoryAgent:
    ws = make_workspace(tmp_path / f"w{window}")
    config = MemoryConfig(
        provider="none",
        user_timezone="Europe/Paris",
        flush=FlushConfig(context_window=window),  # default reserve 20000, soft 4000
    )
    memory = make_memory(workspace=ws, state_dir=tmp_path / f"w{window}" / "state", config=config)
    mw = MemoryMiddleware(memory, clock=fixed_clock, token_counter=TokenCounter(use_tiktoken=False))
    for event in Event:
        mw.hooks.on(event, events.append)
    sc = Scenario(workspace=ws, state_dir=tmp_path / "state", memory=memory, middleware=mw)

    def model(messages: list[dict[str, Any]], tools: Any = None) -> Any:
        return scripted_reply(sc, messages)

    try:
        return MemoryAgent(model, memory, middleware=mw, keep_messages=2)
    except Exception:
        memory.close()
        raise


@pytest.mark.parametrize("window", [16_000, 32_000, 200_000])
def test_windows_flush_once_per_cycle(tmp_path: Path, window: int) -> None:
    """16k used to get threshold 0 (never a flush) and compact on every message."""
    events: list[HookContext] = []
    agent = window_agent(tmp_path, window, events)
    chunk = "word " * (window // 12)  # ~1/12 of the window per message (estimate: 4 chars)
    turns = 0
    while agent.compactions < 3 and turns < 100:
        agent.chat(f"turn {turns}: {chunk}")
        turns += 1
    # Delta flushes (messages that arrived after the cycle's flush and are evicted) may
    # follow; the threshold flush runs once per cycle.
    full = [
        e
        for e in events
        if e.event is Event.COMPACTION
        or (e.event is Event.FLUSH and e.data["outcome"].decision.reason != "delta")
    ]
    assert [e.event.value for e in full] == ["flush", "compaction"] * 3
    cycles = [e.data["outcome"].decision.cycle for e in full if e.event is Event.FLUSH]
    assert cycles == [0, 1, 2]
    agent.middleware.memory.close()


@pytest.mark.parametrize("window", [16_000, 32_000, 200_000])
def test_the_loop_compacts_and_flushes_where_the_middleware_says(
    tmp_path: Path, window: int
) -> None:
    # One computation (MemoryMiddleware.flush_points) for the loop and the middleware.
    agent = window_agent(tmp_path, window, [])
    points = agent.middleware.flush_points()
    assert points.context_window == window
    assert (agent.compact_at_tokens, agent.flush_at_tokens) == (points.compact_at, points.flush_at)
    session = agent.session
    decision = agent.middleware.flush_decision(session, points.flush_at)
    assert decision.threshold == points.flush_at and decision.run
    agent.middleware.memory.close()


@pytest.mark.parametrize("window", [16_000, 20_000, 24_000])
def test_short_messages_never_compact_in_small_windows(tmp_path: Path, window: int) -> None:
    events: list[HookContext] = []
    agent = window_agent(tmp_path, window, events)
    for i in range(10):
        agent.chat(f"short message {i}")
    assert agent.compactions == 0 and not [e for e in events if e.event is Event.FLUSH]
    agent.middleware.memory.close()


def test_window_too_small_for_the_prompt_is_refused(tmp_path: Path) -> None:
    events: list[HookContext] = []
    with pytest.raises(ConfigError, match=r"context window 400 with reserve 200"):
        window_agent(tmp_path, 400, events)


def test_compaction_always_follows_a_flush_even_when_the_threshold_is_jumped(
    scenario_factory,
) -> None:
    sc = scenario_factory()
    agent = make_agent(sc)
    agent.chat("hello")
    agent.chat("x " * 20_000)  # one message from far below the flush threshold to past compaction
    agent.chat("and again")
    order = [e.event.value for e in sc.events if e.event.value in ("flush", "compaction")]
    assert order[:2] == ["flush", "compaction"]
    assert sc.flush_events()[0].data["outcome"].decision.reason in ("tokens", "pre-compaction")


@pytest.mark.parametrize(("text", "shown"), NO_REPLY_FORMS)
@pytest.mark.parametrize("streamed", [False, True])
def test_no_reply_forms(scenario_factory, text: str, shown: str | None, streamed: bool) -> None:
    sc = scenario_factory()

    def model(messages: list[dict[str, Any]], tools: Any = None) -> Any:
        if streamed:
            return iter([text[i : i + 2] for i in range(0, len(text), 2)])
        return text

    agent = MemoryAgent(model, sc.memory, middleware=sc.middleware)
    deltas: list[str] = []
    answer = agent.chat("hi", on_delta=deltas.append) if streamed else agent.chat("hi")
    assert answer == shown
    if streamed:
        assert "".join(deltas).strip() == (shown or "")
        assert shown is not None or deltas == []


@pytest.mark.parametrize("text", ["NO_REPLY", "“NO_REPLY”", " ", "NO_REPLY<|im_end|>"])
@pytest.mark.parametrize("streamed", [False, True])
def test_silent_text_beside_tool_calls_keeps_the_calls(
    scenario_factory, text: str, streamed: bool
) -> None:
    sc = scenario_factory()
    call = {"id": "c1", "name": "memory_search", "args": {"query": "gateway"}}

    def model(messages: list[dict[str, Any]], tools: Any = None) -> Any:
        if messages[-1]["role"] == "tool":
            return iter(["a", "ck"]) if streamed else "ack"
        if streamed:
            return iter([*(text[i : i + 2] for i in range(0, len(text), 2)), {"tool_calls": [call]}])
        return {"content": text, "tool_calls": [call]}

    agent = MemoryAgent(model, sc.memory, middleware=sc.middleware)
    deltas: list[str] = []
    answer = agent.chat("hi", on_delta=deltas.append) if streamed else agent.chat("hi")
    assert answer == "ack"
    if streamed:
        assert "".join(deltas) == "ack"
    with_calls = [m for m in agent.messages if m.get("tool_calls")]
    assert len(with_calls) == 1 and with_calls[0]["tool_calls"][0]["name"] == "memory_search"
    assert with_calls[0]["content"] == ""
    recorded = [r.content for r in sc.middleware.transcripts.read(agent.session.session_id)]
    assert not any("NO_REPLY" in str(c) or "<|" in str(c) for c in recorded)


def test_bootstrap_follows_every_edit(scenario_factory) -> None:
    """Issue 19: the loop picked up one MEMORY.md edit, then missed the next."""
    sc = scenario_factory()
    agent = make_agent(sc)
    memory_md = sc.workspace / "MEMORY.md"
    for version in range(1, 5):  # same size each time, written right before the turn
        memory_md.write_text(f"# Memory\n\n- fact version {version}\n", encoding="utf-8")
        agent.chat(f"hello {version}")
        system = sc.main_calls[-1][0]["content"]
        assert f"fact version {version}" in system
        assert [v for v in range(1, 5) if f"fact version {v}" in system] == [version]
    (sc.workspace / "USER.md").unlink()
    (sc.workspace / "memory" / f"{TODAY}.md").write_text("- a new daily line\n", encoding="utf-8")
    agent.chat("and now")
    system = sc.main_calls[-1][0]["content"]
    assert "Name: Ada" not in system and "a new daily line" in system


def test_a_window_the_bootstrap_fills_is_refused_up_front(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    (ws / "MEMORY.md").write_text("# Memory\n" + "- a long curated line\n" * 1200, encoding="utf-8")
    config = MemoryConfig(provider="none", flush=FlushConfig(context_window=8000))
    memory = make_memory(workspace=ws, state_dir=tmp_path / "state", config=config)
    mw = MemoryMiddleware(memory, clock=fixed_clock, token_counter=TokenCounter(use_tiktoken=False))
    try:
        with pytest.raises(ConfigError, match=r"context window 8000 with reserve 4000 .*bootstrap"):
            MemoryAgent(lambda messages, tools=None: "ack", memory, middleware=mw)
    finally:
        memory.close()


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    reply=st.one_of(silent_forms(), ordinary_sentences(), mixed_replies()),
    cuts=st.lists(st.integers(min_value=1, max_value=7), min_size=1, max_size=6),
)
def test_generated_replies_invoked_and_streamed(scenario_factory, reply: str, cuts: list[int]) -> None:
    """Both modes show exactly the final rule's text (nothing for a silent reply)."""
    sc = shared_scenario(scenario_factory)
    holder = {"reply": reply}

    def model(messages: list[dict[str, Any]], tools: Any = None) -> Any:
        return holder["reply"]

    def streamed(messages: list[dict[str, Any]], tools: Any = None) -> Any:
        return iter(list(chunked(holder["reply"], cuts)))

    expected = visible_text(reply)
    agent = MemoryAgent(model, sc.memory, middleware=sc.middleware)
    assert agent.chat("hi") == expected
    deltas: list[str] = []
    agent = MemoryAgent(streamed, sc.memory, middleware=sc.middleware)
    assert agent.chat("hi", on_delta=deltas.append) == expected
    assert "".join(deltas) == (expected or "") and all(deltas)


def shared_scenario(factory: Any) -> Scenario:
    """One scenario for all examples of a property test (the factory is per test)."""
    if not hasattr(factory, "shared"):
        factory.shared = factory()
    return factory.shared  # type: ignore[no-any-return]


def test_group_prompt_has_no_private_line(scenario_factory) -> None:
    """A DM archive said "my bank PIN is 1234"; it appeared in a group prompt."""
    sc = scenario_factory()
    private = make_agent(sc, session_key="agent:main:telegram:dm:7")
    private.chat("my bank PIN is 1234")
    private.chat("/new")
    group = make_agent(sc, session_key="agent:main:telegram:group:42")
    group.chat("hello group")
    system = sc.main_calls[-1][0]["content"]
    private_files = [sc.workspace / "MEMORY.md", sc.workspace / "USER.md"]
    private_files += sorted((sc.workspace / "memory").glob("*.md"))
    lines = {
        ln.strip()
        for p in private_files
        for ln in p.read_text(encoding="utf-8").splitlines()
        if len(ln.strip()) > 3 and not ln.startswith("# ")  # "# Memory" is in "## Memory Recall"
    }
    assert "1234" not in system
    assert [ln for ln in lines if ln in system] == []


def test_bare_new_gives_startup_context_private_only(scenario_factory) -> None:
    sc = scenario_factory()
    agent = make_agent(sc)
    agent.chat("hello")
    agent.chat("/new")
    agent.chat("what were we doing?")
    system = sc.main_calls[-1][0]["content"]
    assert "## Recent daily memory (startup context)" in system
    assert "untrusted daily memory" in system and "Deployed the billing service" in system
    assert system.count("Deployed the billing service") == 1  # not in the bootstrap too
    agent.chat("/new with an argument")
    agent.chat("next")
    assert "startup context" not in sc.main_calls[-1][0]["content"]
    group = make_agent(sc, session_key="agent:main:slack:channel:x")
    group.chat("hi")
    group.chat("/reset")
    group.chat("hi again")
    assert "Deployed the billing service" not in sc.main_calls[-1][0]["content"]


def test_llm_slug_from_the_agents_model(scenario_factory) -> None:
    sc = scenario_factory()
    sc.memory.config = sc.memory.config.replace(
        session_memory=dataclasses.replace(sc.memory.config.session_memory, llm_slug=True)
    )
    sc.middleware.config = sc.memory.config
    asked: list[str] = []

    def model(messages: list[dict[str, Any]], tools: Any = None) -> Any:
        if "slug" in str(messages[0]["content"]) and "file name" in str(messages[0]["content"]):
            asked.append(str(messages[1]["content"]))
            return "Billing Deploy."
        return scripted_reply(sc, messages)

    agent = MemoryAgent(model, sc.memory, middleware=sc.middleware)
    agent.chat("we deployed billing")
    agent.chat("/new")
    assert (sc.workspace / "memory" / f"{TODAY}-billing-deploy.md").exists()
    assert asked and 'user: "we deployed billing"' in asked[0]


def test_llm_slug_timeout_falls_back_to_hhmm(scenario_factory) -> None:
    sc = scenario_factory()
    sc.memory.config = sc.memory.config.replace(
        session_memory=dataclasses.replace(
            sc.memory.config.session_memory, llm_slug=True, slug_timeout_s=0.2
        )
    )
    sc.middleware.config = sc.memory.config
    release = threading.Event()

    def model(messages: list[dict[str, Any]], tools: Any = None) -> Any:
        if "file name" in str(messages[0]["content"]):
            release.wait(5)
            return "too-late"
        return scripted_reply(sc, messages)

    agent = MemoryAgent(model, sc.memory, middleware=sc.middleware)
    agent.chat("hello")
    agent.chat("/new")
    release.set()
    assert (sc.workspace / "memory" / f"{TODAY}-1505.md").exists()
