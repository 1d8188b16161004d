"""Keyword leg: BM25 in process over the stored postings of the query's terms, or FTS5."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from memmw.store.arena import FRESH, Arena
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


#: Largest tf and chunk length scored through a per-term table of contributions (a
#: chunk's contribution depends only on those two): the table is small, one gather
#: replaces eight arithmetic passes over a frequent term's postings.
TABLE_TF = 16
TABLE_LEN = 1 << 14


def _contributions(
    p: Postings, weight: float, avgdl: float, arena: Arena = FRESH
) -> np.ndarray:
    """One term's BM25 contribution to each chunk of its postings (float32).

    Computed element by element in float32 with one formula whether through the table
    or directly, so both give the same bits.
    """
    top_tf, top_len = int(p.tf.max()), int(p.doc_len.max())
    integral = p.tf.dtype.kind in "iu" and p.doc_len.dtype.kind in "iu"
    if integral and top_tf <= TABLE_TF and top_len < TABLE_LEN and len(p) > top_len:
        tf = np.arange(top_tf + 1, dtype=np.float32)[:, None]
        dl = np.arange(top_len + 1, dtype=np.float32)[None, :]
        table = _formula(weight, tf, dl, avgdl).ravel()
        # Flat index tf * width + length: one take instead of a two-axis gather.
        at = np.multiply(p.tf, top_len + 1, out=arena.take(len(p), np.intp), dtype=np.intp)
        np.add(at, p.doc_len, out=at)
        # Every index is inside the table by construction: "clip" skips the bounds
        # check that costs "raise" (the default) half the gather's time.
        gathered: np.ndarray = np.take(
            table, at, out=arena.take(len(p), np.float32), mode="clip"
        )
        return gathered
    return _formula(weight, p.tf.astype(np.float32), p.doc_len.astype(np.float32), avgdl)


def _formula(weight: float, tf: np.ndarray, dl: np.ndarray, avgdl: float) -> np.ndarray:
    norm = (K1 * (1 - B + B * dl / max(avgdl, 1e-9))).astype(np.float32)
    out: np.ndarray = weight * tf * (K1 + 1) / (tf + norm)
    return out


def bm25_search(
    postings: Sequence[Postings],
    n_docs: int,
    total_terms: float,
    limit: int,
    arena: Arena = FRESH,
) -> list[KeywordHit]:
    """Top chunks by BM25 over the query terms' postings (any term may match).

    Args:
        postings: One entry per distinct query term, in query order (empty when the term
            is in no chunk).
        n_docs: Live chunks of the searched sources.
        total_terms: Their total length in terms (the average length normalises tf).
        limit: Chunks wanted.
        arena: Where the per-posting and per-chunk working arrays are taken from (a
            search's own arena saves their page faults; see ``memmw.store.arena``).

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
    hi = max(int(p.rowids[-1]) for p in lists)
    if hi < DENSE_SPAN:
        # Rowids of a live index are small and nearly contiguous: score into an array
        # indexed by rowid, no merging needed.
        rows: np.ndarray | None = None
        size = hi + 1
        slots = [p.rowids for p in lists]
    elif hi - lo < DENSE_SPAN:
        rows = np.arange(lo, hi + 1, dtype=np.int64)
        size = len(rows)
        slots = [np.subtract(p.rowids, lo, out=arena.take(len(p), np.int64)) for p in lists]
    else:
        rows, inverse = _union(lists)
        size = len(rows)
        ends = np.cumsum([len(p) for p in lists])
        slots = np.split(inverse, ends[:-1])
    scores = arena.zeros(size, np.float32)
    for p, docs in zip(lists, slots, strict=True):
        # float32 throughout, in query-term order: the scores the in-memory matrix gave.
        # Each chunk appears once in a term's postings: one float32 addition per chunk.
        np.add.at(scores, docs, _contributions(p, idf(len(p), n_docs), avgdl, arena))
    hit = np.flatnonzero(scores) if size <= limit else _top(slots, scores, limit, arena)
    # Slots ascend with rowids in every layout, so sorting by slot sorts by rowid.
    hit = hit[np.lexsort((hit, -scores[hit]))][: limit + MAX_TIES]
    ids = hit if rows is None else rows[hit]
    # How many query terms each hit contains, looked up for the hits alone.
    matched = np.zeros(len(ids), dtype=np.int64)
    for p in lists:
        at = np.minimum(np.searchsorted(p.rowids, ids), len(p) - 1)
        matched += p.rowids[at] == ids
    return [
        KeywordHit(int(r), float(s), int(m))
        for r, s, m in zip(ids.tolist(), scores[hit].tolist(), matched.tolist(), strict=True)
    ]


def _top(slots: list[np.ndarray], scores: np.ndarray, limit: int, arena: Arena) -> np.ndarray:
    """Slots scoring at least the ``limit``-th best score (all nonzero ones when it is 0).

    The ``limit``-th best score among the chunks of the shortest list that has ``limit``
    of them is a lower bound of the overall one, and few chunks reach it: the exact
    threshold is then found among those few, not by partitioning every chunk's score.
    """
    size = len(scores)
    floor = 0.0
    short = [docs for docs in slots if len(docs) >= limit]
    if short:
        docs = min(short, key=len)
        some = np.take(scores, docs, out=arena.take(len(docs), np.float32))
        some.partition(len(docs) - limit)
        floor = float(some[len(docs) - limit])
    if floor <= 0:
        part = arena.take(size, np.float32)
        np.copyto(part, scores)
        part.partition(size - limit)
        if part[size - limit] <= 0:
            return np.flatnonzero(scores)
        floor = float(part[size - limit])
    above = np.flatnonzero(np.greater_equal(scores, floor, out=arena.take(size, np.bool_)))
    if len(above) > limit:
        kth = np.partition(scores[above], len(above) - limit)[len(above) - limit]
        above = above[scores[above] >= kth]
    return above


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

    def run(probe: list[str]) -> None:
        every = len(probe) > 1
        for rowid, rank in store.fts_search(probe, limit, sources, require_all=every):
            bm25 = -float(rank)
            matched = len(unique) if every or len(unique) == 1 else 1
            prev = found.get(rowid)
            if prev is None or bm25 > prev.bm25:
                found[rowid] = KeywordHit(rowid, bm25, max(matched, prev.matched if prev else 0))

    run(unique)
    if len(found) < limit:
        for term in unique[:MAX_PROBES]:
            run([term])
    return sorted(found.values(), key=lambda h: -h.bm25)[:limit]
