"""Many agents in one PostgreSQL database: concurrent search and sync, side by side with SQLite.

Usage::

    make pg   # or any PostgreSQL with pgvector; the DSN below must be allowed to create tables
    python benchmarks/postgres.py --dsn "$(python scripts/pgserver.py url)" \\
        --agents 20 --chunks 25000 --dims 384 --searchers 8 --syncers 2 --seconds 60

What it does, in one run:

1. Loads ``--agents`` namespaces of about ``--chunks`` chunks each (the synthetic daily
   notes of ``benchmarks/scale.py``, one seed per agent) into a fresh schema of the
   database, with deterministic pseudo-random unit ``--dims`` vectors (one per text),
   and reports the load time.
2. Runs ``--searchers`` searching processes and ``--syncers`` syncing processes for
   ``--seconds``: each search picks an agent and a query and runs the keyword leg (BM25
   computed in the server from the postings), the vector leg (HNSW) and both (hybrid: the
   two legs and the chunk rows); each sync replaces a few files of an agent under its
   writer lock and writes their vectors. Reports p50/p95 per leg, searches per second,
   syncs, busy waits and errors (target 0).
3. Checks every namespace against a clean recomputation: postings and BM25 statistics
   equal to what the chunks' own term lists give, one vector per chunk.
4. For comparison, one agent of the same size in the SQLite store, searched by
   ``Memory.search`` (keyword and hybrid) and the vector leg alone, in this process.

The figures depend on the machine; the README quotes a run with its command line.
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing as mp
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import CHUNKS_PER_FILE, generate_synthetic, percentile, synthetic_queries

from memmw.store.postgres.backend import PostgresStore
from memmw.store.postgres.connection import open_pool
from memmw.store.segments import decode
from memmw.store.terms import term_counts, term_hash
from memmw.text.analysis import query_terms
from memmw.text.chunking import chunk_text

SOURCES = ["memory"]


def agent_name(i: int) -> str:
    return f"bench-agent-{i:02d}"


def workspace_files(root: Path, chunks: int, seed: int) -> dict[str, str]:
    # ~4 chunks per daily note plus a 40-entry MEMORY.md (one chunk per entry).
    generate_synthetic(root, max(1, (chunks - 40) // CHUNKS_PER_FILE), seed)
    return {
        str(p.relative_to(root)): p.read_text(encoding="utf-8")
        for p in sorted(root.rglob("*.md"))
    }


def fast_vector(text: str, dims: int) -> bytes:
    """A deterministic unit vector per text (loading is not about embedding quality)."""
    seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
    vec = np.random.default_rng(seed).standard_normal(dims).astype("<f4")
    return (vec / np.linalg.norm(vec)).astype("<f4").tobytes()


def replace(writer: Any, path: str, text: str) -> list[int]:
    """Replace one file's chunks as a sync does; returns their rowids."""
    chunks = chunk_text(text, tokens=400, overlap=80)
    return list(writer.replace_file(
        path=path, source="memory", file_hash=str(hash(text)), mtime=time.time(),
        size=len(text), decay_ts=None, chunks=chunks, model="fake",
    ))


def fake_vectors(writer: Any, rowids: list[int], dims: int) -> list[tuple[int, str, bytes]]:
    """``(rowid, hash, vector)`` of chunks, as the backfill computes them (one query)."""
    rows = writer.conn.execute(
        "SELECT rowid, hash, text FROM memmw.chunks WHERE rowid = ANY(%s)", (rowids,)
    ).fetchall()
    return [(r, h, fast_vector(t, dims)) for r, h, t in rows]


#: Vectors per ``write_vectors`` call while loading (the backfill writes in batches too).
VECTOR_BATCH = 2000


def load_agent(dsn: str, index: int, chunks: int, dims: int, work: Path) -> tuple[int, float]:
    """Build one agent's namespace as a full rebuild would: files, then vectors in batches.

    The HNSW index is created when the writer lock is released, over the loaded vectors
    (``PostgresStore.write``), not maintained vector by vector. Returns the chunks and
    the seconds it took (the synthetic notes are written before the clock starts).
    """
    files = workspace_files(work / f"ws-{index}", chunks, seed=1000 + index)
    store = PostgresStore(dsn, agent_id=agent_name(index))
    started = time.perf_counter()
    rowids: list[int] = []
    try:
        with store.write(what="load") as w, store.rebuild(w) as staged:
            for path, text in files.items():
                rowids += replace(staged, path, text)
            staged.bump_generation()
            for at in range(0, len(rowids), VECTOR_BATCH):
                staged.write_vectors(fake_vectors(staged, rowids[at:at + VECTOR_BATCH], dims))
    finally:
        store.close()
    return len(rowids), time.perf_counter() - started


