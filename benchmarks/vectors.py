"""Vector and hybrid search latency at scale, side by side with a plain numpy scan.

Usage::

    python benchmarks/vectors.py --sizes 10000,100000 --dims 384 --queries 100

For each size it generates the synthetic workspace of ``benchmarks/scale.py``, indexes it
with the deterministic fake provider (``memmw.testing``; embedding 100k chunks with the
offline model takes hours here), then times, in one run and on the same queries:

* ``numpy``: a plain brute-force scan (matrix @ query, argpartition) over the same vectors;
* ``memmw vector leg``: ``VectorMatrix.search`` as search uses it, and its ratio to numpy;
* ``sqlite-vec``: ``MATCH ... AND k = ?`` on a vec0 table, when the extension loads;
* ``hybrid``: ``Memory.search`` end to end, excluding the query embedding (query vectors
  are computed before timing), and keyword-only ``Memory.search`` for reference;
* ``load``: what a fresh process pays before its first vector search, reading the matrix
  on a new connection from the vector blocks (``vector_matrix``) and, side by side,
  row by row from ``chunk_vectors`` as before the blocks (medians of 5, interleaved).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import CHUNKS_PER_FILE, SEED, generate_synthetic, percentile, synthetic_queries

from memmw import Memory, MemoryConfig, StoreConfig
from memmw.config import RemoteConfig
from memmw.store.sqlite.db import connect
from memmw.store.sqlite.sqlitevec import SqliteVecIndex, sqlite_vec_status
from memmw.store.sqlite.store import IndexStore
from memmw.store.vectors import VectorMatrix


def timed(fn, runs: list) -> list[float]:  # type: ignore[no-untyped-def,type-arg]
    out = []
    for arg in runs:
        started = time.perf_counter()
        fn(arg)
        out.append((time.perf_counter() - started) * 1000)
    return out


def run_size(size: int, dims: int, n_queries: int, work: Path) -> dict[str, float | str]:
    ws = work / f"ws-{size}"
    if not ws.exists():
        generate_synthetic(ws, max(1, size // CHUNKS_PER_FILE), SEED)
    state = work / f"state-{size}-{dims}"
    config = MemoryConfig(provider="fake", remote=RemoteConfig(dimensions=dims))
    result: dict[str, float | str] = {"size": size, "dims": dims}
    with Memory(workspace=ws, state_dir=state, config=config) as mem:
        started = time.perf_counter()
        report = mem.sync()
        result["index_s"] = round(time.perf_counter() - started, 1)
        result["chunks"] = report.chunks_total
        provider = mem.provider
        assert provider is not None
        queries = synthetic_queries(n_queries, SEED + 1)
        qvecs = {q: np.asarray(provider.embed_query(q), dtype=np.float32) for q in queries}
        units = [v / np.linalg.norm(v) for v in qvecs.values()]
        mem.prepare()  # load the keyword and vector matrices once

        with mem.store.read() as reader:
            matrix = VectorMatrix(reader.vector_rows(("memory",)), dims)
        plain = np.array(matrix.matrix, copy=True)
        result["vectors"] = len(matrix)

        def numpy_scan(q: np.ndarray) -> None:
            sims = plain @ q
            top = np.argpartition(-sims, 23)[:24]
            top[np.argsort(-sims[top])]

        # Interleave the two so machine load affects both alike.
        t_numpy: list[float] = []
        t_leg: list[float] = []
        for q in units:
            t_numpy += timed(numpy_scan, [q])
            t_leg += timed(lambda u: matrix.search(u, 24), [q])
        result["numpy_p50_ms"] = round(statistics.median(t_numpy), 2)
        result["leg_p50_ms"] = round(statistics.median(t_leg), 2)
        result["leg_vs_numpy"] = round(statistics.median(t_leg) / statistics.median(t_numpy), 2)

        loadable, why = sqlite_vec_status()
        if loadable:
            vec0 = SqliteVecIndex(mem.db_path, mem._indexer.lock_path)  # the SQLite store's own
            started = time.perf_counter()
            vec0.refresh(dims)
            result["vec0_build_s"] = round(time.perf_counter() - started, 1)
            t_vec0 = timed(lambda u: vec0.search(u, 24), units)
            result["vec0_p50_ms"] = round(statistics.median(t_vec0), 2)
            vec0.close()
        else:
            result["vec0_p50_ms"] = f"n/a ({why})"

        load_rows: list[float] = []
        load_blocks: list[float] = []
        for _ in range(5):
            for way, into in (("rows", load_rows), ("blocks", load_blocks)):
                conn = connect(mem.db_path, readonly=True)  # a new connection: a cold cache
                try:
                    fresh = IndexStore(conn, fts=False)
                    started = time.perf_counter()
                    if way == "rows":
                        got = VectorMatrix(fresh.vector_rows(("memory",)), dims)
                    else:
                        got = fresh.vector_matrix(("memory",), dims)
                    into.append((time.perf_counter() - started) * 1000)
                    assert got.rowids.tolist() == matrix.rowids.tolist()
                finally:
                    conn.close()
        result["load_rows_ms"] = round(statistics.median(load_rows), 1)
        result["load_blocks_ms"] = round(statistics.median(load_blocks), 1)

        provider.embed_query = lambda text: qvecs[text]  # type: ignore[method-assign]
        t_hybrid = timed(mem.search, queries)
        result["hybrid_p50_ms"] = round(statistics.median(t_hybrid), 2)
        result["hybrid_p95_ms"] = round(percentile(t_hybrid, 0.95), 2)
    keyword = MemoryConfig(provider="none", store=StoreConfig())
    with Memory(workspace=ws, state_dir=work / f"state-{size}-kw", config=keyword) as kw:
        kw.sync()
        kw.prepare()
        t_kw = timed(kw.search, queries)
        result["keyword_p50_ms"] = round(statistics.median(t_kw), 2)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--dims", type=int, default=384)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--out", help="work folder (kept; default a temporary folder)")
    args = parser.parse_args()
    work = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="memmw-vectors-"))
    work.mkdir(parents=True, exist_ok=True)
    for size in (int(s) for s in args.sizes.split(",")):
        print(run_size(size, args.dims, args.queries, work), flush=True)


if __name__ == "__main__":
    main()
