"""LangChain v1 adapter: an AgentMiddleware for ``create_agent`` driving the memmw middleware."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        AgentState,
        ModelRequest,
        ModelResponse,
        hook_config,
    )
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import (
        AIMessage,
        AnyMessage,
        BaseMessage,
        HumanMessage,
        RemoveMessage,
        SystemMessage,
        ToolMessage,
    )
    from langchain_core.tools import BaseTool, StructuredTool
    from langchain_core.utils.function_calling import convert_to_openai_tool
    from langgraph.config import get_config
    from langgraph.graph.message import REMOVE_ALL_MESSAGES
    from langgraph.runtime import Runtime
    from typing_extensions import NotRequired
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "memmw.adapters.langchain needs LangChain v1 (langchain>=1.1, langchain-core>=1.0): "
        "pip install 'memmw[langchain]'"
    ) from exc

from memmw.adapters.langchain_no_reply import (
    NoReplyGuardModel,
    guard_message,
    is_dropped_reply,
)
from memmw.agent.chat import ChatModel, Message, Reply, normalize_reply
from memmw.agent.tools import build_memory_tools, payload_text, tools_by_name
from memmw.errors import ConfigError
from memmw.hooks.session_archive import SlugFunction
from memmw.middleware import (
    MemoryEngine,
    MemoryMiddleware,
    Session,
    WiringError,
    is_context_overflow,
    parse_reset_command,
)
from memmw.timeutil import Clock

log = logging.getLogger(__name__)

#: ``additional_kwargs["lc_source"]`` of SummarizationMiddleware's summary message.
SUMMARY_SOURCE = "summarization"
NEW_SESSION_REPLY = "Started a new session. Earlier messages were saved to memory."
DEFAULT_THREAD = "default"


class MemoryAgentState(AgentState[Any]):
    """Agent state with memmw's compaction bookkeeping.

    Attributes:
        memmw_compactions: Compactions seen in this thread.
        memmw_summary_id: Id of the last summary message counted as a compaction.
        memmw_flush_cycle: Compaction cycle of the last flush in this thread.
    """

    memmw_compactions: NotRequired[int]
    memmw_summary_id: NotRequired[str]
    memmw_flush_cycle: NotRequired[int]


# ---------------------------------------------------------------------------------------
# Message conversion


def message_to_dict(message: BaseMessage) -> Message:
    """A LangChain message as a memmw chat dict (``role``/``content`` [+ tool fields])."""
    if isinstance(message, HumanMessage):
        return {"role": "user", "content": message.content}
    if isinstance(message, AIMessage):
        out: Message = {"role": "assistant", "content": message.content}
        if message.tool_calls:
            out["tool_calls"] = [
                {"id": c.get("id"), "name": c["name"], "args": c.get("args", {})}
                for c in message.tool_calls
            ]
        return out
    if isinstance(message, ToolMessage):
        return {
            "role": "tool",
            "content": message.content,
            "tool_call_id": message.tool_call_id,
            "name": message.name,
        }
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": message.content}
    return {"role": str(getattr(message, "type", "user")), "content": message.content}


def dict_to_message(message: Mapping[str, Any]) -> BaseMessage:
    """A memmw chat dict as a LangChain message."""
    role = message.get("role")
    content = message.get("content") or ""
    if role == "system":
        return SystemMessage(content=content)
    if role == "assistant":
        calls = [
            {"id": c.get("id"), "name": c["name"], "args": c.get("args", {}), "type": "tool_call"}
            for c in message.get("tool_calls") or ()
        ]
        return AIMessage(content=content, tool_calls=calls)
    if role == "tool":
        return ToolMessage(
            content=content,
            tool_call_id=str(message.get("tool_call_id") or ""),
            name=message.get("name"),
        )
    return HumanMessage(content=content)


def is_summary_message(message: BaseMessage) -> bool:
    """True for SummarizationMiddleware's summary HumanMessage (the compaction signal)."""
    return (
        isinstance(message, HumanMessage)
        and message.additional_kwargs.get("lc_source") == SUMMARY_SOURCE
    )


