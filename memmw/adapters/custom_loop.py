"""A small agent loop around any ``messages -> reply`` callable, with memmw memory built in."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from memmw.agent.chat import ChatModel, Message, Reply, call_model, normalize_reply, tool_message
from memmw.agent.prompts import NoReplyStreamGuard, visible_text
from memmw.agent.tools import payload_text, tools_by_name
from memmw.hooks.flush import FlushOutcome
from memmw.hooks.session_archive import SlugFunction
from memmw.middleware import (
    MemoryEngine,
    MemoryMiddleware,
    Session,
    deliverable_reply,
    parse_reset_command,
)

log = logging.getLogger(__name__)

#: Turns the messages being compacted into a summary text.
Summarizer = Callable[[Sequence[Message]], str]
#: Receives the visible text of a streamed reply, piece by piece.
DeltaCallback = Callable[[str], None]
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
        principal: Who the session is with (a DM's sender, a group's id), when the host
            knows; a person's memory is then ``memory/principals/<id>/``. Default: the
            session key and ``dm_scope`` decide.
        middleware: A configured :class:`MemoryMiddleware` (built from ``memory`` if None).
        slug_fn: Optional LLM slug callable for archives.
        flush_model: Model for the flush turn (default ``model``).
        max_tool_steps: Model calls per user message before the loop stops.
        keep_messages: Messages kept verbatim when compacting.
        compact_at_tokens: Compact when the next call would send this many tokens; default
            ``context_window - reserve`` where the reserve is ``reserve_tokens_floor`` but
            at most half the window (so a 16k model still flushes and compacts once per
            cycle). The flush fires ``soft_threshold_tokens`` (at most half of it) earlier.

    Raises:
        ConfigError: The window leaves no room: the system prompt and tools alone reach
            the compaction point (the message names the window and the reserve).
        summarizer: Builds the summary of compacted messages.
        extra_tools: More tools (``name -> (schema, callable(args) -> dict)``).
    """

    def __init__(
        self,
        model: ChatModel,
        memory: MemoryEngine,
        *,
        system_prompt: str = "",
        session_key: str = "main",
        chat_type: str | None = None,
        principal: str | None = None,
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
        points = self.middleware.flush_points(compact_at_tokens)
        self.compact_at_tokens = points.compact_at
        self.flush_at_tokens = points.flush_at
        self.summarizer = summarizer or _default_summary
        self.session: Session = self.middleware.start_session(
            session_key, chat_type=chat_type, principal=principal
        )
        self.messages: list[Message] = []
        self.flushes: list[FlushOutcome] = []
        self.compactions = 0
        self._since_compaction = 0
        self._check_room()
        consolidation = getattr(getattr(memory, "config", None), "consolidation", None)
        if consolidation is not None and consolidation.after_archive:
            from memmw.consolidation import consolidate_after_archive

            # After each /new archive, in the background, with the agent's own model.
            consolidate_after_archive(self.middleware, self._flush_model())

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

    def _check_room(self) -> None:
        """Refuse a window the system prompt, bootstrap and tools alone fill (ConfigError)."""
        base = self.middleware.count_tokens(
            [], system_prompt=self.system_prompt, tool_schemas=self._schemas()
        )
        self.middleware.check_prompt_room(base, self.compact_at_tokens)

    def _append(self, message: Message) -> None:
        self.messages.append(message)
        self._since_compaction += 1
        self.middleware.record(self.session, message)

    def _flush_model(self) -> ChatModel:
        return self.middleware.flush_model or self.model

    # -- public API ------------------------------------------------------------------
    def new_session(self, source: str = "/new") -> Session:
        """Archive the current session and start a fresh one (``/new``)."""
        self.session = self.middleware.reset_session(
            self.session, source=source, model=self._flush_model()
        )
        self.messages = []
        self._since_compaction = 0
        return self.session

    def compact(self) -> None:
        """Summarise all but the last ``keep_messages`` messages and start a flush cycle.

        Messages about to be summarised away that no flush has seen yet (past the flush
        watermark, e.g. arrived since the cycle's flush or since a restart) get a delta
        flush first (:meth:`MemoryMiddleware.flush_before_eviction`).
        """
        if len(self.messages) <= self.keep_messages:
            return
        cut = len(self.messages) - self.keep_messages
        # Never start the kept part with a tool result whose call was compacted away.
        while cut < len(self.messages) and self.messages[cut].get("role") == "tool":
            cut += 1
        outcome = self.middleware.flush_before_eviction(
            self.session, self.messages, range(cut), model=self._flush_model()
        )
        if outcome is not None:
            self.flushes.append(outcome)
        old, kept = self.messages[:cut], self.messages[cut:]
        summary = {
            "role": "user",
            "content": "Summary of earlier conversation:\n" + self.summarizer(old),
        }
        self.messages = [summary, *kept]
        self.compactions += 1
        self._since_compaction = 0
        self.middleware.compaction(self.session)

    def _should_compact(self) -> bool:
        """Over the compaction point, with more than ``keep_messages`` new messages.

        The second condition means a compaction always has fresh messages to summarise:
        a context that is still too large right after compacting (a long kept tail) never
        makes the loop compact again on every message.
        """
        return (
            self._since_compaction > self.keep_messages
            and self._tokens() >= self.compact_at_tokens
        )

    def _flush(self, *, force: bool = False) -> None:
        outcome = self.middleware.before_model(
            self.session,
            self.messages,
            system_prompt=self.system_prompt,
            tool_schemas=self._schemas(),
            model=self._flush_model(),
            threshold=self.flush_at_tokens,
            force=force,
        )
        if outcome.ran:
            self.flushes.append(outcome)

    def _call(self, batch: list[Message], on_delta: DeltaCallback | None) -> Reply:
        if on_delta is None:
            return call_model(self.model, batch, self._schemas())
        raw = self.model([dict(m) for m in batch], tools=self._schemas())
        whole = isinstance(raw, (str, bytes, Mapping, Reply)) or hasattr(raw, "content")
        if whole or not isinstance(raw, Iterable):
            reply = normalize_reply(raw)
            shown = None if reply.tool_calls else visible_text(reply.text)
            if shown:
                on_delta(shown)
            return reply
        return _consume_stream(raw, on_delta)

    def chat(self, text: str, *, on_delta: DeltaCallback | None = None) -> str | None:
        """Send one user message; returns the reply to show, or None when it is silent.

        ``/new`` and ``/reset`` archive the session and start a new one.

        Args:
            text: The user's message.
            on_delta: Streaming: the model is called with ``tools=`` and may return an
                iterable of text deltas (or ``{"content", "tool_calls"}`` pieces); each
                visible piece goes to ``on_delta`` through the ``NO_REPLY`` stream guard,
                so no part of a silent reply is ever shown.
        """
        command = parse_reset_command(text)
        if command is not None:
            self.session = (
                self.middleware.command(self.session, text, model=self._flush_model())
                or self.session
            )
            self.messages = []
            self._since_compaction = 0
            return NEW_SESSION_REPLY
        self._check_room()  # the bootstrap may have grown since the last turn
        self._append({"role": "user", "content": text})
        overflow_retried = False
        for _ in range(self.max_tool_steps):
            self._flush()
            if self._should_compact():
                # Never compact a cycle that had no flush (the threshold may be skipped
                # over by one large message).
                self._flush(force=True)
                self.compact()
            batch = [{"role": "system", "content": self.system_prompt}, *self.messages]
            try:
                reply: Reply = self._call(batch, on_delta)
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
            self._append(deliverable_reply(reply).to_message())  # calls kept, silent text not
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


def _consume_stream(pieces: Iterable[Any], on_delta: DeltaCallback) -> Reply:
    """Read a streamed reply, passing visible text through the ``NO_REPLY`` guard."""
    guard = NoReplyStreamGuard()
    calls: list[Any] = []
    for piece in pieces:
        part = normalize_reply(piece)
        calls.extend(c.to_dict() for c in part.tool_calls)
        shown = guard.feed(part.text)
        if shown:
            on_delta(shown)
    rest = guard.finish()
    if rest:
        on_delta(rest)
    return normalize_reply({"content": guard.raw, "tool_calls": calls})


__all__ = ["NEW_SESSION_REPLY", "DeltaCallback", "MemoryAgent", "Summarizer"]
