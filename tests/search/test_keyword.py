"""Keyword leg: in-process BM25 over packed terms, and the FTS5 path."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from memmw.search.keyword import K1, B, KeywordMatrix, bm25_to_score, fts_quote, fts_search
from memmw.store.sqlite.db import connect
from memmw.store.sqlite.schema import migrate
from memmw.store.sqlite.store import IndexStore
from memmw.store.terms import ENTRY, pack_terms, term_hash, unpack_terms
from memmw.text.analysis import query_terms, terms
from memmw.text.chunking import chunk_text

DOCS = [
    "The gateway runs on port 8080 behind the proxy.",
    "Alice prefers green tea; Bob prefers coffee. Tea, tea, tea.",
    "Kubernetes migration: move the gateway to the new cluster.",
    "Garden: tomatoes need sun, basil needs water.",
    "私の猫の名前はミケです。",
]


def matrix(docs: list[str]) -> KeywordMatrix:
    rows = []
    for i, text in enumerate(docs):
        blob, n = pack_terms(text)
        rows.append((100 + i, blob, n))
    return KeywordMatrix(rows)


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


def test_pack_terms_round_trip() -> None:
    blob, n = pack_terms("Tea, tea and TEA; coffee")
    arr = unpack_terms(blob)
    assert arr.dtype == ENTRY
    assert n == 5
    (coffee,) = terms("coffee")  # stored terms are stems
    assert dict(zip(arr["h"].tolist(), arr["tf"].tolist(), strict=True)) == {
        term_hash("tea"): 3,
        term_hash("and"): 1,
        term_hash(coffee): 1,
    }
    assert pack_terms("") == (b"", 0)


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
    # "the" is in two documents; the shorter ranks first.
    assert [h.rowid for h in m.search(["the"], 1)] == [100]
    assert [h.rowid for h in m.search(["the"], 2)] == [100, 102]
    assert m.search(["zeppelin"], 5) == []
    assert m.search([], 5) == []
    assert KeywordMatrix([]).search(["tea"], 5) == []


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


def test_updated_matrix_scores_like_a_fresh_one() -> None:
    def rows(items: dict[int, str]) -> list[tuple[int, bytes, int]]:
        return [(rid, *pack_terms(text)) for rid, text in sorted(items.items())]

    base = {i: f"note {i} about the gateway and backups number{i}" for i in range(1, 41)}
    base[7] = "the zeppelin hangar opened on the airfield"
    old = KeywordMatrix(rows(base))
    now = {k: v for k, v in base.items() if k not in (3, 7)}
    now[41] = "a second zeppelin landed near the hangar"
    now[42] = "gateway firmware upgrade"
    updated = old.updated(np.asarray(sorted(now), dtype=np.int64), rows({41: now[41], 42: now[42]}))
    fresh = KeywordMatrix(rows(now))
    assert updated.segments == 2 and fresh.segments == 1
    assert updated.n_docs == fresh.n_docs == 40
    assert updated.max_rowid == 42
    for query in (["zeppelin", "hangar"], ["gateway"], ["number3"], ["firmware", "upgrade"]):
        got = [(h.rowid, round(h.bm25, 4), h.matched) for h in updated.search(query, 10)]
        want = [(h.rowid, round(h.bm25, 4), h.matched) for h in fresh.search(query, 10)]
        assert got == want, query
    assert [h.rowid for h in updated.search(["zeppelin"], 5)] == [41]  # 7 was deleted
    assert updated.idf("gateway") == pytest.approx(fresh.idf("gateway"))
    assert not updated.needs_compaction()
    assert old.updated(np.asarray([1, 2], dtype=np.int64), []).needs_compaction()
