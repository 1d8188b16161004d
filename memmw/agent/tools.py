"""The agent tools memory_search, memory_get and memory_append: schemas and payloads."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from memmw import observability
from memmw.agent.prompts import (
    APPEND_TOOL,
    GET_TOOL,
    SEARCH_TOOL,
    describe_sources,
)
from memmw.chat_type import citations_enabled
from memmw.config import FACT_SEARCH_MAX_RESULTS, MemoryConfig, Source
from memmw.errors import (
    ConfigError,
    ContentPolicyError,
    FileReadError,
    IndexCorruptError,
    IndexStoreError,
    MemmwError,
    PathPolicyError,
    ToolArgumentError,
)
from memmw.redaction import redact_secrets
from memmw.search.retriever import Visibility
from memmw.timeutil import Clock, user_now
from memmw.types import ReadResult, SearchHit, SearchResult
from memmw.workspace.access import SessionAccess
from memmw.workspace.active_context import ACTIVE_CONTEXT, write_active_context
from memmw.workspace.files import (
    append_text,
    resolve_read_path,
    unindexed_note_reason,
)
from memmw.workspace.layout import (
    MEMORY_DIR,
    daily_note_path,
    fold_path,
    group_note_dir,
    group_note_path,
    is_curated,
    is_dreams,
    is_principal_note,
    principal_dir,
    principal_note_path,
)

log = logging.getLogger(__name__)

#: The ``corpus`` argument of ``memory_search``: a source's value, or every source.
ALL_SOURCES = "all"
CORPORA = (*(s.value for s in Source), ALL_SOURCES)
Payload = dict[str, Any]


class MemoryBackend(Protocol):
    """The part of :class:`memmw.Memory` the tools and middleware use."""

    workspace: Path
    state_dir: Path
    agent_id: str
    config: MemoryConfig

    def sync(self, force: bool = False) -> Any:
        """Bring the index up to date with the files."""
        ...

    def search_result(
        self,
        query: str,
        max_results: int | None = None,
        min_score: float | None = None,
        *,
        visible: Visibility | None = None,
    ) -> SearchResult:
        """Search; the hits (those ``visible`` keeps) plus mode, provider, fallback, warning."""
        ...

    def get(
        self,
        path: str,
        from_line: int | None = None,
        lines: int | None = None,
        *,
        namespace: str | None = None,
    ) -> ReadResult:
        """Read a window of a memory file (of a ``store.shared`` namespace's, with one)."""
        ...


def session_access(
    memory: MemoryBackend,
    *,
    session_key: str | None = None,
    chat_type: str | None = None,
    principal: str | None = None,
) -> SessionAccess:
    """The privacy gate of a session of ``memory`` (:class:`SessionAccess`).

    ``principal`` is who the session is with, when the host knows (a DM's sender, a
    group's id); otherwise ``dm_scope`` and ``owner_principals`` of the config decide.

    Raises:
        ConfigError: a bad principal id.
    """
    config = memory.config
    return SessionAccess.for_session(
        Path(memory.workspace),
        config.extra_paths,
        session_key=session_key,
        chat_type=chat_type,
        private_kinds=config.private_chat_types,
        principal=principal,
        dm_scope=getattr(config, "dm_scope", "main"),
        owner_principals=getattr(config, "owner_principals", ()),
    )


def _gate(memory: MemoryBackend, access: SessionAccess | None, private: bool) -> SessionAccess:
    if access is not None:
        return access
    return SessionAccess(
        workspace=Path(memory.workspace),
        extra_paths=tuple(memory.config.extra_paths),
        private=private,
    )


def request_sync(memory: MemoryBackend) -> None:
    """Bring the index up to date without waiting when the engine can.

    ``Memory.sync_in_background`` returns at once (the files themselves are already on
    disk; the sync only keeps search fresh, and a first embedding run can take minutes);
    engines without it are synced in place.
    """
    background = getattr(memory, "sync_in_background", None)
    if callable(background):
        background()
    else:
        memory.sync()


@dataclass(frozen=True)
class MemoryTool:
    """A framework-neutral tool: name, description, JSON schema and a handler.

    The handler never raises; failures come back as payloads with an ``error`` key.

    Attributes:
        name: Tool name the model calls.
        description: What the tool does and when to use it.
        parameters: JSON schema of the arguments (``additionalProperties`` false).
        handler: Takes the argument mapping, returns the payload dict.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    handler: Callable[[Mapping[str, Any]], Payload] = field(repr=False)

    def invoke(self, args: Mapping[str, Any] | None = None, **kwargs: Any) -> Payload:
        """Run the tool with ``args`` (and/or keyword arguments); returns the payload."""
        merged: dict[str, Any] = dict(args or {})
        merged.update(kwargs)
        try:
            return self.handler(merged)
        except Exception as exc:  # the contract: never raise into the agent loop
            log.warning("%s failed unexpectedly: %s", self.name, type(exc).__name__)
            log.debug("%s failure", self.name, exc_info=True)
            return {"error": redact_secrets(f"{type(exc).__name__}: {exc}"), "disabled": False}

    def invoke_json(self, args: Mapping[str, Any] | None = None, **kwargs: Any) -> str:
        """Run the tool and return the payload as pretty-printed JSON text."""
        return payload_text(self.invoke(args, **kwargs))

    def openai_schema(self) -> dict[str, Any]:
        """The tool in the OpenAI ``tools=[...]`` function format."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


def payload_text(payload: Mapping[str, Any]) -> str:
    """Pretty-printed JSON (2-space indent) of a tool payload, as the model sees it."""
    return json.dumps(payload, indent=2, ensure_ascii=False, default=str)


# ---------------------------------------------------------------------------------------
# Argument handling


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _arg(args: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        for key in (name, _camel(name)):
            if key in args and args[key] is not None:
                return args[key]
    return None


def _string(args: Mapping[str, Any], *names: str, required: bool = False) -> str | None:
    value = _arg(args, *names)
    if value is None:
        if required:
            raise ToolArgumentError(f"{names[0]} is required")
        return None
    if not isinstance(value, str):
        raise ToolArgumentError(f"{names[0]} must be a string")
    value = value.strip()
    if not value:
        if required:
            raise ToolArgumentError(f"{names[0]} must not be empty")
        return None
    return value


def _number(args: Mapping[str, Any], *names: str) -> float | None:
    value = _arg(args, *names)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise ToolArgumentError(f"{names[0]} must be a number")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ToolArgumentError(f"{names[0]} must be a number; got {value!r}") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise ToolArgumentError(f"{names[0]} must be a finite number")
    return number


def _integer(args: Mapping[str, Any], *names: str, minimum: int | None = 1) -> int | None:
    number = _number(args, *names)
    if number is None:
        return None
    value = int(number)  # integers are truncated, as the reference does
    if minimum is not None and value < minimum:
        raise ToolArgumentError(f"{names[0]} must be >= {minimum}; got {value}")
    return value


# ---------------------------------------------------------------------------------------
# Payloads


def unavailable_payload(error: BaseException | str) -> Payload:
    """The ``memory_search`` payload when the engine failed: results empty plus guidance."""
    text = redact_secrets(str(error) or type(error).__name__)
    lowered = text.lower()
    if isinstance(error, IndexStoreError):
        # Not a provider problem: telling the agent to check keys would send it astray.
        damaged = isinstance(error, IndexCorruptError)
        warning = (
            "Memory search is unavailable: the memory index is damaged."
            if damaged
            else "Memory search is unavailable: the memory index could not be opened."
        )
        action = (
            "The Markdown notes are intact; rebuild the index from them with "
            "'memmw reset' then 'memmw index' (memory_get still reads notes meanwhile)."
            if damaged
            else "Retry shortly; if it persists, rebuild the index with 'memmw index --force'."
        )
    elif "insufficient_quota" in lowered or "quota" in lowered or "429" in lowered:
        warning = "Memory search is unavailable: the embedding provider's quota is exhausted."
        action = (
            "Top up the embedding provider account or switch memory to another provider "
            "(for example provider 'none' for keyword-only search), then retry."
        )
    else:
        warning = "Memory search is unavailable because the memory engine or its provider failed."
        action = "Check the memory configuration (provider, model, keys) and retry the search."
    return {
        "results": [],
        "disabled": True,
        "unavailable": True,
        "error": text,
        "warning": warning,
        "action": action,
    }


def search_payload(
    memory: MemoryBackend,
    query: str,
    max_results: int | None = None,
    min_score: float | None = None,
    *,
    citations: bool = True,
    visible: Visibility | None = None,
) -> Payload:
    """Search ``memory`` and render the ``memory_search`` success payload.

    ``{results, provider, model, fallback, citations, mode, warning?, partial?}``, the
    reference's shape; ``memmw search --json`` prints it too. ``visible``: what the
    searching session may be shown (:class:`~memmw.search.retriever.Visibility`).
    """
    result = memory.search_result(query, max_results, min_score, visible=visible)
    payload: Payload = {
        "results": [h.to_payload(citations=citations) for h in result.hits],
        "provider": result.provider,
        "model": result.model,
        "fallback": (
            {"from": result.fallback_from, "reason": result.fallback_reason}
            if result.fallback_from
            else None
        ),
        "citations": "on" if citations else "off",
        "mode": result.mode,
    }
    if result.warning:
        payload["warning"] = result.warning
    if result.partial:  # the vector leg timed out: keyword-only hits (the reference's key)
        payload["partial"] = True
    return payload


def session_visibility(
    gate: SessionAccess, corpus: str, sources: Sequence[str]
) -> Visibility:
    """What a session searching ``corpus`` is shown: the hits of that corpus (every one
    for ``all``) its privacy gate lets it read, marked ``untrusted`` where it does not
    trust the file (:meth:`SessionAccess.shown`). The search fetches more when the gate
    or the corpus may hide hits (another source is indexed beside ``corpus``)."""
    only = None if corpus == ALL_SOURCES else Source.parse(corpus, "corpus")

    def see(hit: SearchHit) -> SearchHit | None:
        if only is not None and hit.source != only:
            return None
        return gate.shown(hit)

    hides = gate.may_hide() or (only is not None and any(s != only for s in sources))
    return Visibility(see, hides)


def search_tool_payload(
    memory: MemoryBackend,
    args: Mapping[str, Any],
    *,
    citations: bool,
    private: bool = True,
    access: SessionAccess | None = None,
) -> Payload:
    """Run ``memory_search`` against ``memory``; returns the success or error payload.

    Every hit passes the session's privacy gate (``access``, else one for ``private``):
    a group or channel session gets no hit from a file private to direct sessions, under
    any name or link (:meth:`memmw.workspace.access.SessionAccess.check`). Hits from
    untrusted files (notes written from group sessions, extra paths, transcripts) carry
    ``untrusted: true``. The search itself resolves the count and threshold and fetches
    more for a session that may not see every hit (:class:`Visibility`); this function
    parses the arguments and renders the answer.
    """
    gate = _gate(memory, access, private)
    try:
        query = _string(args, "query", required=True)
        max_results = _integer(args, "max_results", minimum=None)
        min_score = _number(args, "min_score")
        corpus = _string(args, "corpus") or Source.MEMORY
    except ToolArgumentError as exc:
        return {"results": [], "error": str(exc)}
    if corpus not in CORPORA:
        return {
            "results": [],
            "error": f"corpus must be one of {', '.join(CORPORA)}; got {corpus!r}",
        }
    config = memory.config
    if not config.enabled:
        return unavailable_payload("memory search is disabled for this agent (enabled = false)")
    if corpus == Source.TRANSCRIPTS and Source.TRANSCRIPTS not in config.sources:
        payload = unavailable_payload("the sessions corpus is not enabled")
        payload["warning"] = "Session transcripts are not indexed for this agent."
        payload["action"] = "Add 'sessions' to memory sources to search past transcripts."
        return payload
    assert query is not None
    visible = session_visibility(gate, corpus, config.sources)
    try:
        return search_payload(
            memory, query, max_results, min_score, citations=citations, visible=visible
        )
    except ConfigError as exc:  # the count or threshold, checked once by the search
        return {"results": [], "error": str(exc)}
    except Exception as exc:
        log.warning("memory_search failed: %s", type(exc).__name__)
        log.debug("memory_search failure", exc_info=True)
        return unavailable_payload(exc)


def get_tool_payload(
    memory: MemoryBackend,
    args: Mapping[str, Any],
    *,
    private: bool = True,
    access: SessionAccess | None = None,
) -> Payload:
    """Run ``memory_get``; returns ``{status, text, path, from, lines, ...}`` or an error.

    The session's privacy gate (``access``, else one for ``private``) decides on the
    resolved file: a group or channel session never reads a private file, whatever the
    spelling, symlink or hard link. Text of untrusted files (notes written from group
    sessions, extra paths) comes with ``untrusted: true``.
    """
    gate = _gate(memory, access, private)
    raw_path = _arg(args, "path")
    shown = str(raw_path).strip() if raw_path is not None else ""
    try:
        path = _string(args, "path", required=True)
        from_line = _integer(args, "from", "from_line")
        lines = _integer(args, "lines")
        namespace = _string(args, "namespace")
    except ToolArgumentError as exc:
        return {"path": shown, "text": "", "disabled": True, "error": str(exc)}
    assert path is not None

    def refused(reason: str) -> Payload:
        return {
            "path": path,
            "text": "",
            "disabled": True,
            "error": f"{path} is not readable from this session: {reason}",
        }

    verdict = gate.check(path)
    if not verdict.readable:
        return refused(verdict.reason)
    try:
        # A hit from a store.shared namespace reads that namespace's file, never ours.
        result = memory.get(path, from_line=from_line, lines=lines, namespace=namespace)
    except (PathPolicyError, ConfigError, FileReadError) as exc:
        return {"path": path, "text": "", "disabled": True, "error": str(exc)}
    except Exception as exc:
        log.warning("memory_get failed: %s", type(exc).__name__)
        log.debug("memory_get failure", exc_info=True)
        return {"path": path, "text": "", "disabled": True, "error": f"{type(exc).__name__}: {exc}"}
    after = gate.check(result.path)  # the file actually read, as the engine resolved it
    if not after.readable:
        return refused(after.reason)
    payload = result.to_payload()
    if not after.trusted and result.status == "ok":
        payload["untrusted"] = True  # written from a group session, an extra path...
    return payload


def workspace_is_writable(workspace: Path) -> bool:
    """True when files can be created in the workspace's ``memory/`` folder (or the root)."""
    memory_dir = Path(workspace) / MEMORY_DIR
    target = memory_dir if memory_dir.is_dir() else Path(workspace)
    return os.access(target, os.W_OK | os.X_OK)


def append_tool_payload(
    memory: MemoryBackend,
    args: Mapping[str, Any],
    *,
    clock: Clock | None = None,
    allow_curated: bool = False,
    only_path: str | None = None,
    read_only: bool | None = None,
    scope: str | None = None,
    principal: str | None = None,
) -> Payload:
    """Run ``memory_append``: add text to the end of a ``memory/*.md`` note.

    A group or channel session (``scope`` set) writes only under its own
    ``memory/groups/<scope>/`` (default its daily note there): what it saves is recorded
    as written from a group, by path, which survives any rebuild of the index. A
    principal's session (``principal`` set) writes only under its own
    ``memory/principals/<id>/`` (default its daily note there), its ``MEMORY.md`` and
    ``USER.md`` included.

    Args:
        memory: The engine (its workspace and timezone are used).
        args: ``content`` (required) and ``path`` (default today's daily note).
        clock: Source of "now" for the default daily note.
        allow_curated: Also allow root ``MEMORY.md``/``USER.md``.
        only_path: When set, the only legal target (the flush turn uses today's note).
        read_only: Force the read-only answer; None checks the file system.
        scope: The group scope of a group or channel session (None when private).
        principal: The principal of a direct session with someone other than the owner.

    Returns:
        ``{status: "ok", path, appended}`` or ``{status: "error", path, error}``.
    """
    with observability.span(
        "append",
        getattr(memory, "agent_id", None),
        append_source="flush" if only_path is not None else "tool",
        append_group=scope is not None,
        **{observability.RECORD_COUNT: 1},
    ) as sp:
        payload = _append(
            memory,
            args,
            clock=clock,
            allow_curated=allow_curated,
            only_path=only_path,
            read_only=read_only,
            scope=scope,
            principal=principal,
        )
        sp.set(append_status=payload["status"], append_chars=payload.get("appended", 0))
        if payload["status"] != "ok":
            sp.fail("rejected")  # the payload's error names the path: never on the span
        return payload


def _append(
    memory: MemoryBackend,
    args: Mapping[str, Any],
    *,
    clock: Clock | None,
    allow_curated: bool,
    only_path: str | None,
    read_only: bool | None,
    scope: str | None,
    principal: str | None = None,
) -> Payload:
    today = user_now(memory.config.user_timezone, clock).date()
    own_dir: str | None = None
    if scope is not None:
        default_path = only_path or group_note_path(scope, today)
        allow_curated = False
        own_dir = group_note_dir(scope)
    elif principal is not None:
        default_path = only_path or principal_note_path(principal, today)
        allow_curated = False
        own_dir = principal_dir(principal)
    else:
        default_path = only_path or daily_note_path(today)
    try:
        content = _arg(args, "content", "text")
        if content is None or not isinstance(content, str) or not content.strip():
            raise ToolArgumentError("content is required (the Markdown text to append)")
        path = _string(args, "path") or default_path
    except ToolArgumentError as exc:
        return {"status": "error", "path": default_path, "error": str(exc)}
    workspace = Path(memory.workspace)
    try:
        rel, abs_path = resolve_read_path(workspace, path)
    except PathPolicyError as exc:
        return {"status": "error", "path": path, "error": f"{exc}; append to {default_path}"}
    if only_path is not None and rel != only_path:
        return {
            "status": "error",
            "path": rel,
            "error": f"only {only_path} may be written now; append your notes there",
        }
    if own_dir is not None and not rel.startswith(own_dir + "/"):
        who = "a group or channel session" if scope is not None else "this person's session"
        return {
            "status": "error",
            "path": rel,
            "error": f"{who} writes only under {own_dir}/; append to {default_path}",
        }
    if own_dir is None and is_principal_note(fold_path(rel)):
        return {
            "status": "error",
            "path": rel,
            "error": f"{rel} is another person's private memory; append to {default_path}",
        }
    if is_curated(rel) or is_dreams(rel):
        if not allow_curated:
            return {
                "status": "error",
                "path": rel,
                "error": f"{rel} is read-only for the agent; append to {default_path} instead",
            }
    elif not rel.startswith(MEMORY_DIR + "/"):
        return {
            "status": "error",
            "path": rel,
            "error": f"only memory/*.md notes can be appended; use {default_path}",
        }
    else:
        unindexed = unindexed_note_reason(rel)
        if unindexed is not None:
            return {
                "status": "error",
                "path": rel,
                "error": f"{unindexed}; append to {default_path} instead",
            }
    if read_only if read_only is not None else not workspace_is_writable(workspace):
        return {"status": "error", "path": rel, "error": "the memory workspace is read-only"}
    # Notes written from a conversation (the agent's and the flush turn's) pass the same
    # redaction as transcripts and archives: a pasted key never reaches the note or index.
    content = redact_secrets(content)
    try:
        appended = append_text(abs_path, content)
    except ContentPolicyError as exc:
        return {"status": "error", "path": rel, "error": f"nothing was written: {exc}"}
    except (OSError, PathPolicyError) as exc:
        log.warning("memory_append failed: %s", type(exc).__name__)
        # An OSError's text names the absolute path: say the reason for the relative one.
        plain = isinstance(exc, OSError) and not isinstance(exc, MemmwError)
        reason = f"{rel}: {exc.strerror or 'write failed'}" if plain else str(exc)
        return {
            "status": "error",
            "path": rel,
            "error": redact_secrets(f"{type(exc).__name__}: {reason}"),
        }
    log.info("memory_append wrote %d chars to %s", appended, rel)
    return {"status": "ok", "path": rel, "appended": appended}


# ---------------------------------------------------------------------------------------
# Schemas and descriptions


def search_schema() -> dict[str, Any]:
    """JSON schema of ``memory_search`` arguments."""
    return {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for, in natural language."},
            "maxResults": {
                "type": "integer",
                "minimum": 1,
                "description": "Most results to return.",
            },
            "minScore": {
                "type": "number",
                "minimum": 0,
                "maximum": 1,
                "description": "Keep only results scoring at least this (0..1); by default "
                "weaker keyword matches fill empty slots.",
            },
            "corpus": {
                "type": "string",
                "enum": list(CORPORA),
                "description": "memory (notes, default), sessions (past transcripts) or all.",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    }


def get_schema(*, shared: bool = False) -> dict[str, Any]:
    """JSON schema of ``memory_get`` arguments (``namespace`` with ``store.shared``)."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": "Path from a search result, e.g. memory/2026-01-02.md.",
            },
            "from": {
                "type": "integer",
                "minimum": 1,
                "description": "First line to read (1-based).",
            },
            "lines": {"type": "integer", "minimum": 1, "description": "Number of lines to read."},
        },
        "required": ["path"],
        "additionalProperties": False,
    }
    if shared:
        schema["properties"]["namespace"] = {
            "type": "string",
            "description": "The namespace of a search result that has one (a shared memory):"
            " reads that namespace's file, not your own file of the same path.",
        }
    return schema


def append_schema() -> dict[str, Any]:
    """JSON schema of ``memory_append`` arguments."""
    return {
        "type": "object",
        "properties": {
            "content": {"type": "string", "description": "Markdown to add at the end of the note."},
            "path": {
                "type": "string",
                "description": "Target note under memory/ (default: today's memory/YYYY-MM-DD.md).",
            },
        },
        "required": ["content"],
        "additionalProperties": False,
    }


def search_description(config: MemoryConfig) -> str:
    """The ``memory_search`` description, listing the configured sources."""
    where = describe_sources(config.sources, [e.path for e in config.extra_paths])
    corpus = "corpus: memory (default) searches the notes"
    if Source.TRANSCRIPTS in config.sources:
        corpus += ", sessions searches past transcripts, all searches both"
    return (
        "Required first step before answering anything about prior work, decisions, dates, "
        f"people, preferences or todos: search long-term memory ({where}). Returns the best "
        "matching snippets with their path and line numbers; follow up with memory_get for "
        f"more lines. {corpus}. If the result says disabled, unavailable or stale, or "
        "carries a warning, tell the user and pass on the warning and action."
    )


def get_description() -> str:
    """The ``memory_get`` description."""
    return (
        "Read an exact excerpt of a memory file (MEMORY.md, USER.md, memory/*.md or an extra "
        "path), optionally starting at line `from` for `lines` lines. Use it after "
        "memory_search to pull only the lines you need. The window is bounded: when "
        "truncated is true, call again with from = nextFrom. status ok means text holds "
        "the lines; status not_found means the file does not exist (not an error)."
    )


def append_description(allow_curated: bool) -> str:
    """The ``memory_append`` description."""
    extra = (
        " MEMORY.md and USER.md may also be appended to."
        if allow_curated
        else (" MEMORY.md and USER.md are read-only.")
    )
    return (
        "Save a durable note to long-term memory by appending Markdown to the end of "
        "today's memory/YYYY-MM-DD.md (the default) or another memory/*.md file. It never "
        f"overwrites or edits existing text.{extra}"
    )


def build_memory_tools(
    memory: MemoryBackend,
    *,
    session_key: str | None = None,
    chat_type: str | None = None,
    include_search: bool = True,
    include_get: bool = True,
    include_append: bool = True,
    allow_curated_append: bool = False,
    read_only: bool | None = None,
    clock: Clock | None = None,
    include_graph: bool = True,
    principal: str | None = None,
) -> list[MemoryTool]:
    """Build the memory tools for one session.

    Args:
        memory: The engine.
        session_key: Decides ``citations = auto`` (off in group/channel sessions).
        chat_type: Explicit chat type, overriding the key.
        principal: Who the session is with (see :func:`session_access`).
        include_search / include_get / include_append: Which tools to build.
        allow_curated_append: Let ``memory_append`` write ``MEMORY.md``/``USER.md``.
        read_only: Force (or deny) read-only behaviour of ``memory_append``.
        clock: Source of "now" for daily note names.
        include_graph: Add ``memory_facts`` (and, with ``active_memory.edit_tools`` in
            private writable sessions, ``memory_forget`` and ``memory_set_context``).

    Returns:
        The tools; empty when memory is disabled in the config.
    """
    config = memory.config
    if not config.enabled:
        return []
    kinds = config.private_chat_types
    cites = citations_enabled(config.citations, session_key, chat_type, kinds)
    access = session_access(
        memory, session_key=session_key, chat_type=chat_type, principal=principal
    )
    private = access.private
    scope = access.scope
    who = access.principal
    tools: list[MemoryTool] = []
    if include_search:
        tools.append(
            MemoryTool(
                SEARCH_TOOL,
                search_description(config),
                search_schema(),
                lambda args: search_tool_payload(
                    memory, args, citations=cites, private=private, access=access
                ),
            )
        )
    if include_get:
        tools.append(
            MemoryTool(
                GET_TOOL,
                get_description(),
                get_schema(shared=bool(memory.config.store.shared)),
                lambda args: get_tool_payload(memory, args, private=private, access=access),
            )
        )
    if include_append:
        tools.append(
            MemoryTool(
                APPEND_TOOL,
                append_description(allow_curated_append),
                append_schema(),
                lambda args: append_tool_payload(
                    memory,
                    args,
                    clock=clock,
                    allow_curated=allow_curated_append,
                    read_only=read_only,
                    scope=scope,
                    principal=who,
                ),
            )
        )
    # -- active memory tools (issue 13) --
    if include_graph:
        writable = include_append and not (
            read_only if read_only is not None else not workspace_is_writable(Path(memory.workspace))
        )
        tools.extend(
            graph_tools(memory, citations=cites, private=private, writable=writable, access=access)
        )
    return tools


def flush_tools(
    memory: MemoryBackend,
    target: str,
    *,
    read_only: bool | None = None,
    clock: Clock | None = None,
    access: SessionAccess | None = None,
) -> list[MemoryTool]:
    """The tools of the silent flush turn: ``memory_get`` and an append bound to ``target``.

    ``access`` is the session's privacy gate: a group session's flush reads only what the
    group may read and writes only its group note.
    """
    scope = access.scope if access is not None and not access.private else None
    who = access.principal if access is not None else None
    append = MemoryTool(
        APPEND_TOOL,
        f"Append durable notes to {target} (append-only; no other file may be written).",
        append_schema(),
        lambda args: append_tool_payload(
            memory,
            args,
            clock=clock,
            only_path=target,
            read_only=read_only,
            scope=scope,
            principal=who,
        ),
    )
    get = MemoryTool(
        GET_TOOL,
        get_description(),
        get_schema(shared=bool(memory.config.store.shared)),
        lambda args: get_tool_payload(memory, args, access=access),
    )
    return [append, get]


# ---------------------------------------------------------------------------------------
# Active memory tools (issue 13): memory_facts, memory_forget, memory_set_context

FACTS_TOOL = "memory_facts"
FORGET_TOOL = "memory_forget"
CONTEXT_TOOL = "memory_set_context"


def facts_schema() -> dict[str, Any]:
    """JSON schema of ``memory_facts`` arguments."""
    return {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "A person, project or question, e.g. 'where does Ali live'.",
            },
            "maxResults": {"type": "integer", "minimum": 1, "description": f"Default {FACT_SEARCH_MAX_RESULTS}."},
            "history": {
                "type": "boolean",
                "description": "Also return superseded (older) values, marked current=false.",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    }


def forget_schema() -> dict[str, Any]:
    """JSON schema of ``memory_forget`` arguments."""
    return {
        "type": "object",
        "properties": {
            "citation": {"type": "string", "description": "The entry to retract: path#L12."},
            "entity": {"type": "string", "description": "Or: the entity whose fact to retract."},
            "key": {"type": "string", "description": "With entity: the fact key (all values)."},
            "reason": {"type": "string", "description": "Why (written into the annotation)."},
            "expect": {
                "type": "string",
                "description": "With citation: the entry's text as you saw it in the search or "
                "facts result. The retraction is refused if the line no longer holds it.",
            },
        },
        "additionalProperties": False,
    }


def context_schema() -> dict[str, Any]:
    """JSON schema of ``memory_set_context`` arguments."""
    return {
        "type": "object",
        "properties": {
            "content": {
                "type": "string",
                "description": "The whole new working context (Markdown); replaces the old one.",
            }
        },
        "required": ["content"],
        "additionalProperties": False,
    }


def facts_tool_payload(
    memory: MemoryBackend,
    args: Mapping[str, Any],
    *,
    citations: bool,
    private: bool = True,
    access: SessionAccess | None = None,
) -> Payload:
    """Run ``memory_facts``: the four-phase fact search (structured error payloads).

    The search runs over the session's view of the graph (rows of files the privacy gate
    lets it read), and every hit is checked again.
    """
    gate = _gate(memory, access, private)
    private = gate.private
    try:
        query = _string(args, "query", required=True)
        max_results = _integer(args, "max_results")
    except ToolArgumentError as exc:
        return {"results": [], "error": str(exc)}
    history = _arg(args, "history")
    search = getattr(memory, "facts", None)
    if not callable(search) or not memory.config.enabled:
        return {"results": [], "disabled": True, "error": "fact search is not available"}
    try:
        hits = search(
            query,
            max_results or FACT_SEARCH_MAX_RESULTS,
            include_history=bool(history) if history is not None else None,
            include_private=private,
            visible=gate.may_read,
        )
    except Exception as exc:
        log.warning("memory_facts failed: %s", type(exc).__name__)
        return unavailable_payload(exc)
    results = []
    for hit in hits:
        verdict = gate.check(hit.path)
        if not verdict.readable:
            continue
        item = hit.to_payload(citations=citations)
        if not verdict.trusted:  # the gate's word on trust wins (extra paths in memory/...)
            item["origin"] = "untrusted"
        results.append(item)
    return {"results": results}


def forget_tool_payload(
    memory: MemoryBackend, args: Mapping[str, Any], *, access: SessionAccess | None = None
) -> Payload:
    """Run ``memory_forget``: retract an entry in the Markdown (struck through, annotated).

    With ``access`` (the session's privacy gate) only files it may read are touched.
    """
    try:
        citation = _string(args, "citation")
        entity = _string(args, "entity")
        key = _string(args, "key")
        reason = _string(args, "reason") or ""
        expect = _string(args, "expect")
    except ToolArgumentError as exc:
        return {"status": "error", "error": str(exc)}
    forget = getattr(memory, "forget", None)
    if not callable(forget):
        return {"status": "error", "error": "forget is not available"}
    gated = {} if access is None else {"visible": access.may_read}
    try:
        if expect is None:
            result = forget(citation, entity=entity, key=key, reason=reason, **gated)
        else:
            result = forget(
                citation, entity=entity, key=key, reason=reason, expect=expect, **gated
            )
    except MemmwError as exc:
        return {"status": "error", "error": str(exc)}
    except Exception as exc:
        log.warning("memory_forget failed: %s", type(exc).__name__)
        return {"status": "error", "error": f"{type(exc).__name__}: {exc}"}
    return {"status": "ok", **result.to_payload()}


def context_tool_payload(memory: MemoryBackend, args: Mapping[str, Any]) -> Payload:
    """Run ``memory_set_context``: overwrite ``active-context.md`` (working memory)."""
    content = _arg(args, "content", "text")
    if not isinstance(content, str):
        return {"status": "error", "error": "content is required (the new working context)"}
    try:
        chars = write_active_context(Path(memory.workspace), content)
    except (OSError, MemmwError) as exc:
        return {"status": "error", "error": f"{type(exc).__name__}: {exc}"}
    return {"status": "ok", "path": ACTIVE_CONTEXT, "chars": chars}


def graph_tools(
    memory: MemoryBackend,
    *,
    citations: bool,
    private: bool,
    writable: bool,
    access: SessionAccess | None = None,
) -> list[MemoryTool]:
    """``memory_facts`` always; ``memory_forget`` and ``memory_set_context`` with
    ``active_memory.edit_tools`` in the owner's private, writable sessions (groups and
    other people's sessions never retract entries or replace the working context)."""
    if not callable(getattr(memory, "facts", None)):
        return []
    tools = [
        MemoryTool(
            FACTS_TOOL,
            "Look up facts recorded in memory about people, projects, decisions and "
            "preferences: the current value of each fact (older values only with "
            "history=true), relations between entities, and the line each comes from.",
            facts_schema(),
            lambda args: facts_tool_payload(
                memory, args, citations=citations, private=private, access=access
            ),
        )
    ]
    edit = getattr(getattr(memory.config, "active_memory", None), "edit_tools", False)
    if private and writable and edit and (access is None or access.principal is None):
        tools.append(
            MemoryTool(
                FORGET_TOOL,
                "Retract a memory entry that is wrong or that the user asked to forget. The "
                "line stays in the file, struck through with a dated note, and is no longer "
                "recalled. Name it by citation (path#L12) with expect (the entry's text as "
                "you saw it), or by entity and key.",
                forget_schema(),
                lambda args: forget_tool_payload(memory, args, access=access),
            )
        )
        tools.append(
            MemoryTool(
                CONTEXT_TOOL,
                "Replace the working context (active-context.md): what you are doing right "
                "now, open threads and next steps. It is overwritten, not appended, and "
                "loaded at the start of every private session.",
                context_schema(),
                lambda args: context_tool_payload(memory, args),
            )
        )
    return tools


def tools_by_name(tools: Sequence[MemoryTool]) -> dict[str, MemoryTool]:
    """Index tools by name."""
    return {t.name: t for t in tools}
