"""Prompt text: the Memory Recall section, the flush prompts and the NO_REPLY convention."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable, Sequence

SEARCH_TOOL = "memory_search"
GET_TOOL = "memory_get"
APPEND_TOOL = "memory_append"
RECALL_HEADING = "## Memory Recall"
#: The token a model replies with when a turn should produce no visible message.
NO_REPLY = "NO_REPLY"


def describe_sources(sources: Sequence[str] = ("memory",), extra_paths: Sequence[str] = ()) -> str:
    """Human wording of what memory search covers, generated from the configuration."""
    parts = ["MEMORY.md", "USER.md", "the Markdown notes under memory/"]
    if extra_paths:
        parts.append("extra paths (" + ", ".join(extra_paths) + ")")
    if "sessions" in sources:
        parts.append("past session transcripts")
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def memory_recall_section(
    tool_names: Iterable[str],
    *,
    citations: bool = True,
    sources: Sequence[str] = ("memory",),
    extra_paths: Sequence[str] = (),
) -> str:
    """The ``## Memory Recall`` system-prompt section for the tools the agent has.

    Args:
        tool_names: Names of the tools available this turn.
        citations: False tells the model not to mention paths or line numbers.
        sources: Configured sources (``memory``, ``sessions``).
        extra_paths: Configured extra paths, listed as searchable.

    Returns:
        The section text ending with a blank line, or ``""`` when neither
        ``memory_search`` nor ``memory_get`` is available.
    """
    names = set(tool_names)
    has_search, has_get = SEARCH_TOOL in names, GET_TOOL in names
    if not (has_search or has_get):
        return ""
    where = describe_sources(sources, extra_paths)
    lines = [RECALL_HEADING]
    if has_search and has_get:
        lines.append(
            "Questions about earlier work, decisions, dates, people, preferences or open "
            f"todos must start with a look at memory: call {SEARCH_TOOL} (it covers {where}), "
            f"then use {GET_TOOL} to read only the lines you need from the best hits."
        )
    elif has_search:
        lines.append(
            "Questions about earlier work, decisions, dates, people, preferences or open "
            f"todos must start with {SEARCH_TOOL} (it covers {where}); answer from the "
            "snippets it returns."
        )
    else:
        lines.append(
            f"When a question names a memory file ({where}), read the relevant lines with "
            f"{GET_TOOL} before answering; it returns a bounded window and tells you where "
            "to continue."
        )
    lines.append(
        "If the results still leave you unsure, say that you checked memory and did not find "
        "a confident answer. When a tool returns a warning (disabled, unavailable, partial or "
        "stale results), tell the user and pass on the suggested action. A status of "
        "not_found means the file does not exist yet, not an error."
    )
    if citations:
        lines.append(
            "When it helps the user verify a remembered fact, cite it as `Source: <path#line>`."
        )
    else:
        lines.append("Do not mention file paths or line numbers unless the user asks for them.")
    return "\n".join(lines) + "\n\n"


def append_section(system_prompt: str | None, section: str) -> str:
    """Append ``section`` to a system prompt once (no-op if empty or already present)."""
    base = system_prompt or ""
    if not section.strip() or section.strip() in base:
        return base
    if not base:
        return section
    sep = "" if base.endswith("\n\n") else ("\n" if base.endswith("\n") else "\n\n")
    return base + sep + section


# ---------------------------------------------------------------------------------------
# Pre-compaction flush


def daily_note_path(day: dt.date) -> str:
    """``memory/YYYY-MM-DD.md`` for ``day``."""
    return f"memory/{day.isoformat()}.md"


def flush_system_prompt(day: dt.date) -> str:
    """Extra system prompt of the silent flush turn."""
    target = daily_note_path(day)
    return (
        "## Memory flush before compaction\n"
        "This conversation is close to its context limit and older turns will soon be "
        "summarised away. Before that happens, save anything worth keeping to disk. "
        f"The only writable file is {target}: add to it with {APPEND_TOOL}; it is "
        "append-only. MEMORY.md, USER.md, DREAMS.md, SOUL.md and AGENTS.md are read-only. "
        f"You may reply, but usually the right reply is just {NO_REPLY}."
    )


#: How to write durable facts so the knowledge graph picks them up (issue 13); the flush
#: prompt includes it, and an archive or extraction prompt can too.
FACT_SYNTAX_GUIDE = (
    "Write durable facts under a heading named after the person or project, one per line: "
    "'## Alice Martin (Ali)' then '- city: Lisbon (since 2026-05-01)', "
    "'- works_at [[Acme Corp]]', '- aka: Al' or '- [preference] flat white'. A newer dated "
    "value replaces the old one; never edit old lines."
)


def flush_user_prompt(day: dt.date, now: dt.datetime) -> str:
    """User message of the silent flush turn (dated in the user's timezone)."""
    target = daily_note_path(day)
    return (
        "Memory flush (automatic, before context compaction). Review the conversation and "
        "store the durable facts: decisions, preferences, people, dates, commitments and "
        f"open todos. Write them only to {target} with {APPEND_TOOL} (the memory/ folder "
        "is created if needed). If the file already exists, add to the end; never rewrite, "
        "delete or edit existing notes, and do not create other files such as "
        f"timestamped variants. Never edit MEMORY.md, USER.md, DREAMS.md, SOUL.md or "
        f"AGENTS.md. If there is nothing new worth keeping, reply with exactly {NO_REPLY}.\n"
        f"{FACT_SYNTAX_GUIDE}\n"
        f"Current time: {now.isoformat(timespec='minutes')} ({now.tzname() or 'local'})."
    )


# ---------------------------------------------------------------------------------------
# NO_REPLY

_TRAILING_TOKEN = re.compile(r"(^|[\s*])NO_REPLY[\s*.]*$", re.IGNORECASE)
_LEADING_TOKEN = re.compile(r"^\s*NO_REPLY\b[\s:.-]*", re.IGNORECASE)


def is_silent_reply(text: str | None) -> bool:
    """True when a reply is only ``NO_REPLY`` (trimmed, any case) or its JSON envelope.

    A reply that merely ends with the token is not silent.
    """
    if text is None:
        return False
    stripped = text.strip()
    if stripped.upper() == NO_REPLY:
        return True
    if stripped.startswith("{") and stripped.endswith("}"):
        try:
            data = json.loads(stripped)
        except ValueError:
            return False
        return (
            isinstance(data, dict)
            and set(data) == {"action"}
            and isinstance(data["action"], str)
            and data["action"].strip().upper() == NO_REPLY
        )
    return False


def strip_no_reply(text: str) -> str:
    """Remove a leading or trailing ``NO_REPLY`` token from a reply that has other content."""
    out = _TRAILING_TOKEN.sub(lambda m: m.group(1).rstrip(), text)
    out = _LEADING_TOKEN.sub("", out)
    return out.strip()


__all__ = [
    "APPEND_TOOL",
    "GET_TOOL",
    "NO_REPLY",
    "RECALL_HEADING",
    "SEARCH_TOOL",
    "append_section",
    "daily_note_path",
    "describe_sources",
    "flush_system_prompt",
    "flush_user_prompt",
    "is_silent_reply",
    "memory_recall_section",
    "strip_no_reply",
]
