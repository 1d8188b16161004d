"""Keyword leg: BM25 in process over the packed term matrix, or through SQLite FTS5."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from memmw.index.store import IndexStore
from memmw.index.terms import ENTRY, term_hash

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


class KeywordMatrix:
    """A sparse term-by-chunk matrix for one index generation, scored with BM25.

    Built from the term blobs the index stores, so loading needs no tokenising: at 100k
    chunks it costs a concatenation and one sort, and a query touches only the postings
    of its terms.
    """

    def __init__(self, rows: Sequence[tuple[int, bytes, int]]) -> None:
        n = len(rows)
        self.rowids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=n)
        self.doc_len = np.fromiter((r[2] for r in rows), dtype=np.float32, count=n)
        self.n_docs = n
        self.avgdl = float(self.doc_len.mean()) if n else 1.0
        sizes = np.fromiter((len(r[1]) // ENTRY.itemsize for r in rows), dtype=np.int64, count=n)
        entries = np.frombuffer(b"".join(r[1] for r in rows), dtype=ENTRY)
        docs = np.repeat(np.arange(n, dtype=np.int32), sizes)
        order = np.argsort(entries["h"])
        hashes = entries["h"][order]
        self.post_doc = docs[order]
        self.post_tf = entries["tf"][order].astype(np.float32)
        self.terms, self.starts = np.unique(hashes, return_index=True)
        self.ends = np.append(self.starts[1:], len(hashes))
        self._norm = (K1 * (1 - B + B * self.doc_len / max(self.avgdl, 1e-9))).astype(np.float32)

    def document_frequency(self, term: str) -> int:
        """Chunks containing ``term``."""
        lo, hi = self._postings(term_hash(term))
        return hi - lo

    def idf(self, term: str) -> float:
        """BM25 idf of ``term`` (0 for an unknown term)."""
        df = self.document_frequency(term)
        if df == 0:
            return 0.0
        return math.log(1.0 + (self.n_docs - df + 0.5) / (df + 0.5))

    def _postings(self, h: int) -> tuple[int, int]:
        i = int(np.searchsorted(self.terms, h))
        if i < len(self.terms) and int(self.terms[i]) == h:
            return int(self.starts[i]), int(self.ends[i])
        return 0, 0

    def search(self, query_terms: Sequence[str], limit: int) -> list[KeywordHit]:
        """Top ``limit`` chunks by BM25 over the query terms (any term may match)."""
        if not self.n_docs or not query_terms:
            return []
        scores = np.zeros(self.n_docs, dtype=np.float32)
        matched = np.zeros(self.n_docs, dtype=np.int16)
        for term in dict.fromkeys(query_terms):
            lo, hi = self._postings(term_hash(term))
            if hi == lo:
                continue
            df = hi - lo
            idf = math.log(1.0 + (self.n_docs - df + 0.5) / (df + 0.5))
            docs = self.post_doc[lo:hi]
            tf = self.post_tf[lo:hi]
            scores[docs] += idf * tf * (K1 + 1) / (tf + self._norm[docs])
            matched[docs] += 1
        hit = np.flatnonzero(scores)
        if hit.size == 0:
            return []
        if hit.size > limit:
            hit = hit[np.argpartition(-scores[hit], limit - 1)[:limit]]
        hit = hit[np.argsort(-scores[hit], kind="stable")]
        return [KeywordHit(int(self.rowids[i]), float(scores[i]), int(matched[i])) for i in hit]


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
