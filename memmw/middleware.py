"""Framework-neutral memory middleware: one object per agent, driven by lifecycle events."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from memmw import observability
from memmw.agent.chat import ChatModel, Reply, normalize_reply
from memmw.agent.prompts import (
    append_section,
    flush_system_prompt,
    flush_user_prompt,
    memory_recall_section,
    visible_text,
)
from memmw.agent.tools import (
    MemoryBackend,
    MemoryTool,
    build_memory_tools,
    flush_tools,
    request_sync,
    session_access,
)
from memmw.agent.tools import workspace_is_writable as _writable
from memmw.chat_type import ChatType, chat_type_for, check_principal_id, citations_enabled
from memmw.errors import ConfigError, WiringError
from memmw.graph.telemetry import TelemetryLog, telemetry_path
from memmw.hooks.active_memory import ActiveMemory
from memmw.hooks.bootstrap import (
    BootstrapContext,
    BootstrapStamp,
    bootstrap_stamp,
    build_startup_context,
    run_bootstrap,
)
from memmw.hooks.flush import (
    FlushDecision,
    FlushOutcome,
    FlushPoints,
    FlushStateStore,
    decide_flush,
    flush_points,
    message_keys,
    run_flush_chunked,
    with_tool_pairs,
)
from memmw.hooks.registry import Event, HookContext, HookRegistry
from memmw.hooks.session_archive import (
    ArchiveRequest,
    SlugFunction,
    archive_session,
    model_slug_fn,
)
from memmw.text.tokens import TokenCounter, default_counter
from memmw.timeutil import Clock, system_clock, user_now
from memmw.workspace.access import SessionAccess
from memmw.workspace.layout import daily_note_path, group_note_path, principal_note_path
from memmw.workspace.transcripts import (
    TranscriptStore,
    principal_session_id,
    transcript_principal,
)

log = logging.getLogger(__name__)

RESET_COMMANDS = ("/new", "/reset")
_OVERFLOW_HINTS = (
    "context length",
    "context_length",
    "context window",
    "maximum context",
    "too many tokens",
    "prompt is too long",
    "input is too long",
    "contextoverflow",
)


# ---------------------------------------------------------------------------------------
# Pure decisions


def is_bare_command(text: str | None) -> bool:
    """True for ``/new`` or ``/reset`` with nothing after it (startup context applies)."""
    return parse_reset_command(text) is not None and len(str(text).split()) == 1


def parse_reset_command(text: str | None) -> str | None:
    """``/new`` or ``/reset`` when ``text`` is that command (any case, arguments allowed)."""
    if not text or not isinstance(text, str):
        return None
    first = text.strip().split(maxsplit=1)[0].lower() if text.strip() else ""
    return first if first in RESET_COMMANDS else None


def is_context_overflow(exc: BaseException) -> bool:
    """True when a model error means the prompt exceeded the context window."""
    for cls in type(exc).__mro__:
        if cls.__name__ == "ContextOverflowError":
            return True
    text = f"{type(exc).__name__} {exc}".lower()
    return any(hint in text for hint in _OVERFLOW_HINTS)


def auto_reset_reason(
    last_activity: dt.datetime | None,
    now: dt.datetime,
    *,
    idle_minutes: float | None = None,
    daily_reset_hour: int | None = None,
) -> str | None:
    """Whether a session should be reset automatically before the next message.

    Args:
        last_activity: Time of the last message (None = fresh session, never reset).
        now: The current time (same timezone as the daily reset hour is meant in).
        idle_minutes: Reset after this much inactivity.
        daily_reset_hour: Reset when the hour ``daily_reset_hour`` passed since the last
            activity (e.g. 4 = sessions roll over at 04:00).

    Returns:
        ``idle`` or ``daily``, or None to keep the session.
    """
    if last_activity is None:
        return None
    if idle_minutes is not None and now - last_activity >= dt.timedelta(minutes=idle_minutes):
        return "idle"
    if daily_reset_hour is not None:
        boundary = now.replace(hour=daily_reset_hour, minute=0, second=0, microsecond=0)
        if boundary > now:
            boundary -= dt.timedelta(days=1)
        if last_activity < boundary <= now:
            return "daily"
    return None


class MemoryEngine(MemoryBackend, Protocol):
    """Everything the middleware uses of its engine; :class:`memmw.Memory` implements it.

    Besides the tools' :class:`~memmw.agent.tools.MemoryBackend` (workspace, state dir,
    agent id, config, ``sync``, ``search_result``, ``get``): the file watcher, the
    background sync and the transcript and compaction notices that keep session
    transcripts searchable.
    """

    def start_watching(self) -> str:
        """Start the file watcher (idempotent); returns its state."""
        ...

    def sync_in_background(self) -> None:
        """Start a sync without waiting for it."""
        ...

    def notify_transcript(self, path: str | os.PathLike[str]) -> bool:
        """A transcript grew; True when that started a re-index."""
        ...

    def notify_compaction(self) -> bool:
        """A session was compacted; True when that started a re-index."""
        ...


def deliverable_text(reply: Any) -> str | None:
    """The text to show the user, or None when the reply is silent (``NO_REPLY`` rules)."""
    return visible_text(normalize_reply(reply).text)


def deliverable_reply(reply: Any) -> Reply:
    """``reply`` with its text as a person may see it: a silent text becomes ``""``, a
    stripped token or special token disappears; tool calls are kept."""
    normalized = normalize_reply(reply)
    shown = visible_text(normalized.text) or ""
    return normalized if shown == normalized.text else replace(normalized, text=shown)


# ---------------------------------------------------------------------------------------
# Session


@dataclass
class Session:
    """One running session of the agent.

    Attributes:
        session_id: Transcript id (file ``<id>.jsonl``).
        session_key: Routing key (``agent:main:telegram:group:42``); decides the chat type.
        chat_type: ``direct`` or ``group``.
        started_at: When the session started (UTC).
        bootstrap: What the session bootstrap loaded.
        tools: The memory tools of this session.
        last_activity: Time of the last recorded message.
        last_flush: The last flush outcome, if any.
        previous_archive: Archive file written when the previous session ended, if any.
        startup_context: Recent daily notes (fenced, untrusted) loaded because the session
            was started by a bare ``/new`` or ``/reset``; private sessions only.
        bootstrap_stamp: What the bootstrap was read from (see
            :meth:`MemoryMiddleware.refresh_bootstrap`).
        bootstrap_daily: The bootstrap includes the recent daily notes (not after a bare
            ``/new``, whose startup context has them).
        principal: Who the host said the session is with (a DM's sender, a group's id),
            validated; None lets the session key and ``dm_scope`` decide
            (:func:`memmw.chat_type.principal_for`).
    """

    session_id: str
    session_key: str
    chat_type: ChatType
    started_at: dt.datetime
    bootstrap: BootstrapContext = field(default_factory=BootstrapContext)
    tools: list[MemoryTool] = field(default_factory=list)
    last_activity: dt.datetime | None = None
    last_flush: FlushOutcome | None = None
    previous_archive: Path | None = None
    startup_context: str = ""
    bootstrap_stamp: BootstrapStamp | None = None
    bootstrap_daily: bool = True
    principal: str | None = None

    @property
    def private(self) -> bool:
        """True in the main/direct session (curated memory is loaded)."""
        return self.chat_type == "direct"

    @property
    def tool_names(self) -> list[str]:
        """Names of the session's tools."""
        return [t.name for t in self.tools]


