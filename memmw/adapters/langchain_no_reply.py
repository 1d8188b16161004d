"""A chat-model wrapper that keeps ``NO_REPLY`` out of LangChain replies, streamed or not."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForLLMRun,
        CallbackManagerForLLMRun,
    )
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
    from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
    from langchain_core.runnables import RunnableConfig
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "memmw.adapters.langchain_no_reply needs langchain-core: pip install 'memmw[langchain]'"
    ) from exc

from memmw.agent.prompts import NoReplyStreamGuard, visible_text

#: ``additional_kwargs`` key marking a reply that was dropped as ``NO_REPLY``.
SILENT_FLAG = "memmw_no_reply"
_NOSTREAM = "nostream"


def is_dropped_reply(message: BaseMessage) -> bool:
    """True for the empty placeholder left where a ``NO_REPLY`` answer was dropped."""
    return isinstance(message, AIMessage) and bool(message.additional_kwargs.get(SILENT_FLAG))


def silent_placeholder(message: AIMessage) -> AIMessage:
    """The empty reply that replaces a silent one (same id, so it replaces it in state).

    Keeping an (empty, flagged) AI message means the run's last message is never the
    user's own question when the agent chose to stay silent.
    """
    return AIMessage(
        content="",
        id=message.id,
        additional_kwargs={SILENT_FLAG: True},
        response_metadata=dict(message.response_metadata),
        usage_metadata=message.usage_metadata,
    )


def _with_text(content: Any, text: str) -> Any:
    """``content`` with its text replaced by ``text`` (non-text blocks are kept)."""
    if isinstance(content, str):
        return text
    blocks = [
        b
        for b in content or ()
        if not (isinstance(b, dict) and b.get("type") == "text") and not isinstance(b, str)
    ]
    if text:
        blocks.append({"type": "text", "text": text})
    return blocks


def _other_blocks(content: Any) -> bool:
    """True when ``content`` holds more than text (images, tool-use blocks ...)."""
    return not isinstance(content, str) and any(
        isinstance(b, dict) and b.get("type") != "text" for b in content or ()
    )


def guard_message(message: AIMessage) -> AIMessage:
    """Apply the ``NO_REPLY`` rules to a complete reply.

    A silent reply (blank, or the token in any wrapping) becomes the empty flagged
    placeholder; with tool calls (or other content blocks) it keeps them and loses only
    its text. A stripped token or special token disappears from the text.
    """
    text = message.text
    if is_dropped_reply(message) and not text:
        return message
    shown = visible_text(text)
    if shown is None and not (message.tool_calls or _other_blocks(message.content)):
        return silent_placeholder(message)
    if shown == text or (not text and shown is None):
        return message
    return message.model_copy(update={"content": _with_text(message.content, shown or "")})


def _config(run_manager: Any) -> RunnableConfig:
    """Config of the wrapped call: it keeps the run's callbacks (tracing) from the context,
    but is tagged ``nostream`` so only the guarded text is streamed to the user."""
    return {"tags": [_NOSTREAM], "run_name": "memmw_guarded_model"}


class NoReplyGuardModel(BaseChatModel):
    """Wraps the agent's chat model so no part of a ``NO_REPLY`` is ever delivered.

    Invoked, a silent reply becomes an empty flagged placeholder and a stripped token
    disappears. Streamed (``stream_mode="messages"``), the wrapped model runs with the
    ``nostream`` tag and its text passes through :class:`memmw.agent.prompts.NoReplyStreamGuard`
    first, so drafts of the token are never emitted. Tool binding is delegated.

    Attributes:
        inner: The wrapped model or bound runnable.
    """

    inner: Any

    @property
    def _llm_type(self) -> str:
        return "memmw-no-reply-guard"

    @classmethod
    def wrap(cls, model: Any) -> NoReplyGuardModel:
        """Guard ``model``, keeping its profile (context limits, capabilities)."""
        profile: Any = getattr(model, "profile", None)
        if not isinstance(profile, Mapping):
            profile = None
        return cls(inner=model, profile=profile)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> NoReplyGuardModel:  # type: ignore[override]
        """Bind tools on the wrapped model and keep guarding it."""
        return NoReplyGuardModel(inner=self.inner.bind_tools(tools, **kwargs), profile=self.profile)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if stop is not None:
            kwargs["stop"] = stop
        out = self.inner.invoke(messages, _config(run_manager), **kwargs)
        return ChatResult(generations=[ChatGeneration(message=guard_message(out))])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if stop is not None:
            kwargs["stop"] = stop
        out = await self.inner.ainvoke(messages, _config(run_manager), **kwargs)
        return ChatResult(generations=[ChatGeneration(message=guard_message(out))])

    @staticmethod
    def _filtered(chunk: AIMessageChunk, guard: NoReplyStreamGuard) -> AIMessageChunk | None:
        shown = guard.feed(chunk.text)
        if not shown and not chunk.tool_call_chunks and not chunk.usage_metadata:
            return None
        return chunk.model_copy(
            update={"content": _with_text(chunk.content, shown), "chunk_position": None}
        )

    @staticmethod
    def _last(guard: NoReplyStreamGuard, chunk_id: str | None, calls: bool) -> AIMessageChunk:
        rest = guard.finish()
        silent = not calls and guard.suppressed and not rest
        return AIMessageChunk(
            content=rest,
            id=chunk_id,
            additional_kwargs={SILENT_FLAG: True} if silent else {},
            chunk_position="last",
        )

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        if stop is not None:
            kwargs["stop"] = stop
        guard = NoReplyStreamGuard()
        chunk_id: str | None = None
        calls = False
        for chunk in self.inner.stream(messages, _config(run_manager), **kwargs):
            chunk_id = chunk_id or chunk.id
            calls = calls or bool(chunk.tool_call_chunks)
            out = self._filtered(chunk, guard)
            if out is not None:
                yield ChatGenerationChunk(message=out)
        yield ChatGenerationChunk(message=self._last(guard, chunk_id, calls))

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        if stop is not None:
            kwargs["stop"] = stop
        guard = NoReplyStreamGuard()
        chunk_id: str | None = None
        calls = False
        async for chunk in self.inner.astream(messages, _config(run_manager), **kwargs):
            chunk_id = chunk_id or chunk.id
            calls = calls or bool(chunk.tool_call_chunks)
            out = self._filtered(chunk, guard)
            if out is not None:
                yield ChatGenerationChunk(message=out)
        yield ChatGenerationChunk(message=self._last(guard, chunk_id, calls))


__all__ = [
    "SILENT_FLAG",
    "NoReplyGuardModel",
    "guard_message",
    "is_dropped_reply",
    "silent_placeholder",
]
