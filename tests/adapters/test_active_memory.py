"""Active memory through both adapters: the [GRAPH MEMORY] block reaches the model's system prompt."""

from __future__ import annotations

from typing import Any

import pytest

from memmw.adapters.custom_loop import MemoryAgent
from memmw.config import ActiveMemoryConfig

from .conftest import Scenario, scripted_reply

PEOPLE = "## People\n- Bob Stone (Bobby): CFO at Acme\n"
PRIVATE = "\n## Alice Martin (Ali)\n- city: Lisbon\n- PRIVATE-GRAPH-FACT: yes\n"


def prepare(sc: Scenario) -> None:
    (sc.workspace / "memory" / "people.md").write_text(PEOPLE, encoding="utf-8")
    with open(sc.workspace / "MEMORY.md", "a", encoding="utf-8") as fh:
        fh.write(PRIVATE)
    sc.memory.sync()
    # Deadlines are tested with a fake timer; a loaded machine must not cut these turns.
    sc.middleware.active_memory.config = ActiveMemoryConfig(deadline_ms=60_000)


def system_of(call: list[dict[str, Any]]) -> str:
    return " ".join(str(m["content"]) for m in call if m["role"] == "system")


def make_agent(sc: Scenario, **kwargs: Any) -> MemoryAgent:
    def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> Any:
        return scripted_reply(sc, messages)

    return MemoryAgent(model, sc.memory, middleware=sc.middleware, system_prompt="You help.", **kwargs)


def test_custom_loop_injects_before_each_call(scenario_factory) -> None:
    sc = scenario_factory()
    prepare(sc)
    agent = make_agent(sc)
    agent.chat("Where does Ali live these days?")
    system = system_of(sc.main_calls[-1])
    assert "[GRAPH MEMORY]" in system and "Alice Martin: city = Lisbon [MEMORY.md#L" in system
    agent.chat("And what does Bobby do?")
    system = system_of(sc.main_calls[-1])
    assert "Bob Stone: role = CFO at Acme [memory/people.md#L2]" in system
    assert "city = Lisbon" not in system  # the block follows the latest message


def test_custom_loop_group_session_gets_no_private_facts(scenario_factory) -> None:
    sc = scenario_factory()
    prepare(sc)
    agent = make_agent(sc, session_key="agent:main:discord:channel:9")
    agent.chat("What about Ali and Bobby?")
    system = system_of(sc.main_calls[-1])
    assert "PRIVATE-GRAPH-FACT" not in system and "Lisbon" not in system
    assert "Bob Stone: role = CFO at Acme" in system


def test_langchain_agent_injects_the_block(scenario_factory) -> None:
    try:
        from langchain_core.messages import HumanMessage

        from .test_langchain import build
    except ImportError as exc:
        pytest.fail(f"these tests need the langchain extra (pip install 'memmw[langchain]'): {exc}")
    sc = scenario_factory()
    prepare(sc)
    agent, _ = build(sc, summarize=False)
    cfg = {"configurable": {"thread_id": "t1"}}
    agent.invoke({"messages": [HumanMessage("Where does Ali live these days?")]}, cfg)
    system = system_of(sc.main_calls[-1])
    assert "You help." in system
    assert "[GRAPH MEMORY]" in system and "Alice Martin: city = Lisbon [MEMORY.md#L" in system
    group = {"configurable": {"thread_id": "telegram:group:42"}}
    agent.invoke({"messages": [HumanMessage("What about Ali and Bobby?")]}, group)
    system = system_of(sc.main_calls[-1])
    assert "PRIVATE-GRAPH-FACT" not in system and "Lisbon" not in system
    assert "Bob Stone: role = CFO at Acme" in system
