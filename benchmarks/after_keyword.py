"""CPU a keyword search spends after its keyword leg, for one checkout or several, interleaved.

Usage::

    python benchmarks/after_keyword.py WORKSPACE STATE_DIR QUERIES_JSONL \
        [--checkout OTHER_CHECKOUT ...] [--rounds 5]

After the keyword leg a search reads its candidates' rows (``store.chunks``), scores,
decays and sorts them, orders them by MMR and builds the snippets of the hits it shows.
Each round runs, for every checkout in turn (this one first; separate processes, so the
load of a shared machine hits all of them alike), one fresh process that times (CPU,
``time.process_time``) its first 20 searches, then 60 more, warm. A search's part after
the keyword leg runs from ``store.chunks`` to the end of ``Searcher.search``. Prints the
median over rounds of each process's p50, and whether every checkout gave the same hits
(paths, lines, score ``repr``, snippets) for every query. Keyword only (``provider='none'``,
no sync on search); the index must already be built (``memmw sync``). Queries: the
``query`` of each line of ``QUERIES_JSONL`` (a seeded sample of 80).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
SEED = 7

CHILD = """
import hashlib, json, statistics, sys, time
from memmw import Memory, MemoryConfig, SyncConfig
from memmw.search.searcher import Searcher
from memmw.store.sqlite.store import IndexStore
ws, state, queries = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
mark, after = [0.0], []
chunks, search = IndexStore.chunks, Searcher.search
def timed_chunks(self, ids):
    mark[0] = time.process_time()
    return chunks(self, ids)
def timed_search(self, *args, **kwargs):
    out = search(self, *args, **kwargs)
    after.append(time.process_time() - mark[0])
    return out
IndexStore.chunks, Searcher.search = timed_chunks, timed_search
cfg = MemoryConfig(provider="none", sync=SyncConfig(on_search=False))
digest = hashlib.sha256()
with Memory(workspace=ws, state_dir=state, config=cfg) as mem:
    total = []
    for q in queries:
        t = time.process_time()
        hits = mem.search(q)
        total.append(time.process_time() - t)
        digest.update(repr([(h.path, h.start_line, h.end_line, repr(h.score), h.snippet)
                            for h in hits]).encode())
ms = lambda xs: statistics.median(xs) * 1000
print(json.dumps({"first": ms(total[:20]), "first_after": ms(after[:20]),
                  "warm": ms(total[20:]), "warm_after": ms(after[20:]),
                  "hits": digest.hexdigest()}))
"""


def run(checkout: Path, *args: str) -> dict[str, float | str]:
    env = dict(os.environ, PYTHONPATH=str(checkout))
    out = subprocess.run(
        [sys.executable, "-c", CHILD, *args],
        env=env,
        cwd=checkout,  # ``python -c`` puts the current folder first on the path
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, float | str] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workspace", type=Path)
    parser.add_argument("state_dir", type=Path)
    parser.add_argument("queries", type=Path, help="JSON lines with a 'query' field")
    parser.add_argument("--checkout", type=Path, action="append", default=[])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    questions = [
        json.loads(line)["query"]
        for line in args.queries.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    queries = json.dumps(random.Random(SEED).sample(questions, min(80, len(questions))))
    checkouts = [HERE, *(c.resolve() for c in args.checkout)]
    results: dict[Path, list[dict[str, float | str]]] = {c: [] for c in checkouts}
    for _ in range(args.rounds):
        for checkout in checkouts:
            results[checkout].append(
                run(checkout, str(args.workspace), str(args.state_dir), queries)
            )
    keys = ("first", "first_after", "warm", "warm_after")
    print(f"{'checkout':<28} {'1st20 p50':>9} {'after kw':>8} {'warm p50':>8} {'after kw':>8}")
    for checkout, rows in results.items():
        medians = [statistics.median(float(r[k]) for r in rows) for k in keys]
        first, first_after, warm, warm_after = medians
        print(
            f"{str(checkout)[-28:]:<28} {first:>9.2f} {first_after:>8.2f}"
            f" {warm:>8.2f} {warm_after:>8.2f}"
        )
    digests = {str(r["hits"]) for rows in results.values() for r in rows}
    print(f"# CPU ms, medians of {args.rounds} rounds; same hits in every run: {len(digests) == 1}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
