"""Line-based chunking of Markdown (the reference algorithm), with per-entry mode."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from memmw.text.analysis import weight
from memmw.text.lines import split_lines

#: Bumped whenever chunk boundaries or text change for the same input (index identity).
CHUNKING_VERSION = 6

_ENTRY_START = re.compile(r"^(?:- |#{1,6}(?:\s|$))")
_HEADING = re.compile(r"^#{1,6}(?:\s|$)")
_CARRIER = re.compile(r"\s*<!--\s*(trigger|importance|project)\s*:\s*(.*?)\s*-->", re.IGNORECASE)


@dataclass(frozen=True, kw_only=True)
class Chunk:
    """A chunk of a file.

    Attributes:
        start_line: First line (1-based).
        end_line: Last line.
        text: Segments joined by ``\\n`` (annotation carriers stripped).
        hash: sha256 of ``text``.
        line_map: Line number of each ``\\n``-separated piece of ``text`` when they are not
            simply consecutive (a long line split into pieces); None otherwise.
        importance: ``<!-- importance: N -->`` of the entry (curated files only).
    """

    start_line: int
    end_line: int
    text: str
    hash: str
    line_map: tuple[int, ...] | None = None
    importance: int | None = None

    def piece_lines(self) -> list[int]:
        """The line number of each ``\\n``-separated piece of ``text``."""
        if self.line_map is not None:
            return list(self.line_map)
        return list(range(self.start_line, self.start_line + self.text.count("\n") + 1))


@dataclass
class _Segment:
    line: int
    text: str
    cost: int
    entry: int


def sha256_text(text: str) -> str:
    """Hex sha256 of the UTF-8 text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def strip_carriers(line: str) -> tuple[str, int | None]:
    """Remove ``<!-- trigger|importance|project: ... -->`` comments from a line.

    Returns:
        The stripped line (trailing spaces removed when a carrier was found) and the
        importance (1..10) it carried, if any.
    """
    if "<!--" not in line:
        return line, None
    importance: int | None = None
    for m in _CARRIER.finditer(line):
        if m.group(1).lower() == "importance" and m.group(2).isdigit():
            value = max(1, min(10, int(m.group(2))))
            importance = value if importance is None else max(importance, value)
    return _CARRIER.sub("", line).rstrip(), importance


def _split_line(text: str, max_chars: int) -> list[str]:
    """Split one line into pieces whose weight fits ``max_chars``, per code point."""
    if weight(text) <= max_chars:
        return [text]
    pieces: list[str] = []
    start = 0
    budget = 0
    for i, ch in enumerate(text):
        w = weight(ch)
        if budget + w > max_chars and i > start:
            pieces.append(text[start:i])
            start, budget = i, 0
        budget += w
    pieces.append(text[start:])
    return pieces


def chunk_text(
    text: str, *, tokens: int = 400, overlap: int = 80, per_entry: bool = False
) -> list[Chunk]:
    """Chunk Markdown text by lines.

    Lines are packed until ``tokens * 4`` weighted characters; the next chunk starts with
    the previous chunk's last lines, as many as fit in ``overlap * 4`` weighted characters. Lines
    longer than a chunk are split without breaking a code point. In ``per_entry`` mode
    (``MEMORY.md``/``USER.md``) every list item (``- ``) and heading starts a new chunk
    with no overlap across entries, and importance annotations apply to their entry; a
    heading with no text of its own joins the entry under it, so a section title is
    searched together with its first entry instead of as a chunk of its own.

    Args:
        text: File content; lines as :func:`memmw.text.lines.split_lines` cuts them.
        tokens: Chunk size in tokens (4 weighted characters each).
        overlap: Overlap in tokens, clamped to ``tokens - 1``.
        per_entry: Use per-entry boundaries.
    """
    max_chars = max(32, tokens * 4)
    overlap_chars = max(0, min(overlap, tokens - 1) * 4)
    lines = split_lines(text)  # the one definition of a line (memmw.text.lines)

    segments: list[_Segment] = []
    entry = 0
    entry_importance: dict[int, int] = {}
    # True while the current entry holds only headings and blank lines: the next entry
    # joins it, so "# User" never stands alone as a chunk without the lines it titles.
    headings_only = False
    for number, raw in enumerate(lines, start=1):
        line, importance = strip_carriers(raw)
        if per_entry and _ENTRY_START.match(line):
            if not headings_only:
                entry += 1
            headings_only = _HEADING.match(line) is not None
        elif line.strip():
            headings_only = False
        if importance is not None and per_entry:
            entry_importance[entry] = max(importance, entry_importance.get(entry, 0))
        if line == "":
            segments.append(_Segment(number, "", 1, entry))
            continue
        for start in range(0, len(line), max_chars):
            for piece in _split_line(line[start : start + max_chars], max_chars):
                segments.append(_Segment(number, piece, weight(piece) + 1, entry))

    chunks: list[Chunk] = []
    buffer: list[_Segment] = []
    current = 0

    def flush() -> None:
        body = "\n".join(s.text for s in buffer)
        if not body.strip():
            return
        piece_lines = [s.line for s in buffer]
        contiguous = piece_lines == list(range(piece_lines[0], piece_lines[0] + len(buffer)))
        importances = [entry_importance[s.entry] for s in buffer if s.entry in entry_importance]
        chunks.append(
            Chunk(
                start_line=buffer[0].line,
                end_line=buffer[-1].line,
                text=body,
                hash=sha256_text(body),
                line_map=None if contiguous else tuple(piece_lines),
                importance=max(importances) if importances else None,
            )
        )

    for seg in segments:
        if buffer and per_entry and seg.entry != buffer[-1].entry:
            flush()
            buffer, current = [], 0
        if buffer and current + seg.cost > max_chars:
            flush()
            # The carry stops before the line that would pass the overlap (the reference),
            # capped so the incoming segment still fits.
            target = min(overlap_chars, max(0, max_chars - seg.cost))
            carried: list[_Segment] = []
            total = 0
            for prev in reversed(buffer):
                if total + prev.cost > target:
                    break
                carried.insert(0, prev)
                total += prev.cost
            buffer, current = carried, total
        buffer.append(seg)
        current += seg.cost
    if buffer:
        flush()
    return chunks
