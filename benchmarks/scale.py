"""Scale benchmark: index and keyword-search synthetic workspaces of 1k to 100k chunks.

Usage::

    python benchmarks/scale.py --sizes 1000,10000 --queries 200 --out /tmp/memmw-scale

For each size it generates a workspace of dated daily notes (``memory/YYYY-MM-DD.md``)
plus a ``MEMORY.md`` from a seeded vocabulary, then reports: the full index time
(``Memory.sync(force=True)`` on a fresh state dir), the incremental sync time after one
file changes (and its ratio to the full time), the first search of a fresh process and
the time until the keyword matrix is ready, the first search after an incremental sync,
keyword search p50/p95 over N queries with the in-process backend, the same p50 with
``StoreConfig(keyword_backend="fts5")``, and the database size. Keyword-only throughout
(``MemoryConfig(provider="none")``); timings are ``time.perf_counter`` medians.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memmw import Memory, MemoryConfig, StoreConfig

SEED = 20260101
#: One chunk holds ~1600 weighted chars; a daily file of ~4 chunks is ~6 KB of notes.
CHUNKS_PER_FILE = 4

SUBJECTS = (
    "Alice Bob Carol Dana Erik Fatima Grace Hiro Ines Jonas Kenji Lena Mateo Nadia Omar "
    "Priya Quinn Rosa Sven Tariq Uma Viktor Wen Yara Zoe"
).split()
TOPICS = (
    "kubernetes migration, gateway outage, backup rotation, quarterly budget, invoice dispute, "
    "dentist appointment, flight to Lisbon, hotel in Kyoto, birthday party, piano lessons, "
    "garden irrigation, tomato seedlings, database upgrade, security audit, VPN certificate, "
    "marathon training, sourdough starter, car insurance, tax return, apartment lease, "
    "conference talk, hiring pipeline, onboarding checklist, release notes, API rate limits, "
    "search relevance, embedding cache, sprint retro, design review, customer escalation, "
    "wedding planning, school pickup, veterinarian visit, solar panels, heat pump quote, "
    "grocery list, book club, chess tournament, photography workshop, camping trip"
).split(", ")
VERBS = (
    "discussed reviewed postponed approved rejected scheduled fixed broke migrated "
    "documented planned cancelled booked renewed tested measured reported escalated"
).split()
DETAILS = (
    "because the previous attempt failed on Tuesday",
    "after a long call with the vendor",
    "pending confirmation from finance",
    "with a follow-up next week",
    "and the numbers looked better than expected",
    "although nobody wrote down the final decision",
    "so the reminder moves to Friday morning",
    "while the staging cluster was still down",
    "using the checklist from last quarter",
    "which should save about two hours per week",
)
FILLER = (
    "the a of to and in on for with at by from about into over after before under "
    "again quickly carefully finally also maybe probably definitely"
).split()


def sentence(rnd: random.Random) -> str:
    words = [
        rnd.choice(SUBJECTS),
        rnd.choice(VERBS),
        "the",
        rnd.choice(TOPICS),
        rnd.choice(DETAILS),
    ]
    words += rnd.choices(FILLER, k=rnd.randint(2, 6))
    words.append(f"ref-{rnd.randint(1000, 99999)}")
    return " ".join(words) + "."


def daily_note(rnd: random.Random, day: dt.date, target_chars: int) -> str:
    lines = [f"# {day.isoformat()}", ""]
    size = 0
    while size < target_chars:
        if rnd.random() < 0.12:
            lines += ["", f"## {rnd.choice(TOPICS).title()}"]
        line = "- " + " ".join(sentence(rnd) for _ in range(rnd.randint(1, 3)))
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines) + "\n"


def generate(root: Path, chunks: int, seed: int = SEED) -> int:
    """Write a workspace of about ``chunks`` chunks; returns the number of daily files."""
    rnd = random.Random(seed)
    memory_dir = root / "memory"
    memory_dir.mkdir(parents=True, exist_ok=True)
    facts = 40  # MEMORY.md entries, one chunk each
    files = max(1, (chunks - facts) // CHUNKS_PER_FILE)
    start = dt.date(2026, 6, 30) - dt.timedelta(days=files - 1)
    # A chunk adds ~1000 chars of new text (1600 minus the overlap carried and the
    # partial line that does not fit).
    per_file = CHUNKS_PER_FILE * 990
    for i in range(files):
        day = start + dt.timedelta(days=i)
        (memory_dir / f"{day.isoformat()}.md").write_text(
            daily_note(rnd, day, per_file), encoding="utf-8"
        )
    entries = [f"- {sentence(rnd)}" for _ in range(facts)]
    (root / "MEMORY.md").write_text("\n".join(entries) + "\n", encoding="utf-8")
    return files


def make_queries(n: int, seed: int = SEED + 1) -> list[str]:
    rnd = random.Random(seed)
    queries = []
    for _ in range(n):
        kind = rnd.random()
        if kind < 0.4:
            queries.append(rnd.choice(TOPICS))
        elif kind < 0.7:
            queries.append(
                f"when did {rnd.choice(SUBJECTS)} {rnd.choice(VERBS)} the {rnd.choice(TOPICS)}"
            )
        elif kind < 0.9:
            queries.append(f"{rnd.choice(TOPICS)} {rnd.choice(DETAILS).split()[-1]}")
        else:
            queries.append(f"ref-{rnd.randint(1000, 99999)}")
    return queries


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))
    return ordered[k]


def db_bytes(db: Path) -> int:
    return sum(os.path.getsize(f"{db}{s}") for s in ("", "-wal") if os.path.exists(f"{db}{s}"))


def run_size(size: int, out: Path, n_queries: int, repeats: int) -> dict[str, float]:
    ws = out / f"ws-{size}"
    if ws.exists():
        shutil.rmtree(ws)
    gen_start = time.perf_counter()
    files = generate(ws, size)
    gen_s = time.perf_counter() - gen_start
    cfg = MemoryConfig(provider="none")
    queries = make_queries(n_queries)

    # Full index: a fresh state dir each time; the median of `repeats` runs.
    full_times: list[float] = []
    for r in range(repeats):
        state = out / f"state-{size}-{r}"
        shutil.rmtree(state, ignore_errors=True)
        with Memory(workspace=ws, state_dir=state, config=cfg) as mem:
            t = time.perf_counter()
            report = mem.sync(force=True)
            full_times.append(time.perf_counter() - t)
    chunks = report.chunks_total
    state = out / f"state-{size}-0"
    for r in range(1, repeats):
        shutil.rmtree(out / f"state-{size}-{r}", ignore_errors=True)

    with Memory(workspace=ws, state_dir=state, config=cfg) as mem:
        mem.sync()
        # A fresh process: the first search (FTS5 answers while a large matrix builds in
        # the background), then the time until the in-process matrix is ready.
        t = time.perf_counter()
        mem.search(queries[0])
        first_ms = (time.perf_counter() - t) * 1000
        t = time.perf_counter()
        mem.prepare()
        ready_s = time.perf_counter() - t + first_ms / 1000
        # Incremental: one file changes, the others are skipped by hash; the first search
        # afterwards updates the matrix incrementally.
        inc_times: list[float] = []
        after_sync: list[float] = []
        daily = sorted((ws / "memory").iterdir())
        target = daily[len(daily) // 2]
        for r in range(repeats):
            with target.open("a", encoding="utf-8") as fh:
                fh.write(
                    f"- Edited during the benchmark, round {r}: the zeppelin hangar code changed.\n"
                )
            t = time.perf_counter()
            inc = mem.sync()
            inc_times.append(time.perf_counter() - t)
            assert inc.files_changed == 1 and inc.files_unchanged == len(daily), inc
            t = time.perf_counter()
            mem.search(queries[r % len(queries)])
            after_sync.append((time.perf_counter() - t) * 1000)
        lat = []
        for q in queries:
            t = time.perf_counter()
            mem.search(q)
            lat.append((time.perf_counter() - t) * 1000)
        size_bytes = db_bytes(mem.db_path)

    fts_cfg = MemoryConfig(provider="none", store=StoreConfig(keyword_backend="fts5"))
    with Memory(workspace=ws, state_dir=state, config=fts_cfg) as mem:
        mem.sync()
        t = time.perf_counter()
        mem.search(queries[0])
        fts_first_ms = (time.perf_counter() - t) * 1000
        fts_lat = []
        for q in queries:
            t = time.perf_counter()
            mem.search(q)
            fts_lat.append((time.perf_counter() - t) * 1000)

    full = statistics.median(full_times)
    incr = statistics.median(inc_times)
    return {
        "size": size,
        "files": files + 1,
        "chunks": chunks,
        "generate_s": gen_s,
        "full_s": full,
        "incr_s": incr,
        "incr_ratio": incr / full,
        "first_ms": first_ms,
        "ready_s": ready_s,
        "after_sync_ms": statistics.median(after_sync),
        "p50_ms": statistics.median(lat),
        "p95_ms": percentile(lat, 0.95),
        "fts_first_ms": fts_first_ms,
        "fts_p50_ms": statistics.median(fts_lat),
        "fts_p95_ms": percentile(fts_lat, 0.95),
        "db_mb": size_bytes / 1e6,
    }


HEADER = (
    f"{'target':>7} {'files':>6} {'chunks':>7} {'full s':>8} {'incr s':>7} {'incr/full':>9} "
    f"{'1st ms':>7} {'ready s':>7} {'after-sync ms':>13} {'p50 ms':>7} {'p95 ms':>7} "
    f"{'fts1st':>7} {'fts p50':>8} {'fts p95':>8} {'DB MB':>7}"
)


def row(r: dict[str, float]) -> str:
    return (
        f"{r['size']:>7} {r['files']:>6} {r['chunks']:>7} {r['full_s']:>8.2f} {r['incr_s']:>7.3f} "
        f"{r['incr_ratio']:>9.4f} {r['first_ms']:>7.1f} {r['ready_s']:>7.2f} "
        f"{r['after_sync_ms']:>13.1f} {r['p50_ms']:>7.2f} {r['p95_ms']:>7.2f} "
        f"{r['fts_first_ms']:>7.1f} {r['fts_p50_ms']:>8.2f} {r['fts_p95_ms']:>8.2f} {r['db_mb']:>7.1f}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", default="1000,10000,100000", help="chunk counts, comma separated"
    )
    parser.add_argument("--out", default=None, help="work folder (default: a temporary folder)")
    parser.add_argument("--queries", type=int, default=200, help="queries per size")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each sync timing (median)")
    parser.add_argument("--keep", action="store_true", help="keep generated workspaces")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="memmw-scale-"))
    out.mkdir(parents=True, exist_ok=True)
    print(
        f"# memmw scale benchmark: python {sys.version.split()[0]}, {os.cpu_count()} cpus, out={out}"
    )
    print(f"# queries={args.queries} repeats={args.repeats}; keyword-only (provider='none')")
    print(HEADER, flush=True)
    try:
        for size in sizes:
            repeats = args.repeats if size <= 10_000 else 1
            print(row(run_size(size, out, args.queries, repeats)), flush=True)
    finally:
        if not args.keep:
            for child in out.glob("ws-*"):
                shutil.rmtree(child, ignore_errors=True)
            for child in out.glob("state-*"):
                shutil.rmtree(child, ignore_errors=True)
    print(
        "# full s: Memory.sync(force=True) on a fresh state dir; incr s: sync after one file "
        "changed; 1st ms: first search of a fresh process (FTS5 answers while a matrix over "
        "20k chunks builds in the background); ready s: until the matrix is ready; after-sync "
        "ms: first search after an incremental sync; p50/p95: in-process BM25; "
        "fts*: StoreConfig(keyword_backend='fts5'); DB MB: index file + WAL"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
