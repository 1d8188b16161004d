"""Query-centred snippets: show the lines of a chunk that best match the query."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memmw.text.analysis import cut_utf16, normalize, terms, utf16_len


@dataclass(frozen=True)
class Snippet:
    """Text shown for a hit and the file lines it covers."""

    text: str
    start_line: int
    end_line: int


def _line_score(line: str, query: set[str], idf: Callable[[str], float]) -> float:
    present = query.intersection(terms(line))
    return sum(idf(t) for t in present)


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
    pieces = text.split("\n")
    if len(pieces) != len(piece_lines):  # defensive: fall back to consecutive numbering
        piece_lines = list(range(piece_lines[0], piece_lines[0] + len(pieces)))
    qset = set(query)
    scores = [_line_score(p, qset, idf) if qset else 0.0 for p in pieces]
    best = max(range(len(pieces)), key=lambda i: (scores[i], -i))
    if utf16_len(pieces[best]) > max_chars:
        shown = _cut_long_line(pieces[best], list(qset), max_chars)
        return Snippet(shown, piece_lines[best], piece_lines[best])
    lo = hi = best
    used = utf16_len(pieces[best])
    while True:
        options = []
        if lo > 0:
            options.append((scores[lo - 1], 0, lo - 1))
        if hi + 1 < len(pieces):
            options.append((scores[hi + 1], 1, hi + 1))
        grown = False
        # Higher-scoring neighbour first; on a tie, the side with fewer lines so far (the
        # line after first), so an unmatched context grows evenly around the best line.
        below, above = hi - best, best - lo
        for _score, _after, idx in sorted(
            options, key=lambda o: (-o[0], (below if o[1] else above + 1))
        ):
            cost = utf16_len(pieces[idx]) + 1
            if used + cost <= max_chars:
                used += cost
                lo, hi = min(lo, idx), max(hi, idx)
                grown = True
                break
        if not grown:
            break
    shown = "\n".join(pieces[lo : hi + 1]).strip("\n")
    return Snippet(shown, piece_lines[lo], piece_lines[hi])
