"""Prompt text: the Memory Recall section, the flush prompts and the NO_REPLY convention."""

from __future__ import annotations

import datetime as dt
import functools
import json
import logging
import re
import unicodedata
from collections.abc import Iterable, Sequence

from memmw.config import Source
from memmw.workspace.layout import daily_note_path

log = logging.getLogger(__name__)

SEARCH_TOOL = "memory_search"
GET_TOOL = "memory_get"
APPEND_TOOL = "memory_append"
RECALL_HEADING = "## Memory Recall"
#: The token a model replies with when a turn should produce no visible message.
NO_REPLY = "NO_REPLY"


def describe_sources(sources: Sequence[str] = (Source.MEMORY,), extra_paths: Sequence[str] = ()) -> str:
    """Human wording of what memory search covers, generated from the configuration."""
    parts = ["MEMORY.md", "USER.md", "the Markdown notes under memory/"]
    if extra_paths:
        parts.append("extra paths (" + ", ".join(extra_paths) + ")")
    if Source.TRANSCRIPTS in sources:
        parts.append("past session transcripts")
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def memory_recall_section(
    tool_names: Iterable[str],
    *,
    citations: bool = True,
    sources: Sequence[str] = (Source.MEMORY,),
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
# One rule for every host (custom loop, LangChain; invoked or streamed), decided on the
# reply's *decision text*: every character NFKC-normalised (fullwidth ``ＮＯ＿ＲＥＰＬＹ`` is the
# token), Unicode format characters (category Cf: zero-width space and joiners, soft
# hyphen, word joiner, BOM) removed, and a Markdown escape before ``_`` (``NO\_REPLY``)
# removed. What a person sees is never normalised, only cut.
#
# 1. Model special tokens (``<|endoftext|>``, ``<|im_end|>``, ``</s>``, ``<|eot_id|>``,
#    ``<end_of_turn>``, ``<|im_start|>assistant`` ...) and whitespace at either end are cut.
# 2. blank: nothing is left -> silent.
# 3. silent: what is left unwraps to the token, case-insensitively. Unwrapping removes, in
#    any nesting: surrounding punctuation, quotes (also typographic), brackets, Markdown
#    emphasis and headings, inline code, a code fence with any info string, an HTML
#    element, and a JSON object in which some top-level value is the token whatever the
#    other keys (``{"action": "NO_REPLY", "reason": "..."}``). The token followed by
#    ``:`` or a dash and a reason (for the runtime, never for the user) is silent too.
# 4. strip: a leading token (only marks before it) and a trailing one (after whitespace or
#    punctuation, with its own quotes or emphasis; only marks, whitespace and special
#    tokens after it) are cut, and what is left is judged again (the rule is idempotent);
#    a reply left without a letter or digit is silent.
# 5. Otherwise the reply is delivered unchanged: a token that is not the first word and
#    has a word after it ("the NO_REPLY token is special") never changes a reply.
#
# Streaming: :class:`NoReplyStreamGuard` holds back exactly the text that could still be
# cut or become silent, so for every chunking the streamed text equals the final rule's.

_TOKEN_FOLD = NO_REPLY.casefold()
#: Characters that may open (before) or close (after) a trailing token.
_DECOR_BEFORE = frozenset("*_`~\"'\\“”‘’«»‹›„‚([")
_DECOR_AFTER = frozenset("*_`~\"'\\“”‘’«»‹›)].!?")
#: Special tokens of common model families (after NFKC, DeepSeek's ``<｜...｜>`` is ``<|...|>``).
_SPECIAL_LITERALS = (
    "</s>",
    "<s>",
    "<eos>",
    "<bos>",
    "<pad>",
    "<unk>",
    "<eot>",
    "<end_of_turn>",
    "<start_of_turn>",
    "[/INST]",
)
#: Special tokens a role name may follow (``<|im_start|>assistant``).
_ROLE_STARTERS = frozenset(
    {"<|im_start|>", "<|start|>", "<|start_header_id|>", "<|channel|>", "<start_of_turn>"}
)
_ROLE_WORDS = (
    "system",
    "user",
    "assistant",
    "model",
    "tool",
    "developer",
    "analysis",
    "final",
    "commentary",
    "ipython",
)
_PIPE_NAME_MAX = 48
_MIRROR = {"(": ")", "[": "]", "{": "}", "<": ">", "“": "”“", "‘": "’‘", "«": "»", "‹": "›", "„": "“”", "‚": "‘’", "「": "」", "『": "』"}
#: Edge marks kept by a partial unwrap, so a fence, an HTML element or JSON stays whole.
_STRUCTURE = (("`~{<", "`~}>"), ("`", "`"), ("~", "~"), ("{", "}"), ("<", ">"))
_PARTIAL = -1
_NO, _MAYBE, _TO_END = 0, 1, 2

_FENCE = re.compile(r"\A(`{3,}|~{3,})[^\n]*\n(.*?)\n?[ \t]*\1[`~]*\Z", re.S)
_INLINE_CODE = re.compile(r"\A(`+)(.*?)\1\Z", re.S)
_INFO_WORD = re.compile(r"\A[^\s{]+\s+(\{.*)\Z", re.S)
_HTML = re.compile(r"\A<([A-Za-z][\w-]*)[^>]*>(.*)</\1\s*>\Z", re.S)
_REASON = re.compile(r"\Ano_reply(?:[\s*_`~\"'“”‘’«»)\]]*:|\s*[\u2013\u2014]|\s+-|-\s)", re.I)
#: A leading token: only marks before it (no word, no JSON or tag), marks and a reason
#: separator after it.
_LEADING_TOKEN = re.compile(r"(?:[^\w{<]|_)*?no_reply(?!\w)(?:[^\w{<]|_)*", re.I)


@functools.lru_cache(maxsize=4096)
def _decision_char(ch: str) -> str:
    if unicodedata.category(ch) == "Cf":
        return ""
    return unicodedata.normalize("NFKC", ch)


def _invisible(ch: str) -> bool:
    return ch >= "\x80" and unicodedata.category(ch) == "Cf"


def _next_shown(text: str, i: int) -> int:
    """Index of the first character after ``text[i]`` that is not a format character."""
    j = i + 1
    while j < len(text) and _invisible(text[j]):
        j += 1
    return j


def _escapes(text: str, i: int) -> bool:
    """True when the backslash at ``text[i]`` is not itself escaped (an even run before it)."""
    j = i
    while j > 0 and text[j - 1] == "\\":
        j -= 1
    return (i - j) % 2 == 0


def _decide(text: str, start: int, stop: int, out: list[str], pos: list[int]) -> None:
    """Append the decision text of ``text[start:stop]`` to ``out`` (``pos``: source index)."""
    for i in range(start, stop):
        ch = text[i]
        if ch < "\x80":
            if ch == "\\" and text[_next_shown(text, i) : _next_shown(text, i) + 1] == "_" and _escapes(text, i):
                continue  # a Markdown escape: NO\_REPLY
            out.append(ch)
            pos.append(i)
            continue
        mapped = _decision_char(ch)
        out.append(mapped)
        pos.extend([i] * len(mapped))


def _decision_text(text: str) -> tuple[str, list[int]]:
    out: list[str] = []
    pos: list[int] = []
    _decide(text, 0, len(text), out, pos)
    return "".join(out), pos


def _special_end(n: str, i: int, final: bool) -> int | None:
    """End of the special token at ``n[i]``; ``_PARTIAL`` when ``n[i:]`` may still become
    (or extend) one and ``final`` is False; None when there is none."""
    size = len(n)
    end: int | None = None
    could = False
    if n.startswith("<|", i):
        k = i + 2
        while k < size and k - i - 2 <= _PIPE_NAME_MAX and not n[k].isspace() and n[k] not in "|<>":
            k += 1
        if k == size:
            could = True
        elif n[k] == "|" and k > i + 2 and k - i - 2 <= _PIPE_NAME_MAX:
            if k + 1 == size:
                could = True
            elif n[k + 1] == ">":
                end = k + 2
    elif n[i] in "<[":
        tail = n[i : i + 16]
        for lit in _SPECIAL_LITERALS:
            if tail.startswith(lit):
                end = i + len(lit)
                break
            if len(tail) < len(lit) and lit.startswith(tail):
                could = True
    if end is None:
        return _PARTIAL if could and not final else None
    if n[i:end] in _ROLE_STARTERS:
        k = end
        while k < size and n[k].isascii() and n[k].isalpha():
            k += 1
        word = n[end:k].lower()
        if k == size and not final and any(r.startswith(word) for r in _ROLE_WORDS):
            return _PARTIAL
        if word in _ROLE_WORDS:
            return k
    return end


def _leading_end(n: str, final: bool, start: int = 0) -> tuple[int, bool, bool]:
    """Where the whitespace and special tokens from ``start`` end: ``(index, any special
    token, a special token may still be completing)``."""
    j, special = start, False
    while j < len(n):
        if n[j].isspace():
            j += 1
            continue
        end = _special_end(n, j, final)
        if end == _PARTIAL:
            return j, special, True
        if end is None:
            break
        j, special = end, True
    return j, special, False


def _token_boundary(n: str, i: int) -> bool:
    """A trailing token may start at ``n[i]``: no word character or opening mark before."""
    if i == 0:
        return True
    prev = n[i - 1]
    return not (prev.isalnum() or prev == "_" or prev in _DECOR_BEFORE)


def _region(n: str, i: int, *, final: bool, tokens: bool) -> tuple[bool, bool, bool]:
    """Parse ``n[i:]`` as a tail that is cut: (whitespace | special token | token)*.

    Returns ``(ok, cut, token)``: ok when it is such a tail (``final``) or may still
    become one (not ``final``); cut when it holds a special token or the token; token when
    it holds the token. ``tokens`` False allows only whitespace and special tokens.
    """
    size = len(n)
    j, cut, token = i, False, False
    while j < size:
        if n[j].isspace():
            j += 1
            continue
        end = _special_end(n, j, final)
        if end == _PARTIAL:
            return True, cut, token
        if end is not None:
            j, cut = end, True
            continue
        if not tokens or not _token_boundary(n, j):
            return False, cut, token
        k = j
        while k < size and n[k] in _DECOR_BEFORE:
            k += 1
        m = 0
        while m < len(_TOKEN_FOLD) and k + m < size and n[k + m].lower() == _TOKEN_FOLD[m]:
            m += 1
        if m < len(_TOKEN_FOLD):
            return (k + m == size and not final), cut, token
        j = k + m
        while j < size and n[j] in _DECOR_AFTER:
            j += 1
        cut = token = True
    return True, cut, token


def _region_start(
    n: str, start: int, *, final: bool, tokens: bool = True
) -> tuple[int, bool, bool]:
    """The first index ``>= start`` where :func:`_region` succeeds (else ``len(n)``)."""
    size = len(n)
    for i in range(start, size):
        ch = n[i]
        if ch.isspace():
            if i > start and n[i - 1].isspace():
                continue  # same outcome as the start of this whitespace run
        elif not (i == start or ch in "<[" or ch in _DECOR_BEFORE or ch in "nN"):
            continue
        ok, cut, token = _region(n, i, final=final, tokens=tokens)
        if ok:
            return i, cut, token
    return size, False, False


def _edge(s: str, keep_left: str = "", keep_right: str = "") -> str:
    a, b = 0, len(s)
    while a < b and not s[a].isalnum() and s[a] not in keep_left:
        a += 1
    while b > a and not s[b - 1].isalnum() and s[b - 1] not in keep_right:
        b -= 1
    return s[a:b]


def _layers(s: str) -> list[str]:
    """``s`` without one wrapping layer: a mark (or a run of it) at the start and the
    closing mark (or run) at the end."""
    if not s or s[0].isalnum():
        return []
    closers = _MIRROR.get(s[0], s[0])
    a = b = 0
    while a < len(s) and s[a] == s[0]:
        a += 1
    while b < len(s) - a and s[len(s) - 1 - b] in closers:
        b += 1
    return [s[k : len(s) - k] for k in {1, min(a, b)} if 0 < k <= min(a, b)]


def _json_values(s: str) -> list[str]:
    if not s.startswith("{"):
        return []
    try:
        data = json.loads(s)
    except (ValueError, RecursionError):
        return []
    if not isinstance(data, dict):
        return []
    out: list[str] = []
    for value in data.values():
        if isinstance(value, str):
            out.append(_decision_text(value)[0])  # escapes like \u200b are decoded now
        elif isinstance(value, dict):
            out.append(json.dumps(value))
    return out


def _unwraps_to_token(core: str) -> bool:
    """True when peeling wrappers off ``core`` (decision text) can leave just the token."""
    todo, seen, budget = [core], set(), 256
    while todo and budget > 0:
        s = todo.pop().strip()
        if not s or s in seen:
            continue
        seen.add(s)
        budget -= 1
        if s.casefold() == _TOKEN_FOLD or _REASON.match(s):
            return True
        todo.append(_edge(s))
        for left, right in _STRUCTURE:
            todo.append(_edge(s, left, right))
        todo.extend(_layers(s))
        for rx in (_FENCE, _INLINE_CODE):
            m = rx.match(s)
            if m:
                todo.append(m.group(2))
                info = _INFO_WORD.match(m.group(2)) if len(m.group(1)) >= 3 else None
                if info:
                    todo.append(info.group(1))
        html = _HTML.match(s)
        if html:
            todo.append(html.group(2))
        todo.extend(_json_values(s))
    return False


def canonical_reply(text: str) -> str:
    """The normalisation every ``NO_REPLY`` rule starts from.

    The decision text (NFKC, Cf characters and ``\\_`` escapes removed) without the
    special tokens and whitespace at either end; ``NO_REPLY`` when it unwraps to the token
    (quotes, brackets, emphasis, code, fences, HTML, JSON envelopes, a reason). Silent
    exactly when the result is ``""`` or ``NO_REPLY``.
    """
    _n, _pos, _lead, _special, core = _normalised(text)
    return NO_REPLY if core and _unwraps_to_token(core) else core


def _normalised(text: str) -> tuple[str, list[int], int, bool, str]:
    """The first step of every rule: the decision text, its map back to ``text``, where the
    leading special tokens end (and whether there were any) and the core between them
    and the trailing ones."""
    n, pos = _decision_text(text)
    lead, special, _ = _leading_end(n, final=True)
    tail, _cut, _tok = _region_start(n, lead, final=True, tokens=False)
    return n, pos, lead, special, n[lead:tail]


def _cut(text: str, n: str, pos: list[int], lead: int, special: bool) -> str | None:
    """``text`` without the special tokens and the leading/trailing token (None: nothing left)."""
    start = lead if special else 0
    token = False
    m = _LEADING_TOKEN.match(n, lead)
    while m:  # tokens and special tokens in a row: all cut (the rule is idempotent)
        start, _special, _ = _leading_end(n, True, m.end())
        token = True
        m = _LEADING_TOKEN.match(n, start)
    end, cut, has_token = _region_start(n, start, final=True)
    if cut:
        token = token or has_token
    else:
        end = len(n)
    if start == 0 and end == len(n):
        return text
    if token and not any(ch.isalnum() for ch in n[start:end]):
        return None
    lo = 0 if start == 0 else (pos[start] if start < len(n) else len(text))
    hi = len(text) if end == len(n) else pos[end]
    return text[lo:hi]


def visible_text(text: str | None) -> str | None:
    """What a person may see of a final reply: None when silent, else the text with
    special tokens and a leading or trailing ``NO_REPLY`` cut (otherwise unchanged).

    Examples:
        >>> visible_text("“NO_REPLY”") is None, visible_text("Saved. NO_REPLY")
        (True, 'Saved.')
    """
    while text is not None:
        n, pos, lead, special, core = _normalised(text)
        if lead == len(n):
            return None  # blank: whitespace, invisible characters or special tokens only
        if _unwraps_to_token(core):
            return None
        shown = _cut(text, n, pos, lead, special)
        if shown == text:
            return text
        text = shown  # what is left is judged again: the rule is idempotent
    return None


def is_silent_reply(text: str | None) -> bool:
    """True when a reply shows nothing to a person (blank, the token in any wrapping, or
    only the token once it is cut). ``Saved. NO_REPLY`` is not silent (``Saved.`` is shown).
    """
    return text is not None and visible_text(text) is None


def strip_no_reply(text: str) -> str:
    """``text`` with special tokens and a leading or trailing ``NO_REPLY`` cut, stripped."""
    n, pos = _decision_text(text)
    lead, special, _ = _leading_end(n, final=True)
    return (_cut(text, n, pos, lead, special) or "").strip()


def _could_be_silent(n: str, i: int) -> int:
    """Whether a reply starting with ``n`` (decision text, leading special tokens end at
    ``i``) may still be silent or lose a leading token: ``_NO``, ``_MAYBE`` (wait for more)
    or ``_TO_END`` (decide at the end). A superset of the prefixes :func:`visible_text`
    silences: it follows every way unwrapping can remove text before the first word."""
    size = len(n)
    while i < size:
        ch = n[i]
        if ch == "{":
            return _TO_END  # a JSON envelope may name the token in any key
        if ch in "`~":
            k = i
            while k < size and n[k] == ch:
                k += 1
            if k == size:
                return _MAYBE
            if k - i >= 3:  # a code fence: its info string, then its first line
                nl = n.find("\n", k)
                info = n[k:] if nl < 0 else n[k:nl]
                if "{" in info:
                    return _TO_END
                first = next((k + j for j, c in enumerate(info) if c.isalnum()), None)
                if first is not None:
                    verdict = _word_verdict(n, first)
                    if verdict:
                        return verdict
                if nl < 0:
                    return _MAYBE
                i = nl + 1
                continue
            i = k
            continue
        if ch in "<[":
            end = _special_end(n, i, False)
            if end == _PARTIAL:
                return _MAYBE
            if end is not None:  # its letters are no word of the reply
                i = end
                continue
        if ch == "<":
            if i + 1 == size:
                return _MAYBE
            if n[i + 1].isascii() and n[i + 1].isalpha():  # an HTML element
                verdict = _word_verdict(n, i + 1)
                if verdict:
                    return verdict
                close = n.find(">", i)
                if close < 0:
                    return _MAYBE
                i = close + 1
                continue
        if ch.isalnum():
            return _word_verdict(n, i)
        i += 1
    return _MAYBE


def _word_verdict(n: str, i: int) -> int:
    k = i
    while k < len(n) and (n[k].isalnum() or n[k] == "_"):
        k += 1
    word = n[i:k].casefold()
    if word.startswith(_TOKEN_FOLD):
        return _TO_END
    if k == len(n) and _TOKEN_FOLD.startswith(word):
        return _MAYBE
    return _NO


class NoReplyStreamGuard:
    """Filters a streamed reply so that no part of a ``NO_REPLY`` ever reaches a person.

    Feed each text delta to :meth:`feed` and show what it returns; call :meth:`finish`
    at the end and show what it returns. Whatever the chunking, everything returned
    joins to exactly :func:`visible_text` of the whole reply (``""`` when silent): text
    that could still become silent (a reply that may still be the token, blank, a JSON
    envelope or a fence) is held back, and so is a tail that could still be cut (a
    trailing token or special token in the making). A reply starting with the token or a
    JSON object is decided at its end.

    Example:
        >>> guard = NoReplyStreamGuard()
        >>> [guard.feed(d) for d in ["NO", "_RE", "PLY"]], guard.finish()
        (['', '', ''], '')
    """

    def __init__(self) -> None:
        self.raw = ""
        #: Index in :attr:`raw` up to which text was shown (or skipped).
        self.sent = 0
        self._text = ""
        self._pos: list[int] = []
        self._upto = 0
        self._start: int | None = None
        self._hold = 0
        self._to_end = False
        self._lead = 0
        self._lead_special = False

    @property
    def suppressed(self) -> bool:
        """True while nothing was emitted yet (a host may hide its typing indicator)."""
        return self._start is None or self.sent == self._start

    def _orig(self, k: int) -> int:
        return self._pos[k] if k < len(self._pos) else self._upto

    def feed(self, delta: str) -> str:
        """Add a delta; return the text that is safe to show now ("" when held back)."""
        if not delta:
            return ""
        self.raw += delta
        stop = len(self.raw)
        while stop > 0 and _invisible(self.raw[stop - 1]):
            stop -= 1
        if stop > 0 and self.raw[stop - 1] == "\\":
            stop -= 1  # an escape or not: the next character decides
        else:
            stop = len(self.raw)
        if stop > self._upto:
            out: list[str] = []
            _decide(self.raw[:stop], self._upto, stop, out, self._pos)
            self._text += "".join(out)
            self._upto = stop
        if self._to_end:
            return ""
        n = self._text
        if self._start is None:
            # Resume where the complete leading whitespace and special tokens ended.
            lead, special, partial = _leading_end(n, False, self._lead)
            self._lead, self._lead_special = lead, self._lead_special or special
            special = self._lead_special
            if partial or lead == len(n):
                return ""
            verdict = _could_be_silent(n, lead)
            if verdict == _TO_END:
                self._to_end = True
            if verdict != _NO:
                return ""
            self._hold = lead if special else 0
            self._start = self._orig(lead) if special else 0
            self.sent = self._start
        self._hold = _region_start(n, self._hold, final=False)[0]
        end = self._orig(self._hold)
        if end <= self.sent:
            return ""
        shown = self.raw[self.sent : end]
        self.sent = end
        return shown

    def finish(self) -> str:
        """The end of the stream: the rest that may be shown ("" for a silent reply)."""
        final = visible_text(self.raw) or ""
        if self._start is None:
            self.sent = len(self.raw)
            return final
        shown = self.raw[self._start : self.sent]
        self.sent = len(self.raw)
        if not final.startswith(shown):  # never expected: the guard only shows safe text
            log.error("NO_REPLY stream guard showed text the final rule cuts")
            return ""
        return final[len(shown) :]
