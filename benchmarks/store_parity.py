"""Same answers from both stores: every LoCoMo dev query searched on SQLite and on PostgreSQL.

Usage::

    make pg
    MEMMW_STORE_DSN="$(python3 scripts/pgserver.py url)" \\
        python benchmarks/store_parity.py ../shared/benchmarks/locomo-dev [--provider none]

Indexes each conversation workspace into a fresh SQLite file and into a namespace of the
PostgreSQL database, runs every query on both, and counts the queries whose hits (path,
line, order), scores (4 decimals) or snippets differ. Prints the first differences.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import memmw
from memmw.config import StoreConfig


def answers(mem: memmw.Memory, queries: list[str]) -> list[list[tuple[Any, ...]]]:
    return [
        [(h.path, h.start_line, round(h.score, 4), h.snippet) for h in mem.search(q, max_results=6)]
        for q in queries
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data_dir")
    parser.add_argument("--provider", default="none")
    parser.add_argument("--show", type=int, default=3, help="differences to print")
    args = parser.parse_args()
    dsn = os.environ.get("MEMMW_STORE_DSN")
    if not dsn:
        parser.error("set MEMMW_STORE_DSN (see `make pg`)")
    data = Path(args.data_dir)
    queries = [json.loads(x) for x in (data / "queries.jsonl").read_text().splitlines() if x]
    by_conv: dict[str, list[str]] = defaultdict(list)
    for q in queries:
        by_conv[q["conv"]].append(q["query"])
    run = f"parity-{os.getpid()}"
    differ = total = 0
    with tempfile.TemporaryDirectory(prefix="memmw-parity-") as state:
        for conv, items in sorted(by_conv.items()):
            results = {}
            for backend in ("sqlite", "postgres"):
                config = memmw.MemoryConfig(
                    provider=args.provider, store=StoreConfig(backend=backend)
                )
                agent = conv if backend == "sqlite" else f"{run}-{conv}"
                with memmw.Memory(
                    workspace=data / "workspaces" / conv,
                    state_dir=Path(state) / backend,
                    agent_id=agent,
                    config=config,
                ) as mem:
                    mem.sync(force=True)
                    results[backend] = answers(mem, items)
                if backend == "postgres":
                    from memmw.store.postgres import PostgresStore

                    check = PostgresStore(dsn, agent_id=agent)
                    try:
                        if not check.published():
                            sys.exit("store.backend = 'postgres' is not wired into the engine")
                    finally:
                        check.close()
            for query, a, b in zip(items, results["sqlite"], results["postgres"], strict=True):
                total += 1
                if a != b:
                    differ += 1
                    if differ <= args.show:
                        print(f"{conv}: {query!r}\n  sqlite   {a}\n  postgres {b}")
    print(f"{differ} of {total} queries differ (hits, order, scores or snippets)")


if __name__ == "__main__":
    main()
