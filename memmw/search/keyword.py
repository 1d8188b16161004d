"""Keyword leg: BM25 in process over the stored postings of the query's terms, or FTS5."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from memmw.store.arena import FRESH, Arena
from memmw.store.protocol import StoreReader, TermPostings, find_sorted, first_of_runs

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


def _union(lists: Sequence[TermPostings]) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct rowids of all lists, and each posting's index into them.

    ``np.unique`` without its default quicksort: a stable sort (timsort) merges the
    already sorted lists in about linear time.
    """
    every = np.concatenate([p.rowids for p in lists])
    if len(lists) == 1 or not len(every):
        return every, np.arange(len(every))
    order = np.argsort(every, kind="stable")
    ordered = every[order]
    first = first_of_runs(ordered)
    inverse = np.empty(len(ordered), dtype=np.intp)
    inverse[order] = np.cumsum(first) - 1
    return ordered[first], inverse


#: Largest tf and chunk length scored through a per-term table of contributions (a
#: chunk's contribution depends only on those two): the table is small, one gather
#: replaces eight arithmetic passes over a frequent term's postings.
TABLE_TF = 16
TABLE_LEN = 1 << 14


def _contributions(
    p: TermPostings, weight: float, avgdl: float, arena: Arena = FRESH
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
    postings: Sequence[TermPostings],
    n_docs: int,
    total_terms: float,
    limit: int,
    arena: Arena = FRESH,
) -> list[KeywordHit]:
    """Top chunks by BM25 over the query terms' postings (any term may match).

    The one BM25 scorer of both stores. From ``PRUNE_MIN_POSTINGS`` postings on, terms
    whose summed best possible contribution cannot lift a chunk to the ``limit``-th score
    are not scored over their postings: only the chunks still in the running are looked
    up in them (``_pruned``, MaxScore). The answer is the exhaustive one
    (``bm25_exhaustive``) bit for bit.

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
    total = sum(len(p) for p in lists)
    if len(lists) > 1 and total >= PRUNE_MIN_POSTINGS:
        pruned = _pruned(lists, total, n_docs, total_terms, limit, arena)
        if pruned is not None:
            return pruned
    return bm25_exhaustive(lists, n_docs, total_terms, limit, arena)


def bm25_exhaustive(
    postings: Sequence[TermPostings],
    n_docs: int,
    total_terms: float,
    limit: int,
    arena: Arena = FRESH,
) -> list[KeywordHit]:
    """``bm25_search`` scoring every posting of every term (the reference answer)."""
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
        matched += find_sorted(p.rowids, ids)[0]
    return [
        KeywordHit(int(r), float(s), int(m))
        for r, s, m in zip(ids.tolist(), scores[hit].tolist(), matched.tolist(), strict=True)
    ]


#: Fewer postings than this (all the query's terms together) are scored exhaustively:
#: below it MaxScore's bookkeeping costs more than the postings it skips. Measured per
#: query, pruned against exhaustive, whole searches, keyword-only (LoCoMo-derived notes;
#: ``benchmarks/keyword_scale.py`` workspaces): 50k and 142k chunks, every bucket up to
#: 400k postings 10-20% slower pruned; 1.42M chunks, 0.4-0.7M postings 12.4 vs 11.3 ms,
#: 0.7-0.9M 16.1 vs 15.7, 1.0-1.2M 18.2 vs 20.7, 2-2.9M 30.8 vs 41.4 (pruned first).
PRUNE_MIN_POSTINGS = 1_000_000
#: Relative slack of the pruning bounds. The bounds add float32 contributions in another
#: order (or in float64) than the final scores, which differ by a few ulps (~1e-7 each);
#: a chunk is dropped only when it misses the threshold by far more than that.
_SLACK = 1e-4
#: What looking one chunk up in a term's postings costs, in postings scored exhaustively
#: (measured on 142k LoCoMo chunks: a binary search and three gathers against a gather
#: and a scattered addition).
LOOKUP_COST = 4
#: Chunks (times the limit) fully scored by lookups to raise MaxScore's threshold
#: before the rest are looked up.
PROBE_FACTOR = 16


def _distinct(rowids: np.ndarray) -> np.ndarray:
    """The distinct values of ``rowids`` (a few sorted runs), ascending: a stable sort
    merges the runs (``np.unique`` hashes them, slower on millions)."""
    out = np.sort(rowids, kind="stable")
    distinct: np.ndarray = out[first_of_runs(out)]
    return distinct


def _kth(values: np.ndarray, k: int) -> float:
    """The ``k``-th largest value (0 when there are fewer)."""
    if len(values) < k:
        return 0.0
    return float(np.partition(values, len(values) - k)[len(values) - k])


def _pruned(
    lists: Sequence[TermPostings],
    total: int,
    n_docs: int,
    total_terms: float,
    limit: int,
    arena: Arena,
) -> list[KeywordHit] | None:
    """MaxScore: the exhaustive answer without scoring the frequent terms' postings.

    A term adds less than ``idf * (K1 + 1)`` to any chunk (``tf / (tf + norm) < 1``).
    The rarest terms ("essential") are scored over all their postings; the ``limit``-th
    best of those partial scores (a lower bound of the final ``limit``-th score) is the
    threshold. Once the other terms' bounds add up to less than it, a chunk in none of
    the essential terms' postings cannot reach the answer; nor can a chunk whose partial
    score plus the bounds still to add falls short. The others are looked up in the
    frequent terms one term at a time (the bound shrinking, the threshold rising), and the
    few left are scored exactly: every term's contribution by the one float32 formula,
    added in query order as the exhaustive scoring adds them, so the scores are the same
    bits. None when pruning would skip nothing worth it (the caller scores exhaustively).
    ``total`` is the postings of ``lists`` together (the caller counted them).
    """
    avgdl = total_terms / n_docs
    weights = [idf(len(p), n_docs) for p in lists]
    bounds = [w * (K1 + 1) for w in weights]
    hi = max(p.last for p in lists)
    if hi >= DENSE_SPAN:
        return None
    # Essential terms first by bound (the rarest), the rest in ascending order of bound.
    order = sorted(range(len(lists)), key=lambda i: (-bounds[i], len(lists[i]), i))
    partial = arena.zeros(hi + 1, np.float32)  # by rowid: the essential terms' sums
    scored = 0
    theta = 0.0
    for cut in range(1, len(order)):
        i = order[cut - 1]
        scored += len(lists[i])
        if 2 * scored > total:
            return None  # most postings are essential: exhaustive scoring costs no more
        docs = lists[i].rowids
        # np.add.at: faster than a fancy-indexed += (gather, add, scatter), same bits.
        np.add.at(partial, docs, _contributions(lists[i], weights[i], avgdl, arena))
        essential, rest = order[:cut], order[cut:]
        # The limit-th best partial score among any chunks is a lower bound of the
        # limit-th best of them all (and so of the final one); partial scores only grow,
        # so one found at an earlier cut stays a bound. Ranked among the chunks of the
        # rarest essential term that has enough: the fewest to rank, and usually the best.
        ranked = next((j for j in essential if len(lists[j]) >= limit), i)
        values = partial[lists[ranked].rowids]
        theta = max(theta, _kth(values, limit) * (1 - _SLACK))
        remaining = sum(bounds[i] for i in rest) * (1 + _SLACK)
        if theta > 0 and remaining < theta:
            break
    else:
        return None
    # The best few chunks of the term ranked above, scored over every term: the threshold
    # rises to the limit-th best of those scores (``limit`` chunks are at least that good).
    # Several times ``limit`` finds chunks whose frequent terms lift them above the
    # partial leaders; a higher threshold leaves fewer chunks to gather and look up.
    probe = lists[ranked].rowids  # ``values``: its chunks' partial scores
    some = min(len(values), limit * PROBE_FACTOR)
    best = probe[np.sort(np.argpartition(values, len(values) - some)[len(values) - some :])]
    floor = partial[best].astype(np.float64)
    for i in rest:
        has, tf, dl = lists[i].lookup(best)
        floor += np.where(
            has, _formula(weights[i], tf.astype(np.float32), dl.astype(np.float32), avgdl), 0
        )
    theta = max(theta, _kth(floor, limit) * (1 - _SLACK))
    # Chunks that may still reach the threshold: in an essential term (a nonzero partial
    # score) and close enough; found among the essential terms' postings when those are
    # fewer than the chunks.
    if 4 * scored < hi:
        near = [lists[j].rowids for j in essential]
        near = [r[partial[r] >= theta - remaining] for r in near]
        rows = near[0] if len(near) == 1 else _distinct(np.concatenate(near))
    else:
        rows = np.flatnonzero(partial >= theta - remaining)
    known = partial[rows].astype(np.float64)
    keep = known + remaining >= theta
    cand, known = rows[keep], known[keep]
    if LOOKUP_COST * len(cand) * len(rest) > sum(len(lists[i]) for i in rest):
        return None  # looking the candidates up would cost more than scoring the terms
    # Each term's contribution to each remaining candidate (0 where absent), query order.
    contrib: dict[int, np.ndarray] = {}
    present: dict[int, np.ndarray] = {}
    for i in sorted(rest, key=lambda i: -bounds[i]):
        has, tf, dl = lists[i].lookup(cand)
        c = np.where(
            has, _formula(weights[i], tf.astype(np.float32), dl.astype(np.float32), avgdl), 0
        ).astype(np.float32)
        contrib[i], present[i] = c, has
        known += c
        remaining -= bounds[i] * (1 + _SLACK)
        theta = max(theta, _kth(known, limit) * (1 - _SLACK))
        keep = known + max(remaining, 0.0) >= theta
        if not keep.all():
            cand, known = cand[keep], known[keep]
            for j in contrib:
                contrib[j], present[j] = contrib[j][keep], present[j][keep]
    for i in essential:
        has, tf, dl = lists[i].lookup(cand)
        contrib[i] = np.where(
            has, _formula(weights[i], tf.astype(np.float32), dl.astype(np.float32), avgdl), 0
        ).astype(np.float32)
        present[i] = has
    scores = np.zeros(len(cand), dtype=np.float32)
    matched = np.zeros(len(cand), dtype=np.int64)
    for i in range(len(lists)):  # query order: the exhaustive path's float32 additions
        scores += contrib[i]
        matched += present[i]
    kth = _kth(scores, limit)
    hit = np.flatnonzero((scores >= kth) & (scores > 0))
    hit = hit[np.lexsort((cand[hit], -scores[hit]))][: limit + MAX_TIES]
    return [
        KeywordHit(int(r), float(s), int(m))
        for r, s, m in zip(
            cand[hit].tolist(), scores[hit].tolist(), matched[hit].tolist(), strict=True
        )
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