def langchain_chat_model(model: BaseChatModel) -> ChatModel:
    """Wrap a LangChain chat model as a memmw ``(messages, tools=...) -> Reply`` callable.

    The call is tagged ``nostream`` so the silent flush never streams to the user.
    """

    def call(messages: list[Message], tools: Sequence[Mapping[str, Any]] = ()) -> Reply:
        bound: Any = model.bind_tools([dict(t) for t in tools]) if tools else model
        result = bound.invoke(
            [dict_to_message(m) for m in messages],
            config={"tags": ["nostream", "memmw-flush"], "run_name": "memmw_flush"},
        )
        return normalize_reply(result)

    return call


def _thread_id(runtime: Any = None) -> str:
    info = getattr(runtime, "execution_info", None)
    thread = getattr(info, "thread_id", None)
    if thread is None:
        try:
            thread = get_config().get("configurable", {}).get("thread_id")
        except RuntimeError:
            thread = None
    return str(thread) if thread is not None else DEFAULT_THREAD


def _tool_names(tools: Sequence[Any]) -> list[str]:
    names: list[str] = []
    for tool in tools:
        if isinstance(tool, BaseTool):
            names.append(tool.name)
        elif isinstance(tool, Mapping):
            fn = tool.get("function")
            name = fn.get("name") if isinstance(fn, Mapping) else tool.get("name")
            if isinstance(name, str):
                names.append(name)
    return names


# ---------------------------------------------------------------------------------------
# Summarizer triggers


def trigger_token_limits(summarization: Any) -> list[int]:
    """The token counts at which ``summarization`` compacts (``tokens`` and ``fraction``).

    ``messages``-only triggers give none: then memmw flushes at the compaction point.
    """
    trigger = getattr(summarization, "trigger", None)
    if trigger is None:
        return []
    items = trigger if isinstance(trigger, list) else [trigger]
    limits: list[int] = []
    profile_limit: int | None = None
    getter = getattr(summarization, "_get_profile_limits", None)
    if callable(getter):
        try:
            found = getter()
            profile_limit = found if isinstance(found, int) else None
        except Exception:  # a model without a profile only loses the fraction trigger
            profile_limit = None
    for item in items:
        pairs = list(item.items()) if isinstance(item, Mapping) else [tuple(item)]
        for kind, value in pairs:
            if kind == "tokens" and isinstance(value, int):
                limits.append(value)
            elif kind == "fraction" and profile_limit is not None:
                limits.append(max(1, int(profile_limit * float(value))))
    return limits


# ---------------------------------------------------------------------------------------
# The middleware


