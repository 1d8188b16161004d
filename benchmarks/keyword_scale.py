"""Keyword search at scale on both stores, side by side with another checkout, in one run.

Usage::

    python benchmarks/keyword_scale.py ../shared/benchmarks/locomo-dev --out /tmp/ks \\
        --code base=/tmp/memmw-base --code new=. --dsn "$MEMMW_STORE_DSN" \\
        --sqlite-chunks 142000 1420000 --pg-chunks 25000 --pg-big 250000

The workspaces are the LoCoMo daily notes of ``benchmarks/scale.py`` (runs of dialogue
turns, ~28.6 chunks a note; written to ``--out`` at run time, never into the repository)
and the queries a seeded sample of the LoCoMo questions. Every measurement runs in a child
process with ``PYTHONPATH=<checkout>`` through the public API (``Memory.sync`` and
``Memory.search``); the checkouts alternate at every step. Steps, per checkout:

1. SQLite, for each ``--sqlite-chunks``: a full index (``sync(force=True)``: seconds, max
   RSS), then a fresh process answering ``--queries`` keyword searches (p50 / p95 of each
   call, the process's max RSS). The ratio of the index times shows whether indexing
   grows faster than the chunk count. ``--fresh-runs N`` runs N fresh search processes
   per checkout, alternating between checkouts, and adds the p50 / p95 of each query's
   best and median time over them.
2. PostgreSQL (``--dsn``; a fresh database per checkout), ``--pg-chunks`` in one agent
   and the same workspace in SQLite: keyword, vector and hybrid p50 / p95 in one client
   (the deterministic ``fake`` embedder, so the vector leg costs the store's work only),
   each store in its own process; then ``--pg-big`` chunks in one agent, keyword only.
3. Concurrency at ``--pg-chunks``: ``--searchers`` processes searching (keyword) and
   ``--syncers`` processes appending a line to a note and syncing, for ``--seconds``, on
   each store: searches per second, p50 / p95, syncs, errors.
4. After step 3, each store's index is checked against a clean rebuild of the same files
   in a fresh state folder / namespace: the BM25 statistics, and for every query term the
   postings by chunk place (path, lines) with their tf and length; mismatches are counted.

It prints one table (a column per checkout, the ratio to the first) and writes every raw
figure to ``<out>/keyword_scale.json``. The machine's load average is recorded as each
child starts: on a shared machine, compare ratios within one run, not absolute numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import FILE_CHARS, SEED, generate_locomo, locomo_queries, percentile

ROOT = Path(__file__).resolve().parents[1]
#: Chunks per generated note (measured: 4,950 notes give 141,756 chunks).
CHUNKS_PER_NOTE = 28.64
AGENT = "bench-agent"


def summary(ms: list[float]) -> dict[str, float]:
    if not ms:
        return {}
    return {"p50": statistics.median(ms), "p95": percentile(ms, 0.95), "n": len(ms)}


# -- children ---------------------------------------------------------------------------


def _memory(
    spec: dict[str, Any], *, provider: str = "none", agent: str = AGENT, hybrid: bool = True
) -> Any:
    import memmw

    store = (
        memmw.StoreConfig(backend="postgres", dsn=spec["dsn"])
        if spec.get("dsn")
        else memmw.StoreConfig()
    )
    query = memmw.QueryConfig(hybrid=memmw.HybridConfig(enabled=hybrid))
    cfg = memmw.MemoryConfig(provider=provider, store=store, query=query)
    return memmw.Memory(
        workspace=spec["workspace"], state_dir=spec["state"], config=cfg,
        agent_id=spec.get("agent", agent),
    )


def _timed(mem: Any, queries: list[str], **kwargs: Any) -> list[float]:
    out = []
    for q in queries:
        t = time.perf_counter()
        mem.search(q, **kwargs)
        out.append((time.perf_counter() - t) * 1000)
    return out


#: Postings a full segment holds (``memmw.store.segments.SEGMENT_MAX``).
SEGMENT_FULL = 4096


def segment_layout(spec: dict[str, Any]) -> dict[str, float]:
    """The agent's keyword postings segments as stored, read straight from the tables (the
    same SQL for every checkout): how many, their mean size, how many are full, the mean
    size of those of terms with 5k-100k postings, and the terms with a short segment
    before their last one."""
    if spec.get("dsn"):
        import psycopg

        table = "memmw.postings_segments"
        where = (" WHERE namespace_id = (SELECT id FROM memmw.namespaces WHERE name = %s)",
                 (spec.get("agent", AGENT),))
        term = "term_hash"
        with psycopg.connect(spec["dsn"]) as conn:
            rows = [conn.execute(q.format(table=table, where=where[0], term=term),
                                 where[1]).fetchone() for q in _LAYOUT]
    else:
        import sqlite3

        db = Path(spec["state"]) / "memory" / f"{spec.get('agent', AGENT)}.sqlite"
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        rows = [conn.execute(q.format(table="postings", where="", term="term")).fetchone()
                for q in _LAYOUT]
        conn.close()
    (segs, postings, full), (mid_segs, mid_postings), (bad,) = (map(float, r) for r in rows)
    return {
        "segments": int(segs), "mean_n": postings / segs if segs else 0.0, "full": int(full),
        "mid_mean_n": mid_postings / mid_segs if mid_segs else 0.0,
        "terms_short_inside": int(bad),
    }


_LAYOUT = (
    f"SELECT count(*), coalesce(sum(n), 0), coalesce(sum(CASE WHEN n >= {SEGMENT_FULL}"
    " THEN 1 ELSE 0 END), 0) FROM {table}{where}",
    "SELECT coalesce(sum(c), 0), coalesce(sum(t), 0) FROM (SELECT count(*) AS c, sum(n) AS t"
    " FROM {table}{where} GROUP BY source, {term} HAVING sum(n) BETWEEN 5000 AND 100000) AS m",
    "SELECT count(*) FROM (SELECT 1 FROM {table}{where} GROUP BY source, {term} HAVING"
    f" min(CASE WHEN n < {SEGMENT_FULL} THEN seg END) < max(seg)) AS b",
)


def worker(spec_path: str) -> None:
    """One measurement (``spec["task"]``); prints ``RESULT <json>``."""
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    task = spec["task"]
    out: dict[str, Any] = {}
    if task == "index":
        with _memory(spec, provider=spec.get("provider", "none")) as mem:
            t = time.perf_counter()
            report = mem.sync(force=True)
            out["full_s"] = time.perf_counter() - t
            out["chunks"] = report.chunks_total
        out["segments"] = segment_layout(spec)
    elif task == "search":
        t = time.perf_counter()
        mem = _memory(spec, provider=spec.get("provider", "none"))
        out["open_ms"] = (time.perf_counter() - t) * 1000
        queries = spec["queries"]
        if spec.get("provider", "none") == "none":
            out["keyword_ms"] = _timed(mem, queries)
        else:
            out["hybrid_ms"] = _timed(mem, queries)
            # ``query.hybrid.enabled = false``: the vector leg alone (same index).
            with _memory(spec, provider=spec["provider"], hybrid=False) as vec:
                out["vector_ms"] = _timed(vec, queries)
        mem.close()
    elif task == "searcher":
        mem = _memory(spec)
        deadline = time.monotonic() + spec["seconds"]
        ms: list[float] = []
        errors = 0
        i = spec["seed"]
        while time.monotonic() < deadline:
            q = spec["queries"][i % len(spec["queries"])]
            i += 7
            t = time.perf_counter()
            try:
                mem.search(q)
            except Exception:  # counted: the target is none
                errors += 1
            ms.append((time.perf_counter() - t) * 1000)
        mem.close()
        out.update(ms=ms, errors=errors)
    elif task == "syncer":
        mem = _memory(spec)
        deadline = time.monotonic() + spec["seconds"]
        notes = sorted(Path(spec["workspace"], "memory").glob("*.md"))
        syncs = errors = 0
        i = spec["seed"]
        while time.monotonic() < deadline:
            note = notes[i % len(notes)]
            i += 13
            with note.open("a", encoding="utf-8") as fh:
                fh.write(f"- [D0:{i}] Bench: syncer {spec['seed']} wrote line {i} zeppelin.\n")
            try:
                mem.sync()
                syncs += 1
            except Exception:  # a busy writer lock or a failure: counted
                errors += 1
        mem.close()
        out.update(syncs=syncs, errors=errors)
    elif task == "check":
        out.update(_check(spec))
    else:
        raise SystemExit(f"unknown task {task!r}")
    usage = resource.getrusage(resource.RUSAGE_SELF)
    out["maxrss_mb"] = usage.ru_maxrss / 1024
    # CPU seconds of this process: on a shared machine steadier than wall time.
    out["cpu_s"] = usage.ru_utime + usage.ru_stime
    print("RESULT " + json.dumps(out), flush=True)


def _postings_by_place(mem: Any, hashes: list[int]) -> tuple[dict[Any, Any], tuple[int, float]]:
    with mem.store.read() as r:
        sources = list(mem.config.sources)
        found = r.postings(hashes, sources)
        stats = r.keyword_stats(sources)
        rowids = sorted({int(x) for p in found.values() for x in p.rowids.tolist()})
        rows = r.chunks(rowids)
        out = {}
        for h, p in found.items():
            out[h] = sorted(
                (rows[x].path, rows[x].start_line, rows[x].end_line, t, d)
                for x, t, d in zip(p.rowids.tolist(), p.tf.tolist(), p.doc_len.tolist(),
                                   strict=True)
            )
    return out, stats


def _check(spec: dict[str, Any]) -> dict[str, Any]:
    """The index against a clean rebuild of the same files (a fresh state / namespace)."""
    from memmw.store.terms import term_hash
    from memmw.text.analysis import query_terms

    hashes = sorted({term_hash(t) for q in spec["queries"] for t in query_terms(q)})
    try:  # the rows as stored, not what this process kept of them (its own edits aside)
        from memmw.store.cache import SEGMENTS

        SEGMENTS.clear()
    except ImportError:  # a checkout older than the cache
        pass
    with _memory(spec) as mem:
        mem.sync()
        live, live_stats = _postings_by_place(mem, hashes)
    clean_spec = dict(spec, state=spec["clean_state"])
    with _memory(dict(clean_spec, agent=AGENT + "-clean")) as clean:
        clean.sync(force=True)
        want, want_stats = _postings_by_place(clean, hashes)
    terms_differ = sum(1 for h in set(live) | set(want) if live.get(h) != want.get(h))
    return {
        "terms_checked": len(hashes),
        "terms_differ": terms_differ,
        "postings_checked": sum(len(v) for v in want.values()),
        "stats_equal": tuple(live_stats) == tuple(want_stats),
    }


# -- the parent -------------------------------------------------------------------------


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Harness:
    def __init__(self, args: argparse.Namespace, out: Path) -> None:
        self.args = args
        self.out = out
        self.n = 0

    def spawn(self, code: Path, spec: dict[str, Any]) -> subprocess.Popen[str]:
        self.n += 1
        path = self.out / f"spec-{self.n}.json"
        path.write_text(json.dumps(spec), encoding="utf-8")
        env = dict(os.environ, PYTHONPATH=str(code))
        return subprocess.Popen(
            [self.args.python, str(Path(__file__).resolve()), "--worker", str(path)],
            env=env, cwd=str(code), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )

    def collect(self, proc: subprocess.Popen[str]) -> dict[str, Any]:
        stdout, stderr = proc.communicate(timeout=self.args.timeout)
        for line in stdout.splitlines():
            if line.startswith("RESULT "):
                result: dict[str, Any] = json.loads(line[7:])
                return result
        return {"error": (stderr or stdout)[-2000:], "code": proc.returncode}

    def run(self, code: Path, spec: dict[str, Any]) -> dict[str, Any]:
        load = os.getloadavg()[0]
        t = time.perf_counter()
        result = self.collect(self.spawn(code, spec))
        result["wall_s"] = time.perf_counter() - t
        result["load"] = load
        return result


def workspace(out: Path, data: Path, chunks: int) -> Path:
    ws = out / f"ws-{chunks}"
    if not (ws / "memory").is_dir():
        generate_locomo(ws, data, max(1, round(chunks / CHUNKS_PER_NOTE)), FILE_CHARS, SEED)
    return ws


def fresh_database(dsn: str, name: str) -> str:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    base, _, _ = dsn.rpartition("/")
    return f"{base}/{name}"


def measure(args: argparse.Namespace, codes: dict[str, Path], out: Path) -> dict[str, Any]:
    h = Harness(args, out)
    data = Path(args.data)
    queries = locomo_queries(data, args.queries, args.seed)
    report: dict[str, Any] = {"codes": {k: str(v) for k, v in codes.items()}, "sqlite": {},
                              "postgres": {}, "concurrent": {}, "check": {}}
    # 1. SQLite at each size: every checkout's index, then --fresh-runs rounds of one fresh
    # search process per checkout, alternating.
    for chunks in args.sqlite_chunks:
        ws = workspace(out, data, chunks)
        specs: dict[str, dict[str, Any]] = {}
        for name, code in codes.items():
            state = out / f"sqlite-{chunks}-{name}"
            shutil.rmtree(state, ignore_errors=True)
            specs[name] = {"workspace": str(ws), "state": str(state)}
            log(f"sqlite {chunks}: index ({name})")
            idx = h.run(code, dict(specs[name], task="index"))
            report["sqlite"].setdefault(str(chunks), {})[name] = {"index": idx}
        for run in range(args.fresh_runs):
            for name, code in codes.items():
                log(f"sqlite {chunks}: fresh search ({name}, {run + 1} of {args.fresh_runs})")
                srch = h.run(code, dict(specs[name], task="search", queries=queries))
                entry = report["sqlite"][str(chunks)][name]
                entry.setdefault("search", srch)
                entry.setdefault("search_runs", []).append(srch.get("keyword_ms", []))
        if not args.keep:
            for spec in specs.values():
                shutil.rmtree(spec["state"], ignore_errors=True)
    # 2. PostgreSQL against SQLite at --pg-chunks (keyword, vector, hybrid), and --pg-big.
    if args.dsn:
        dsns = {name: fresh_database(args.dsn, f"memmw_ks_{name}") for name in codes}
        ws = workspace(out, data, args.pg_chunks)
        for name, code in codes.items():
            for store in ("sqlite", "postgres"):
                key = f"{store}-{args.pg_chunks}"
                # Keyword-only index of a copy of the workspace (the syncers append to it).
                wsc = out / f"ws-concurrent-{store}-{name}"
                shutil.rmtree(wsc, ignore_errors=True)
                shutil.copytree(ws, wsc)
                spec = {"workspace": str(wsc), "state": str(out / f"{store}-concurrent-{name}"),
                        "dsn": dsns[name] if store == "postgres" else None}
                log(f"{store} {args.pg_chunks}: index ({name})")
                idx = h.run(code, dict(spec, task="index"))
                log(f"{store} {args.pg_chunks}: one client, keyword ({name})")
                srch = h.run(code, dict(spec, task="search", queries=queries))
                log(f"{store}: {args.searchers} searchers + {args.syncers} syncers ({name})")
                procs = [h.spawn(code, dict(spec, task="searcher", seconds=args.seconds,
                                            seed=i, queries=queries))
                         for i in range(args.searchers)]
                procs += [h.spawn(code, dict(spec, task="syncer", seconds=args.seconds, seed=i))
                          for i in range(args.syncers)]
                results = [h.collect(p) for p in procs]
                ms = [x for r in results[: args.searchers] for x in r.get("ms", [])]
                report["concurrent"].setdefault(store, {})[name] = {
                    "searches_per_s": len(ms) / args.seconds,
                    "latency": summary(ms),
                    "search_errors": sum(r.get("errors", 0) for r in results[: args.searchers]),
                    "syncs": sum(r.get("syncs", 0) for r in results[args.searchers :]),
                    "sync_errors": sum(r.get("errors", 0) for r in results[args.searchers :]),
                    "failed_children": [r["error"] for r in results if "error" in r],
                }
                log(f"{store}: check against a clean rebuild ({name})")
                report["check"].setdefault(store, {})[name] = h.run(code, dict(
                    spec, task="check", queries=queries,
                    clean_state=str(out / f"{store}-clean-{name}")))
                # Vectors (the fake embedder) for the vector and hybrid legs.
                vspec = {"workspace": str(ws), "state": str(out / f"{store}-vec-{name}"),
                         "provider": "fake", "dsn": spec["dsn"], "agent": AGENT + "-vec"}
                if args.vectors:
                    log(f"{store} {args.pg_chunks} with vectors: index ({name})")
                    h.run(code, dict(vspec, task="index"))
                    log(f"{store} {args.pg_chunks}: one client, vector and hybrid ({name})")
                    vsrch = h.run(code, dict(vspec, task="search", queries=queries))
                    srch.update({k: v for k, v in vsrch.items() if k.endswith("_ms")})
                report["postgres"].setdefault(key, {})[name] = {"index": idx, "search": srch}
        if args.pg_big:
            wsb = workspace(out, data, args.pg_big)
            for name, code in codes.items():
                spec = {"workspace": str(wsb), "state": str(out / f"pg-big-{name}"),
                        "dsn": dsns[name], "agent": AGENT + "-big"}
                log(f"postgres {args.pg_big}: index ({name})")
                idx = h.run(code, dict(spec, task="index"))
                log(f"postgres {args.pg_big}: one client ({name})")
                srch = h.run(code, dict(spec, task="search", queries=queries))
                report["postgres"].setdefault(f"postgres-{args.pg_big}", {})[name] = {
                    "index": idx, "search": srch}
    return report


def table(report: dict[str, Any]) -> str:
    names = list(report["codes"])
    lines = ["| measure | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]

    def row(label: str, values: list[float | None], fmt: str = "{:.1f}") -> None:
        first = values[0]
        cells = []
        for v in values:
            if v is None:
                cells.append("-")
                continue
            ratio = f" ({v / first:.2f}x)" if first and v is not first else ""
            cells.append(fmt.format(v) + ratio)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")

    def get(d: dict[str, Any], *path: str) -> float | None:
        for key in path:
            if not isinstance(d, dict) or key not in d:
                return None
            d = d[key]
        return d if isinstance(d, (int, float)) else None

    def layout_rows(label: str, per: dict[str, Any]) -> None:
        for key, what, fmt in (("segments", "segments", "{:.0f}"),
                               ("mean_n", "postings a segment", "{:.0f}"),
                               ("full", "full segments", "{:.0f}"),
                               ("mid_mean_n", "postings a segment, 5k-100k terms", "{:.0f}"),
                               ("terms_short_inside", "terms short before last", "{:.0f}")):
            row(f"{label}: {what}", [get(per, n, "index", "segments", key) for n in names], fmt)

    for chunks, per in report["sqlite"].items():
        row(f"sqlite {chunks}: chunks", [get(per, n, "index", "chunks") for n in names], "{:.0f}")
        row(f"sqlite {chunks}: full index s", [get(per, n, "index", "full_s") for n in names])
        row(f"sqlite {chunks}: index CPU s", [get(per, n, "index", "cpu_s") for n in names])
        row(f"sqlite {chunks}: index RSS MB", [get(per, n, "index", "maxrss_mb") for n in names])
        layout_rows(f"sqlite {chunks}", per)
        for q in ("p50", "p95"):
            row(f"sqlite {chunks}: fresh keyword {q} ms",
                [get(per, n, "search", "keyword", q) for n in names], "{:.2f}")
        for kind in ("best", "median"):
            for q in ("p50", "p95"):
                values = [get(per, n, "search", f"keyword_{kind}", q) for n in names]
                if any(v is not None for v in values):  # --fresh-runs 2 or more
                    row(f"sqlite {chunks}: fresh keyword {q} ms, each query's {kind} of its"
                        " runs", values, "{:.2f}")
        row(f"sqlite {chunks}: search RSS MB", [get(per, n, "search", "maxrss_mb") for n in names])
    for key, per in report["postgres"].items():
        row(f"{key}: full index s", [get(per, n, "index", "full_s") for n in names])
        layout_rows(key, per)
        for leg in ("keyword", "vector", "hybrid"):
            for q in ("p50", "p95"):
                row(f"{key}: {leg} {q} ms", [get(per, n, "search", leg, q) for n in names],
                    "{:.2f}")
    for store, per in report["concurrent"].items():
        row(f"8+2 {store}: searches/s", [get(per, n, "searches_per_s") for n in names])
        for q in ("p50", "p95"):
            row(f"8+2 {store}: keyword {q} ms", [get(per, n, "latency", q) for n in names],
                "{:.2f}")
        row(f"8+2 {store}: syncs", [get(per, n, "syncs") for n in names], "{:.0f}")
        row(f"8+2 {store}: errors", [
            (get(per, n, "search_errors") or 0) + (get(per, n, "sync_errors") or 0)
            for n in names], "{:.0f}")
    for store, per in report["check"].items():
        row(f"{store}: terms differing from a clean rebuild",
            [get(per, n, "terms_differ") for n in names], "{:.0f}")
    return "\n".join(lines)


def _summaries(report: dict[str, Any]) -> None:
    """Add the summaries of the raw millisecond lists of searches (kept raw too); with
    several fresh runs (``--fresh-runs``), also of each query's best and median time over
    them: on a shared machine the best is the code's cost, the median what a run sees."""
    for section in ("sqlite", "postgres"):
        for per in report[section].values():
            for res in per.values():
                srch = res.get("search", {})
                for leg in ("keyword", "vector", "hybrid"):
                    if f"{leg}_ms" in srch:
                        srch[leg] = summary(srch[f"{leg}_ms"])
                runs = [r for r in res.get("search_runs", []) if r]
                if len(runs) > 1 and len({len(r) for r in runs}) == 1:
                    per_query = list(zip(*runs, strict=True))
                    srch["keyword_best"] = summary([min(q) for q in per_query])
                    srch["keyword_median"] = summary([statistics.median(q) for q in per_query])


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) == 3 and sys.argv[1] == "--worker":
        worker(sys.argv[2])
        return 0
    if argv is None and len(sys.argv) == 3 and sys.argv[1] == "--table":
        report = json.loads(Path(sys.argv[2]).read_text(encoding="utf-8"))
        print(table(report))
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], epilog=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("data", help="the LoCoMo dev folder (../shared/benchmarks/locomo-dev)")
    parser.add_argument("--code", action="append", default=[],
                        help="name=checkout (repeatable; default: this checkout as 'here')")
    parser.add_argument("--sqlite-chunks", type=int, nargs="*", default=[142_000])
    parser.add_argument("--dsn", default=os.environ.get("MEMMW_STORE_DSN"),
                        help="PostgreSQL server (a database per checkout is created)")
    parser.add_argument("--pg-chunks", type=int, default=25_000)
    parser.add_argument("--pg-big", type=int, default=0, help="chunks of the one big agent")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--vectors", action="store_true",
                        help="also index with the fake embedder: vector and hybrid legs")
    parser.add_argument("--searchers", type=int, default=8)
    parser.add_argument("--syncers", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--out", required=True, help="work folder")
    parser.add_argument("--fresh-runs", type=int, default=1,
                        help="fresh search processes per checkout and SQLite size, alternating"
                             " (every checkout's index is kept on disk meanwhile)")
    parser.add_argument("--keep", action="store_true", help="keep the SQLite indexes")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--timeout", type=float, default=7200)
    args = parser.parse_args(argv)
    codes = {}
    for spec in args.code or ["here=."]:
        name, _, path = spec.partition("=")
        codes[name] = Path(path).resolve()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = measure(args, codes, out)
    _summaries(report)
    (out / "keyword_scale.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(table(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