def _load_one(job: tuple[str, int, int, int, str]) -> tuple[int, float]:
    dsn, index, chunks, dims, work = job
    return load_agent(dsn, index, chunks, dims, Path(work))


def searcher(dsn: str, agents: int, dims: int, seconds: float, seed: int, out: Any) -> None:
    rnd = random.Random(seed)
    queries = synthetic_queries(200, seed)
    # One pool per process serves every agent's store: a pool per agent would need
    # processes x agents connections (past max_connections at 20 agents and 10 processes).
    pool = open_pool(dsn, max_size=2)
    stores = [PostgresStore(dsn, agent_id=agent_name(i), pool=pool) for i in range(agents)]
    lat: dict[str, list[float]] = {"keyword": [], "vector": [], "hybrid": []}
    errors: list[str] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        store = stores[rnd.randrange(agents)]
        query = rnd.choice(queries)
        hashes = [term_hash(t) for t in query_terms(query)]
        qvec = np.frombuffer(fast_vector(query, dims), dtype="<f4").tolist()
        try:
            t0 = time.perf_counter()
            with store.read() as r:
                r.bm25_search(hashes, 24, SOURCES)
            t1 = time.perf_counter()
            with store.read() as r:
                r.nearest(qvec, 24, SOURCES)
            t2 = time.perf_counter()
            with store.read() as r:
                ids = [h[0] for h in r.bm25_search(hashes, 24, SOURCES)]
                ids += [h[0] for h in r.nearest(qvec, 24, SOURCES)]
                r.chunks(sorted(set(ids)))
            t3 = time.perf_counter()
        except Exception as exc:
            errors.append(repr(exc))
            continue
        lat["keyword"].append((t1 - t0) * 1000)
        lat["vector"].append((t2 - t1) * 1000)
        lat["hybrid"].append((t3 - t2) * 1000)
    for store in stores:
        store.close()
    pool.close()
    out.put({"latency": lat, "errors": errors})


def syncer(
    dsn: str, agents: list[int], dims: int, seconds: float, seed: int, work: str, out: Any
) -> None:
    rnd = random.Random(seed)
    syncs = busy = 0
    errors: list[str] = []
    durations: list[float] = []
    deadline = time.monotonic() + seconds
    from memmw.errors import IndexBusyError

    pool = open_pool(dsn, max_size=2)  # shared by every agent's store in this process
    while time.monotonic() < deadline:
        index = rnd.choice(agents)
        store = PostgresStore(dsn, agent_id=agent_name(index), pool=pool)
        try:
            started = time.perf_counter()
            with store.write(timeout=5, what="bench sync") as w, w.transaction():
                paths = list(w.file_records("memory"))
                for path in rnd.sample(paths, min(3, len(paths))):
                    stamp = f"\n- sync {uuid.uuid4().hex[:8]} touched the harbour lighthouse\n"
                    text = (Path(work) / f"ws-{index}" / path).read_text(encoding="utf-8")
                    w.write_vectors(fake_vectors(w, replace(w, path, text + stamp), dims))
                w.bump_generation()
            durations.append((time.perf_counter() - started) * 1000)
            syncs += 1
        except IndexBusyError:
            busy += 1
        except Exception as exc:
            errors.append(repr(exc))
        finally:
            store.close()
    pool.close()
    out.put({"syncs": syncs, "busy": busy, "errors": errors, "sync_ms": durations})


def namespace_postings(conn: Any, ns: int) -> tuple[np.ndarray, ...]:
    """Every live posting of a namespace ``(rowids, term hashes, tf, lengths)``, decoded
    from its segments (tombstoned chunks left out)."""
    dead = {int(r) for (r,) in conn.execute(
        "SELECT chunk_rowid FROM memmw.postings_dead WHERE namespace_id = %s", (ns,)
    ).fetchall()}
    parts = []
    for term, seg, data in conn.execute(
        "SELECT term_hash, seg, data FROM memmw.postings_segments WHERE namespace_id = %s",
        (ns,),
    ).fetchall():
        rows, tf, dl = decode(int(seg), bytes(data))
        parts.append((rows, np.full(len(rows), int(term), dtype=np.int64), tf, dl))
    if not parts:
        return tuple(np.zeros(0, dtype=np.int64) for _ in range(4))
    rows, hashes, tf, dl = (np.concatenate([p[i] for p in parts]).astype(np.int64)
                            for i in range(4))
    keep = ~np.isin(rows, np.fromiter(dead, dtype=np.int64, count=len(dead)))
    return rows[keep], hashes[keep], tf[keep], dl[keep]


