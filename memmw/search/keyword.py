"""Keyword leg: BM25 in process over the stored postings of the query's terms, or FTS5."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from memmw.store.protocol import Postings, StoreReader

K1 = 1.2
B = 0.75
#: Keyword probes the FTS5 path runs when the all-terms query finds too little.
MAX_PROBES = 6
#: Chunks tied with the last wanted score kept beyond the limit (a stable tie-break
#: needs them; past this many, rowid order decides).
MAX_TIES = 1000
#: Largest rowid range scored in a dense array (16 MB of float32); wider ranges (an
#: index with a long history of edits) merge the postings instead.
DENSE_SPAN = 1 << 22


@dataclass(frozen=True)
class KeywordHit:
    """A keyword-leg candidate: raw BM25 and how many query terms the chunk contains."""

    rowid: int
    bm25: float
    matched: int


def bm25_to_score(value: float) -> float:
    """The reference's mapping of a BM25 score to 0..1: ``s / (1 + s)``."""
    if not math.isfinite(value) or value <= 0:
        return 0.001 if not math.isfinite(value) else 0.0
    return value / (1.0 + value)


def idf(df: int, n_docs: int) -> float:
    """BM25 idf of a term found in ``df`` of ``n_docs`` chunks (0 for an unknown term)."""
    if df <= 0:
        return 0.0
    return math.log(1.0 + max(0.0, n_docs - df + 0.5) / (df + 0.5))


def _union(lists: Sequence[Postings]) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct rowids of all lists, and each posting's index into them.

    ``np.unique`` without its default quicksort: a stable sort (timsort) merges the
    already sorted lists in about linear time.
    """
    every = np.concatenate([p.rowids for p in lists])
    if len(lists) == 1 or not len(every):
        return every, np.arange(len(every))
    order = np.argsort(every, kind="stable")
    ordered = every[order]
    first = np.empty(len(ordered), dtype=bool)
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    inverse = np.empty(len(ordered), dtype=np.intp)
    inverse[order] = np.cumsum(first) - 1
    return ordered[first], inverse


def bm25_search(
    postings: Sequence[Postings], n_docs: int, total_terms: float, limit: int
) -> list[KeywordHit]:
    """Top chunks by BM25 over the query terms' postings (any term may match).

    Args:
        postings: One entry per distinct query term, in query order (empty when the term
            is in no chunk).
        n_docs: Live chunks of the searched sources.
        total_terms: Their total length in terms (the average length normalises tf).
        limit: Chunks wanted.

    Returns:
        Hits by descending score. Every chunk tied with the ``limit``-th score is kept
        (up to ``MAX_TIES`` more), so the caller can break ties by a key that does not
        depend on the index's history, such as path and line; among ties the order here
        is by rowid.
    """
    lists = [p for p in postings if len(p)]
    if not n_docs or not lists or limit < 1:
        return []
    avgdl = total_terms / n_docs
    lo = min(int(p.rowids[0]) for p in lists)
    span = max(int(p.rowids[-1]) for p in lists) - lo + 1
    if span <= DENSE_SPAN:
        # Rowids of a live index are nearly contiguous: score into an array indexed by
        # rowid, no merging needed.
        rows: np.ndarray | None = None
        size = span
        slots = [p.rowids - lo for p in lists]
    else:
        rows, inverse = _union(lists)
        size = len(rows)
        ends = np.cumsum([len(p) for p in lists])
        slots = np.split(inverse, ends[:-1])
    scores = np.zeros(size, dtype=np.float32)
    matched = np.zeros(size, dtype=np.int16)
    for p, docs in zip(lists, slots, strict=True):
        weight = idf(len(p), n_docs)
        # float32 throughout, in query-term order: the scores the in-memory matrix gave.
        norm = (K1 * (1 - B + B * p.doc_len / max(avgdl, 1e-9))).astype(np.float32)
        scores[docs] += weight * p.tf * (K1 + 1) / (p.tf + norm)
        matched[docs] += 1
    hit = np.flatnonzero(scores)
    if hit.size > limit:
        kth = np.partition(-scores[hit], limit - 1)[limit - 1]
        hit = hit[-scores[hit] <= kth]
    # Slots ascend with rowids in both layouts, so sorting by slot sorts by rowid.
    hit = hit[np.lexsort((hit, -scores[hit]))][: limit + MAX_TIES]
    ids = hit + lo if rows is None else rows[hit]
    return [
        KeywordHit(int(r), float(scores[i]), int(matched[i]))
        for r, i in zip(ids.tolist(), hit.tolist(), strict=True)
    ]


def fts_quote(term: str) -> str:
    """Quote one term for an FTS5 MATCH expression (no user input can break the syntax)."""
    return '"' + term.replace('"', '""') + '"'


def fts_search(
    store: StoreReader, query_terms: Sequence[str], limit: int, sources: Sequence[str]
) -> list[KeywordHit]:
    """The original's keyword strategy through FTS5.

    All terms first (AND); when that finds fewer than ``limit`` chunks, up to six single
    keyword probes, merged by chunk with the best score kept.
    """
    unique = list(dict.fromkeys(query_terms))
    if not unique:
        return []
    found: dict[int, KeywordHit] = {}
    if store.fts_tokenizer == "trigram":
        # The trigram tokenizer cannot MATCH strings under three characters (CJK
        # unigrams and bigrams, short words): find those as substrings, scored by the
        # share of the query's terms they contain.
        short = [t for t in unique if len(t) < 3]
        for rowid, n in store.substring_counts(short, limit, sources):
            found[rowid] = KeywordHit(rowid, n / len(unique), n)
        unique = [t for t in unique if len(t) >= 3]
        if not unique:
            return sorted(found.values(), key=lambda h: -h.bm25)[:limit]

    def run(match: str) -> None:
        for rowid, rank in store.fts_search(match, limit, sources):
            bm25 = -float(rank)
            matched = len(unique) if " AND " in match or len(unique) == 1 else 1
            prev = found.get(rowid)
            if prev is None or bm25 > prev.bm25:
                found[rowid] = KeywordHit(rowid, bm25, max(matched, prev.matched if prev else 0))

    run(" AND ".join(fts_quote(t) for t in unique))
    if len(found) < limit:
        for term in unique[:MAX_PROBES]:
            run(fts_quote(term))
    return sorted(found.values(), key=lambda h: -h.bm25)[:limit]
