"""The NO_REPLY guard through a LangChain agent, invoked and streamed, on generated replies."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memmw.agent.prompts import visible_text

from ..agent.noreply_strategies import mixed_replies, ordinary_sentences, silent_forms
from .conftest import Scenario

pytestmark = pytest.mark.optional

try:
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from memmw.adapters.langchain import LangChainMemoryMiddleware
    from memmw.adapters.langchain_no_reply import SILENT_FLAG

    from .lc_fakes import scripted

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


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    reply=st.one_of(silent_forms(), ordinary_sentences(), mixed_replies()),
    chunk=st.integers(min_value=1, max_value=7),
)
def test_generated_replies_invoked_and_streamed(scenario_factory, reply: str, chunk: int) -> None:
    """Invoked and streamed, the person sees exactly the final rule's text (nothing, or
    the flagged placeholder, for a silent reply)."""
    if not hasattr(scenario_factory, "shared"):
        sc: Scenario = scenario_factory()
        holder: dict[str, Any] = {}
        model = scripted(lambda messages: holder["reply"])
        mw = LangChainMemoryMiddleware(middleware=sc.middleware)
        agent = create_agent(model, middleware=[mw], checkpointer=InMemorySaver())
        scenario_factory.shared = (holder, model, agent, [0])
    holder, model, agent, count = scenario_factory.shared
    holder["reply"] = reply
    model.chunk_chars = chunk
    expected = visible_text(reply) or ""
    count[0] += 1
    cfg = {"configurable": {"thread_id": f"gen-{count[0]}"}}
    last = agent.invoke({"messages": [HumanMessage("hi")]}, cfg)["messages"][-1]
    assert isinstance(last, AIMessage) and last.text == expected
    assert bool(last.additional_kwargs.get(SILENT_FLAG)) == (visible_text(reply) is None)
    cfg = {"configurable": {"thread_id": f"gen-s{count[0]}"}}
    pieces = [
        c.text
        for c, _meta in agent.stream({"messages": [HumanMessage("hi")]}, cfg, stream_mode="messages")
        if c.type == "AIMessageChunk"
    ]
    assert "".join(pieces) == expected