class LangChainMemoryMiddleware(AgentMiddleware[MemoryAgentState, Any, Any]):
    """memmw memory for a LangChain v1 agent built with ``create_agent``.

    It adds ``memory_search``, ``memory_get`` and ``memory_append`` as tools, injects the
    Memory Recall section and the session bootstrap into the system message, records a
    JSONL transcript per thread, keeps ``NO_REPLY`` from ever reaching the user (streamed
    or not), and archives the session on a ``/new`` or ``/reset`` message or a
    :meth:`new_session` call.

    **Compaction guard.** Give it your ``SummarizationMiddleware`` (``summarization=``)
    and do not list that one in ``create_agent``: memmw then owns the compaction point.
    The silent flush fires ``soft_threshold_tokens`` below the summarizer's token trigger
    (counted with the summarizer's own counter) and, whatever the trigger, before every
    summarization that would otherwise run unflushed. Every message a summary removes was
    seen by a flush first: messages that arrived after the cycle's flush (or since a
    restart) and fall outside the kept tail get a delta flush over exactly those right
    before the summary is applied (:meth:`MemoryMiddleware.flush_before_eviction`). The
    flush uses ``flush_model`` or else the agent's own model; on a thread's first call
    (or after a restart) that model is known only inside the model call, so a due
    summarization then waits one model call: the flush runs there first and that call is
    sent the summarised view, so it fits the window (the state is summarised next step).

    Wrong wiring is never silent: a summary that appears without the flush of its cycle
    (a summarizer listed in ``create_agent`` before memmw, or one whose trigger lies
    below the flush threshold) raises :class:`~memmw.middleware.WiringError` at that
    first summarization (``strict=False`` logs an error instead), and a ``flush_model``
    that cannot call tools is refused here.

    Example:
        >>> agent = create_agent(model, middleware=[  # doctest: +SKIP
        ...     LangChainMemoryMiddleware(
        ...         memory,
        ...         summarization=SummarizationMiddleware(model, trigger=("tokens", 150_000)),
        ...     )
        ... ], checkpointer=InMemorySaver())

    Args:
        memory: The engine (ignored when ``middleware`` is given).
        summarization: The ``SummarizationMiddleware`` memmw runs itself, flush first.
        middleware: A configured framework-neutral :class:`MemoryMiddleware`.
        flush_model: Model for the flush turn; default the agent's own model.
        slug_fn: Optional LLM slug callable for archives.
        session_key: Maps a thread id to a session key; default
            ``agent:<agent_id>:<thread_id>`` (``group``/``channel`` tokens mean group).
        chat_type: Explicit chat type for every thread.
        principal: Maps a thread id to who the thread is with (a DM's sender, a group's
            id), or None to let the session key and ``dm_scope`` decide; a person's
            memory is then ``memory/principals/<id>/``.
        summarization_trigger_tokens: Token trigger of a summarizer you run yourself
            (listed **after** memmw); the flush then fires below it. Prefer
            ``summarization=``.
        read_only: Force read-only memory.
        clock: Source of "now".
        include_append_tool: Offer ``memory_append``.
        name: Middleware name (must be unique in the agent).
        strict: Raise :class:`~memmw.middleware.WiringError` on an unflushed compaction
            (default); False logs an error instead.

    Raises:
        WiringError: ``flush_model`` is not a chat model that can call tools, or both
            ``summarization`` and ``summarization_trigger_tokens`` were given.
        ConfigError: (at a model call) the system prompt, the memory bootstrap and the
            tools alone fill the context window up to the compaction point.
    """

    state_schema = MemoryAgentState

    def __init__(
        self,
        memory: MemoryEngine | None = None,
        *,
        summarization: AgentMiddleware[Any, Any, Any] | None = None,
        middleware: MemoryMiddleware | None = None,
        flush_model: BaseChatModel | None = None,
        slug_fn: SlugFunction | None = None,
        session_key: Callable[[str], str] | None = None,
        chat_type: str | None = None,
        principal: Callable[[str], str | None] | None = None,
        summarization_trigger_tokens: int | None = None,
        read_only: bool | None = None,
        clock: Clock | None = None,
        include_append_tool: bool = True,
        name: str = "memmw",
        strict: bool = True,
    ) -> None:
        super().__init__()
        if middleware is None:
            if memory is None:
                raise ConfigError("pass a memory engine or a MemoryMiddleware")
            middleware = MemoryMiddleware(
                memory,
                slug_fn=slug_fn,
                read_only=read_only,
                clock=clock,
                include_append_tool=include_append_tool,
            )
        self.core = middleware
        if flush_model is not None and not callable(getattr(flush_model, "bind_tools", None)):
            raise WiringError(
                f"flush_model {type(flush_model).__name__} cannot bind tools; the flush "
                "writes with memory_append: pass a LangChain chat model or leave it out to "
                "use the agent's own model"
            )
        if summarization is not None:
            if summarization_trigger_tokens is not None:
                raise WiringError("pass summarization= or summarization_trigger_tokens=, not both")
            if not callable(getattr(summarization, "before_model", None)):
                raise WiringError(
                    f"summarization must be a SummarizationMiddleware, got "
                    f"{type(summarization).__name__}"
                )
        self.summarization = summarization
        limits = (
            trigger_token_limits(summarization)
            if summarization is not None
            else ([summarization_trigger_tokens] if summarization_trigger_tokens else [])
        )
        #: The flush threshold derived from the summarizer's token trigger, if any.
        self.flush_at: int | None = (
            min(self.core.flush_points(compact_at=n).flush_at for n in limits) if limits else None
        )
        self._compact_at: int | None = min(limits) if limits else None
        self._name = name
        self._strict = strict
        self._flush_model = flush_model
        self._key_fn = session_key
        self._chat_type = chat_type
        self._principal_fn = principal
        self._lock = threading.RLock()
        self._models: dict[str, BaseChatModel] = {}
        self._last_model: BaseChatModel | None = None
        self._prompt_tokens: dict[str, int] = {}
        self._recorded: dict[str, set[str]] = {}
        self._pending_clear: set[str] = set()
        self._pending_flush: set[str] = set()
        consolidation = getattr(getattr(self.core.memory, "config", None), "consolidation", None)
        if consolidation is not None and consolidation.after_archive:
            from memmw.consolidation import consolidate_after_archive

            consolidate_after_archive(self.core, self.consolidation_model)
        self.tools = self._build_tools()

    @property
    def name(self) -> str:
        """The middleware name (``memmw`` unless configured)."""
        return self._name

    # -- sessions --------------------------------------------------------------------
    def session_key_for(self, thread_id: str) -> str:
        """The session key of ``thread_id``."""
        if self._key_fn is not None:
            return self._key_fn(thread_id)
        return f"agent:{self.core.memory.agent_id}:{thread_id}"

    def session_for(self, thread_id: str) -> Session:
        """The memmw session of a thread (started, with bootstrap, on first use)."""
        with self._lock:
            principal = self._principal_fn(thread_id) if self._principal_fn is not None else None
            return self.core.session(
                self.session_key_for(thread_id), chat_type=self._chat_type, principal=principal
            )

    def new_session(self, thread_id: str, *, source: str = "/new") -> Session:
        """Archive the thread's session and start a new one (what ``/new`` does).

        The thread's checkpointed messages are cleared on its next turn.

        Returns:
            The new session (``previous_archive`` is the file written, if any).
        """
        with self._lock:
            old = self.session_for(thread_id)
            fresh = self.core.reset_session(
                old, source=source, model=self._flush_callable(thread_id)
            )
            self._recorded.pop(old.session_id, None)
            self._pending_clear.add(thread_id)
            return fresh

    # -- tools -----------------------------------------------------------------------
    def _build_tools(self) -> list[BaseTool]:
        templates = build_memory_tools(
            self.core.memory,
            include_append=self.core.include_append_tool,
            allow_curated_append=self.core.allow_curated_append,
        )
        tools: list[BaseTool] = []
        for template in templates:
            tools.append(
                StructuredTool.from_function(
                    func=self._tool_func(template.name),
                    name=template.name,
                    description=template.description,
                    args_schema=template.parameters,
                    response_format="content_and_artifact",
                )
            )
        return tools

    def _tool_func(self, tool_name: str) -> Callable[..., tuple[str, dict[str, Any]]]:
        def run(**kwargs: Any) -> tuple[str, dict[str, Any]]:
            try:
                session = self.session_for(_thread_id())
                tool = tools_by_name(session.tools).get(tool_name)
                if tool is None:
                    payload: dict[str, Any] = {"error": f"{tool_name} is disabled"}
                else:
                    payload = tool.invoke(kwargs)
            except Exception as exc:  # never raise into the agent loop
                log.warning("%s failed: %s", tool_name, type(exc).__name__)
                payload = {"error": f"{type(exc).__name__}: {exc}"}
            return payload_text(payload), payload

        run.__name__ = tool_name
        return run

    # -- transcript ------------------------------------------------------------------
    def _seen(self, session: Session) -> set[str]:
        seen = self._recorded.get(session.session_id)
        if seen is None:
            seen = set()
            for record in self.core.transcripts.read(session.session_id):
                rid = record.extra.get("id")
                if isinstance(rid, str):
                    seen.add(rid)
            self._recorded[session.session_id] = seen
        return seen

    def _record_new(self, session: Session, messages: Sequence[AnyMessage]) -> None:
        with self._lock:
            seen = self._seen(session)
            for message in messages:
                if message.id is None or message.id in seen or is_summary_message(message):
                    continue
                if not isinstance(message, (HumanMessage, AIMessage, ToolMessage)):
                    continue
                if is_dropped_reply(message):
                    continue
                seen.add(message.id)
                data = message_to_dict(message)
                data["id"] = message.id
                self.core.record(session, data)

    # -- compaction ------------------------------------------------------------------
    @staticmethod
    def _last_summary(messages: Sequence[AnyMessage]) -> tuple[int, BaseMessage | None]:
        for index in range(len(messages) - 1, -1, -1):
            if is_summary_message(messages[index]):
                return index, messages[index]
        return -1, None

    def _detect_compaction(
        self, session: Session, messages: Sequence[AnyMessage]
    ) -> tuple[str | None, int | None]:
        _, summary = self._last_summary(messages)
        if summary is None or summary.id is None:
            return None, None
        state = self.core.flush_state.load(session.session_id)
        if state.compaction_marker == summary.id:
            return summary.id, state.cycle
        flushed = state.flushed_cycle is not None and state.flushed_cycle == state.cycle
        # The marker makes this idempotent: one summary id advances the cycle once.
        cycle = self.core.compaction(session, marker=summary.id)
        if not flushed and self.core.flush_possible():
            self._unflushed(session, state.cycle)
        return summary.id, cycle

    def _unflushed(self, session: Session, cycle: int) -> None:
        where = (
            "memmw runs the summarizer you passed, so this one is listed in create_agent"
            if self.summarization is not None
            else "a SummarizationMiddleware listed before memmw, or with a trigger below "
            "the flush threshold"
        )
        message = (
            f"session {session.session_id}: context was summarised (end of flush cycle "
            f"{cycle}) without the memory flush, so the evicted messages were never saved "
            f"({where}). Wire it as LangChainMemoryMiddleware(memory, "
            "summarization=SummarizationMiddleware(...)) and do not list the summarizer "
            "in create_agent yourself."
        )
        if self._strict:
            raise WiringError(message)
        log.error("%s", message)

    # -- token estimate --------------------------------------------------------------
    def _tokens(self, thread: str, session: Session, messages: Sequence[AnyMessage]) -> int:
        """Tokens of the next call, in the unit the flush threshold is measured in.

        With a summarizer, its own counter over the state messages (what its trigger
        compares); else memmw's counter over prompt, tools and messages. A provider's
        reported total after the last compaction wins when larger.
        """
        if self.summarization is not None and self.flush_at is not None:
            counter = getattr(self.summarization, "token_counter", None)
            counted = int(counter(list(messages))) if callable(counter) else 0
        else:
            dicts = [message_to_dict(m) for m in messages if not isinstance(m, SystemMessage)]
            prompt_tokens = self._prompt_tokens.get(thread)
            if prompt_tokens is None:
                schemas = [t.openai_schema() for t in session.tools]
                prompt_tokens = self.core.count_tokens(
                    [], system_prompt=self.core.system_prompt(session), tool_schemas=schemas
                )
            counted = prompt_tokens + self.core.tokens.count_messages(dicts)
        # The provider's count is more reliable, but only if it postdates the last
        # compaction (an older reply reports the size of the pre-compaction context).
        start, _ = self._last_summary(messages)
        for message in reversed(messages[start + 1 :]):
            if isinstance(message, AIMessage) and message.usage_metadata:
                reported = int(message.usage_metadata.get("total_tokens") or 0)
                return max(counted, reported)
        return counted

    def consolidation_model(self, messages: list[Message]) -> str:
        """The agent's own model as a consolidation's ``messages -> text`` model (the
        model of the last call, or ``flush_model``); called in the background only."""
        model = self._flush_model or self._last_model
        if model is None:
            raise WiringError("no LangChain model has run yet: nothing to consolidate with")
        return str(langchain_chat_model(model)(messages).text)

    def _agent_model(self, thread: str) -> BaseChatModel | None:
        return self._flush_model or self._models.get(thread) or self._last_model

    def _flush_callable(self, thread: str) -> ChatModel | None:
        model = self._agent_model(thread)
        if model is None:
            return self.core.flush_model
        return langchain_chat_model(model)

    def _summary_due(self, messages: Sequence[AnyMessage]) -> bool:
        """Whether the owned summarizer would summarise ``messages`` now."""
        return self._summary_cutoff(messages) is not None

    def _summary_cutoff(self, messages: Sequence[AnyMessage]) -> int | None:
        """Where the owned summarizer would cut ``messages`` now (None: it would not run).

        ``messages[:cutoff]`` are the messages its summary would evict.
        """
        summ = self.summarization
        if summ is None:
            return None
        should = getattr(summ, "_should_summarize", None)
        cutoff = getattr(summ, "_determine_cutoff_index", None)
        counter = getattr(summ, "token_counter", None)
        if not (callable(should) and callable(cutoff) and callable(counter)):
            return None  # unknown version: the check after the summary call covers it
        batch = list(messages)
        try:
            if not should(batch, counter(batch)):
                return None
            cut = int(cutoff(batch))
        except Exception:
            log.debug("cannot ask the summarizer whether it will run", exc_info=True)
            return None
        return cut if cut > 0 else None

    def _conversation(self, messages: Sequence[AnyMessage]) -> list[Message]:
        """The flush's view of ``messages``; each dict keeps the message id, which is the
        flush watermark's key (the flush turn never sends it to the model)."""
        out: list[Message] = []
        for m in messages:
            if isinstance(m, SystemMessage) or is_dropped_reply(m):
                continue
            data = message_to_dict(m)
            if m.id is not None:
                data["id"] = m.id
            out.append(data)
        return out

    def _flush_evicted(
        self,
        thread: str,
        session: Session,
        messages: Sequence[AnyMessage],
        evicted_ids: set[str],
    ) -> bool:
        """The compaction choke point: before the messages with ``evicted_ids`` leave the
        state, a delta flush over those no flush has seen yet (False = deferred, because
        the model is known only inside the next model call)."""
        if not self.core.flush_possible():
            return True
        conversation = self._conversation(messages)
        evicted = [i for i, m in enumerate(conversation) if m.get("id") in evicted_ids]
        model = self._flush_callable(thread)
        if model is None:
            if self.core.unflushed(session, conversation, evicted):
                self._pending_flush.add(thread)  # the model call will run it first
                return False
            return True
        self.core.flush_before_eviction(session, conversation, evicted, model=model)
        return True

    def _flush_now(
        self, thread: str, session: Session, messages: Sequence[AnyMessage], *, force: bool
    ) -> bool:
        """Run the flush if due (or ``force``: a compaction follows). False = deferred."""
        if force and (self.core.flushed_this_cycle(session) or not self.core.flush_possible()):
            return True
        model = self._flush_callable(thread)
        if model is None:
            if force or self._flush_decision_due(thread, session, messages):
                self._pending_flush.add(thread)  # the model call will run it first
                return False
            return True
        self.core.before_model(
            session,
            self._conversation(messages),
            tokens=self._tokens(thread, session, messages),
            model=model,
            threshold=self.flush_at,
            force=force,
        )
        self._pending_flush.discard(thread)
        return True

    def _flush_decision_due(
        self, thread: str, session: Session, messages: Sequence[AnyMessage]
    ) -> bool:
        decision = self.core.flush_decision(
            session, self._tokens(thread, session, messages), threshold=self.flush_at
        )
        return decision.run

    # -- node hooks ------------------------------------------------------------------
    @hook_config(can_jump_to=["end"])
    def before_agent(self, state: MemoryAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Start the thread's session; handle ``/new``/``/reset`` and pending clears."""
        thread = _thread_id(runtime)
        messages = state["messages"]
        last = messages[-1] if messages else None
        session = self.session_for(thread)
        command = parse_reset_command(last.text) if isinstance(last, HumanMessage) else None
        if command is not None and last is not None:
            self._record_new(session, messages[:-1])
            with self._lock:
                fresh = self.core.command(
                    session, last.text, source=command, model=self._flush_callable(thread)
                )
                self._recorded.pop(session.session_id, None)
                # The confirmation below is not part of the new session's history.
                self._pending_clear.add(thread)
            log.info("thread %s: new session %s", thread, fresh.session_id if fresh else "?")
            return {
                "messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), AIMessage(NEW_SESSION_REPLY)],
                "memmw_compactions": 0,
                "jump_to": "end",
            }
        if thread in self._pending_clear:
            with self._lock:
                self._pending_clear.discard(thread)
            keep = [last] if isinstance(last, HumanMessage) else []
            return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *keep]}
        # Placeholders of dropped NO_REPLY answers are not sent to the model again.
        dropped = [m.id for m in messages if is_dropped_reply(m) and m.id is not None]
        if dropped:
            return {"messages": [RemoveMessage(id=mid) for mid in dropped]}
        return None

    def _before(self, state: MemoryAgentState, runtime: Runtime[Any]) -> tuple[
        str, Session, dict[str, Any], bool
    ]:
        """Record, count compactions, flush when due; True when the summarizer may run."""
        thread = _thread_id(runtime)
        session = self.session_for(thread)
        messages = state["messages"]
        update: dict[str, Any] = {}
        summary_id, _cycle = self._detect_compaction(session, messages)
        if summary_id is not None and summary_id != state.get("memmw_summary_id"):
            update["memmw_summary_id"] = summary_id
            update["memmw_compactions"] = int(state.get("memmw_compactions", 0)) + 1
        self._record_new(session, messages)
        self._flush_now(thread, session, messages, force=False)
        may_summarize = True
        cut = self._summary_cutoff(messages)
        if cut is not None:
            may_summarize = self._flush_now(thread, session, messages, force=True)
            if may_summarize:
                evicted = {m.id for m in messages[:cut] if m.id is not None}
                may_summarize = self._flush_evicted(thread, session, messages, evicted)
        return thread, session, update, may_summarize

    def _after_summary(
        self,
        thread: str,
        session: Session,
        state: MemoryAgentState,
        result: dict[str, Any] | None,
        update: dict[str, Any],
    ) -> dict[str, Any] | None:
        if result and result.get("messages"):
            # The summary's own result names what it evicts: every state message it
            # does not keep. Flush what no flush has seen before applying it.
            messages = state["messages"]
            kept = {
                m.id
                for m in result["messages"]
                if isinstance(m, BaseMessage) and not isinstance(m, RemoveMessage)
            }
            evicted = {m.id for m in messages if m.id is not None and m.id not in kept}
            if not self._flush_now(thread, session, messages, force=True):
                return update or None  # deferred: summarise on the next step instead
            if not self._flush_evicted(thread, session, messages, evicted):
                return update or None
            update.update(result)
        flushed = self.core.flush_state.load(session.session_id).flushed_cycle
        if flushed is not None and flushed != state.get("memmw_flush_cycle"):
            update["memmw_flush_cycle"] = flushed
        return update or None

    def before_model(self, state: MemoryAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Record new messages, count compactions, flush when due, then summarise (if owned)."""
        thread, session, update, may_summarize = self._before(state, runtime)
        result = None
        if self.summarization is not None and may_summarize:
            result = self.summarization.before_model(state, runtime)
        return self._after_summary(thread, session, state, result, update)

    async def abefore_model(
        self, state: MemoryAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of :meth:`before_model` (file work and the flush run in a thread)."""
        thread, session, update, may_summarize = await asyncio.to_thread(
            self._before, state, runtime
        )
        result = None
        if self.summarization is not None and may_summarize:
            result = await self.summarization.abefore_model(state, runtime)
        return await asyncio.to_thread(
            self._after_summary, thread, session, state, result, update
        )

    def after_model(self, state: MemoryAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Record the reply; a ``NO_REPLY`` answer becomes an empty flagged placeholder.

        The placeholder (same id, no text) replaces the silent answer, so the run never
        ends with the user's own message as its last one; it is not sent to the model
        again. A stripped token (``Done. NO_REPLY``) leaves only the visible text; a
        silent text beside tool calls is emptied and the calls are kept.
        """
        session = self.session_for(_thread_id(runtime))
        messages = state["messages"]
        last = messages[-1] if messages else None
        if isinstance(last, AIMessage):
            cleaned = guard_message(last)  # a silent text with tool calls: calls kept
            if is_dropped_reply(cleaned):
                self.core.after_model(session, message_to_dict(last), record=False)
                if last.id is not None:
                    with self._lock:
                        self._seen(session).add(last.id)
                if cleaned is last:
                    return None  # the guard model already left the placeholder
                return {"messages": [cleaned]}
            if cleaned is not last:
                self._record_new(session, [*messages[:-1], cleaned])
                self.core.after_model(session, message_to_dict(cleaned), record=False)
                return {"messages": [cleaned]}
        self._record_new(session, messages)
        if isinstance(last, AIMessage):
            self.core.after_model(session, message_to_dict(last), record=False)
        return None

    def after_agent(self, state: MemoryAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Record anything not recorded yet (the transcript is the archive's input)."""
        self._record_new(self.session_for(_thread_id(runtime)), state["messages"])
        return None

    # -- wrap hooks ------------------------------------------------------------------
    def _prepare(self, request: ModelRequest[Any]) -> tuple[str, Session, ModelRequest[Any]]:
        thread = _thread_id(request.runtime)
        session = self.session_for(thread)
        if isinstance(request.model, BaseChatModel):
            self._models[thread] = request.model
            self._last_model = request.model
        self._detect_compaction(session, request.messages)
        messages = request.messages
        names = _tool_names(request.tools)
        extra = self.core.system_prompt(session, "", tool_names=names).strip()
        overrides: dict[str, Any] = {}
        if extra:
            current = request.system_message
            if current is None:
                system = SystemMessage(content=extra)
            elif isinstance(current.content, str):
                system = SystemMessage(content=f"{current.content}\n\n{extra}")
            else:
                system = SystemMessage(content=[*current.content, {"type": "text", "text": extra}])
            overrides["system_message"] = system
        if any(is_dropped_reply(m) for m in request.messages):
            overrides["messages"] = [m for m in request.messages if not is_dropped_reply(m)]
        if isinstance(request.model, BaseChatModel) and not isinstance(
            request.model, NoReplyGuardModel
        ):
            overrides["model"] = NoReplyGuardModel.wrap(request.model)
        if overrides:
            request = request.override(**overrides)
        schemas: list[dict[str, Any]] = []
        for tool in request.tools:
            try:
                schemas.append(convert_to_openai_tool(tool))
            except Exception:  # an exotic tool only costs accuracy of the estimate
                log.debug("cannot convert tool for token counting", exc_info=True)
        system_text = request.system_message.text if request.system_message else ""
        self._prompt_tokens[thread] = self.core.count_tokens(
            [], system_prompt=system_text, tool_schemas=schemas
        )
        # A window the system prompt, bootstrap and tools alone fill: a clear error now,
        # not an overflow on every turn (the custom loop refuses the same way).
        self.core.check_prompt_room(self._prompt_tokens[thread], self._compact_at)
        pending = thread in self._pending_flush
        if pending or self._flush_decision_due(thread, session, messages):
            # First call of a thread or of a new process: the model is known only now.
            self._flush_now(thread, session, messages, force=pending)
        if pending:
            # A summary waits for this flush: save what it will evict, then send this
            # call the compacted view so it fits (the state is summarised next step).
            cut = self._summary_cutoff(messages)
            if cut is not None:
                evicted = {m.id for m in messages[:cut] if m.id is not None}
                self._flush_evicted(thread, session, messages, evicted)
                sent_cut = self._summary_cutoff(request.messages)
                if sent_cut is not None:
                    request = self._compacted_request(request, sent_cut)
            self._pending_flush.discard(thread)
        return thread, session, request

    def _compacted_request(self, request: ModelRequest[Any], cut: int) -> ModelRequest[Any]:
        """``request`` with ``messages[:cut]`` replaced by the summarizer's summary.

        Used once, for the call that ran a deferred flush: its state still holds the
        whole conversation (the summarizer replaces it on the next step), and sending all
        of it could overflow the window and fail the user's turn.
        """
        summ = self.summarization
        create = getattr(summ, "_create_summary", None)
        build = getattr(summ, "_build_new_messages", None)
        if not (callable(create) and callable(build)):
            return request
        messages = list(request.messages)
        try:
            head = list(build(create(messages[:cut])))
        except Exception:
            log.debug("cannot summarise the deferred call's request", exc_info=True)
            return request
        return request.override(messages=[*head, *messages[cut:]])

    def _overflow_flush(
        self, thread: str, session: Session, request: ModelRequest[Any], exc: BaseException
    ) -> None:
        self._record_new(session, request.messages)
        self.core.on_model_error(
            session, exc, self._conversation(request.messages), model=self._flush_callable(thread)
        )

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage:
        """Inject the prompt, guard ``NO_REPLY``, run a deferred flush; flush on overflow."""
        thread, session, request = self._prepare(request)
        try:
            return handler(request)
        except Exception as exc:
            if is_context_overflow(exc):
                self._overflow_flush(thread, session, request, exc)
            raise

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage:
        """Async twin of :meth:`wrap_model_call`."""
        thread, session, request = await asyncio.to_thread(self._prepare, request)
        try:
            return await handler(request)
        except Exception as exc:
            if is_context_overflow(exc):
                await asyncio.to_thread(self._overflow_flush, thread, session, request, exc)
            raise


__all__ = [
    "DEFAULT_THREAD",
    "NEW_SESSION_REPLY",
    "SUMMARY_SOURCE",
    "LangChainMemoryMiddleware",
    "MemoryAgentState",
    "dict_to_message",
    "is_summary_message",
    "langchain_chat_model",
    "message_to_dict",
    "trigger_token_limits",
]
