"""Freshness benchmark: the "Always fresh" done-when figures.

Usage::

    python benchmarks/freshness.py [--only latency,burst,idle,soak,kill] [--quick] [--json OUT]

Measures, keyword-only (``provider="none"``) with the default sync settings
(``watch_debounce_ms=1500``):

* ``latency``: a new line appended to ``memory/<today>.md`` until ``Memory.search`` finds
  it, with a watching ``Memory`` and no explicit sync; median/p95/max over 20 trials.
* ``burst``: 1,000 writes spread over 10 s; the number of syncs they caused, and whether
  the final index equals a fresh full rebuild (files and chunks compared).
* ``idle``: process CPU (``time.process_time`` and ``getrusage``) of a watching
  ``Memory`` over 60 s with nothing changing, on a generated 10k-chunk workspace.
* ``soak``: 60 s of two processes: a writer that writes files and syncs in a loop, and
  the CLI (``memmw index``, ``memmw search``, ``memmw index --force``) in a loop; errors,
  lost files, ``PRAGMA integrity_check`` and equality with a fresh rebuild.
* ``kill``: a writer killed with SIGKILL at random points of incremental and forced syncs;
  the next open must read the old generation, and its sync must repair the index.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import resource
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from memmw import Memory, MemoryConfig  # noqa: E402
from memmw.store.sqlite.sync import Indexer  # noqa: E402

CONFIG = MemoryConfig(provider="none")
ENV = {**os.environ, "MEMMW_PROVIDER": "none"}


# -- helpers -----------------------------------------------------------------------------


def fingerprint(db: Path) -> tuple[list[Any], list[Any]]:
    """Files and chunks of an index, comparable across databases."""
    conn = sqlite3.connect(db)
    try:
        files = conn.execute("SELECT path, source, hash, size FROM files ORDER BY 1, 2").fetchall()
        chunks = conn.execute(
            "SELECT path, source, start_line, end_line, hash FROM chunks ORDER BY 1, 2, 3, 4, 5"
        ).fetchall()
    finally:
        conn.close()
    return files, chunks


def equals_fresh_rebuild(db: Path, ws: Path, scratch: Path) -> bool:
    fresh = scratch / f"fresh-{uuid.uuid4().hex[:8]}.sqlite"
    Indexer(db_path=fresh, workspace=ws, config=CONFIG).sync(force=True)
    return fingerprint(db) == fingerprint(fresh)


def integrity(db: Path) -> str:
    conn = sqlite3.connect(db)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


def small_workspace(root: Path) -> Path:
    ws = root / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("- The gateway runs on port 8080.\n", encoding="utf-8")
    for i in range(10):
        (ws / "memory" / f"2026-01-{i + 1:02d}.md").write_text(
            "".join(f"Day {i} note {j}: routine entry.\n" for j in range(40)), encoding="utf-8"
        )
    return ws


def wait_until(pred: Any, timeout: float, step: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return bool(pred())


def background_syncs(mem: Memory) -> int:
    return int(mem.status().to_dict()["sync"]["backgroundSyncs"])


def settle(mem: Memory, timeout: float = 30.0) -> None:
    """Wait until the watcher has nothing pending and no sync runs or is queued."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        watcher = mem.status().to_dict()["watcher"]
        if not watcher.get("pending") and not mem.dirty and mem.wait_for_sync(1):
            time.sleep(0.3)
            if not mem.status().to_dict()["watcher"].get("pending") and not mem.dirty:
                return
        time.sleep(0.1)


# -- measurements --------------------------------------------------------------------------


def bench_latency(tmp: Path, trials: int) -> dict[str, Any]:
    ws = small_workspace(tmp)
    today = ws / "memory" / f"{dt.date.today().isoformat()}.md"
    latencies: list[float] = []
    with Memory(ws, tmp / "state", config=CONFIG, watch=True) as mem:
        mem.sync()
        for i in range(trials):
            token = f"freshtoken{i}x{uuid.uuid4().hex[:6]}"
            started = time.perf_counter()
            with today.open("a", encoding="utf-8") as fh:
                fh.write(f"- {token} was written at trial {i}\n")
            found = wait_until(lambda t=token: bool(mem.search(t)), timeout=15)
            latencies.append(time.perf_counter() - started if found else float("inf"))
            time.sleep(0.2)
        state = mem.watcher_state
    ordered = sorted(latencies)
    return {
        "trials": trials,
        "watcher": state,
        "median_s": round(statistics.median(latencies), 3),
        "p95_s": round(ordered[max(0, round(0.95 * len(ordered)) - 1)], 3),
        "max_s": round(max(latencies), 3),
        "min_s": round(min(latencies), 3),
        "pass_median_under_3s": statistics.median(latencies) < 3.0,
    }


