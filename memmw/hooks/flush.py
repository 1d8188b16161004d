"""Pre-compaction memory flush: the threshold decision, the per-cycle marker and the silent turn."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from memmw.agent.chat import ChatModel, Message, call_model, tool_message
from memmw.agent.prompts import is_silent_reply
from memmw.agent.tools import MemoryTool, payload_text, tools_by_name
from memmw.config import FlushConfig
from memmw.statedir import FLUSH_SESSIONS_KEY, FLUSH_STATE_FILE
from memmw.text.tokens import content_text
from memmw.workspace.files import atomic_write_text
from memmw.workspace.locks import exclusive_lock, lock_path_for
from memmw.workspace.transcripts import check_session_id

log = logging.getLogger(__name__)

STATE_FILE = FLUSH_STATE_FILE
#: Model/tool rounds the flush turn may take before it is stopped.
MAX_FLUSH_STEPS = 6
#: Message keys remembered as "seen by a flush" per session (the oldest are dropped).
MAX_SEEN_KEYS = 4096


def effective_reserve(config: FlushConfig, context_window: int | None = None) -> int:
    """The reserve kept free below the window: ``reserve_tokens_floor``, at most half of it.

    The reference subtracts the full floor (20000) from any window, so a window at or
    below ``reserve + soft`` (a 16k model) gets threshold 0 and never flushes, and a loop
    that compacts at ``window - reserve`` compacts on every message. memmw caps the
    reserve at half the window instead: 200k and 40k+ windows keep the reference's
    numbers, a 32k window reserves 16000 and a 16k window 8000.
    """
    window = context_window if context_window is not None else config.context_window
    return min(config.reserve_tokens_floor, window // 2)


def soft_threshold(config: FlushConfig, room: int) -> int:
    """``min(soft_threshold_tokens, room // 2)``: the newer clamp for small windows."""
    return min(config.soft_threshold_tokens, max(0, room) // 2)


@dataclass(frozen=True)
class FlushPoints:
    """Where a conversation compacts and where the silent flush fires before it.

    Attributes:
        context_window: The effective context window in tokens.
        reserve: Tokens kept free below the window (:func:`effective_reserve`).
        compact_at: Tokens at which the conversation is compacted: ``context_window -
            reserve``, or a summarizer's own trigger.
        flush_at: The flush threshold: ``soft_threshold_tokens`` (at most half of
            ``compact_at``) below ``compact_at``.
    """

    context_window: int
    reserve: int
    compact_at: int
    flush_at: int


def flush_points(
    config: FlushConfig, *, context_window: int | None = None, compact_at: int | None = None
) -> FlushPoints:
    """The effective context window, compaction point and flush threshold.

    The one computation the middleware and both adapters use.

    Args:
        config: Flush settings (their ``context_window`` is used when none is given).
        context_window: The model's context window in tokens, when known.
        compact_at: Where compaction really happens when something else decides it (a
            summarizer's token trigger, a custom loop's own point); default
            ``context_window - reserve``.
    """
    window = config.context_window if context_window is None else context_window
    reserve = effective_reserve(config, window)
    compact = compact_at if compact_at is not None else max(1, window - reserve)
    return FlushPoints(window, reserve, compact, threshold_below_trigger(config, compact))


def flush_threshold(config: FlushConfig, context_window: int | None = None) -> int:
    """Tokens at which the flush fires: ``room - min(soft, room // 2)``.

    ``room = context_window - reserve`` is where compaction happens (the reserve is
    :func:`effective_reserve`), so the flush fires ``soft_threshold_tokens`` before it,
    or half-way to it in a small window. Positive for every window of 2 tokens or more.

    Args:
        config: Flush settings (their ``context_window`` is used when none is given).
        context_window: The model's context window in tokens, when known.
    """
    return flush_points(config, context_window=context_window).flush_at


def threshold_below_trigger(config: FlushConfig, trigger_tokens: int) -> int:
    """The flush threshold for a summarizer that compacts at ``trigger_tokens``."""
    return max(1, trigger_tokens - soft_threshold(config, trigger_tokens))


@dataclass(frozen=True, kw_only=True)
class FlushDecision:
    """Whether the flush should run now, and why.

    Attributes:
        run: True when the flush should run.
        reason: ``tokens``, ``transcript-bytes``, or why it was skipped (``disabled``,
            ``read-only``, ``already-flushed``, ``below-threshold``, ``no-threshold``,
            ``heartbeat``).
        tokens: Tokens the next model call will send.
        threshold: The token threshold in force.
        cycle: The compaction cycle the decision is about.
    """

    run: bool
    reason: str
    tokens: int = 0
    threshold: int = 0
    cycle: int = 0


def decide_flush(
    config: FlushConfig,
    *,
    tokens: int,
    cycle: int,
    flushed_cycle: int | None,
    transcript_bytes: int = 0,
    read_only: bool = False,
    context_window: int | None = None,
    heartbeat: bool = False,
    threshold: int | None = None,
) -> FlushDecision:
    """Decide whether to run the pre-compaction flush (pure).

    It runs when the tokens reach the threshold or the transcript reaches
    ``force_flush_transcript_bytes`` (when > 0), and no flush has happened yet in this
    compaction ``cycle`` (``flushed_cycle`` is the cycle of the last flush, None = never).

    Args:
        config: Flush settings.
        tokens: Tokens the next model call will send.
        cycle: Current compaction cycle id (0 before the first compaction).
        flushed_cycle: Cycle id of the last flush, or None.
        transcript_bytes: Transcript bytes written since the last compaction.
        read_only: True when the workspace cannot be written (the flush is skipped).
        context_window: Overrides ``config.context_window``.
        heartbeat: True for heartbeat runs (never flushed).
        threshold: Token threshold to use instead of the window's (e.g. derived from a
            summarizer's trigger).
    """
    if threshold is None:
        threshold = flush_points(config, context_window=context_window).flush_at
    base = {"tokens": tokens, "threshold": threshold, "cycle": cycle}
    if not config.enabled:
        return FlushDecision(run=False, reason="disabled", **base)
    if heartbeat:
        return FlushDecision(run=False, reason="heartbeat", **base)
    if read_only:
        return FlushDecision(run=False, reason="read-only", **base)
    if flushed_cycle is not None and flushed_cycle == cycle:
        return FlushDecision(run=False, reason="already-flushed", **base)
    if threshold > 0 and tokens >= threshold:
        return FlushDecision(run=True, reason="tokens", **base)
    limit = config.force_flush_transcript_bytes
    if limit > 0 and transcript_bytes >= limit:
        return FlushDecision(run=True, reason="transcript-bytes", **base)
    reason = "below-threshold" if threshold > 0 else "no-threshold"
    return FlushDecision(run=False, reason=reason, **base)


# ---------------------------------------------------------------------------------------
# Per-session cycle state


@dataclass(frozen=True, kw_only=True)
class SessionFlushState:
    """Flush bookkeeping of one session.

    Attributes:
        cycle: Compaction cycle id; starts at 0 and grows by one per real compaction.
        flushed_cycle: The cycle the last flush ran in (None = never flushed).
        flushed_at: ISO time of the last flush.
        flush_status: ``ok``, ``silent`` or ``failed`` for the last flush.
        compaction_marker: Identity of the last compaction seen (e.g. the summary
            message id), so one compaction is never counted twice.
        compaction_bytes: Transcript size when the last compaction was recorded; the
            ``force_flush_transcript_bytes`` trigger counts the bytes written since.
        seen: The flush watermark: keys (:func:`message_keys`) of the messages a flush
            turn was shown, oldest first (at most ``MAX_SEEN_KEYS``). It survives restarts,
            so a compaction after a restart still knows what no flush has seen.
        unsaved_evictions: Messages a compaction removed although no flush had saved them
            (every flush attempt for them failed); never silent: logged, in telemetry and
            in ``Memory.status()``.
        last_unsaved_at: ISO time of the last such eviction.
    """

    cycle: int = 0
    flushed_cycle: int | None = None
    flushed_at: str | None = None
    flush_status: str | None = None
    compaction_marker: str | None = None
    compaction_bytes: int = 0
    seen: tuple[str, ...] = ()
    unsaved_evictions: int = 0
    last_unsaved_at: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (camelCase)."""
        return {
            "cycle": self.cycle,
            "flushedCycle": self.flushed_cycle,
            "flushedAt": self.flushed_at,
            "flushStatus": self.flush_status,
            "compactionMarker": self.compaction_marker,
            "compactionBytes": self.compaction_bytes,
            "seen": list(self.seen),
            "unsavedEvictions": self.unsaved_evictions,
            "lastUnsavedAt": self.last_unsaved_at,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SessionFlushState:
        """Parse the JSON form; bad values fall back to defaults."""
        cycle = data.get("cycle")
        flushed = data.get("flushedCycle")
        size = data.get("compactionBytes")
        seen = data.get("seen")
        unsaved = data.get("unsavedEvictions")
        return cls(
            cycle=cycle if isinstance(cycle, int) and cycle >= 0 else 0,
            flushed_cycle=flushed if isinstance(flushed, int) else None,
            flushed_at=data.get("flushedAt") if isinstance(data.get("flushedAt"), str) else None,
            flush_status=(
                data.get("flushStatus") if isinstance(data.get("flushStatus"), str) else None
            ),
            compaction_marker=(
                data.get("compactionMarker")
                if isinstance(data.get("compactionMarker"), str)
                else None
            ),
            compaction_bytes=size if isinstance(size, int) and size >= 0 else 0,
            seen=(
                tuple(k for k in seen if isinstance(k, str))[-MAX_SEEN_KEYS:]
                if isinstance(seen, list)
                else ()
            ),
            unsaved_evictions=unsaved if isinstance(unsaved, int) and unsaved >= 0 else 0,
            last_unsaved_at=(
                data.get("lastUnsavedAt") if isinstance(data.get("lastUnsavedAt"), str) else None
            ),
        )


class FlushStateStore:
    """Persists :class:`SessionFlushState` per session in a small JSON file.

    The file is ``<state_dir>/agents/<agent_id>/flush-state.json``: ``{"sessions": {id:
    {cycle, flushedCycle, ...}}}``. Writes are atomic and locked, so the marker survives
    restarts and concurrent processes.

    Args:
        state_dir: The memmw state directory.
        agent_id: The agent.
    """

    def __init__(self, state_dir: str | os.PathLike[str], agent_id: str) -> None:
        self.path = Path(state_dir) / "agents" / check_session_id(agent_id) / STATE_FILE

    def _read_all(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("flush state %s unreadable (%s); starting fresh", self.path, exc)
            return {}
        sessions = data.get(FLUSH_SESSIONS_KEY) if isinstance(data, dict) else None
        return sessions if isinstance(sessions, dict) else {}

    def load(self, session_id: str) -> SessionFlushState:
        """The state of ``session_id`` (defaults when unknown)."""
        entry = self._read_all().get(session_id)
        return (
            SessionFlushState.from_dict(entry) if isinstance(entry, dict) else SessionFlushState()
        )

    def _update(self, session_id: str, change: Any) -> SessionFlushState:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(lock_path_for(self.path)):
            sessions = self._read_all()
            entry = sessions.get(session_id)
            current = (
                SessionFlushState.from_dict(entry)
                if isinstance(entry, dict)
                else SessionFlushState()
            )
            new = change(current)
            sessions[session_id] = new.to_dict()
            atomic_write_text(
                self.path,
                json.dumps({"version": 1, FLUSH_SESSIONS_KEY: sessions}, indent=2, sort_keys=True),
            )
        return new  # type: ignore[no-any-return]

    def mark_flushed(
        self, session_id: str, cycle: int, *, status: str = "ok", seen: Iterable[str] = ()
    ) -> SessionFlushState:
        """Record "flushed for cycle ``cycle``" (the cycle captured when the flush began).

        ``seen`` are the keys of the messages the flush turns were shown and completed on:
        they join the watermark.
        """
        now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        keys = list(seen)
        return self._update(
            session_id,
            lambda s: replace(
                s,
                flushed_cycle=cycle,
                flushed_at=now,
                flush_status=status,
                seen=_merge_seen(s.seen, keys),
            ),
        )

    def record_unsaved(self, session_id: str, count: int) -> SessionFlushState:
        """Count ``count`` messages evicted although no flush saved them."""
        now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        return self._update(
            session_id,
            lambda s: replace(
                s, unsaved_evictions=s.unsaved_evictions + max(0, count), last_unsaved_at=now
            ),
        )

    def record_compaction(
        self, session_id: str, marker: str | None = None, *, transcript_bytes: int = 0
    ) -> SessionFlushState:
        """Advance the cycle id because a compaction really happened.

        With a ``marker`` (e.g. the summary message id) the same compaction reported twice
        advances the cycle once. ``transcript_bytes`` is the transcript size now: the
        size trigger counts from here.
        """

        if marker is not None:
            current = self.load(session_id)
            if current.compaction_marker == marker:
                return current  # already counted; no write

        def change(s: SessionFlushState) -> SessionFlushState:
            if marker is not None and marker == s.compaction_marker:
                return s
            return replace(
                s,
                cycle=s.cycle + 1,
                compaction_marker=marker or s.compaction_marker,
                compaction_bytes=max(0, transcript_bytes),
            )

        return self._update(session_id, change)

    def forget(self, session_id: str) -> None:
        """Drop the state of an ended session."""
        if not self.path.exists():
            return
        with exclusive_lock(lock_path_for(self.path)):
            sessions = self._read_all()
            if sessions.pop(session_id, None) is not None:
                atomic_write_text(
                    self.path,
                    json.dumps({"version": 1, FLUSH_SESSIONS_KEY: sessions}, indent=2, sort_keys=True),
                )


def _merge_seen(old: Sequence[str], new: Sequence[str]) -> tuple[str, ...]:
    if not new:
        return tuple(old)
    fresh = set(new)
    merged = [k for k in old if k not in fresh]
    merged.extend(dict.fromkeys(new))
    return tuple(merged[-MAX_SEEN_KEYS:])


def _fingerprint(message: Mapping[str, Any]) -> str:
    calls = [
        [c.get("id"), c.get("name"), c.get("args")]
        for c in message.get("tool_calls") or ()
        if isinstance(c, Mapping)
    ]
    body = [
        str(message.get("role", "")),
        content_text(message.get("content", "")),
        calls,
        message.get("tool_call_id"),
    ]
    return hashlib.sha256(json.dumps(body, default=str).encode("utf-8", "replace")).hexdigest()


def message_keys(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """A stable key per message: what the flush watermark remembers.

    A message with a string ``id`` (LangChain) is keyed by it; any other by a hash of its
    role, text, tool calls and tool-call id chained with the previous message's hash, so
    two identical "ok"s in different places get different keys. Keys depend only on the
    messages, so they are the same after a restart.
    """
    keys: list[str] = []
    previous = ""
    for message in messages:
        own = _fingerprint(message)
        chained = hashlib.sha256(f"{previous}:{own}".encode()).hexdigest()[:24]
        previous = own
        mid = message.get("id")
        keys.append(f"id:{mid}" if isinstance(mid, str) and mid else f"h:{chained}")
    return keys


def with_tool_pairs(
    messages: Sequence[Mapping[str, Any]], chosen: Iterable[int]
) -> list[int]:
    """``chosen`` indices plus what a chat API needs to accept them, in order.

    A tool result is sent with the assistant message that called it, and an assistant
    message with tool calls with its results, so the flush conversation is valid.
    """
    picked = set(chosen)
    callers: dict[str, int] = {}
    for i, m in enumerate(messages):
        for call in m.get("tool_calls") or ():
            if isinstance(call, Mapping) and call.get("id") is not None:
                callers[str(call["id"])] = i
    changed = True
    while changed:
        changed = False
        for i, m in enumerate(messages):
            if m.get("role") == "tool":
                caller = callers.get(str(m.get("tool_call_id")))
                if caller is None:
                    continue
                if i in picked and caller not in picked:
                    picked.add(caller)
                    changed = True
                elif caller in picked and i not in picked:
                    picked.add(i)
                    changed = True
    return sorted(picked)


def _trim_text(text: str, ratio: float) -> str:
    keep = max(16, int(len(text) * ratio) - 64)  # 64: the marker that replaces the middle
    if keep >= len(text):
        return text
    head = keep // 2
    tail = keep - head
    cut = len(text) - keep
    return f"{text[:head]}\n[... {cut} characters trimmed to fit the flush window ...]\n{text[-tail:]}"


def fit_message(
    message: Mapping[str, Any], budget: int, count: Callable[[Mapping[str, Any]], int]
) -> dict[str, Any]:
    """``message`` with its text cut in the middle until it fits ``budget`` tokens."""
    out = dict(message)
    for _ in range(8):
        tokens = count(out)
        if tokens <= budget:
            break
        text = content_text(out.get("content", ""))
        shorter = _trim_text(text, 0.9 * budget / max(1, tokens))
        if shorter == text:
            break
        out["content"] = shorter
    return out


def plan_flush_chunks(
    messages: Sequence[Mapping[str, Any]],
    budget: int,
    count: Callable[[Mapping[str, Any]], int],
) -> list[list[int]]:
    """Split a flush conversation into consecutive runs of at most ``budget`` tokens.

    A run never starts with a tool result (it stays with the call that produced it when
    both fit); a single message over the budget is a run of its own (the caller trims it
    with :func:`fit_message`).
    """
    runs: list[list[int]] = []
    current: list[int] = []
    used = 0
    for i, message in enumerate(messages):
        size = count(message)
        starts_clean = message.get("role") != "tool"
        if current and used + size > budget and starts_clean:
            runs.append(current)
            current, used = [], 0
        current.append(i)
        used += size
    if current:
        runs.append(current)
    return runs


# ---------------------------------------------------------------------------------------
# The silent turn


@dataclass(frozen=True, kw_only=True)
class FlushTurnResult:
    """What the silent flush turn did.

    Attributes:
        reply: The model's final text (never shown to the user).
        silent: True when the reply was only ``NO_REPLY``.
        tool_calls: Names of the tools called, in order.
        writes: Paths appended to successfully.
        steps: Model calls made.
    """

    reply: str
    silent: bool
    tool_calls: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    steps: int = 0


def run_flush_turn(
    model: ChatModel,
    conversation: Sequence[Message],
    *,
    system_prompt: str,
    user_prompt: str,
    tools: Sequence[MemoryTool],
    max_steps: int = MAX_FLUSH_STEPS,
) -> FlushTurnResult:
    """Run the silent flush turn: the conversation, the flush prompts, only the flush tools.

    The messages of this turn are local; nothing here is added to the agent's history.

    Raises:
        Exception: whatever the model raises (the caller retries once).
    """
    history: list[Message] = [{"role": "system", "content": system_prompt}]
    history.extend(
        {k: v for k, v in m.items() if k != "id"} for m in conversation if m.get("role") != "system"
    )
    history.append({"role": "user", "content": user_prompt})
    by_name = tools_by_name(tools)
    schemas = [t.openai_schema() for t in tools]
    called: list[str] = []
    writes: list[str] = []
    reply_text = ""
    steps = 0
    for _ in range(max_steps):
        steps += 1
        reply = call_model(model, history, schemas)
        reply_text = reply.text
        history.append(reply.to_message())
        if not reply.tool_calls:
            break
        for call in reply.tool_calls:
            called.append(call.name)
            tool = by_name.get(call.name)
            if tool is None:
                payload: dict[str, Any] = {
                    "error": f"tool {call.name!r} is not available during the memory flush; "
                    f"use {', '.join(by_name)}"
                }
            else:
                payload = tool.invoke(call.args)
                if tool.name == "memory_append" and payload.get("status") == "ok":
                    writes.append(str(payload.get("path")))
            history.append(tool_message(call, payload_text(payload)))
    return FlushTurnResult(
        reply=reply_text,
        silent=is_silent_reply(reply_text) or not reply_text.strip(),
        tool_calls=tuple(called),
        writes=tuple(writes),
        steps=steps,
    )


@dataclass(frozen=True, kw_only=True)
class FlushOutcome:
    """The result of one flush trigger.

    Attributes:
        decision: Why it ran or not.
        ran: True when a flush turn was attempted.
        ok: True when a turn completed (possibly silently).
        attempts: Turns attempted (at most 2: one retry).
        result: The completed turn, if any (several turns of one chunked flush are
            merged: their tool calls and writes in order, the last reply).
        error: Last error text when every attempt failed.
        seen: Keys (:func:`message_keys`) of the messages a completed turn was shown.
        missed: Keys of the messages whose turn failed (not saved by this flush).
        turns: Flush turns run (more than one when the conversation was split to fit).
    """

    decision: FlushDecision
    ran: bool = False
    ok: bool = False
    attempts: int = 0
    result: FlushTurnResult | None = None
    error: str | None = None
    seen: tuple[str, ...] = ()
    missed: tuple[str, ...] = ()
    turns: int = 0


def _merge_results(results: Sequence[FlushTurnResult]) -> FlushTurnResult | None:
    if not results:
        return None
    return FlushTurnResult(
        reply=results[-1].reply,
        silent=all(r.silent for r in results),
        tool_calls=tuple(c for r in results for c in r.tool_calls),
        writes=tuple(w for r in results for w in r.writes),
        steps=sum(r.steps for r in results),
    )


def run_flush_chunked(
    model: ChatModel,
    conversation: Sequence[Message],
    keys: Sequence[str],
    *,
    decision: FlushDecision,
    system_prompt: str,
    user_prompt: str,
    tools: Sequence[MemoryTool],
    budget: int,
    count: Callable[[Mapping[str, Any]], int],
    is_overflow: Callable[[BaseException], bool],
    retries: int = 1,
) -> FlushOutcome:
    """The flush over ``conversation``, split into turns that fit ``budget`` tokens.

    ``keys[i]`` is the key of ``conversation[i]``. Each run of messages is one silent
    turn (retried ``retries`` times); a turn that overflows the model's window is split in
    two, and a single message that still overflows is trimmed further, so the flush fits
    whatever the window. Never raises.
    """
    budget = max(64, budget)
    pending: list[tuple[list[int], int]] = [
        (run, budget) for run in plan_flush_chunks(conversation, budget, count) or [[]]
    ]
    results: list[FlushTurnResult] = []
    seen: list[str] = []
    missed: list[str] = []
    error: str | None = None
    attempts = 0
    turns = 0
    failed = 0
    while pending:
        run, room = pending.pop(0)
        shown = [fit_message(conversation[i], room, count) for i in run]
        done = False
        for attempt in range(1, retries + 2):
            attempts += 1
            try:
                result = run_flush_turn(
                    model,
                    shown,
                    system_prompt=system_prompt,
                    user_prompt=user_prompt,
                    tools=tools,
                )
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
                log.warning("memory flush attempt %d failed: %s", attempt, type(exc).__name__)
                log.debug("memory flush failure", exc_info=True)
                if is_overflow(exc) and (len(run) > 1 or room > 64):
                    half = len(run) // 2
                    if len(run) > 1:
                        pending[:0] = [(run[:half], room), (run[half:], room)]
                    else:
                        pending.insert(0, (run, room // 2))
                    done = True  # replaced by smaller turns
                    break
                continue
            turns += 1
            results.append(result)
            seen.extend(keys[i] for i in run)
            done = True
            break
        if not done:
            failed += 1
            missed.extend(keys[i] for i in run)
    merged = _merge_results(results)
    ok = failed == 0
    if merged is not None:
        log.info(
            "memory flush done (cycle %d, %s): %d turns, %d writes, silent=%s",
            decision.cycle,
            decision.reason,
            turns,
            len(merged.writes),
            merged.silent,
        )
    return FlushOutcome(
        decision=decision,
        ran=True,
        ok=ok,
        attempts=attempts,
        result=merged,
        error=None if ok else error,
        seen=tuple(seen),
        missed=tuple(missed),
        turns=turns,
    )
