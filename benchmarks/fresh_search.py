"""Fresh-process search benchmark on a large workspace of LoCoMo turns, one checkout or two.

Usage::

    python benchmarks/fresh_search.py ../shared/benchmarks/locomo-dev --files 5000 \
        --out /tmp/memmw-fresh [--checkout OTHER_CHECKOUT ...]

Generates (once, seeded) ``--files`` daily notes of LoCoMo conversation turns drawn at
random, then for each checkout (this one first) in separate processes: the full index
time (``Memory.sync(force=True)`` on a fresh state folder), the index size on disk, and
a fresh search process that runs the first 20 queries with no ``prepare()`` (p50, p95,
max), then 300 more (warm p50, p95), its maximum RSS, and the top hit of each first
query (so two checkouts can be compared for agreement). Keyword only
(``provider='none'``); queries are the data set's questions.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
SEED = 20261130
#: LoCoMo turns per generated note (~33 chunks of ~1600 characters each).
TURNS_PER_FILE = 400


def generate(data: Path, ws: Path, files: int) -> None:
    """Write ``files`` notes of random LoCoMo turns under ``ws/memory``."""
    turns = [
        line.split("] ", 1)[1]
        for f in sorted((data / "workspaces").glob("*/memory/*.md"))
        for line in f.read_text(encoding="utf-8").splitlines()
        if line.startswith("- [D") and "] " in line
    ]
    rnd = random.Random(SEED)
    (ws / "memory").mkdir(parents=True, exist_ok=True)
    for i in range(files):
        year, day = 2000 + i // 365, i % 365
        month, dom = 1 + day // 31 % 12, 1 + day % 28
        lines = [f"# Session {i}", "", f"Date: {year}-{month:02d}-{dom:02d}", ""]
        lines += [f"- [D{i}:{n}] {rnd.choice(turns)}" for n in range(1, TURNS_PER_FILE + 1)]
        name = f"{year}-{month:02d}-{dom:02d}-session-{i}.md"
        (ws / "memory" / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))]


CHILD_INDEX = """
import json, sys, time
from memmw import Memory, MemoryConfig
ws, state = sys.argv[1], sys.argv[2]
with Memory(workspace=ws, state_dir=state, config=MemoryConfig(provider="none")) as mem:
    t = time.perf_counter()
    report = mem.sync(force=True)
    print(json.dumps({"full_s": time.perf_counter() - t, "chunks": report.chunks_total,
                      "db": str(mem.db_path)}))
"""

CHILD_SEARCH = """
import json, resource, sys, time
from memmw import Memory, MemoryConfig, SyncConfig
ws, state, queries = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
cfg = MemoryConfig(provider="none", sync=SyncConfig(on_search=False))
with Memory(workspace=ws, state_dir=state, config=cfg) as mem:
    first, top = [], []
    for q in queries[:20]:
        t = time.perf_counter()
        hits = mem.search(q)
        first.append((time.perf_counter() - t) * 1000)
        top.append([hits[0].path, hits[0].start_line] if hits else None)
    warm = []
    for q in queries[20:]:
        t = time.perf_counter()
        mem.search(q)
        warm.append((time.perf_counter() - t) * 1000)
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"first": first, "warm": warm, "top": top, "rss_mb": rss}))
"""


def run(checkout: Path, code: str, *args: str) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=str(checkout))
    # cwd too: ``python -c`` puts the current folder first on the path.
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env,
        cwd=checkout,
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path, help="the locomo-dev folder")
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--checkout", type=Path, action="append", default=[])
    parser.add_argument("--queries", type=int, default=320)
    args = parser.parse_args(argv)
    ws = args.out / f"ws-{args.files}"
    if not ws.exists():
        generate(args.data, ws, args.files)
    questions = [
        json.loads(line)["query"]
        for line in (args.data / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    queries = random.Random(SEED).sample(questions, min(args.queries, len(questions)))
    tops: dict[str, list[object]] = {}
    print(
        f"{'checkout':<28} {'chunks':>7} {'full s':>7} {'DB MB':>7} {'1st20 p50':>9}"
        f" {'p95':>7} {'max':>7} {'warm p50':>8} {'p95':>6} {'RSS MB':>7}"
    )
    for checkout in [HERE, *args.checkout]:
        state = args.out / f"state-{checkout.name}"
        shutil.rmtree(state, ignore_errors=True)
        idx = run(checkout, CHILD_INDEX, str(ws), str(state))
        db = Path(str(idx["db"]))
        size = sum(
            os.path.getsize(f"{db}{s}") for s in ("", "-wal") if os.path.exists(f"{db}{s}")
        )
        res = run(checkout, CHILD_SEARCH, str(ws), str(state), json.dumps(queries))
        import_check = run(checkout, "import json, memmw; print(json.dumps({'f': memmw.__file__}))")
        assert str(import_check["f"]).startswith(str(checkout)), import_check
        first = [float(x) for x in res["first"]]  # type: ignore[attr-defined]
        warm = [float(x) for x in res["warm"]]  # type: ignore[attr-defined]
        tops[str(checkout)] = list(res["top"])  # type: ignore[call-overload]
        print(
            f"{str(checkout)[-28:]:<28} {idx['chunks']:>7} {float(idx['full_s']):>7.1f}"  # type: ignore[arg-type]
            f" {size / 1e6:>7.0f} {statistics.median(first):>9.1f} {percentile(first, 0.95):>7.1f}"
            f" {max(first):>7.1f} {statistics.median(warm):>8.1f} {percentile(warm, 0.95):>6.1f}"
            f" {float(res['rss_mb']):>7.0f}",  # type: ignore[arg-type]
            flush=True,
        )
    if len(tops) > 1:
        base, *others = tops.values()
        for name, other in zip(list(tops)[1:], others, strict=True):
            same = sum(1 for a, b in zip(base, other, strict=True) if a == b)
            print(f"# top hit of the first 20 queries equal to this checkout's: {same}/20 ({name})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
