"""What a consolidation reads and writes: a note's entries, their kind and their citations."""

from __future__ import annotations

import re
from dataclasses import dataclass

from memmw.notes.syntax import retract_line
from memmw.text.lines import split_lines

#: ``path#L12`` or ``path#L12-L14`` (``path#L12-14``): a workspace-relative Markdown file.
CITATION = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.md)#L(\d+)(?:-L?(\d+))?")
_BULLET = re.compile(r"^(\s*)(?:[-*+]|\d+[.)])\s+(.*)$")
_HEADING = re.compile(r"^\s{0,3}#{1,6}(?:\s|$)")
_FENCE = re.compile(r"^\s*(```|~~~)")
_COMMENT_ONLY = re.compile(r"^\s*<!--.*-->\s*$")
#: A retracted (superseded, merged, forgotten) entry: ``- ~~text~~ (retracted DAY: why)``.
RETRACTED = re.compile(
    r"^(\s*)(?:[-*+]|\d+[.)])\s+~~(.+?)~~\s*\(retracted (\d{4}-\d{2}-\d{2})(?::\s*([^)]*))?\)"
)
#: Words of a decision (several languages; matched on whole words, case folded).
_DECISION = re.compile(
    r"\b(decided|decision|agreed|chose|chosen|will use|switched|switch to|moved to|"
    r"now uses?|is now|are now|changed to|from now on|going forward|settled on|"
    r"entschieden|beschlossen|décidé|decidido|决定|決定)\b",
    re.IGNORECASE,
)
#: A fact: ``key: value``, ``key = value``, a number or date, an e-mail or handle, a
#: relation verb, or a proper noun past the first word ("Lunch was nice" is none of these).
_FACT = re.compile(
    r"^[^:=]{1,60}[:=]\s*\S|\d|@\w|\b(prefers?|likes?|dislikes?|lives|works|uses|owns|leads|"
    r"manages|named|called|allergic|birthday|moved)\b|\s[A-Z][a-z]+",
)


@dataclass(frozen=True)
class Citation:
    """A cited line range of a workspace file."""

    path: str
    start: int
    end: int

    def __str__(self) -> str:
        return f"{self.path}#L{self.start}" + (f"-L{self.end}" if self.end != self.start else "")


def citations_in(text: str) -> list[Citation]:
    """Every ``path#Lnn`` citation in ``text``, in order."""
    out = []
    for m in CITATION.finditer(text):
        start = int(m.group(2))
        end = int(m.group(3)) if m.group(3) else start
        out.append(Citation(m.group(1), start, max(start, end)))
    return out


def is_entry(line: str) -> bool:
    """True for a line that holds an entry: text that is not a heading, fence or comment."""
    return bool(line.strip()) and not (
        _HEADING.match(line) or _FENCE.match(line) or _COMMENT_ONLY.match(line)
    )


def is_retracted(line: str) -> bool:
    """True for a struck-through, annotated entry (superseded, merged or forgotten)."""
    return RETRACTED.match(line) is not None


def live_entries(text: str) -> list[tuple[int, str]]:
    """``(line number, text)`` of the entries of ``text`` that are not retracted."""
    return [
        (n, line)
        for n, line in enumerate(split_lines(text), 1)
        if is_entry(line) and not is_retracted(line)
    ]


def entry_body(line: str) -> str:
    """The entry's text without its list marker."""
    m = _BULLET.match(line)
    return (m.group(2) if m else line).strip()


def kind_of(line: str) -> str:
    """``decision``, ``fact`` or ``other``: what an entry holds, by its words."""
    body = entry_body(line)
    if _DECISION.search(body):
        return "decision"
    if _FACT.search(body):
        return "fact"
    return "other"


def retraction_of(old: str, new: str) -> str | None:
    """The reason when ``new`` is ``old`` struck through and annotated, else None.

    The struck-through text must be the old entry's text exactly (history is kept): a
    line that changes the entry while striking it through is not a retraction of it.
    """
    m = RETRACTED.match(new)
    if m is None:
        return None
    day, reason = m.group(3), m.group(4) or ""
    try:
        expected = retract_line(old, day=day, reason=reason)
    except ValueError:
        return None
    return reason if expected == new else None


#: One superseded value kept after the current one: `` ~~old~~ (superseded 2026-11-30)``.
HISTORY = re.compile(r" ~~(.+?)~~ \(superseded (\d{4}-\d{2}-\d{2})\)")


def split_history(line: str) -> tuple[str, str, str] | None:
    """``(list marker, current value, history)`` of a list entry, else None.

    An entry updated in place reads ``- <newer value> (source: ...) ~~<older value>~~
    (superseded DAY)``, newest history first: the current value leads (it is what a
    search snippet shows first), every older value stays on the line, struck through.
    """
    m = _BULLET.match(line)
    if m is None or is_retracted(line):
        return None
    prefix, body = line[: m.start(2)], m.group(2)
    h = HISTORY.search(body)
    if h is None:
        return prefix, body.rstrip(), ""
    return prefix, body[: h.start()], body[h.start() :]


def updated_in_place(old: str, new: str) -> str | None:
    """The newer value's text when ``new`` is ``old`` updated in place, else None.

    ``new`` must keep ``old``'s list marker, strike through ``old``'s current value as
    the newest history item (dated), keep every older history item unchanged, and cite
    a source in its newer value.
    """
    o, n = split_history(old), split_history(new)
    if o is None or n is None or o[0] != n[0]:
        return None
    h = HISTORY.match(n[2])
    if h is None or h.group(1) != o[1].strip():
        return None
    if n[2] != f" ~~{o[1].strip()}~~ (superseded {h.group(2)})" + o[2]:
        return None
    return n[1] if citations_in(n[1]) and n[1].strip() else None


def normalized(text: str) -> str:
    """Text folded for comparison: case, spacing, list marker, strike-through marks."""
    body = HISTORY.sub("", entry_body(text)).replace("~~", "")
    return " ".join(body.casefold().split())
