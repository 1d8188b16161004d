"""The process's cache of chunk rows a search read (``memmw.store.postgres.cache``): never
an answer the server would not give (the LRU itself: ``tests/store/test_cache.py``)."""

from __future__ import annotations

import uuid
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memmw.store import segments
from memmw.store.postgres import cache
from memmw.store.protocol import ChunkRow
from memmw.store.terms import term_hash
from memmw.text.chunking import chunk_text

# -- against a server --------------------------------------------------------------------

_WORDS = ["gateway", "atlas", "alice", "tea", "backup", "harbour", "lighthouse", "nas"]

_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.integers(0, 3), st.integers(0, 40)),
        # Another process's store on the same namespace (this process's caches are shared
        # with the first store: the hardest case for them).
        st.tuples(st.just("elsewhere"), st.integers(0, 3), st.integers(0, 40)),
        st.tuples(st.just("reset"), st.just(0), st.just(0)),
        st.tuples(st.just("delete"), st.integers(0, 3), st.just(0)),
        st.tuples(st.just("rebuild"), st.just(0), st.just(0)),
        st.tuples(st.just("forge"), st.integers(0, 100), st.just(0)),
        st.tuples(st.just("read"), st.integers(0, 100), st.integers(1, 12)),
    ),
    min_size=1,
    max_size=14,
)


def _text(seed: int) -> str:
    words = [_WORDS[(seed * 7 + i * 3) % len(_WORDS)] for i in range(4 + seed % 9)]
    return "\n".join(" ".join(words[i : i + 3]) for i in range(0, len(words), 3)) + "\n"


def _write(writer: Any, path: str, text: str) -> list[int]:
    rowids: list[int] = writer.replace_file(
        path=path, source="memory", file_hash=str(hash(text)), mtime=1.0, size=len(text),
        decay_ts=float(len(text)), chunks=chunk_text(text, tokens=4, overlap=0),
        model="fts-only",
    )
    return rowids


def _postings(reader: Any) -> dict[int, list[tuple[int, int, int]]]:
    found = reader.postings([term_hash(w) for w in _WORDS], ["memory"])
    return {
        h: list(zip(p.rowids.tolist(), p.tf.tolist(), p.doc_len.tolist(), strict=True))
        for h, p in found.items()
    }


@pytest.mark.postgres
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=_STEPS)
# Held segments, then a write by another store of the terms they hold, then a read.
@example(steps=[("write", 0, 5), ("read", 0, 3), ("elsewhere", 1, 7), ("read", 0, 3)])
def test_a_snapshot_reads_what_the_server_has_whatever_the_cache_holds(
    pg_database: str, steps: list[tuple[str, int, int]]
) -> None:
    """Writes (new chunks, deleted files, tombstones purged from the segments, a rebuild,
    a reset; here or by another store) interleaved with snapshot reads: the chunk rows,
    postings, statistics and newest decay date a snapshot reads through the process's
    caches (chunk rows, segments) are what an uncached read in the writer gives, for
    rowids that exist and for deleted ones, even when the cache was given a row under a
    version the server does not have."""
    from memmw.store.postgres.backend import PostgresStore

    agent = f"agent-{uuid.uuid4().hex[:8]}"
    store = PostgresStore(pg_database, agent_id=agent, pool_size=2)
    other = PostgresStore(pg_database, agent_id=agent, pool_size=1)
    files: dict[str, str] = {}
    seen: list[int] = []
    scope = (store.dsn, store.namespace_id)
    with mock.patch.object(segments, "DEAD_MAX", 3):  # purges after a few deletions
        try:
            for op, a, b in steps:
                path = f"memory/note-{a}.md"
                if op == "write":
                    with store.write() as w, w.transaction():
                        seen += _write(w, path, _text(b))
                        w.bump_generation()
                    files[path] = _text(b)
                elif op == "elsewhere":
                    with other.write() as w, w.transaction():
                        seen += _write(w, path, _text(b))
                        w.bump_generation()
                    files[path] = _text(b)
                elif op == "reset":
                    other.reset()
                    files.clear()
                elif op == "delete" and path in files:
                    with store.write() as w:
                        w.delete_file(path, "memory")
                    del files[path]
                elif op == "rebuild":
                    with store.write() as w, store.rebuild(w) as staged:
                        for name, text in files.items():
                            seen += _write(staged, name, text)
                elif op == "forge" and seen:
                    # A row under a version the server never gave it (as if the database
                    # had been recreated with the same rowids): it must not be answered.
                    rowid = seen[a % len(seen)]
                    forged = ChunkRow(rowid=rowid, id="forged", path="forged.md", source="memory",
                                      start_line=1, end_line=1, text="forged", line_map=None,
                                      importance=None, n_terms=1, decay_ts=None)
                    cache.CHUNKS.put((scope, rowid), (-1, forged), 10)
                elif op == "read" and seen:
                    ids = [seen[(a + i * 5) % len(seen)] for i in range(b)] + [max(seen) + 1]
                    for _ in range(2):  # the second read finds the segments held
                        with store.read() as r:
                            got = (r.chunks(ids), _postings(r), r.keyword_stats(["memory"]),
                                   r.newest_decay_ts())
                    with store.write() as w:  # the writer reads uncached
                        want = (w.chunks(ids), _postings(w), w.keyword_stats(["memory"]),
                                w.newest_decay_ts())
                    assert got == want
                    assert set(got[0]) <= set(ids) and all(c.id != "forged" for c in got[0].values())
        finally:
            store.close()
            other.close()
