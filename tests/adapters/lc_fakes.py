"""Scripted LangChain chat models for the adapter tests: tool calls, streaming, a call log."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult


class ScriptedChatModel(BaseChatModel):
    """A chat model whose reply comes from ``policy(messages)``; binds tools, streams.

    No stock fake model binds tools or streams tool calls, so this one does both: the
    text streams in ``chunk_chars`` pieces, then one chunk carries the tool calls.

    Attributes:
        policy: ``list[BaseMessage] -> AIMessage | str | dict``.
        chunk_chars: Characters per streamed text chunk.
    """

    policy: Any
    chunk_chars: int = 2

    @property
    def _llm_type(self) -> str:
        return "scripted-fake"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        return self

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        out = self.policy(messages)
        if isinstance(out, AIMessage):
            return out
        if isinstance(out, str):
            return AIMessage(content=out)
        calls = [
            {"id": c["id"], "name": c["name"], "args": c.get("args", {}), "type": "tool_call"}
            for c in out.get("tool_calls") or ()
        ]
        return AIMessage(content=out.get("content", ""), tool_calls=calls)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        reply = self._reply(messages)
        text = reply.text
        step = max(1, self.chunk_chars)
        for i in range(0, len(text), step):
            yield ChatGenerationChunk(message=AIMessageChunk(content=text[i : i + step]))
        chunks = [
            {
                "id": c["id"],
                "name": c["name"],
                "args": json.dumps(c["args"]),
                "index": n,
                "type": "tool_call_chunk",
            }
            for n, c in enumerate(reply.tool_calls)
        ]
        yield ChatGenerationChunk(
            message=AIMessageChunk(content="", tool_call_chunks=chunks, chunk_position="last")
        )


def scripted(policy: Callable[[list[BaseMessage]], Any], **kw: Any) -> ScriptedChatModel:
    """A :class:`ScriptedChatModel` for ``policy``."""
    return ScriptedChatModel(policy=policy, **kw)
