"""Keyword leg: BM25 in process over the packed term matrix, or through SQLite FTS5."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from memmw.store.sqlite.store import IndexStore
from memmw.store.terms import ENTRY, term_hash

K1 = 1.2
B = 0.75
#: Keyword probes the FTS5 path runs when the all-terms query finds too little.
MAX_PROBES = 6


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


class _Segment:
    """One immutable slice of the matrix: the chunks loaded together, postings sorted."""

    def __init__(self, rows: Sequence[tuple[int, bytes, int]]) -> None:
        n = len(rows)
        self.rowids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=n)
        self.doc_len = np.fromiter((r[2] for r in rows), dtype=np.float32, count=n)
        sizes = np.fromiter((len(r[1]) // ENTRY.itemsize for r in rows), dtype=np.int64, count=n)
        entries = np.frombuffer(b"".join(r[1] for r in rows), dtype=ENTRY)
        docs = np.repeat(np.arange(n, dtype=np.int32), sizes)
        order = np.argsort(entries["h"])
        hashes = entries["h"][order]
        self.post_doc = docs[order]
        self.post_tf = entries["tf"][order].astype(np.float32)
        self.terms, self.starts = np.unique(hashes, return_index=True)
        self.ends = np.append(self.starts[1:], len(hashes))

    def postings(self, h: int) -> tuple[int, int]:
        i = int(np.searchsorted(self.terms, h))
        if i < len(self.terms) and int(self.terms[i]) == h:
            return int(self.starts[i]), int(self.ends[i])
        return 0, 0


class KeywordMatrix:
    """A sparse term-by-chunk matrix scored with BM25, updated incrementally.

    Built from the term blobs the index stores, so loading needs no tokenising. Chunk
    rowids are never reused, so after a sync the chunks above the last loaded rowid are
    the new ones and a missing rowid is a deleted one: ``updated`` adds a small segment
    and masks deletions instead of re-sorting everything. Instances are immutable, so a
    search can use one while another is being built.
    """

    def __init__(
        self,
        rows: Sequence[tuple[int, bytes, int]] = (),
        *,
        _segments: Sequence[_Segment] | None = None,
        _alive: Sequence[np.ndarray] | None = None,
    ) -> None:
        self._segments = list(_segments) if _segments is not None else []
        if _segments is None and len(rows):
            self._segments.append(_Segment(rows))
        self._alive = (
            list(_alive)
            if _alive is not None
            else [np.ones(len(seg.rowids), dtype=bool) for seg in self._segments]
        )
        self.n_docs = int(sum(int(a.sum()) for a in self._alive))
        total_len = sum(
            float(seg.doc_len[a].sum()) for seg, a in zip(self._segments, self._alive, strict=True)
        )
        self.avgdl = total_len / self.n_docs if self.n_docs else 1.0
        self._norm = [
            (K1 * (1 - B + B * seg.doc_len / max(self.avgdl, 1e-9))).astype(np.float32)
            for seg in self._segments
        ]

    @property
    def max_rowid(self) -> int:
        """Largest chunk rowid loaded (new chunks get larger ones)."""
        return max((int(seg.rowids[-1]) for seg in self._segments if len(seg.rowids)), default=0)

    @property
    def segments(self) -> int:
        """Number of segments (grows with incremental updates until compacted)."""
        return len(self._segments)

    @property
    def loaded_docs(self) -> int:
        """Chunks held, deleted ones included."""
        return sum(len(seg.rowids) for seg in self._segments)

    @property
    def n_terms(self) -> int:
        """Distinct terms over all segments (an upper bound when segments share terms)."""
        return sum(len(seg.terms) for seg in self._segments)

    def updated(
        self, alive_rowids: np.ndarray, new_rows: Sequence[tuple[int, bytes, int]]
    ) -> KeywordMatrix:
        """A matrix reflecting a newer index: ``alive_rowids`` (sorted) and the new chunks."""
        alive = [np.isin(seg.rowids, alive_rowids, assume_unique=True) for seg in self._segments]
        segments = list(self._segments)
        if len(new_rows):
            segments.append(_Segment(new_rows))
            alive.append(np.ones(len(new_rows), dtype=bool))
        return KeywordMatrix(_segments=segments, _alive=alive)

    def needs_compaction(self) -> bool:
        """True when many segments or many deleted chunks make a full rebuild worthwhile."""
        loaded = self.loaded_docs
        return self.segments > 8 or (loaded > 0 and (loaded - self.n_docs) > 0.25 * loaded)

    def document_frequency(self, term: str) -> int:
        """Live chunks containing ``term``."""
        h = term_hash(term)
        df = 0
        for seg, alive in zip(self._segments, self._alive, strict=True):
            lo, hi = seg.postings(h)
            if hi > lo:
                df += int(np.count_nonzero(alive[seg.post_doc[lo:hi]]))
        return df

    def idf(self, term: str) -> float:
        """BM25 idf of ``term`` (0 for an unknown term)."""
        df = self.document_frequency(term)
        if df == 0:
            return 0.0
        return math.log(1.0 + max(0.0, self.n_docs - df + 0.5) / (df + 0.5))

    def _segment_scores(
        self, index: int, terms: Sequence[str], idfs: Sequence[float]
    ) -> tuple[np.ndarray, np.ndarray]:
        seg, alive, norm = self._segments[index], self._alive[index], self._norm[index]
        scores = np.zeros(len(seg.rowids), dtype=np.float32)
        matched = np.zeros(len(seg.rowids), dtype=np.int16)
        for term, idf in zip(terms, idfs, strict=True):
            if idf == 0.0:
                continue
            lo, hi = seg.postings(term_hash(term))
            if hi == lo:
                continue
            docs = seg.post_doc[lo:hi]
            tf = seg.post_tf[lo:hi]
            scores[docs] += idf * tf * (K1 + 1) / (tf + norm[docs])
            matched[docs] += 1
        scores[~alive] = 0.0
        return scores, matched

    def search(self, query_terms: Sequence[str], limit: int) -> list[KeywordHit]:
        """Top ``limit`` chunks by BM25 over the query terms (any term may match)."""
        if not self.n_docs or not query_terms:
            return []
        terms = list(dict.fromkeys(query_terms))
        idfs = [self.idf(t) for t in terms]
        hits: list[KeywordHit] = []
        for index, seg in enumerate(self._segments):
            scores, matched = self._segment_scores(index, terms, idfs)
            hit = np.flatnonzero(scores)
            if hit.size > limit:
                # Keep every chunk tied with the limit-th score, so the final order (score,
                # then rowid) does not depend on how argpartition breaks ties.
                kth = np.partition(-scores[hit], limit - 1)[limit - 1]
                hit = hit[-scores[hit] <= kth]
            hits.extend(
                KeywordHit(int(seg.rowids[i]), float(scores[i]), int(matched[i])) for i in hit
            )
        hits.sort(key=lambda h: (-h.bm25, h.rowid))
        return hits[:limit]


def fts_quote(term: str) -> str:
    """Quote one term for an FTS5 MATCH expression (no user input can break the syntax)."""
    return '"' + term.replace('"', '""') + '"'


def fts_search(
    store: IndexStore, query_terms: Sequence[str], limit: int, sources: Sequence[str]
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
