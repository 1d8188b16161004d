"""Prompt text: the Memory Recall section, the flush prompts and the NO_REPLY convention."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable, Sequence

from memmw.workspace.layout import daily_note_path

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


def flush_system_prompt(day: dt.date, target: str | None = None) -> str:
    """Extra system prompt of the silent flush turn (``target``: a group's own note)."""
    target = target or daily_note_path(day)
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


def flush_user_prompt(day: dt.date, now: dt.datetime, target: str | None = None) -> str:
    """User message of the silent flush turn (dated in the user's timezone)."""
    target = target or daily_note_path(day)
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
#
# The rules of reference section 9, applied by every host (custom loop, LangChain, streamed
# or not):
# * silent: the whole reply is the token, ignoring Markdown emphasis/code/quote marks and
#   trailing punctuation (``NO_REPLY``, ``NO_REPLY.``, ``**NO_REPLY**``, `` `no_reply` ``),
#   or the JSON envelope ``{"action": "NO_REPLY"}``; also ``NO_REPLY: <reason>`` (a reason
#   addressed to the runtime, never to the user). Merely *ending* with the token is not
#   silent (upstream #19537).
# * strip: a leading token and a trailing token (after the start, whitespace or ``*``)
#   are removed from a reply that has other content.
# * streaming guard: text that could still become the token is held back (see
#   :class:`NoReplyStreamGuard`), so no draft of a silent reply is ever streamed.

#: Markdown and punctuation that may wrap the token without changing its meaning.
_DECORATION = " \t\r\n*_`~\"'.,!;:>#-()[]"
_LEAD_DECOR = re.compile(r"^[\s*_`~>\"']*")
_REASON_FORM = re.compile(r"^[\s*_`~>\"']*NO_REPLY[\s*_`~\"']*[:\u2013\u2014-]", re.IGNORECASE)
_TRAILING_TOKEN = re.compile(r"(?<!\w)[\s*_`~]*NO_REPLY[\s*_`~.!]*$", re.IGNORECASE)
_BEFORE_TOKEN = frozenset(" \t\r\n*_`~")
_AFTER_TOKEN = frozenset(" \t\r\n*_`~.!")
_ENVELOPE = '{"action":"no_reply"}'
_LEADING_TOKEN = re.compile(r"^[\s*_`~>]*NO_REPLY\b[\s*_`~:.!-]*", re.IGNORECASE)


def _envelope(stripped: str) -> bool:
    if not (stripped.startswith("{") and stripped.endswith("}")):
        return False
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


def is_silent_reply(text: str | None) -> bool:
    """True when a reply means "say nothing" (see the rules above).

    ``NO_REPLY``, ``no_reply``, ``NO_REPLY.``, ``**NO_REPLY**``, ``NO_REPLY: reason`` and
    ``{"action": "NO_REPLY"}`` are silent; ``Saved. NO_REPLY`` is not (its text is kept
    and the token stripped).
    """
    if text is None:
        return False
    stripped = text.strip()
    if not stripped:
        return False
    if stripped.strip(_DECORATION).upper() == NO_REPLY:
        return True
    if _REASON_FORM.match(stripped):
        return True
    return _envelope(stripped)


def strip_no_reply(text: str) -> str:
    """Remove a leading or trailing ``NO_REPLY`` token from a reply that has other content."""
    out = _TRAILING_TOKEN.sub("", text)
    out = _LEADING_TOKEN.sub("", out)
    return out.strip()


def visible_text(text: str | None) -> str | None:
    """What a person may see of a final reply: None when silent, else the stripped text.

    A reply left with no letters or digits once the token is stripped is silent too.
    """
    if text is None or is_silent_reply(text):
        return None
    if NO_REPLY.lower() not in text.lower():
        return text
    out = strip_no_reply(text)
    return out if any(ch.isalnum() for ch in out) else None


def _ascii_letter(ch: str) -> bool:
    return ch.isascii() and ch.isalpha()


def _could_become_token(fragment: str) -> bool:
    """True when ``fragment`` (decoration removed) is a case-insensitive prefix of the token."""
    core = _LEAD_DECOR.sub("", fragment).rstrip("*_`~ \t\r\n")
    return NO_REPLY.startswith(core.upper())


class NoReplyStreamGuard:
    """Filters a streamed reply so that no part of a ``NO_REPLY`` ever reaches a person.

    Feed each text delta to :meth:`feed` and show what it returns; call :meth:`finish`
    at the end and show what it returns. Text that could still turn into the token (at
    the start, or a trailing word after whitespace or ``*``) is held back until the next
    delta decides; a reply that starts with the whole token is held to the end and then
    judged as a final reply (silent, reason form, or stripped). The concatenation of
    everything returned equals :func:`visible_text` of the whole reply, up to whitespace
    at the cut.

    Example:
        >>> guard = NoReplyStreamGuard()
        >>> [guard.feed(d) for d in ["NO", "_RE", "PLY"]], guard.finish()
        (['', '', ''], '')
    """

    def __init__(self) -> None:
        self.raw = ""
        self.sent = 0
        self._released = False
        self._leading = False

    @property
    def suppressed(self) -> bool:
        """True while nothing was emitted yet (a host may hide its typing indicator)."""
        return self.sent == 0

    def _held_tail_start(self) -> int:
        """Where a trailing fragment that may still become the token begins (or the end)."""
        raw = self.raw
        end = len(raw)
        while end > 0 and raw[end - 1] in _AFTER_TOKEN:
            end -= 1
        start = end
        while start > 0 and (raw[start - 1] == "_" or (raw[start - 1].isascii() and raw[start - 1].isalpha())):
            start -= 1
        word = raw[start:end]
        boundary = start == 0 or not raw[start - 1].isalnum()
        candidate = bool(word) and boundary and NO_REPLY.startswith(word.upper())
        # Without a candidate word only the trailing decoration is held.
        cut = start if candidate else len(raw)
        while cut > 0 and raw[cut - 1] in _BEFORE_TOKEN:
            cut -= 1
        return cut

    def feed(self, delta: str) -> str:
        """Add a delta; return the text that is safe to show now ("" when held back)."""
        if not delta:
            return ""
        self.raw += delta
        if self._leading:
            return ""
        if not self._released:
            core = _LEAD_DECOR.sub("", self.raw)
            compact = re.sub(r"\s+", "", self.raw).lower()
            if core.upper().startswith(NO_REPLY) or compact.startswith(_ENVELOPE):
                self._leading = True
                return ""
            if _could_become_token(self.raw) or _ENVELOPE.startswith(compact):
                return ""
            if not any(ch.isalnum() for ch in self.raw[: self._held_tail_start()]):
                return ""  # nothing a person needs yet, and it may still turn silent
            self._released = True
        end = self._held_tail_start()
        if end <= self.sent:
            return ""
        out = self.raw[self.sent : end]
        self.sent = end
        return out

    def finish(self) -> str:
        """The end of the stream: the rest that may be shown ("" for a silent reply)."""
        if self._leading or not self._released:
            return visible_text(self.raw) or ""
        # The same rule as a final reply: strip a trailing token from the whole text,
        # then show what was not shown yet.
        final = self.raw
        if _TRAILING_TOKEN.search(final):
            final = _TRAILING_TOKEN.sub("", final).rstrip()
        rest = final[self.sent :]
        self.sent = len(self.raw)
        return rest
