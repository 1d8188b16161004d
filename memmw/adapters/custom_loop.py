"""A small agent loop around any ``messages -> reply`` callable, with memmw memory built in."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from memmw.chat import ChatModel, Message, Reply, call_model, tool_message
from memmw.hooks.flush import FlushOutcome
from memmw.hooks.session_archive import SlugFunction
from memmw.middleware import MemoryMiddleware, Session, parse_reset_command
from memmw.tools import MemoryBackend, payload_text, tools_by_name

log = logging.getLogger(__name__)

#: Turns the messages being compacted into a summary text.
Summarizer = Callable[[Sequence[Message]], str]
NEW_SESSION_REPLY = "Started a new session. Earlier messages were saved to memory."


def _default_summary(messages: Sequence[Message]) -> str:
    return f"[{len(messages)} earlier messages were compacted]"


class MemoryAgent:
    """A minimal tool-calling chat loop with memory: tools, prompt, flush, archive.

    Example:
        >>> agent = MemoryAgent(my_model, memory)  # doctest: +SKIP
        >>> agent.chat("What did we decide about the gateway?")  # doctest: +SKIP

    Args:
        model: Callable taking a list of ``{"role", "content"}`` dicts (and ``tools=`` if
            it accepts it) and returning text or ``{"content", "tool_calls"}``.
        memory: The engine (:class:`memmw.Memory`).
        system_prompt: Your base system prompt.
        session_key: Routing key (``group``/``channel`` tokens make a group session).
        chat_type: Explicit ``direct``/``group``.
        middleware: A configured :class:`MemoryMiddleware` (built from ``memory`` if None).
        slug_fn: Optional LLM slug callable for archives.
        flush_model: Model for the flush turn (default ``model``).
        max_tool_steps: Model calls per user message before the loop stops.
        keep_messages: Messages kept verbatim when compacting.
        compact_at_tokens: Compact when the next call would send this many tokens; default
            ``context_window - reserve_tokens_floor`` (the flush fires before it).
        summarizer: Builds the summary of compacted messages.
        extra_tools: More tools (``name -> (schema, callable(args) -> dict)``).
    """

    def __init__(
        self,
        model: ChatModel,
        memory: MemoryBackend,
        *,
        system_prompt: str = "",
        session_key: str = "main",
        chat_type: str | None = None,
        middleware: MemoryMiddleware | None = None,
        slug_fn: SlugFunction | None = None,
        flush_model: ChatModel | None = None,
        max_tool_steps: int = 8,
        keep_messages: int = 6,
        compact_at_tokens: int | None = None,
        summarizer: Summarizer | None = None,
    ) -> None:
        self.model = model
        self.middleware = middleware or MemoryMiddleware(
            memory, slug_fn=slug_fn, flush_model=flush_model
        )
        self.base_prompt = system_prompt
        self.max_tool_steps = max_tool_steps
        self.keep_messages = keep_messages
        flush_cfg = self.middleware.config.flush
        window = self.middleware.context_window or flush_cfg.context_window
        self.compact_at_tokens = (
            compact_at_tokens
            if compact_at_tokens is not None
            else max(1, window - flush_cfg.reserve_tokens_floor)
        )
        self.summarizer = summarizer or _default_summary
        self.session: Session = self.middleware.start_session(session_key, chat_type=chat_type)
        self.messages: list[Message] = []
        self.flushes: list[FlushOutcome] = []
        self.compactions = 0

    # -- helpers ---------------------------------------------------------------------
    @property
    def system_prompt(self) -> str:
        """The full system prompt of the next call (base + recall + bootstrap)."""
        return self.middleware.system_prompt(self.session, self.base_prompt)

    def _schemas(self) -> list[dict[str, Any]]:
        return [t.openai_schema() for t in self.session.tools]

    def _tokens(self) -> int:
        return self.middleware.count_tokens(
            self.messages, system_prompt=self.system_prompt, tool_schemas=self._schemas()
        )

    def _append(self, message: Message) -> None:
        self.messages.append(message)
        self.middleware.record(self.session, message)

    def _flush_model(self) -> ChatModel:
        return self.middleware.flush_model or self.model

    # -- public API ------------------------------------------------------------------
    def new_session(self, source: str = "/new") -> Session:
        """Archive the current session and start a fresh one (``/new``)."""
        self.session = self.middleware.reset_session(self.session, source=source)
        self.messages = []
        return self.session

    def compact(self) -> None:
        """Summarise all but the last ``keep_messages`` messages and start a flush cycle."""
        if len(self.messages) <= self.keep_messages:
            return
        cut = len(self.messages) - self.keep_messages
        # Never start the kept part with a tool result whose call was compacted away.
        while cut < len(self.messages) and self.messages[cut].get("role") == "tool":
            cut += 1
        old, kept = self.messages[:cut], self.messages[cut:]
        summary = {
            "role": "user",
            "content": "Summary of earlier conversation:\n" + self.summarizer(old),
        }
        self.messages = [summary, *kept]
        self.compactions += 1
        self.middleware.compaction(self.session)

    def chat(self, text: str) -> str | None:
        """Send one user message; returns the reply to show, or None when it is silent.

        ``/new`` and ``/reset`` archive the session and start a new one.
        """
        command = parse_reset_command(text)
        if command is not None:
            self.session = self.middleware.command(self.session, text) or self.session
            self.messages = []
            return NEW_SESSION_REPLY
        self._append({"role": "user", "content": text})
        overflow_retried = False
        for _ in range(self.max_tool_steps):
            outcome = self.middleware.before_model(
                self.session,
                self.messages,
                system_prompt=self.system_prompt,
                tool_schemas=self._schemas(),
                model=self._flush_model(),
            )
            if outcome.ran:
                self.flushes.append(outcome)
            if self._tokens() >= self.compact_at_tokens:
                self.compact()
            batch = [{"role": "system", "content": self.system_prompt}, *self.messages]
            try:
                reply: Reply = call_model(self.model, batch, self._schemas())
            except Exception as exc:
                flushed = self.middleware.on_model_error(
                    self.session, exc, self.messages, model=self._flush_model()
                )
                if flushed is None or overflow_retried:
                    raise
                if flushed.ran:
                    self.flushes.append(flushed)
                overflow_retried = True
                self.compact()
                continue
            if not reply.tool_calls:
                self.messages.append(reply.to_message())
                return self.middleware.after_model(self.session, reply)
            self._append(reply.to_message())
            by_name = tools_by_name(self.session.tools)
            for call in reply.tool_calls:
                tool = by_name.get(call.name)
                if tool is None:
                    payload: dict[str, Any] = {"error": f"unknown tool {call.name!r}"}
                else:
                    payload = tool.invoke(call.args)
                self._append(tool_message(call, payload_text(payload)))
        log.warning("tool loop stopped after %d model calls", self.max_tool_steps)
        return None


__all__ = ["NEW_SESSION_REPLY", "MemoryAgent", "Summarizer"]
