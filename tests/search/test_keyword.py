"""Keyword leg: in-process BM25 over stored postings, and the FTS5 path."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memmw.search import keyword
from memmw.search.keyword import (
    K1,
    MAX_TIES,
    B,
    KeywordHit,
    bm25_exhaustive,
    bm25_search,
    bm25_to_score,
    fts_search,
    idf,
)
from memmw.store.arena import Arena
from memmw.store.protocol import EMPTY_POSTINGS as EMPTY
from memmw.store.protocol import Postings
from memmw.store.sqlite.db import connect
from memmw.store.sqlite.schema import migrate
from memmw.store.sqlite.store import IndexStore
from memmw.store.terms import term_counts, term_hash
from memmw.text.analysis import query_terms, terms
from memmw.text.chunking import chunk_text

DOCS = [
    "The gateway runs on port 8080 behind the proxy.",
    "Alice prefers green tea; Bob prefers coffee. Tea, tea, tea.",
    "Kubernetes migration: move the gateway to the new cluster.",
    "Garden: tomatoes need sun, basil needs water.",
    "私の猫の名前はミケです。",
]


class Corpus:
    """Postings of a few documents (rowids from 100), as a store would return them."""

    def __init__(self, docs: list[str]) -> None:
        entries: dict[int, list[tuple[int, int, int]]] = {}
        self.total = 0
        for i, text in enumerate(docs):
            hashes, tf, n = term_counts(text)
            self.total += n
            for h, f in zip(hashes.tolist(), tf.tolist(), strict=True):
                entries.setdefault(h, []).append((100 + i, f, n))
        self.n_docs = len(docs)
        self.postings = {
            h: Postings(
                np.asarray([r for r, _, _ in e], dtype=np.int64),
                np.asarray([f for _, f, _ in e], dtype=np.int32),
                np.asarray([n for _, _, n in e], dtype=np.int32),
            )
            for h, e in entries.items()
        }

    def search(self, query: list[str], limit: int) -> list[KeywordHit]:
        lists = [self.postings.get(term_hash(t), EMPTY) for t in dict.fromkeys(query)]
        return bm25_search(lists, self.n_docs, self.total, limit)

    def document_frequency(self, term: str) -> int:
        return len(self.postings.get(term_hash(term), EMPTY))

    def idf(self, term: str) -> float:
        return idf(self.document_frequency(term), self.n_docs)


def matrix(docs: list[str]) -> Corpus:
    return Corpus(docs)


def naive_bm25(docs: list[str], query: list[str]) -> dict[int, float]:
    tokenised = [terms(d) for d in docs]
    n = len(docs)
    avgdl = sum(len(t) for t in tokenised) / n
    out: dict[int, float] = {}
    for i, toks in enumerate(tokenised):
        tf = Counter(toks)
        score = 0.0
        for q in dict.fromkeys(query):
            df = sum(1 for t in tokenised if q in t)
            if not df or not tf[q]:
                continue
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            score += idf * tf[q] * (K1 + 1) / (tf[q] + K1 * (1 - B + B * len(toks) / avgdl))
        if score:
            out[100 + i] = score
    return out


def test_term_counts() -> None:
    hashes, tf, n = term_counts("Tea, tea and TEA; coffee")
    assert n == 5
    (coffee,) = terms("coffee")  # stored terms are stems
    assert dict(zip(hashes.tolist(), tf.tolist(), strict=True)) == {
        term_hash("tea"): 3,
        term_hash("and"): 1,
        term_hash(coffee): 1,
    }
    hashes, tf, n = term_counts("")
    assert (len(hashes), len(tf), n) == (0, 0, 0)


def test_term_hash_is_stable_across_processes() -> None:
    # blake2b-based, not Python's salted hash(): the packed blobs stay valid on disk.
    import hashlib

    digest = hashlib.blake2b(b"gateway", digest_size=8).digest()
    assert term_hash("gateway") == int.from_bytes(digest, "little", signed=True)
    assert -(2**63) <= term_hash("x") < 2**63


@pytest.mark.parametrize("query", ["gateway", "tea coffee", "gateway port cluster", "猫 ミケ", "basil"])
def test_bm25_matches_a_naive_implementation(query: str) -> None:
    m = matrix(DOCS)
    q = query_terms(query)
    expected = naive_bm25(DOCS, q)
    hits = m.search(q, 10)
    assert {h.rowid: h.bm25 for h in hits} == pytest.approx(expected, rel=1e-5)
    assert [h.bm25 for h in hits] == sorted((h.bm25 for h in hits), reverse=True)


def test_matched_counts_query_terms_present() -> None:
    m = matrix(DOCS)
    hits = {h.rowid: h.matched for h in m.search(query_terms("gateway port cluster"), 10)}
    assert hits == {100: 2, 102: 2}


def test_limit_and_no_match() -> None:
    m = matrix(DOCS)
    # "the" is twice in two documents of nine terms: they tie, so a limit of 1 keeps both.
    assert [h.rowid for h in m.search(["the"], 1)] == [100, 102]
    assert [h.rowid for h in m.search(["gateway"], 1)] == [100, 102]
    assert [h.rowid for h in m.search(["tea"], 1)] == [101]
    assert [h.rowid for h in m.search(["the"], 2)] == [100, 102]
    assert m.search(["zeppelin"], 5) == []
    assert m.search([], 5) == []
    assert bm25_search([], 0, 0.0, 5) == []
    assert bm25_search([EMPTY], 5, 10.0, 5) == []


def test_ties_at_the_limit_are_all_returned() -> None:
    # Four identical documents tie; a limit of 2 returns all four (by rowid here) so the
    # caller can break the tie by path and line.
    m = matrix(["alpha beta", "alpha beta", "alpha beta", "alpha beta", "gamma"])
    hits = m.search(["alpha"], 2)
    assert [h.rowid for h in hits] == [100, 101, 102, 103]
    assert len({h.bm25 for h in hits}) == 1
    many = matrix(["alpha"] * (MAX_TIES + 10))
    assert len(many.search(["alpha"], 3)) == 3 + MAX_TIES


def test_idf_and_document_frequency() -> None:
    m = matrix(DOCS)
    assert m.document_frequency("gateway") == 2
    assert m.document_frequency("zeppelin") == 0
    assert m.idf("zeppelin") == 0.0
    assert m.idf("basil") > m.idf("gateway") > 0


def test_bm25_to_score() -> None:
    assert bm25_to_score(1.0) == 0.5
    assert bm25_to_score(3.0) == 0.75
    assert bm25_to_score(0.0) == 0.0
    assert bm25_to_score(-2.0) == 0.0
    assert bm25_to_score(float("nan")) == 0.001
    assert bm25_to_score(float("inf")) == 0.001


@pytest.mark.parametrize(
    ("term", "quoted"),
    [("tea", '"tea"'), ('a"b', '"a""b"'), ("NEAR(", '"NEAR("'), ("*", '"*"'), ("", '""')],
)
def test_fts_quote(term: str, quoted: str) -> None:
    from memmw.store.sqlite.store import fts_quote

    assert fts_quote(term) == quoted


def store_with(tmp_path: Path, docs: list[str], tokenizer: str = "unicode61") -> IndexStore:
    conn = connect(tmp_path / f"{tokenizer}.sqlite")
    migrate(conn, tokenizer)
    store = IndexStore(conn, fts_tokenizer=tokenizer)
    for i, text in enumerate(docs):
        store.replace_file(
            path=f"memory/{i}.md", source="memory", file_hash=str(i), mtime=0.0, size=len(text),
            decay_ts=None, chunks=chunk_text(text), model="fts-only",
        )
    return store


@pytest.mark.parametrize("tokenizer", ["unicode61", "trigram"])
def test_fts_search_finds_the_same_chunks(tmp_path: Path, tokenizer: str) -> None:
    store = store_with(tmp_path, DOCS, tokenizer)
    try:
        by_path = {}
        for query in ["gateway", "tea coffee", "kubernetes cluster", "猫", "ミケ", "basil"]:
            hits = fts_search(store, query_terms(query), 10, ["memory"])
            rows = store.chunks([h.rowid for h in hits])
            by_path[query] = sorted(rows[h.rowid].path for h in hits)
            assert all(h.bm25 > 0 for h in hits)
        assert by_path == {
            "gateway": ["memory/0.md", "memory/2.md"],
            "tea coffee": ["memory/1.md"],
            "kubernetes cluster": ["memory/2.md"],
            "猫": ["memory/4.md"],
            "ミケ": ["memory/4.md"],
            "basil": ["memory/3.md"],
        }
    finally:
        store.conn.close()


def test_fts_search_falls_back_to_single_term_probes(tmp_path: Path) -> None:
    store = store_with(tmp_path, DOCS)
    try:
        # No chunk has both terms: the AND query is empty, the probes find each.
        hits = fts_search(store, query_terms("basil kubernetes"), 10, ["memory"])
        assert sorted(store.chunks([h.rowid for h in hits])[h.rowid].path for h in hits) == [
            "memory/2.md",
            "memory/3.md",
        ]
        assert {h.matched for h in hits} == {1}
        assert fts_search(store, [], 10, ["memory"]) == []
        assert fts_search(store, ["tea"], 10, ["sessions"]) == []
    finally:
        store.conn.close()


@pytest.mark.parametrize("tokenizer", ["unicode61", "trigram"])
@pytest.mark.parametrize(
    "raw", ['"', "NEAR(", "*", "-", ":", "(((", ")", "a\" OR \"b", "tea AND", "OR", "NOT tea", "x" * 10_000]
)
def test_fts_search_survives_hostile_terms(tmp_path: Path, tokenizer: str, raw: str) -> None:
    store = store_with(tmp_path, DOCS, tokenizer)
    try:
        # Raw strings straight into the term list: quoting alone must keep FTS5 happy.
        fts_search(store, [raw], 5, ["memory"])
        fts_search(store, query_terms(raw), 5, ["memory"])
    finally:
        store.conn.close()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sets(st.integers(0, 60)), min_size=1, max_size=5))
def test_union_of_postings_equals_numpy_unique(lists: list[set[int]]) -> None:
    from memmw.search.keyword import _union

    postings = [
        Postings(
            np.asarray(sorted(s), dtype=np.int64),
            np.ones(len(s), dtype=np.int32),
            np.ones(len(s), dtype=np.int32),
        )
        for s in lists
    ]
    rows, inverse = _union(postings)
    want_rows, want_inverse = np.unique(
        np.concatenate([p.rowids for p in postings]), return_inverse=True
    )
    assert rows.tolist() == want_rows.tolist()
    assert inverse.tolist() == want_inverse.tolist()


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.dictionaries(st.integers(0, 10_000), st.integers(1, 5), min_size=0, max_size=30),
        min_size=1,
        max_size=4,
    ),
    st.integers(1, 12),
)
def test_dense_and_merged_scoring_agree(terms_docs: list[dict[int, int]], limit: int) -> None:
    from unittest import mock

    import memmw.search.keyword as kw

    lists = [
        Postings(
            np.asarray(sorted(d), dtype=np.int64),
            np.asarray([d[r] for r in sorted(d)], dtype=np.int32),
            np.asarray([(r % 7) + 3 for r in sorted(d)], dtype=np.int32),
        )
        for d in terms_docs
    ]
    dense = bm25_search(lists, 20_000, 100_000.0, limit)
    with mock.patch.object(kw, "DENSE_SPAN", 0):
        merged = bm25_search(lists, 20_000, 100_000.0, limit)
    assert dense == merged
    assert [h.rowid for h in dense] == [
        h.rowid for h in sorted(dense, key=lambda h: (-h.bm25, h.rowid))
    ]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 40), st.integers(1, 3000)), min_size=1, max_size=400),
    st.floats(0.01, 30.0),
    st.floats(1.0, 2000.0),
)
def test_the_contribution_table_gives_the_formulas_bits(
    pairs: list[tuple[int, int]], weight: float, avgdl: float
) -> None:
    """Scoring through the (tf, length) table equals the float32 formula bit for bit."""
    from memmw.search.keyword import _contributions, _formula

    tf = np.asarray([t for t, _ in pairs], dtype=np.int32)
    dl = np.asarray([n for _, n in pairs], dtype=np.int32)
    p = Postings(np.arange(len(pairs), dtype=np.int64), tf, dl)
    want = _formula(weight, tf.astype(np.float32), dl.astype(np.float32), avgdl)
    assert want.dtype == np.float32
    assert _contributions(p, weight, avgdl).tobytes() == want.tobytes()


def reference_bm25(lists: list[Postings], n_docs: int, total: float, limit: int) -> list[tuple]:
    """BM25 as the in-memory matrix computed it: float32, query-term order, all postings."""
    avgdl = total / n_docs
    scores: dict[int, np.float32] = {}
    matched: Counter[int] = Counter()
    for p in lists:
        if not len(p):
            continue
        w = idf(len(p), n_docs)
        tf = p.tf.astype(np.float32)
        norm = (K1 * (1 - B + B * p.doc_len.astype(np.float32) / max(avgdl, 1e-9))).astype(
            np.float32
        )
        for r, c in zip(p.rowids.tolist(), w * tf * (K1 + 1) / (tf + norm), strict=True):
            scores[r] = np.float32(scores.get(r, np.float32(0)) + c)
            matched[r] += 1
    ordered = sorted(scores, key=lambda r: (-scores[r], r))
    if len(ordered) > limit:
        kth = scores[ordered[limit - 1]]
        ordered = [r for r in ordered if scores[r] >= kth]
    return [(r, float(scores[r]), matched[r]) for r in ordered[: limit + MAX_TIES]]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.dictionaries(
            st.integers(0, 5_000), st.tuples(st.integers(1, 30), st.integers(1, 900)), max_size=60
        ),
        min_size=1,
        max_size=5,
    ),
    st.integers(1, 12),
    st.sampled_from([0, 1 << 22, 10**9]),
    st.sampled_from([0, 300, 1 << 20]),
)
def test_bm25_search_equals_the_reference_computation(
    terms_docs: list[dict[int, tuple[int, int]]], limit: int, offset: int, arena_bytes: int
) -> None:
    """Same hits, scores (float32 bits), ties and matched counts as the plain computation,
    whatever the rowids' layout (small, offset past the dense span, or spread out) and
    whether the working arrays come from an arena (too small for them, or reused)."""
    lists = []
    for d in terms_docs:
        rows = sorted(d)
        # Each chunk has one length whatever the term; the last layout spreads rowids
        # wider than the dense span (merged scoring).
        spread = 1000 if offset == 10**9 else 1
        lists.append(
            Postings(
                np.asarray([offset + r * spread for r in rows], dtype=np.int64),
                np.asarray([d[r][0] for r in rows], dtype=np.int32),
                np.asarray([(r % 13) * 50 + 20 for r in rows], dtype=np.int32),
            )
        )
    want = reference_bm25(lists, 6_000, 6_000 * 180.0, limit)
    arena = Arena(max_bytes=arena_bytes)
    for _ in range(3):  # the second and third searches reuse what the first left
        arena.reset()
        arena.take(arena.capacity // 8, np.int64).fill(-1)  # stale values everywhere
        arena.reset()
        got = bm25_search(lists, 6_000, 6_000 * 180.0, limit, arena)
        assert [(h.rowid, h.bm25, h.matched) for h in got] == want


# -- MaxScore pruning: the exhaustive answer, bit for bit -------------------------------


@st.composite
def skewed_corpora(draw: st.DrawFn) -> tuple[list[Postings], int, float]:
    """Postings of 2-6 terms over up to 600 chunks, from rare terms to terms in almost
    every chunk (names and common words), with few distinct lengths and frequencies so
    that many chunks tie; rowids with gaps (deleted chunks)."""
    seed = draw(st.integers(0, 2**32 - 1))
    n_docs = draw(st.integers(40, 600))
    densities = draw(
        st.lists(st.sampled_from([0.005, 0.02, 0.1, 0.4, 0.8, 0.97]), min_size=2, max_size=6)
    )
    max_tf = draw(st.sampled_from([1, 3, 30]))
    rng = np.random.default_rng(seed)
    rowids = np.sort(rng.choice(n_docs * 3, size=n_docs, replace=False)).astype(np.int64)
    lengths = rng.choice([8, 20, 21, 60, 400], size=n_docs).astype(np.int32)
    lists = []
    for density in densities:
        docs = np.flatnonzero(rng.random(n_docs) < density)
        tf = rng.integers(1, max_tf + 1, size=len(docs)).astype(np.int32)
        lists.append(Postings(rowids[docs], np.minimum(tf, lengths[docs]), lengths[docs]))
    return lists, n_docs, float(lengths.sum())


def hits(found: list[KeywordHit]) -> list[tuple[int, float, int]]:
    return [(h.rowid, h.bm25, h.matched) for h in found]


@settings(max_examples=300, deadline=None)
@given(skewed_corpora(), st.integers(1, 40), st.sampled_from([0, keyword.LOOKUP_COST]))
def test_pruned_top_k_equals_exhaustive_scoring(
    corpus: tuple[list[Postings], int, float], limit: int, lookup_cost: int
) -> None:
    """Same hits, same float32 scores, same ties, same matched counts as scoring every
    posting, whether or not MaxScore skips the frequent terms (``lookup_cost`` 0: it
    prunes whenever the bounds allow, however many chunks it looks up)."""
    lists, n_docs, total = corpus
    with (
        mock.patch.object(keyword, "LOOKUP_COST", lookup_cost),
        mock.patch.object(keyword, "PRUNE_MIN_POSTINGS", 0),
    ):
        got = bm25_search(lists, n_docs, total, limit)
    assert hits(got) == hits(bm25_exhaustive(lists, n_docs, total, limit))


def test_pruning_skips_a_frequent_term_and_keeps_the_answer() -> None:
    """A rare term decides the top: the frequent term is looked up, never scored whole,
    and the answer is still the exhaustive one."""
    n = 20_000
    rows = np.arange(n, dtype=np.int64)
    lengths = np.full(n, 30, dtype=np.int32)
    common = Postings(rows, np.ones(n, dtype=np.int32), lengths)
    rare = Postings(rows[::500], np.full(40, 3, dtype=np.int32), lengths[::500])
    looked: list[int] = []

    class Watched(Postings):
        def lookup(self, rowids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            looked.append(len(rowids))
            return super().lookup(rowids)

    watched = Watched(common.rowids, common.tf, common.doc_len)
    with mock.patch.object(keyword, "PRUNE_MIN_POSTINGS", 0):
        got = bm25_search([watched, rare], n, 30.0 * n, 10)
    assert hits(got) == hits(bm25_exhaustive([common, rare], n, 30.0 * n, 10))
    assert looked and max(looked) <= 40  # only the rare term's chunks were looked up


def test_few_postings_are_scored_exhaustively_many_are_pruned() -> None:
    """Below ``PRUNE_MIN_POSTINGS`` (all terms together) MaxScore is not tried: its
    bookkeeping costs more than the postings it skips there. The answer is the same."""
    n = 3_000
    rows = np.arange(n, dtype=np.int64)
    lengths = np.full(n, 30, dtype=np.int32)
    common = Postings(rows, np.ones(n, dtype=np.int32), lengths)
    rare = Postings(rows[::100], np.full(30, 3, dtype=np.int32), lengths[::100])
    want = hits(bm25_exhaustive([common, rare], n, 30.0 * n, 5))
    for minimum, tried in ((n + 31, False), (n + 30, True)):
        with (
            mock.patch.object(keyword, "PRUNE_MIN_POSTINGS", minimum),
            mock.patch.object(keyword, "_pruned", wraps=keyword._pruned) as pruned,
        ):
            assert hits(bm25_search([common, rare], n, 30.0 * n, 5)) == want
        assert pruned.called is tried
