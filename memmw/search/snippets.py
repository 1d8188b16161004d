"""Query-centred snippets: show the lines of a chunk that best match the query."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from memmw.text.analysis import (
    WordMemo,
    cut_utf16,
    fold_ascii,
    normalize,
    stem,
    terms,
    utf16_len,
)

#: Word -> its stem, so a line's words map to terms in C.
_STEMS: WordMemo[str] = WordMemo(stem, 200_000)


@dataclass(frozen=True)
class Snippet:
    """Text shown for a hit and the file lines it covers."""

    text: str
    start_line: int
    end_line: int


def _line_score(line: str, query: set[str], idf: Callable[[str], float]) -> float:
    present = query.intersection(terms(line))
    # fsum: exact, so the score does not depend on the set's (per-process) order.
    return math.fsum(idf(t) for t in present)


def _line_scores(
    text: str, pieces: list[str], query: set[str], idf: Callable[[str], float]
) -> list[float]:
    """``_line_score`` of each piece of ``text`` (the chunk's ``\\n``-separated lines).

    ASCII lines skip the regular expression and NFKC: they are folded (the whole chunk in
    one pass when it is all ASCII), split, and their words mapped to stems through a
    cache, all in C.
    """
    if not query:
        return [0.0] * len(pieces)
    folded = (
        fold_ascii(text).split("\n")
        if text.isascii()
        else [fold_ascii(p) if p.isascii() else None for p in pieces]
    )
    stems, matching = _STEMS.__getitem__, query.intersection
    scores = []
    for piece, line in zip(pieces, folded, strict=True):
        if line is None:
            scores.append(_line_score(piece, query, idf))
            continue
        present = matching(map(stems, line.split()))
        # fsum: exact, so the score does not depend on the set's (per-process) order.
        scores.append(math.fsum(map(idf, present)) if present else 0.0)
    return scores


def _cut_long_line(line: str, query: Sequence[str], limit: int) -> str:
    """A ``limit``-unit window of one long line around its first query match."""
    lowered = normalize(line)
    positions = [lowered.find(t) for t in query if t and lowered.find(t) >= 0]
    first = min(positions) if positions and len(lowered) == len(line) else 0
    start = 0 if first < limit * 2 // 3 else max(0, first - limit // 3)
    # Never start in the middle of a surrogate pair (Python strings are code points,
    # so any index is safe); cut the end by UTF-16 units.
    return cut_utf16(line[start:], limit)


def build_snippet(
    text: str,
    piece_lines: Sequence[int],
    query: Sequence[str],
    *,
    idf: Callable[[str], float],
    max_chars: int = 700,
) -> Snippet:
    """Pick the best-matching line of a chunk and grow a window around it.

    Lines are scored by the summed idf of the query terms they contain; the window grows
    towards the better-scoring neighbour until ``max_chars`` UTF-16 units are used. The
    returned line range is exactly what the snippet shows.

    Args:
        text: Chunk text (pieces separated by ``\\n``).
        piece_lines: File line number of each piece.
        query: Query terms.
        idf: Weight of a term (rarer terms matter more).
        max_chars: Snippet budget in UTF-16 units.
    """
    return build_snippets(text, piece_lines, query, idf=idf, max_chars=max_chars, count=1)[0]


def build_snippets(
    text: str,
    piece_lines: Sequence[int],
    query: Sequence[str],
    *,
    idf: Callable[[str], float],
    max_chars: int = 700,
    count: int = 1,
) -> list[Snippet]:
    """:func:`build_snippet`'s window, then (``count`` 2) a second window of the same chunk.

    The second window shows lines the first does not: it grows (the same way) around the
    best-matching line outside the first window, on the side that holds the better one
    (after it on a tie). It exists only when such a line holds a query term, so a chunk
    that fits one snippet, or whose other lines match nothing, gives one snippet.
    """
    pieces = text.split("\n")
    if len(pieces) != len(piece_lines):  # defensive: fall back to consecutive numbering
        piece_lines = list(range(piece_lines[0], piece_lines[0] + len(pieces)))
    qset = set(query)
    scores = _line_scores(text, pieces, qset, idf)
    sizes = list(map(len, pieces)) if text.isascii() else [utf16_len(p) for p in pieces]
    lo, hi = _window(0, len(pieces), scores, sizes, max_chars)
    out = [_shown(pieces, piece_lines, lo, hi, qset, sizes, max_chars)]
    if count >= 2:
        sides = [(a, b) for a, b in ((hi + 1, len(pieces)), (0, lo)) if a < b]
        sides = [(a, b) for a, b in sides if max(scores[a:b]) > 0]
        if sides:
            a, b = max(sides, key=lambda side: max(scores[side[0] : side[1]]))
            lo2, hi2 = _window(a, b, scores, sizes, max_chars)
            out.append(_shown(pieces, piece_lines, lo2, hi2, qset, sizes, max_chars))
    return out


def _window(
    start: int, stop: int, scores: list[float], sizes: list[int], max_chars: int
) -> tuple[int, int]:
    """The window of pieces ``start..stop-1`` around their best line (first on a tie)."""
    best = max(range(start, stop), key=lambda i: (scores[i], -i))
    if sizes[best] > max_chars:
        return best, best
    lo = hi = best
    used = sizes[best]
    last = stop - 1
    while True:
        # The next line on each side that still fits (a side that no longer fits stays
        # closed: the window only grows).
        before = lo > start and used + sizes[lo - 1] + 1 <= max_chars
        after = hi < last and used + sizes[hi + 1] + 1 <= max_chars
        if before and after:
            # Higher-scoring neighbour first; on a tie, the side with fewer lines so far
            # (the line after first), so an unmatched context grows evenly around the
            # best line.
            after = (-scores[hi + 1], hi - best) < (-scores[lo - 1], best - lo + 1)
            before = not after
        if before:
            lo -= 1
            used += sizes[lo] + 1
        elif after:
            hi += 1
            used += sizes[hi] + 1
        else:
            break
    return lo, hi


def _shown(
    pieces: list[str],
    piece_lines: Sequence[int],
    lo: int,
    hi: int,
    query: set[str],
    sizes: list[int],
    max_chars: int,
) -> Snippet:
    """The snippet of pieces ``lo..hi`` (one line longer than the budget: cut around its
    first query match)."""
    if lo == hi and sizes[lo] > max_chars:
        shown = _cut_long_line(pieces[lo], list(query), max_chars)
        return Snippet(shown, piece_lines[lo], piece_lines[lo])
    shown = "\n".join(pieces[lo : hi + 1]).strip("\n")
    return Snippet(shown, piece_lines[lo], piece_lines[hi])


#: Lines that are structure, not evidence: headings and a session archive's header fields.
_NOT_EVIDENCE = ("#", "- **Session", "- **Source", "- **Reason", "## Conversation")


def evidence_line(
    snippet: str,
    start_line: int,
    query: Sequence[Collection[str]],
    *,
    max_chars: int = 240,
) -> tuple[int, int, str] | None:
    """The line of a hit's snippet that says the most about ``query``.

    ``query`` is a list of term groups (a query word; all the names of an entity): the
    line holding the most groups wins (the first on a tie), headings and archive header
    fields left out, cut to ``max_chars`` UTF-16 units around its first match. In a session archive a ``user:`` line comes with the ``assistant:`` line that
    answers it (each cut to half). None when no line holds a query term.

    Args:
        snippet: The hit's snippet (its lines are file lines from ``start_line`` on).
        start_line: File line number of the snippet's first line.
        query: Groups of query terms.
        max_chars: Longest text returned.

    Returns:
        ``(first line, last line, text)``.
    """
    groups = [frozenset(g) for g in query if g]
    wanted = set().union(*groups) if groups else set()
    lines = snippet.split("\n")
    best: tuple[int, int] | None = None
    for offset, line in enumerate(lines):
        text = line.strip()
        if not text or text.startswith(_NOT_EVIDENCE):
            continue
        held = wanted.intersection(terms(text))
        found = sum(1 for g in groups if not g.isdisjoint(held))
        if found and (best is None or found > best[0]):
            best = (found, offset)
    if best is None:
        return None
    offset = best[1]
    parts = [lines[offset].strip()]
    if parts[0].startswith("user:") and offset + 1 < len(lines):
        answer = lines[offset + 1].strip()
        if answer.startswith("assistant:"):
            parts.append(answer)
    limit = max_chars // len(parts)
    shown = [parts[0] if utf16_len(parts[0]) <= limit else _cut_long_line(parts[0], sorted(wanted), limit)]
    if len(parts) == 2:  # the answer from its start
        shown.append(parts[1] if utf16_len(parts[1]) <= limit else cut_utf16(parts[1], limit - 1) + "…")
    return start_line + offset, start_line + offset + len(parts) - 1, " ".join(shown)