def bench_burst(tmp: Path, writes: int, seconds: float) -> dict[str, Any]:
    ws = small_workspace(tmp)
    with Memory(ws, tmp / "state", config=CONFIG, watch=True) as mem:
        mem.sync()
        before = background_syncs(mem)
        rnd = random.Random(7)
        started = time.perf_counter()
        for i in range(writes):
            target = ws / "memory" / f"burst-{rnd.randrange(40):02d}.md"
            with target.open("a", encoding="utf-8") as fh:
                fh.write(f"burst write {i} lorem {rnd.random():.6f}\n")
            delay = started + (i + 1) * seconds / writes - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
        wrote_in = time.perf_counter() - started
        settle(mem)
        syncs = background_syncs(mem) - before
        status = mem.status().to_dict()
        same = equals_fresh_rebuild(mem.db_path, ws, tmp)
    return {
        "writes": writes,
        "write_seconds": round(wrote_in, 2),
        "syncs": syncs,
        "watcher_batches": status["watcher"]["batches"],
        "watcher_events": status["watcher"]["events"],
        "final_equals_fresh_rebuild": same,
    }


def bench_idle(tmp: Path, seconds: float, chunks: int) -> dict[str, Any]:
    import scale  # benchmarks/scale.py: the shared synthetic workspace generator

    ws = tmp / "big"
    ws.mkdir()
    scale.generate(ws, chunks)
    dirs = sum(1 for _ in (ws / "memory").rglob("*") if _.is_dir()) + 1
    with Memory(ws, tmp / "state", config=CONFIG) as mem:
        report = mem.sync()
        state = mem.start_watching()
        time.sleep(2.0)  # let start-up settle
        cpu0 = time.process_time()
        ru0 = resource.getrusage(resource.RUSAGE_SELF)
        wall0 = time.perf_counter()
        time.sleep(seconds)
        wall = time.perf_counter() - wall0
        cpu = time.process_time() - cpu0
        ru1 = resource.getrusage(resource.RUSAGE_SELF)
        syncs = background_syncs(mem)
    ru_cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    return {
        "chunks": report.chunks_total,
        "files": report.files_added,
        "watched_dirs": dirs,
        "watcher": state,
        "seconds": round(wall, 1),
        "cpu_seconds": round(cpu, 4),
        "cpu_percent_of_one_core": round(100 * cpu / wall, 3),
        "rusage_cpu_percent": round(100 * ru_cpu / wall, 3),
        "syncs_while_idle": syncs,
        "pass_under_1pct": 100 * cpu / wall < 1.0,
    }


_WRITER = textwrap.dedent(
    """
    import random, sys, time
    from memmw import Memory, MemoryConfig
    ws, state, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    mem = Memory(ws, state, config=MemoryConfig(provider="none"))
    rnd = random.Random(1)
    end = time.monotonic() + seconds
    i = syncs = errors = 0
    while time.monotonic() < end:
        with open(f"{ws}/memory/soak-{i:05d}.md", "w") as fh:
            fh.write(f"soak file {i} marker soak{i}z\\n" * rnd.randint(1, 40))
        if i and i % 5 == 0:  # rewrite an older one too
            with open(f"{ws}/memory/soak-{rnd.randrange(i):05d}.md", "a") as fh:
                fh.write("appended later\\n")
        try:
            mem.sync()
            syncs += 1
        except Exception as exc:
            errors += 1
            print("ERROR", type(exc).__name__, exc, file=sys.stderr, flush=True)
        i += 1
    mem.close()
    print(i, syncs, errors)
    """
)


def bench_soak(tmp: Path, seconds: float) -> dict[str, Any]:
    import scale

    ws = tmp / "soak"
    ws.mkdir()
    scale.generate(ws, 1000)
    state = tmp / "state"
    with Memory(ws, state, config=CONFIG) as mem:
        mem.sync()
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(ws), str(state), str(seconds)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=ENV,
    )
    base = [sys.executable, "-m", "memmw", "-w", str(ws), "--state-dir", str(state)]
    cli_runs = 0
    cli_errors: list[str] = []
    searches_empty: list[str] = []
    rnd = random.Random(3)
    wait_until(lambda: (ws / "memory" / "soak-00000.md").exists(), timeout=30)
    while writer.poll() is None:
        op = rnd.choice([["index"], ["search", "soak file marker"], ["search", "gateway outage"],
                         ["index", "--force"], ["status", "--json"]])
        r = subprocess.run(base + op, capture_output=True, text=True, cwd=ROOT, env=ENV)
        cli_runs += 1
        if r.returncode != 0:
            cli_errors.append(f"{' '.join(op)}: {r.stderr.strip()[:200]}")
        elif op[0] == "search" and "No matches" in r.stdout:
            searches_empty.append(op[1])
    out, err = writer.communicate()
    files, syncs, writer_errors = (int(x) for x in out.split())
    with Memory(ws, state, config=CONFIG) as mem:
        mem.sync()
        indexed = {row[0] for row in fingerprint(mem.db_path)[0]}
    lost = [f"memory/soak-{i:05d}.md" for i in range(files)
            if f"memory/soak-{i:05d}.md" not in indexed]
    db = state / "memory" / "main.sqlite"
    return {
        "seconds": seconds,
        "writer_files": files,
        "writer_syncs": syncs,
        "writer_errors": writer_errors + err.count("ERROR"),
        "cli_runs": cli_runs,
        "cli_errors": cli_errors[:5],
        "cli_error_count": len(cli_errors),
        "searches_without_hits": searches_empty,
        "lost_files": len(lost),
        "integrity": integrity(db),
        "final_equals_fresh_rebuild": equals_fresh_rebuild(db, ws, tmp),
        "orphan_tmp_files": len(list(db.parent.glob("*.tmp-*"))),
    }