def new_session_id(now: dt.datetime | None = None) -> str:
    """A sortable, file-safe session id: ``YYYYmmddTHHMMSS-<8 hex>``."""
    stamp = (now or dt.datetime.now(dt.timezone.utc)).astimezone(dt.timezone.utc)
    return f"{stamp.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"


def _flush_status(outcome: FlushOutcome) -> str:
    """``silent`` (the turn completed with a bare ``NO_REPLY``), ``ok`` (completed with
    another reply) or ``failed`` (no turn completed)."""
    if outcome.ok and outcome.result is not None:
        return "silent" if outcome.result.silent else "ok"
    return "failed"


# ---------------------------------------------------------------------------------------
# Middleware


class MemoryMiddleware:
    """Memory for one agent, framework-neutral; adapters call its event methods.

    Events: :meth:`start_session`, :meth:`before_model` (may run the silent flush),
    :meth:`after_model` (filters ``NO_REPLY``), :meth:`command` (``/new``, ``/reset``),
    :meth:`auto_reset`, :meth:`compaction` and :meth:`on_model_error`. Register your own
    callbacks with ``middleware.hooks.on(Event.COMPACTION, fn)``.

    Args:
        memory: The engine (:class:`memmw.Memory` or anything with the same methods).
        flush_model: Model used for the silent flush turn when the adapter passes none.
        slug_fn: Optional LLM call naming session archives (``text -> slug``), used
            whenever given, with ``session_memory.slug_timeout_s``. Without it, and with
            ``session_memory.llm_slug`` on, the agent's own model names them; else
            ``HHMM``.
        hooks: Callback registry (a new one by default).
        token_counter: Token counter (the shared tiktoken/estimate counter by default).
        read_only: Force read-only (no flush, no writes); None checks the file system.
        clock: Source of "now" (tests pin it).
        include_append_tool: Offer ``memory_append`` to the agent.
        allow_curated_append: Let ``memory_append`` write ``MEMORY.md``/``USER.md``.
        context_window: Model context window; default ``config.flush.context_window``.
        watch: Start the engine's file watcher (default ``config.sync.watch``); without
            watchdog installed searches sync instead, with a warning only when
            ``watch=True`` was passed (the default logs an info line).
    """

    def __init__(
        self,
        memory: MemoryEngine,
        *,
        flush_model: ChatModel | None = None,
        slug_fn: SlugFunction | None = None,
        hooks: HookRegistry | None = None,
        token_counter: TokenCounter | None = None,
        read_only: bool | None = None,
        clock: Clock | None = None,
        include_append_tool: bool = True,
        allow_curated_append: bool = False,
        context_window: int | None = None,
        watch: bool | None = None,
    ) -> None:
        self.memory = memory
        self.config = memory.config
        self.flush_model = flush_model
        self.slug_fn = slug_fn
        self.hooks = hooks or HookRegistry()
        self.tokens = token_counter or default_counter()
        self.read_only = read_only
        self.clock: Clock = clock or system_clock
        self.include_append_tool = include_append_tool
        self.allow_curated_append = allow_curated_append
        if context_window is not None and context_window < 1:
            raise ConfigError(f"context_window must be >= 1; got {context_window}")
        self.context_window = context_window
        self.transcripts = TranscriptStore(memory.state_dir, memory.agent_id)
        self.flush_state = FlushStateStore(memory.state_dir, memory.agent_id)
        self._sessions: dict[str, Session] = {}
        self._telemetry_log: TelemetryLog | None = None
        # Active memory (issue 13): the [GRAPH MEMORY] block of each turn.
        self.active_memory = ActiveMemory(memory, token_counter=self.tokens.count)
        if self.config.sync.watch if watch is None else watch:
            self._start_watching(asked=watch is True)

    def _start_watching(self, asked: bool = False) -> None:
        """Watch the memory files so edits are searchable without an explicit sync.

        watchdog missing is a warning only when the caller ``asked`` for watching: the
        default (``sync.watch``) then syncs on search, as documented, and says so at INFO.
        """
        try:
            state = self.memory.start_watching()
        except Exception as exc:  # e.g. watchdog missing: searches sync instead
            quiet = isinstance(exc, ConfigError) and not asked
            log.log(logging.INFO if quiet else logging.WARNING,
                    "file watcher not started (%s); searches will sync instead", exc)
            return
        log.debug("file watcher: %s", state)

    # -- helpers ---------------------------------------------------------------------
    def _emit(self, event: Event, session: Session, **data: Any) -> None:
        self.hooks.emit(HookContext(event, session.session_id, session.session_key, data))

    def now(self) -> dt.datetime:
        """Now in the user's timezone."""
        return user_now(self.config.user_timezone, self.clock)

    def is_read_only(self) -> bool:
        """True when memory files cannot be written (forced, or the folder is not writable)."""
        if self.read_only is not None:
            return self.read_only
        return not _writable(Path(self.memory.workspace))

    # -- session lifecycle -----------------------------------------------------------
    def start_session(
        self,
        session_key: str = "main",
        *,
        session_id: str | None = None,
        chat_type: str | None = None,
        resume: bool = True,
        startup: bool = False,
        principal: str | None = None,
    ) -> Session:
        """Start (or resume) the session of ``session_key``: warm sync, bootstrap, tools.

        Args:
            session_key: Routing key; ``group``/``channel`` tokens make it a group session.
            session_id: Explicit id; default the key's current session (``resume``) or new.
            chat_type: Explicit ``direct``/``group`` from framework metadata.
            resume: Continue the key's last session after a restart.
            startup: Started by a bare ``/new`` or ``/reset``: a private session gets the
                recent daily notes as the startup context instead of in the bootstrap.
            principal: Who the session is with (a DM's sender, a group's id), when the
                host knows; its private memory is ``memory/principals/<id>/``.

        Raises:
            ConfigError: a bad principal id.
        """
        kind = chat_type_for(session_key, chat_type, self.config.private_chat_types)
        gate = session_access(
            self.memory, session_key=session_key, chat_type=kind, principal=principal
        )
        principal = check_principal_id(principal) if principal is not None else None
        startup = startup and kind == "direct"
        if session_id is not None and transcript_principal(session_id) not in (
            None,
            gate.principal,
        ):
            raise ConfigError(
                f"session id {session_id!r} is another principal's conversation; "
                f"this session is {gate.principal or 'the owner'}'s"
            )
        if session_id is None and resume:
            session_id = self.transcripts.current_session(session_key)
            if session_id is not None and transcript_principal(session_id) != gate.principal:
                session_id = None  # the key was another principal's: never continue it
        # A principal's transcript is named as theirs (<id>=<principal>.jsonl).
        session_id = principal_session_id(
            session_id or new_session_id(self.clock()), gate.principal
        )
        self.transcripts.bind_session(session_key, session_id)
        stamp = self._stamp(session_key, kind, include_daily=not startup, principal=principal)
        bootstrap = run_bootstrap(
            self.memory,
            session_key=session_key,
            chat_type=kind,
            clock=self.clock,
            include_daily=not startup,
            principal=principal,
        )
        startup_text = ""
        if startup:
            try:
                startup_text = build_startup_context(
                    Path(self.memory.workspace),
                    today=self.now().date(),
                    utc_today=self.clock().astimezone(dt.timezone.utc).date(),
                    access=gate,
                )
            except Exception as exc:
                log.warning("startup context failed: %s", type(exc).__name__)
        tools = build_memory_tools(
            self.memory,
            session_key=session_key,
            chat_type=kind,
            include_append=self.include_append_tool,
            allow_curated_append=self.allow_curated_append,
            read_only=self.read_only,
            clock=self.clock,
            principal=principal,
        )
        session = Session(
            session_id=session_id,
            session_key=session_key,
            chat_type=kind,
            started_at=self.clock(),
            bootstrap=bootstrap,
            tools=tools,
            startup_context=startup_text,
            bootstrap_stamp=stamp,
            bootstrap_daily=not startup,
            principal=principal,
        )
        self._sessions[session_key] = session
        log.info(
            "session %s started (%s, %d bootstrap files)", session_id, kind, len(bootstrap.files)
        )
        self._emit(Event.SESSION_START, session, bootstrap=bootstrap)
        return session

    def session(
        self,
        session_key: str = "main",
        *,
        chat_type: str | None = None,
        principal: str | None = None,
    ) -> Session:
        """The running session of ``session_key``, started on first use.

        A running session asked for with another ``principal`` is an error, never a
        silent switch of whose memory it reads.

        Raises:
            ConfigError: a bad principal id, or another principal than the session's.
        """
        existing = self._sessions.get(session_key)
        if existing is None:
            return self.start_session(session_key, chat_type=chat_type, principal=principal)
        if principal is not None and check_principal_id(principal) != existing.principal:
            raise ConfigError(
                f"session {session_key!r} is running for principal {existing.principal!r},"
                f" not {principal!r}: use one session key per principal"
            )
        return existing

    def access(self, session: Session) -> SessionAccess:
        """The privacy gate of ``session``: what it may read, and where it writes."""
        return session_access(
            self.memory,
            session_key=session.session_key,
            chat_type=session.chat_type,
            principal=session.principal,
        )


    # -- bootstrap freshness -----------------------------------------------------------
    def _stamp(
        self,
        session_key: str,
        chat_type: str,
        *,
        include_daily: bool,
        principal: str | None = None,
    ) -> BootstrapStamp | None:
        try:
            return bootstrap_stamp(
                self.memory,
                session_key=session_key,
                chat_type=chat_type,
                clock=self.clock,
                include_daily=include_daily,
                principal=principal,
            )
        except Exception as exc:  # no stamp: the next check re-reads
            log.warning("bootstrap stat check failed: %s", type(exc).__name__)
            return None

    def refresh_bootstrap(self, session: Session) -> bool:
        """Re-read the session bootstrap when its files changed; True when it did.

        A stat check per file (``mtime_ns``, size, inode, and which files exist, for the
        user's current day): an edit to ``MEMORY.md``, ``USER.md``, a daily note or a
        working-memory file reaches the very next model call, in every adapter, without
        re-reading unchanged files. :meth:`system_prompt` calls it.
        """
        stamp = self._stamp(
            session.session_key,
            session.chat_type,
            include_daily=session.bootstrap_daily,
            principal=session.principal,
        )
        old = session.bootstrap_stamp
        if stamp is not None and old is not None and old.current(stamp):
            return False
        session.bootstrap = run_bootstrap(
            self.memory,
            session_key=session.session_key,
            chat_type=session.chat_type,
            clock=self.clock,
            warm_sync=False,
            include_daily=session.bootstrap_daily,
            principal=session.principal,
        )
        session.bootstrap_stamp = stamp
        if old is not None and stamp is not None and old.files != stamp.files:
            log.info("session %s: bootstrap files changed; re-read", session.session_id)
        return True

    def check_prompt_room(self, base_tokens: int, compact_at: int | None = None) -> None:
        """Refuse a context window that the system prompt, bootstrap and tools alone fill.

        Args:
            base_tokens: Tokens of the system prompt (with the memory bootstrap) and the
                tool schemas, without any message.
            compact_at: Where compaction happens when something else decides it.

        Raises:
            ConfigError: No room is left before compaction (names the window, the
                reserve and the sizes), instead of overflow errors turn after turn.
        """
        points = self.flush_points(compact_at)
        if base_tokens >= points.compact_at:
            raise ConfigError(
                f"context window {points.context_window} with reserve {points.reserve} "
                f"leaves {points.compact_at} tokens before compaction, but the system prompt "
                f"(with the memory bootstrap) and tools alone take {base_tokens}: use a "
                "larger context_window, a shorter system prompt or smaller bootstrap files "
                "(MEMORY.md, USER.md; bootstrap.total_max_chars)"
            )

    # -- prompt ----------------------------------------------------------------------
    def recall_section(self, session: Session, tool_names: Sequence[str] | None = None) -> str:
        """The ``## Memory Recall`` section for the tools present (empty without them)."""
        names = session.tool_names if tool_names is None else list(tool_names)
        return memory_recall_section(
            names,
            citations=citations_enabled(
                self.config.citations,
                session.session_key,
                session.chat_type,
                self.config.private_chat_types,
            ),
            sources=self.config.sources,
            extra_paths=[e.path for e in self.config.extra_paths],
        )

    def system_prompt(
        self, session: Session, base: str | None = None, *, tool_names: Sequence[str] | None = None
    ) -> str:
        """The system prompt memmw gives the model: every adapter builds it here.

        ``base`` (the host's own prompt), then the ``## Memory Recall`` section (only with
        memory tools), the session bootstrap and, after a bare ``/new``, the startup
        context. Add a memmw prompt block in this one method and every host gets it.
        The bootstrap is re-read first when its files changed (:meth:`refresh_bootstrap`).
        """
        self.refresh_bootstrap(session)
        prompt = append_section(base, self.recall_section(session, tool_names))
        prompt = append_section(prompt, session.bootstrap.text)
        prompt = append_section(prompt, session.startup_context)
        # Active memory (issue 13): facts and triggers for the latest user message.
        return append_section(prompt, self.active_memory.block(session))

    # -- transcript ------------------------------------------------------------------
    def record(self, session: Session, message: Mapping[str, Any]) -> None:
        """Append a message to the session transcript (failures are logged, not raised)."""
        role = str(message.get("role", ""))
        self.active_memory.observe(session, message)  # active memory (issue 13)
        extra = {k: v for k, v in message.items() if k not in ("role", "content")}
        try:
            self.transcripts.append(session.session_id, role, message.get("content", ""), **extra)
        except Exception as exc:
            log.warning("transcript write failed: %s", type(exc).__name__)
        session.last_activity = self.clock()
        self._notify_transcript(session)

    def _notify_transcript(self, session: Session) -> None:
        """Tell the engine the transcript grew: it re-indexes past ``sync.sessions`` deltas.

        Without the watcher nothing else notices transcript growth; with it, a second
        report of the same size counts no new bytes.
        """
        try:
            self.memory.notify_transcript(self.transcripts.path(session.session_id))
        except Exception as exc:
            log.warning("transcript delta sync failed: %s", type(exc).__name__)

    # -- before/after the model call -------------------------------------------------
    def count_tokens(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        system_prompt: str = "",
        tool_schemas: Sequence[Mapping[str, Any]] = (),
    ) -> int:
        """Tokens the next model call sends: system prompt, messages and tool schemas."""
        total = self.tokens.count(system_prompt) + self.tokens.count_messages(messages)
        if tool_schemas:
            total += self.tokens.count(json.dumps(list(tool_schemas), default=str))
        return total

    def flush_points(self, compact_at: int | None = None) -> FlushPoints:
        """The effective context window, compaction point and flush threshold.

        Both adapters and :meth:`flush_decision` use this (one computation,
        :func:`memmw.hooks.flush.flush_points`).

        Args:
            compact_at: Where compaction happens when something else decides it (a
                summarizer's token trigger, a custom loop's own point).
        """
        return flush_points(
            self.config.flush, context_window=self.context_window, compact_at=compact_at
        )

    def flush_decision(
        self,
        session: Session,
        tokens: int,
        *,
        heartbeat: bool = False,
        threshold: int | None = None,
    ) -> FlushDecision:
        """Decide whether the flush should run now for ``session`` (reads the cycle state).

        Args:
            session: The session.
            tokens: Tokens the next model call sends.
            heartbeat: True for heartbeat runs (never flushed).
            threshold: Token threshold overriding the window's (a summarizer's trigger
                minus the soft threshold).
        """
        state = self.flush_state.load(session.session_id)
        size = self.transcripts.size_bytes(session.session_id)
        since = size - state.compaction_bytes if size >= state.compaction_bytes else size
        return decide_flush(
            self.config.flush,
            tokens=tokens,
            cycle=state.cycle,
            flushed_cycle=state.flushed_cycle,
            transcript_bytes=since,
            read_only=self.is_read_only(),
            heartbeat=heartbeat,
            threshold=self.flush_points().flush_at if threshold is None else threshold,
        )

    def flushed_this_cycle(self, session: Session) -> bool:
        """True when the flush already ran (or was attempted) in the current cycle."""
        state = self.flush_state.load(session.session_id)
        return state.flushed_cycle is not None and state.flushed_cycle == state.cycle

    def flush_possible(self) -> bool:
        """True when a flush can run at all (enabled and the workspace is writable)."""
        return self.config.flush.enabled and not self.is_read_only()

    def before_model(
        self,
        session: Session,
        messages: Sequence[Mapping[str, Any]],
        *,
        system_prompt: str = "",
        tool_schemas: Sequence[Mapping[str, Any]] = (),
        model: ChatModel | None = None,
        tokens: int | None = None,
        heartbeat: bool = False,
        threshold: int | None = None,
        force: bool = False,
    ) -> FlushOutcome:
        """Before each model call: run the silent flush when the threshold is reached.

        Args:
            session: The session.
            messages: The conversation the next call will send (no system message).
            system_prompt: The system prompt of that call.
            tool_schemas: Tool schemas of that call (they cost tokens too).
            model: Model for the flush turn (default ``flush_model``).
            tokens: Precomputed token count (otherwise counted here).
            heartbeat: True for heartbeat runs (never flushed).
            threshold: Token threshold overriding the window's.
            force: Flush now unless already flushed this cycle, disabled or read-only
                (the host is about to compact: reason ``pre-compaction``).

        Returns:
            The flush outcome (``ran`` False when it was not due).

        Raises:
            WiringError: A flush is due and neither ``model`` nor ``flush_model`` was
                given (memory would be lost at the next compaction). Other failures are
                logged, never raised.
        """
        try:
            if tokens is None:
                tokens = self.count_tokens(
                    messages, system_prompt=system_prompt, tool_schemas=tool_schemas
                )
            decision = self.flush_decision(
                session, tokens, heartbeat=heartbeat, threshold=threshold
            )
            if force and decision.reason in ("below-threshold", "no-threshold"):
                decision = replace(decision, run=True, reason="pre-compaction")
        except Exception as exc:
            log.warning("flush decision failed: %s", type(exc).__name__)
            log.debug("flush decision failure", exc_info=True)
            decision = FlushDecision(run=False, reason="error")
        self._emit(Event.BEFORE_MODEL, session, decision=decision, tokens=tokens)
        if not decision.run:
            return FlushOutcome(decision=decision)
        return self.run_flush(session, messages, decision, model=model)

    def run_flush(
        self,
        session: Session,
        messages: Sequence[Mapping[str, Any]],
        decision: FlushDecision,
        *,
        model: ChatModel | None = None,
    ) -> FlushOutcome:
        """Run the silent flush turn for ``decision.cycle`` and store the cycle marker.

        The turn is retried once; whether it succeeds or not, the cycle is marked so the
        flush neither blocks the user's turn nor repeats every turn.

        Raises:
            WiringError: No model for the flush (never a silent skip).
        """
        conversation = [dict(m) for m in messages]
        return self._flush_turns(
            session, conversation, message_keys(conversation), decision, model=model
        )

    def flush_budget(self, tools: Sequence[MemoryTool] = ()) -> int:
        """Tokens of conversation one flush turn may be shown: the room below compaction
        (``context_window - reserve``) less the flush prompts and the ``tools``' schemas.
        A turn the model still finds too long is split again (``run_flush_chunked``)."""
        now = self.now()
        overhead = self.count_tokens(
            [{"role": "user", "content": flush_user_prompt(now.date(), now)}],
            system_prompt=flush_system_prompt(now.date()),
            tool_schemas=[t.openai_schema() for t in tools],
        )
        return max(64, self.flush_points().compact_at - overhead)

    def _flush_turns(
        self,
        session: Session,
        conversation: list[dict[str, Any]],
        keys: Sequence[str],
        decision: FlushDecision,
        *,
        model: ChatModel | None = None,
    ) -> FlushOutcome:
        """Run the flush over ``conversation`` (split to fit the window), store the cycle
        marker and the watermark (the keys of what a completed turn was shown)."""
        with observability.span(
            "flush",
            self.memory.agent_id,
            flush_reason=decision.reason,
            flush_cycle=decision.cycle,
            flush_messages=len(conversation),
            **{observability.CONVERSATION_ID: session.session_id},
        ) as sp:
            outcome = self._flush_turns_traced(session, conversation, keys, decision, model)
            status = _flush_status(outcome)
            sp.set(
                flush_status=status,
                flush_turns=outcome.turns,
                flush_messages_seen=len(outcome.seen),
                flush_messages_missed=len(outcome.missed),
                flush_writes=len(outcome.result.writes) if outcome.result is not None else 0,
                **{
                    observability.RECORD_COUNT: (
                        len(outcome.result.writes) if outcome.result is not None else 0
                    )
                },
            )
            if status == "failed":
                sp.fail("flush_failed")  # its error text may quote the conversation
            return outcome

    def _flush_turns_traced(
        self,
        session: Session,
        conversation: list[dict[str, Any]],
        keys: Sequence[str],
        decision: FlushDecision,
        model: ChatModel | None,
    ) -> FlushOutcome:
        flush_model = model or self.flush_model
        if flush_model is None:
            raise WiringError(
                f"memory flush due in session {session.session_id} (cycle {decision.cycle}, "
                f"{decision.reason}) but no model was given: pass flush_model= to "
                "MemoryMiddleware or model= to before_model()"
            )
        now = self.now()
        access = self.access(session)
        # A group session's flush writes the group's own note (recorded as group-written).
        # A principal's flush writes that person's own note.
        if access.private and access.principal is not None:
            target = principal_note_path(access.principal, now.date())
        elif access.private or access.scope is None:
            target = daily_note_path(now.date())
        else:
            target = group_note_path(access.scope, now.date())
        tools = flush_tools(
            self.memory, target, read_only=self.read_only, clock=self.clock, access=access
        )
        outcome = run_flush_chunked(
            flush_model,
            conversation,
            keys,
            decision=decision,
            system_prompt=flush_system_prompt(now.date(), target),
            user_prompt=flush_user_prompt(now.date(), now, target),
            tools=tools,
            budget=self.flush_budget(tools),
            count=lambda m: self.tokens.count_messages([m]),
            is_overflow=is_context_overflow,
        )
        try:
            self.flush_state.mark_flushed(
                session.session_id,
                decision.cycle,
                status=_flush_status(outcome),
                seen=outcome.seen,
            )
        except Exception as exc:
            log.warning("could not store the flush marker: %s", type(exc).__name__)
        session.last_flush = outcome
        self._telemetry(
            "flush",
            session=session.session_id,
            cycle=decision.cycle,
            reason=decision.reason,
            ok=outcome.ok,
            turns=outcome.turns,
            seen=len(outcome.seen),
            missed=len(outcome.missed),
        )
        self._emit(Event.FLUSH, session, outcome=outcome)
        return outcome

    def _telemetry(self, event: str, **fields: Any) -> None:
        log_ = self._telemetry_log
        if log_ is None:
            enabled = getattr(getattr(self.config, "active_memory", None), "telemetry", True)
            log_ = self._telemetry_log = TelemetryLog(
                telemetry_path(Path(self.memory.state_dir), self.memory.agent_id),
                enabled=bool(enabled),
            )
        log_.record(event, **fields)

    def unflushed(
        self, session: Session, messages: Sequence[Mapping[str, Any]], evicted: Iterable[int]
    ) -> list[int]:
        """Indices among ``evicted`` of the messages no flush has been shown yet."""
        keys = message_keys(messages)
        seen = set(self.flush_state.load(session.session_id).seen)
        return [i for i in evicted if 0 <= i < len(keys) and keys[i] not in seen]

    def flush_before_eviction(
        self,
        session: Session,
        messages: Sequence[Mapping[str, Any]],
        evicted: Iterable[int],
        *,
        model: ChatModel | None = None,
    ) -> FlushOutcome | None:
        """The compaction choke point: call it right before ``messages[i]`` for each ``i``
        in ``evicted`` leave the context.

        The messages among them that no flush has been shown yet (past the flush
        watermark) get a delta flush over exactly those (with the tool calls or results
        they need to be valid chat input) first: silent, ``NO_REPLY``, ``memory_append``
        to today's daily note, split to fit the window. Messages a failed flush could not
        save are counted (``unsaved_evictions`` in the flush state and
        ``Memory.status()``), logged as an error and written to telemetry: an eviction
        of unsaved messages is never silent. Never raises except :class:`WiringError`
        (no model).

        Returns:
            The delta flush's outcome, or None when every evicted message was already
            seen (or the flush is disabled or the workspace read-only).
        """
        chosen = list(evicted)
        if not chosen or not self.flush_possible():
            return None
        conversation = [dict(m) for m in messages]
        try:
            keys = message_keys(conversation)
            state = self.flush_state.load(session.session_id)
        except Exception as exc:
            log.warning("flush watermark unreadable: %s", type(exc).__name__)
            return None
        seen = set(state.seen)
        unseen = [i for i in chosen if 0 <= i < len(keys) and keys[i] not in seen]
        if not unseen:
            return None
        shown = with_tool_pairs(conversation, unseen)
        reason = "delta" if state.flushed_cycle == state.cycle else "pre-compaction"
        decision = FlushDecision(run=True, reason=reason, cycle=state.cycle)
        outcome = self._flush_turns(
            session, [conversation[i] for i in shown], [keys[i] for i in shown], decision,
            model=model,
        )
        missed = set(outcome.missed)
        lost = [i for i in unseen if keys[i] in missed]
        if lost:
            self.record_unsaved(session, len(lost), outcome.error)
        return outcome

    def record_unsaved(self, session: Session, count: int, error: str | None = None) -> None:
        """``count`` messages leave the context unsaved: log, count, telemetry (never silent)."""
        log.error(
            "session %s: %d messages are being compacted away although the memory flush "
            "failed to save them (%s)",
            session.session_id,
            count,
            error or "unknown error",
        )
        try:
            self.flush_state.record_unsaved(session.session_id, count)
        except Exception as exc:
            log.warning("could not count the unsaved eviction: %s", type(exc).__name__)
        self._telemetry(
            "flush_unsaved_eviction", session=session.session_id, messages=count, error=error
        )

    def after_model(self, session: Session, reply: Any, *, record: bool = True) -> str | None:
        """After a model call: record the reply and return what the user may see.

        Returns:
            The text to deliver, or None for a silent (``NO_REPLY``) or tool-only reply.
        """
        normalized: Reply = normalize_reply(reply)
        if record:
            self.record(session, normalized.to_message())
        deliver = None if normalized.tool_calls else deliverable_text(normalized)
        self._emit(Event.AFTER_MODEL, session, reply=normalized, deliver=deliver)
        return deliver

    def on_model_error(
        self,
        session: Session,
        error: BaseException,
        messages: Sequence[Mapping[str, Any]],
        *,
        model: ChatModel | None = None,
    ) -> FlushOutcome | None:
        """A model call failed: on a context overflow, flush first (once per cycle).

        Returns:
            The flush outcome, or None when the error is not an overflow. Never raises.
        """
        if not is_context_overflow(error):
            return None
        try:
            decision = self.flush_decision(session, tokens=0)
            conversation = [dict(m) for m in messages]
            keys = message_keys(conversation)
            unseen = self.unflushed(session, conversation, range(len(conversation)))
        except Exception:
            log.debug("flush decision failed", exc_info=True)
            return None
        if decision.reason in ("below-threshold", "no-threshold", "already-flushed"):
            decision = replace(decision, run=bool(unseen), reason="context-overflow")
        if not decision.run:
            return FlushOutcome(decision=decision)
        shown = with_tool_pairs(conversation, unseen)
        return self._flush_turns(
            session,
            [conversation[i] for i in shown],
            [keys[i] for i in shown],
            decision,
            model=model,
        )

    # -- compaction ------------------------------------------------------------------
    def compaction(self, session: Session, marker: str | None = None) -> int:
        """A compaction happened: start the next flush cycle.

        Args:
            session: The session.
            marker: Identity of this compaction (e.g. the summary message id); reporting
                the same marker twice advances the cycle once.

        Returns:
            The new cycle id.
        """
        before = self.flush_state.load(session.session_id).cycle
        state = self.flush_state.record_compaction(
            session.session_id,
            marker,
            transcript_bytes=self.transcripts.size_bytes(session.session_id),
        )
        if state.cycle != before:
            log.info("session %s: compaction, flush cycle %d", session.session_id, state.cycle)
            self._emit(Event.COMPACTION, session, cycle=state.cycle, marker=marker)
            try:  # re-index the transcript now (sync.sessions)
                self.memory.notify_compaction()
            except Exception as exc:
                log.warning("post-compaction sync failed: %s", type(exc).__name__)
        return state.cycle

    # -- /new, /reset, auto-reset ----------------------------------------------------
    def command(
        self,
        session: Session,
        text: str,
        *,
        source: str | None = None,
        model: ChatModel | None = None,
    ) -> Session | None:
        """Handle a slash command; ``/new`` and ``/reset`` archive and start a new session.

        A bare ``/new`` or ``/reset`` gives a private session the startup context.

        Args:
            session: The ending session.
            text: The user's message.
            source: Command source recorded in the archive (default the command).
            model: The agent's model, for the archive slug when ``session_memory.llm_slug``.

        Returns:
            The new session, or None when ``text`` is not a reset command.
        """
        cmd = parse_reset_command(text)
        if cmd is None:
            return None
        self._emit(Event.COMMAND, session, command=cmd)
        return self.reset_session(
            session, source=source or cmd, model=model, startup=is_bare_command(text)
        )

    def auto_reset(
        self, session: Session, reason: str = "idle", *, model: ChatModel | None = None
    ) -> Session:
        """An automatic (idle/daily) reset: archive like ``/new`` and start a new session."""
        self._emit(Event.AUTO_RESET, session, reason=reason)
        return self.reset_session(session, reason=reason, model=model)

    def check_auto_reset(
        self,
        session: Session,
        *,
        idle_minutes: float | None = None,
        daily_reset_hour: int | None = None,
    ) -> Session:
        """Reset the session when it went idle or crossed the daily boundary; else keep it."""
        reason = auto_reset_reason(
            session.last_activity and session.last_activity.astimezone(self.now().tzinfo),
            self.now(),
            idle_minutes=idle_minutes,
            daily_reset_hour=daily_reset_hour,
        )
        return self.auto_reset(session, reason) if reason else session

    def slug_function(self, model: ChatModel | None = None) -> SlugFunction | None:
        """How archives are named: ``slug_fn`` when given, else the agent's model when
        ``session_memory.llm_slug`` is on (``model``, else ``flush_model``), else None
        (``HHMM``). The call has the ``slug_timeout_s`` timeout and its answer is cleaned."""
        if self.slug_fn is not None:
            return self.slug_fn
        chosen = model or self.flush_model
        if self.config.session_memory.llm_slug and chosen is not None:
            return model_slug_fn(chosen)
        return None

    def reset_session(
        self,
        session: Session,
        *,
        source: str | None = None,
        reason: str | None = None,
        model: ChatModel | None = None,
        startup: bool = False,
    ) -> Session:
        """Archive the ending session (read before rotating), rotate it, start a new one.

        Args:
            session: The ending session.
            source: Command source (``/new``, ``/reset``).
            reason: Auto-reset reason (``idle``, ``daily``).
            model: The agent's model (archive slug with ``session_memory.llm_slug``).
            startup: Give the new private session the startup context (bare ``/new``).
        """
        path: Path | None = None
        if self.config.session_memory.enabled and not self.is_read_only():
            try:
                messages = self.transcripts.read(session.session_id)
            except Exception as exc:
                log.warning("cannot read transcript for archive: %s", type(exc).__name__)
                messages = []
            access = self.access(session)
            path = archive_session(
                ArchiveRequest(
                    workspace=Path(self.memory.workspace),
                    folder=access.notes_dir,
                    messages=messages,
                    session_key=session.session_key,
                    session_id=session.session_id,
                    now=self.now(),
                    source=source,
                    reason=reason,
                    max_messages=self.config.session_memory.messages,
                    slug_fn=self.slug_function(model),
                    slug_timeout_s=self.config.session_memory.slug_timeout_s,
                )
            )
        try:
            self.transcripts.rotate(session.session_id, now=self.clock())
            self.flush_state.forget(session.session_id)
        except Exception as exc:
            log.warning("session rotation failed: %s", type(exc).__name__)
        self._emit(Event.ARCHIVE, session, path=path, source=source, reason=reason)
        self._emit(Event.SESSION_END, session, reason=reason or source)
        if path is not None:
            try:
                request_sync(self.memory)
            except Exception as exc:
                log.warning("sync after archive failed: %s", type(exc).__name__)
        fresh = self.start_session(
            session.session_key,
            session_id=new_session_id(self.clock()),
            chat_type=session.chat_type,
            resume=False,
            startup=startup,
            principal=session.principal,
        )
        fresh.previous_archive = path
        return fresh


__all__ = [
    "RESET_COMMANDS",
    "Event",
    "HookContext",
    "HookRegistry",
    "MemoryEngine",
    "MemoryMiddleware",
    "Session",
    "TokenCounter",
    "WiringError",
    "auto_reset_reason",
    "deliverable_reply",
    "deliverable_text",
    "is_bare_command",
    "is_context_overflow",
    "new_session_id",
    "parse_reset_command",
]