def verify(dsn: str, agents: int, sample: int = 100) -> list[str]:
    """Differences between each namespace and a clean recomputation from its chunks.

    BM25 statistics equal to the chunks' own counts, one posting per distinct term of
    each chunk (none orphaned, each with its chunk's length; the segments decoded here),
    one vector per chunk. In this process: ``sample`` chunks per agent re-tokenised from their text,
    whose postings must be exactly the recomputed terms and counts.
    """
    problems: list[str] = []
    for i in range(agents):
        store = PostgresStore(dsn, agent_id=agent_name(i))
        try:
            with store.read() as r:
                ns = r.namespace_id
                docs, length, distinct = r.conn.execute(
                    "SELECT count(*), coalesce(sum(n_terms), 0),"
                    " coalesce(sum(octet_length(terms) / 8), 0)"
                    " FROM memmw.chunks WHERE namespace_id = %s AND source = ANY(%s)",
                    (ns, SOURCES),
                ).fetchone()
                p_rows, p_hashes, p_tf, p_dl = namespace_postings(r.conn, ns)
                lengths = dict(r.conn.execute(
                    "SELECT rowid, n_terms FROM memmw.chunks WHERE namespace_id = %s"
                    " AND source = ANY(%s)", (ns, SOURCES),
                ).fetchall())
                postings = len(p_rows)
                stray = sum(
                    1 for x, d in zip(p_rows.tolist(), p_dl.tolist(), strict=True)
                    if lengths.get(x) != d
                )
                stats = r.keyword_stats(SOURCES)
                vectors = r.vector_stats()
                picked = r.conn.execute(
                    "SELECT rowid, text FROM memmw.chunks WHERE namespace_id = %s"
                    " ORDER BY md5(rowid::text) LIMIT %s",
                    (ns, sample),
                ).fetchall()
                stored: dict[int, dict[int, int]] = {}
                wanted = {int(row) for row, _ in picked}
                for x, h, t in zip(p_rows.tolist(), p_hashes.tolist(), p_tf.tolist(), strict=True):
                    if x in wanted:
                        stored.setdefault(x, {})[h] = t
            name = agent_name(i)
            if stats != (int(docs), float(length)):
                problems.append(f"{name}: stats {stats}, chunks give {(docs, length)}")
            if postings != distinct or stray:
                problems.append(f"{name}: {postings} postings ({stray} stray), {distinct} expected")
            if vectors.pending or vectors.vectors != docs:
                problems.append(f"{name}: {vectors.vectors} vectors for {docs} chunks")
            for rowid, text in picked:
                hashes, tf, _ = term_counts(text)
                if stored.get(int(rowid), {}) != dict(zip(hashes.tolist(), tf.tolist(), strict=True)):
                    problems.append(f"{name}: chunk {rowid}'s postings differ from its text")
        finally:
            store.close()
    return problems


def sqlite_side(chunks: int, dims: int, n_queries: int, work: Path) -> dict[str, float]:
    """One agent of the same size in the SQLite store (this process, warm)."""
    from memmw import Memory, MemoryConfig
    from memmw.config import RemoteConfig

    ws = work / "ws-0"
    config = MemoryConfig(provider="fake", remote=RemoteConfig(dimensions=dims))
    queries = synthetic_queries(n_queries, 7)
    out: dict[str, float] = {}
    with Memory(workspace=ws, state_dir=work / "sqlite-state", config=config) as mem:
        started = time.perf_counter()
        mem.sync()
        out["index_s"] = time.perf_counter() - started
        mem.search(queries[0])  # warm: matrices built
        keyword_cfg = MemoryConfig(provider="none")
        hybrid = []
        for q in queries:
            t0 = time.perf_counter()
            mem.search(q)
            hybrid.append((time.perf_counter() - t0) * 1000)
    with Memory(workspace=ws, state_dir=work / "sqlite-kw", config=keyword_cfg) as kw:
        kw.sync()
        kw.search(queries[0])
        keyword = []
        for q in queries:
            t0 = time.perf_counter()
            kw.search(q)
            keyword.append((time.perf_counter() - t0) * 1000)
    out.update(
        keyword_p50=percentile(keyword, 0.5), keyword_p95=percentile(keyword, 0.95),
        hybrid_p50=percentile(hybrid, 0.5), hybrid_p95=percentile(hybrid, 0.95),
    )
    return out


