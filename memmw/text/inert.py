"""Stored memory text made inert before it enters a prompt: no forged headings, tags or fences.

Memory files are written by people, by the agent and (through the agent) by anyone in a
group chat. memmw wraps what it injects in its own structure: ``[GRAPH MEMORY]`` ...
``[/GRAPH MEMORY]``, untrusted fences, and headings such as ``## Memory Recall`` or
``### MEMORY.md``. :func:`inert_memory_text` is applied to every piece of stored text
before memmw puts it in a prompt, so stored text can neither close a block early nor
open a section of its own:

* a line that would read as one of memmw's section headings (a Markdown heading whose
  title names one of memmw's sections or a file label such as ``MEMORY.md``, or such a
  title underlined with ``===``/``---``) or as a code fence, after Unicode
  compatibility folding, with format characters, indentation and ``>`` quote markers
  ignored, is escaped with a leading backslash (other headings of the notes stay);
* on a line that names one of memmw's tags in any case, spacing, punctuation or with
  common Cyrillic/Greek look-alike letters, every bracket-like character becomes a
  parenthesis, so the tag cannot be formed.
"""

from __future__ import annotations

import unicodedata

#: The words of memmw's own bracket tags and section titles (``[GRAPH MEMORY]`` ...).
TAG_WORDS = (
    "graph memory",
    "untrusted",
    "memory context",
    "memory recall",
    "working memory",
    "startup context",
    "recent daily memory",
)

# Cyrillic and Greek letters that look like Latin ones (both cases; digits 0 -> o).
_LOOKALIKES = str.maketrans(
    {
        **dict(zip("АВСЕНІЈКМОРЅТХУҮ", "ABCEHIJKMOPSTXYY", strict=True)),
        **dict(zip("ΑΒΕΖΗΙΚΜΝΟΡΤΥΧ", "ABEZHIKMNOPTYX", strict=True)),
        **dict(zip("асеһіјкорѕхуԁԍӏոսмт", "acehijkopsxydglnumt", strict=True)),
        **dict(zip("αεικορτυχνημ", "aeikoptuxvnu", strict=True)),
        "0": "o",
    }
)
_OPEN_LIKE = frozenset("<‹«")
_CLOSE_LIKE = frozenset(">›»")


def _fold(text: str) -> str:
    """NFKC without format characters (zero-width joiners, bidi marks...)."""
    folded = unicodedata.normalize("NFKC", text)
    return "".join(ch for ch in folded if unicodedata.category(ch) != "Cf")


def _latin(text: str) -> str:
    """``text`` folded: compatibility forms, no marks or format characters, Latin look-alikes, case."""
    folded = unicodedata.normalize("NFKD", _fold(text).translate(_LOOKALIKES))
    folded = "".join(ch for ch in folded if not unicodedata.combining(ch))
    return folded.translate(_LOOKALIKES).casefold()


def skeleton(text: str) -> str:
    """Letters of ``text`` only, folded (see :func:`_latin`)."""
    return "".join(ch for ch in _latin(text) if "a" <= ch <= "z")


_TAG_SKELETONS = tuple(skeleton(w) for w in TAG_WORDS)


def _bracket_kind(ch: str) -> str | None:
    for form in {ch, unicodedata.normalize("NFKC", ch)}:
        for c in form:
            cat = unicodedata.category(c)
            if cat in ("Ps", "Pi") or c in _OPEN_LIKE:
                return "("
            if cat in ("Pe", "Pf") or c in _CLOSE_LIKE:
                return ")"
    return None


def _body(line: str) -> str:
    return _fold(line).lstrip(" \t>\u00a0\u3000")


def reserved_title(title: str) -> bool:
    """True when a heading title could pass for one of memmw's: a section or a file label."""
    if any(tag in skeleton(title) for tag in _TAG_SKELETONS):
        return True
    folded = "".join(_latin(title).split())
    return ".md" in folded or "memory/" in folded


def _heading(body: str) -> bool:
    return body.startswith("#") and reserved_title(body.lstrip("#"))


def _underline(body: str) -> bool:
    stripped = body.strip()
    return len(stripped) >= 1 and (set(stripped) == {"="} or set(stripped) == {"-"})


def inert_memory_text(text: str) -> str:
    """``text`` with every line that could forge memmw's prompt structure neutralised.

    Ordinary lines are returned unchanged; the result has the same line count.
    """
    if not text:
        return text
    out: list[str] = []
    previous_reserved = False
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
        end = line[len(body) :]
        if any(tag in skeleton(body) for tag in _TAG_SKELETONS):
            body = "".join(_bracket_kind(ch) or ch for ch in body)
        folded = _body(body)
        if (
            _heading(folded)
            or folded.startswith(("```", "~~~"))
            or (previous_reserved and _underline(folded))
        ):
            body = "\\" + body
        previous_reserved = bool(folded.strip()) and reserved_title(folded)
        out.append(body + end)
    return "".join(out)
