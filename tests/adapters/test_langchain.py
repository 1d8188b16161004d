"""Acceptance scenarios through create_agent with a scripted tool-calling fake chat model."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from .conftest import FILLER, TODAY, Scenario, scripted_reply

pytestmark = pytest.mark.optional

try:
    from langchain.agents import create_agent
    from langchain.agents.middleware import SummarizationMiddleware
    from langchain_core.exceptions import ContextOverflowError
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langgraph.checkpoint.memory import InMemorySaver

    from memmw.adapters.langchain import (
        NEW_SESSION_REPLY,
        LangChainMemoryMiddleware,
        dict_to_message,
        message_to_dict,
    )

    LANGCHAIN_ERROR: str | None = None
except ImportError as exc:  # pragma: no cover - only without the extra
    LANGCHAIN_ERROR = str(exc)


@pytest.fixture(autouse=True)
def _require_langchain() -> None:
    if LANGCHAIN_ERROR is not None:
        pytest.fail(
            "these tests need the langchain extra (pip install 'memmw[langchain]'): "
            + LANGCHAIN_ERROR
        )


if LANGCHAIN_ERROR is None:

    class ScriptedChatModel(GenericFakeChatModel):
        """GenericFakeChatModel driven by a Python policy, with bind_tools."""

        policy: Any = None

        def _generate(
            self,
            messages: list[BaseMessage],
            stop: list[str] | None = None,
            run_manager: Any = None,
            **kwargs: Any,
        ) -> ChatResult:
            reply = self.policy([message_to_dict(m) for m in messages])
            if isinstance(reply, BaseMessage):
                message = reply
            else:
                message = dict_to_message({"role": "assistant", **reply})
            return ChatResult(generations=[ChatGeneration(message=message)])

        def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
            return self


def build(sc: Scenario, *, summarize: bool = True, trigger: int = 2200, **kwargs: Any) -> Any:
    model = ScriptedChatModel(messages=iter(()), policy=lambda msgs: scripted_reply(sc, msgs))
    mem_mw = LangChainMemoryMiddleware(middleware=sc.middleware, **kwargs)
    middleware: list[Any] = [mem_mw]
    if summarize:
        summarizer = ScriptedChatModel(
            messages=iter(()), policy=lambda msgs: {"content": "They chatted about filler."}
        )
        middleware.append(
            SummarizationMiddleware(summarizer, trigger=("tokens", trigger), keep=("messages", 2))
        )
    agent = create_agent(
        model, middleware=middleware, system_prompt="You help.", checkpointer=InMemorySaver()
    )
    return agent, mem_mw


def ask(agent: Any, text: str, thread: str = "t1") -> dict[str, Any]:
    cfg = {"configurable": {"thread_id": thread}}
    return agent.invoke({"messages": [HumanMessage(text)]}, cfg)  # type: ignore[no-any-return]


def test_recall_tool_and_prompt_section(scenario_factory) -> None:
    sc = scenario_factory()
    agent, _ = build(sc, summarize=False)
    result = ask(agent, "Which port does the gateway use?")
    final = result["messages"][-1]
    assert isinstance(final, AIMessage) and "8443" in final.text
    tool_msg = next(m for m in result["messages"] if m.type == "tool")
    assert tool_msg.artifact["results"][0]["path"] == "MEMORY.md"
    assert json.loads(tool_msg.content)["results"][0]["citation"].startswith("MEMORY.md#L")
    system = sc.main_calls[0][0]
    assert system["role"] == "system" and "## Memory Recall" in str(system["content"])
    assert "You help." in str(system["content"])
    assert "SECRET-CURATED-FACT" in str(system["content"])


def test_async_invoke_injects_prompt(scenario_factory) -> None:
    sc = scenario_factory()
    agent, _ = build(sc, summarize=False)
    cfg = {"configurable": {"thread_id": "a1"}}
    result = asyncio.run(agent.ainvoke({"messages": [HumanMessage("hello")]}, cfg))
    assert result["messages"][-1].text == "ack 1"
    assert "## Memory Recall" in str(sc.main_calls[0][0]["content"])


def test_flush_once_per_cycle_over_three_compactions(scenario_factory) -> None:
    sc = scenario_factory()
    agent, _ = build(sc)
    state: dict[str, Any] = {}
    turns = 0
    while state.get("memmw_compactions", 0) < 3 and turns < 60:
        state = ask(agent, f"turn {turns}: {FILLER}")
        turns += 1
    ask(agent, "short")
    compactions = sc.compaction_events()
    assert len(compactions) == 3
    flushed = [e.data["outcome"].decision.cycle for e in sc.flush_events()]
    assert flushed[:3] == [0, 1, 2] and len(flushed) == len(set(flushed))
    order = [e.event.value for e in sc.events if e.event.value in ("flush", "compaction")]
    assert order[:6] == ["flush", "compaction"] * 3
    daily = (sc.workspace / "memory" / f"{TODAY}.md").read_text(encoding="utf-8")
    assert "flush note 1" in daily and "flush note 3" in daily
    # The flush turn's messages never enter the graph state.
    final = ask(agent, "after")["messages"]
    assert not any("Memory flush" in str(m.content) for m in final)


def test_no_reply_never_reaches_user(scenario_factory) -> None:
    sc = scenario_factory()
    agent, _ = build(sc)
    outputs = [ask(agent, f"turn {i}: {FILLER}") for i in range(4)]
    assert sc.flush_events() and all(e.data["outcome"].result.silent for e in sc.flush_events())
    for out in outputs:
        assert not any("NO_REPLY" in str(m.content) for m in out["messages"])
    quiet = ask(agent, "please stay quiet")["messages"]
    assert not any(isinstance(m, AIMessage) and "NO_REPLY" in m.text for m in quiet)


def test_new_message_writes_archive(scenario_factory) -> None:
    sc = scenario_factory()
    agent, mw = build(sc, summarize=False)
    ask(agent, "Which port does the gateway use?")
    ask(agent, "please stay quiet")
    ask(agent, "Thanks, remember that I like tea")
    old = mw.session_for("t1").session_id
    result = ask(agent, "/new")
    assert [m.text for m in result["messages"]] == [NEW_SESSION_REPLY]
    text = (sc.workspace / "memory" / f"{TODAY}-1505.md").read_text(encoding="utf-8")
    assert "- **Session Key**: agent:main:t1" in text and f"- **Session ID**: {old}" in text
    assert "- **Source**: /new" in text
    assert 'user: "Which port does the gateway use?"' in text
    assert 'assistant: "From memory:' in text and 'user: "Thanks, remember that I like tea"' in text
    assert "NO_REPLY" not in text and "memory_search" not in text
    assert mw.session_for("t1").session_id != old
    # The next turn starts from a clean history.
    after = ask(agent, "hello again")["messages"]
    assert [m.type for m in after] == ["human", "ai"]


def test_new_session_api_archives_and_clears(scenario_factory) -> None:
    sc = scenario_factory()
    agent, mw = build(sc, summarize=False)
    ask(agent, "hello there", thread="t2")
    fresh = mw.new_session("t2")
    assert fresh.previous_archive is not None
    assert fresh.previous_archive.name == f"{TODAY}-1505.md"
    after = ask(agent, "next", thread="t2")["messages"]
    assert [m.type for m in after] == ["human", "ai"]


def test_group_session_never_sees_memory_md(scenario_factory) -> None:
    sc = scenario_factory()
    agent, _ = build(sc, summarize=False)
    result = ask(agent, "Which port does the gateway use?", thread="telegram:group:42")
    system = str(sc.main_calls[0][0]["content"])
    assert "SECRET-CURATED-FACT" not in system and "Name: Ada" not in system
    assert "## Memory Recall" in system and "Do not mention file paths" in system
    tool_msg = next(m for m in result["messages"] if m.type == "tool")
    # memory_search in a group never returns the private MEMORY.md (nor cites anything).
    assert "8443" not in tool_msg.content and "SECRET-CURATED-FACT" not in tool_msg.content
    assert all(
        r["path"] != "MEMORY.md" and "citation" not in r for r in tool_msg.artifact["results"]
    )


def test_read_only_workspace_skips_flush(scenario_factory) -> None:
    sc = scenario_factory(read_only=True)
    agent, _ = build(sc)
    for i in range(6):
        ask(agent, f"turn {i}: {FILLER}")
    assert sc.flush_events() == [] and sc.flush_calls == []
    assert sc.compaction_events(), "compaction still happens"


def test_failing_slug_falls_back_to_hhmm(scenario_factory) -> None:
    def broken(text: str) -> str:
        raise TimeoutError("slug model timed out")

    sc = scenario_factory(slug_fn=broken)
    agent, _ = build(sc, summarize=False)
    ask(agent, "hello there")
    ask(agent, "/reset")
    text = (sc.workspace / "memory" / f"{TODAY}-1505.md").read_text(encoding="utf-8")
    assert "- **Source**: /reset" in text


def test_context_overflow_flushes_before_reraising(scenario_factory) -> None:
    sc = scenario_factory()
    state = {"n": 0}

    def policy(msgs: list[dict[str, Any]]) -> Any:
        if "Memory flush before compaction" not in str(msgs[0]["content"]):
            state["n"] += 1
            if state["n"] == 2:
                raise ContextOverflowError("input exceeds the context window")
        return scripted_reply(sc, msgs)

    model = ScriptedChatModel(messages=iter(()), policy=policy)
    mw = LangChainMemoryMiddleware(middleware=sc.middleware)
    agent = create_agent(model, middleware=[mw], checkpointer=InMemorySaver())
    ask(agent, "first")
    with pytest.raises(ContextOverflowError):
        ask(agent, "second")
    assert [e.data["outcome"].decision.reason for e in sc.flush_events()] == ["context-overflow"]
    assert sc.flush_calls, "the flush turn saw the conversation first"


def test_system_message_blocks_are_extended(scenario_factory) -> None:
    sc = scenario_factory()
    model = ScriptedChatModel(messages=iter(()), policy=lambda m: scripted_reply(sc, m))
    agent = create_agent(
        model,
        middleware=[LangChainMemoryMiddleware(middleware=sc.middleware)],
        system_prompt=SystemMessage(content=[{"type": "text", "text": "Block prompt."}]),
    )
    agent.invoke({"messages": [HumanMessage("hi")]})
    content = sc.main_calls[0][0]["content"]
    assert isinstance(content, list) and content[0]["text"] == "Block prompt."
    assert "## Memory Recall" in content[-1]["text"]


def test_example_runs_offline() -> None:
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "examples" / "langchain_agent.py"
    out = subprocess.run(
        [sys.executable, "-W", "error", str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "studio.local" in out.stdout and "[flush] cycle 0" in out.stdout
    assert "[compaction] now in cycle 1" in out.stdout and "archive: memory/" in out.stdout