def print_sqlite(side: dict[str, float]) -> None:
    print(f"SQLite, one agent of the same size (this process): index {side['index_s']:.1f} s;"
          f" keyword p50 {side['keyword_p50']:.1f} / p95 {side['keyword_p95']:.1f} ms;"
          f" hybrid p50 {side['hybrid_p50']:.1f} / p95 {side['hybrid_p95']:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", default=os.environ.get("MEMMW_STORE_DSN")
                        or os.environ.get("MEMMW_TEST_PG_DSN"))
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--chunks", type=int, default=25000, help="chunks per agent")
    parser.add_argument("--dims", type=int, default=384)
    parser.add_argument("--searchers", type=int, default=8)
    parser.add_argument("--syncers", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--sqlite-queries", type=int, default=100)
    parser.add_argument("--load-workers", type=int, default=2,
                        help="agents loaded at the same time (one process each)")
    parser.add_argument("--sqlite-only", action="store_true",
                        help="only the SQLite side (one agent of --chunks), no server needed")
    args = parser.parse_args()
    if args.sqlite_only:
        with tempfile.TemporaryDirectory(prefix="memmw-pg-bench-") as tmp:
            workspace_files(Path(tmp) / "ws-0", args.chunks, seed=1000)  # agent 0's notes
            print_sqlite(sqlite_side(args.chunks, args.dims, args.sqlite_queries, Path(tmp)))
        return
    if not args.dsn:
        parser.error("no DSN: pass --dsn or set MEMMW_STORE_DSN (see `make pg`)")

    # A fresh database for the run, dropped afterwards.
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    dbname = f"memmw_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
    dsn = make_conninfo(args.dsn, dbname=dbname)
    open_pool(dsn, max_size=1).close()  # migrate once
    try:
        with tempfile.TemporaryDirectory(prefix="memmw-pg-bench-") as tmp:
            work = Path(tmp)
            print(f"loading {args.agents} agents x ~{args.chunks} chunks, {args.dims}-d vectors")
            ctx = mp.get_context("spawn")
            jobs = [(dsn, i, args.chunks, args.dims, str(work)) for i in range(args.agents)]
            started = time.perf_counter()
            # Agents load side by side (each under its own writer lock), as separate hosts would.
            with ctx.Pool(args.load_workers) as loaders:
                loaded = loaders.map(_load_one, jobs, chunksize=1)
            wall = time.perf_counter() - started
            total_chunks = sum(n for n, _ in loaded)
            load_times = [s for _, s in loaded]
            print(f"  {total_chunks} chunks loaded in {wall:.1f} s wall, {args.load_workers}"
                  f" agents at a time ({total_chunks / wall:.0f} chunks/s; median"
                  f" {statistics.median(load_times):.1f} s per agent)", flush=True)

            out = ctx.Queue()
            procs = [
                ctx.Process(target=searcher,
                            args=(dsn, args.agents, args.dims, args.seconds, 100 + i, out))
                for i in range(args.searchers)
            ]
            agents = list(range(args.agents))
            procs += [
                ctx.Process(target=syncer,
                            args=(dsn, agents, args.dims, args.seconds, 200 + i, str(work), out))
                for i in range(args.syncers)
            ]
            print(f"{args.searchers} searching and {args.syncers} syncing processes"
                  f" for {args.seconds:.0f} s")
            for p in procs:
                p.start()
            results = [out.get(timeout=args.seconds + 300) for _ in procs]
            for p in procs:
                p.join(timeout=60)
            lat: dict[str, list[float]] = {"keyword": [], "vector": [], "hybrid": []}
            errors: list[str] = []
            syncs = busy = 0
            sync_ms: list[float] = []
            for r in results:
                errors += r["errors"]
                if "latency" in r:
                    for k, v in r["latency"].items():
                        lat[k] += v
                else:
                    syncs += r["syncs"]
                    busy += r["busy"]
                    sync_ms += r["sync_ms"]
            n = len(lat["hybrid"])
            print(f"  searches: {n} ({n / args.seconds:.1f}/s, each = keyword + vector + hybrid)")
            for k, v in lat.items():
                if v:
                    print(f"  {k:8s} p50 {percentile(v, 0.5):7.1f} ms   p95 {percentile(v, 0.95):7.1f} ms")
            sync_p50 = f"p50 {percentile(sync_ms, 0.5):.0f} ms" if sync_ms else "none finished"
            # Always printed: a slow machine may finish no sync in a short run.
            print(f"  syncs: {syncs} ({sync_p50}), busy waits {busy}, errors {len(errors)}")
            for e in errors[:5]:
                print(f"    error: {e}")
            problems = verify(dsn, args.agents)
            print(f"rows equal to a clean recomputation: {'yes' if not problems else problems[:5]}")
            print_sqlite(sqlite_side(args.chunks, args.dims, args.sqlite_queries, work))
    finally:
        with psycopg.connect(args.dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname))
            )


if __name__ == "__main__":
    main()