_VICTIM = textwrap.dedent(
    """
    import sys
    from memmw import Memory, MemoryConfig
    ws, state, force = sys.argv[1], sys.argv[2], sys.argv[3] == "force"
    mem = Memory(ws, state, config=MemoryConfig(provider="none"))
    i = 0
    while True:
        for k in range(20):
            with open(f"{ws}/memory/victim-{(i * 20 + k) % 60:02d}.md", "w") as fh:
                fh.write(f"victim round {i} file {k}\\n" * 300)
        print("start", flush=True)
        mem.sync(force=force)
        print("end", flush=True)
        i += 1
    """
)


def bench_kill(tmp: Path, trials: int) -> dict[str, Any]:
    import scale

    ws = tmp / "kill"
    ws.mkdir()
    scale.generate(ws, 3000)
    state = tmp / "state"
    db = state / "memory" / "main.sqlite"
    with Memory(ws, state, config=CONFIG) as mem:
        mem.sync()
    rnd = random.Random(11)
    results: list[dict[str, Any]] = []
    for trial in range(trials):
        mode = "force" if trial % 2 else "incremental"
        proc = subprocess.Popen(
            [sys.executable, "-c", _VICTIM, str(ws), str(state), mode],
            stdout=subprocess.PIPE, text=True, cwd=ROOT, env=ENV,
        )
        assert proc.stdout is not None
        # Time one whole sync, then kill the next one at a random point inside it.
        assert proc.stdout.readline().strip() == "start"
        t0 = time.perf_counter()
        assert proc.stdout.readline().strip() == "end"
        duration = time.perf_counter() - t0
        assert proc.stdout.readline().strip() == "start"
        time.sleep(rnd.uniform(0.05, 0.95) * duration)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        tail = proc.stdout.read().split()
        proc.stdout.close()
        mid_sync = "end" not in tail
        ok_integrity = integrity(db) == "ok"
        with Memory(ws, state, config=CONFIG) as mem:
            readable = bool(mem.search("victim round"))
            report = mem.sync()
            repaired = equals_fresh_rebuild(db, ws, tmp)
        results.append({
            "mode": mode, "sync_seconds": round(duration, 3), "killed_mid_sync": mid_sync, "integrity_ok": ok_integrity,
            "readable_before_repair": readable, "repaired": repaired,
            "repair_sync": "full" if report.full_rebuild else "incremental",
            "orphans_left": len(list(db.parent.glob("*.tmp-*"))),
        })
    return {
        "trials": trials,
        "killed_mid_sync": sum(r["killed_mid_sync"] for r in results),
        "all_integrity_ok": all(r["integrity_ok"] for r in results),
        "all_readable_before_repair": all(r["readable_before_repair"] for r in results),
        "all_repaired": all(r["repaired"] for r in results),
        "orphans_left": sum(r["orphans_left"] for r in results),
        "details": results,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="latency,burst,idle,soak,kill")
    parser.add_argument("--quick", action="store_true", help="shorter runs (not the figures)")
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args(argv)
    wanted = set(args.only.split(","))
    q = args.quick
    results: dict[str, Any] = {}
    runs = {
        "latency": lambda t: bench_latency(t, 5 if q else 20),
        "burst": lambda t: bench_burst(t, 200 if q else 1000, 2.0 if q else 10.0),
        "idle": lambda t: bench_idle(t, 10.0 if q else 60.0, 10_000),
        "soak": lambda t: bench_soak(t, 10.0 if q else 60.0),
        "kill": lambda t: bench_kill(t, 4 if q else 10),
    }
    for name, run in runs.items():
        if name not in wanted:
            continue
        with tempfile.TemporaryDirectory(prefix=f"memmw-fresh-{name}-") as tmp:
            started = time.perf_counter()
            results[name] = run(Path(tmp))
            results[name]["bench_seconds"] = round(time.perf_counter() - started, 1)
        print(f"{name}: {json.dumps(results[name], default=str)}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
