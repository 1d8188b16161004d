"""Offline demo of memmw in a LangChain v1 ``create_agent`` agent (needs memmw[langchain]).

A scripted fake chat model stands in for an LLM. The ``SummarizationMiddleware`` is handed
to the memmw middleware (``summarization=``), which runs the silent flush before every
summarization, with the agent's own model, so notes are saved before old turns are evicted.

Run: python examples/langchain_agent.py
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver

from memmw import Memory, MemoryConfig
from memmw.adapters.langchain import LangChainMemoryMiddleware
from memmw.config import FlushConfig
from memmw.hooks import Event
from memmw.middleware import MemoryMiddleware
from memmw.text.tokens import TokenCounter

HERE = Path(__file__).resolve().parent
FILLER = "We went through the quarterly infrastructure review in detail. " * 40


class ScriptedChatModel(GenericFakeChatModel):
    """A fake chat model whose replies come from a Python function; supports bind_tools."""

    policy: Any = None

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.policy(messages))])

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        return self


def policy(messages: list[BaseMessage]) -> AIMessage:
    system = messages[0].text if isinstance(messages[0], SystemMessage) else ""
    last = messages[-1]
    if "Memory flush before compaction" in system:
        if isinstance(last, ToolMessage):
            return AIMessage("NO_REPLY")  # the flush turn is silent
        note = "- Reviewed infrastructure; backups move to 03:00 next week."
        return AIMessage(
            "", tool_calls=[{"id": "f1", "name": "memory_append", "args": {"content": note}}]
        )
    if isinstance(last, ToolMessage):
        snippet = last.artifact["results"][0]["snippet"] if last.artifact else last.text
        lines = [ln for ln in snippet.splitlines() if ln.strip() and not ln.startswith("#")]
        return AIMessage("From memory: " + (lines[0] if lines else snippet))
    if isinstance(last, HumanMessage) and "gateway" in last.text.lower():
        return AIMessage(
            "",
            tool_calls=[{"id": "s1", "name": "memory_search", "args": {"query": "gateway runs"}}],
        )
    return AIMessage("Noted.")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "workspace"
        shutil.copytree(HERE / "workspace", workspace)
        config = MemoryConfig(
            provider="none",
            user_timezone="Europe/Paris",
            flush=FlushConfig(
                context_window=6000, reserve_tokens_floor=1500, soft_threshold_tokens=800
            ),
        )
        with Memory(workspace=workspace, state_dir=Path(tmp) / "state", config=config) as memory:
            core = MemoryMiddleware(memory, token_counter=TokenCounter(use_tiktoken=False))
            core.hooks.on(
                Event.FLUSH,
                lambda ctx: print(
                    f"  [flush] cycle {ctx.data['outcome'].decision.cycle}: "
                    f"wrote {list(ctx.data['outcome'].result.writes)}"
                ),
            )
            core.hooks.on(
                Event.COMPACTION,
                lambda ctx: print(f"  [compaction] now in cycle {ctx.data['cycle']}"),
            )
            summarizer = ScriptedChatModel(
                messages=iter(()), policy=lambda msgs: AIMessage("An infrastructure review.")
            )
            # memmw owns the compaction point: it flushes, then runs the summarizer.
            memmw_mw = LangChainMemoryMiddleware(
                middleware=core,
                summarization=SummarizationMiddleware(
                    summarizer, trigger=("tokens", 3200), keep=("messages", 2)
                ),
            )
            agent = create_agent(
                ScriptedChatModel(messages=iter(()), policy=policy),
                system_prompt="You are a helpful ops assistant.",
                middleware=[memmw_mw],
                checkpointer=InMemorySaver(),
            )
            cfg = {"configurable": {"thread_id": "demo"}}

            def say(text: str) -> str:
                result = agent.invoke({"messages": [HumanMessage(text)]}, cfg)
                return str(result["messages"][-1].text)

            print("== recall")
            print("user> Where does the gateway run?")
            print("agent>", say("Where does the gateway run?"))

            print("== a long conversation reaches the flush threshold")
            for i in range(6):
                print(f"user> part {i} ... agent> {say(f'Part {i} of the review: {FILLER}')}")

            print("== /new archives the session")
            print("agent>", say("/new"))
            archive = memmw_mw.session_for("demo").previous_archive
            assert archive is not None
            print(f"archive: memory/{archive.name}")
            print(archive.read_text(encoding="utf-8")[:400])
            daily = workspace / "memory" / f"{core.now().date().isoformat()}.md"
            print(f"daily note memory/{daily.name}:")
            print(daily.read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()
