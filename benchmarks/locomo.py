"""LoCoMo retrieval benchmark: snippet-hit@k, line-hit@k and evidence recall per category.

``chunk@k`` (``chunk_hit``) counts a question when its evidence is anywhere in the chunk
of a returned hit: the ceiling of what the snippets of those chunks could show (a hit
that shows the top chunk's second window repeats that chunk, so it counts distinct
chunks).

Usage:
    python benchmarks/locomo.py ../shared/benchmarks/locomo-dev [--provider none]
        [--decay bounded|classic|off] [--keyword-backend memory|fts5] [--fusion rrf|weighted]
        [--max-results 6] [--json OUT] [--store-backend sqlite|postgres] [--hnsw-min-vectors 1]

``--store-backend postgres`` indexes every conversation as a namespace of the database in
``MEMMW_STORE_DSN`` (for example the bundled server: ``make pg``).

The data set stays where it is (its licence is non-commercial); state goes to a
temporary folder that is deleted afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import memmw
from memmw.agent.tools import search_payload
from memmw.config import HybridConfig, QueryConfig, StoreConfig, TemporalDecayConfig

EVIDENCE = re.compile(r"\[(D\d+:\d+)\]")


def evidence_lines(workspace: Path) -> dict[str, tuple[str, int]]:
    """``{evidence id: (relative path, line number)}`` for every turn in a workspace."""
    out: dict[str, tuple[str, int]] = {}
    for f in sorted((workspace / "memory").glob("*.md")):
        rel = f.relative_to(workspace).as_posix()
        for number, line in enumerate(f.read_text(encoding="utf-8").split("\n"), start=1):
            for eid in EVIDENCE.findall(line):
                out.setdefault(eid, (rel, number))
    return out


def weights(spec: str | None) -> dict[str, float]:
    """``"0.7,0.3"`` -> vector and text weights; None -> the config defaults."""
    if not spec:
        return {}
    vector, text = (float(x) for x in spec.split(","))
    return {"vector_weight": vector, "text_weight": text}


def build_config(args: argparse.Namespace) -> memmw.MemoryConfig:
    if args.decay == "classic":
        decay = TemporalDecayConfig.classic()
    elif args.decay == "off":
        decay = TemporalDecayConfig(enabled=False)
    else:
        decay = TemporalDecayConfig()
    query = QueryConfig(
        max_results=args.max_results,
        temporal_decay=decay,
        hybrid=HybridConfig(
            fusion=args.fusion, calibrate_vectors=not args.no_calibrate, **weights(args.weights)
        ),
    )
    return memmw.MemoryConfig(
        provider=args.provider,
        query=query,
        store=StoreConfig(keyword_backend=args.keyword_backend, backend=args.store_backend),
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    data = Path(args.data_dir)
    queries = [
        json.loads(line) for line in (data / "queries.jsonl").read_text().splitlines() if line
    ]
    if args.limit:
        queries = queries[: args.limit]
    by_conv: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for q in queries:
        by_conv[q["conv"]].append(q)

    config = build_config(args)
    per_cat: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    latencies: list[float] = []
    index_seconds: dict[str, float] = {}
    provider_name = "?"
    with contextlib.ExitStack() as stack:
        state = args.state_dir or stack.enter_context(
            tempfile.TemporaryDirectory(prefix="memmw-locomo-")
        )
        for conv, items in sorted(by_conv.items()):
            workspace = data / "workspaces" / conv
            where = evidence_lines(workspace)
            with memmw.Memory(
                workspace=workspace, state_dir=state, agent_id=conv, config=config
            ) as mem:
                started = time.perf_counter()
                mem.sync(force=True)
                index_seconds[conv] = time.perf_counter() - started
                mem.search("warm up")  # loads the keyword matrix (and the model, if any)
                payload = search_payload(mem, "warm up")
                provider_name = f"{payload['provider']}/{payload['model']} ({payload['mode']})"
                for q in items:
                    started = time.perf_counter()
                    hits = mem.search(q["query"], max_results=args.max_results)
                    latencies.append(time.perf_counter() - started)
                    snippet_ids = {e for h in hits for e in EVIDENCE.findall(h.snippet)}
                    evidence = q["evidence"]
                    snippet_hit = any(e in snippet_ids for e in evidence)
                    line_hit = any(
                        e in where
                        and any(
                            h.path == where[e][0] and h.start_line <= where[e][1] <= h.end_line
                            for h in hits
                        )
                        for e in evidence
                    )
                    chunk_hit = any(
                        e in where
                        and any(
                            h.path == where[e][0]
                            and h.chunk_start_line <= where[e][1] <= h.chunk_end_line
                            for h in hits
                        )
                        for e in evidence
                    )
                    found = sum(1 for e in evidence if e in snippet_ids)
                    for cat in (q["category_name"], "overall"):
                        s = per_cat[cat]
                        s["n"] += 1
                        s["snippet_hit"] += snippet_hit
                        s["line_hit"] += line_hit
                        s["chunk_hit"] += chunk_hit
                        s["evidence"] += len(evidence)
                        s["evidence_found"] += found
    table = {
        cat: {
            "n": int(s["n"]),
            "snippet_hit": s["snippet_hit"] / s["n"],
            "line_hit": s["line_hit"] / s["n"],
            "chunk_hit": s["chunk_hit"] / s["n"],
            "evidence_recall": s["evidence_found"] / max(s["evidence"], 1),
        }
        for cat, s in per_cat.items()
    }
    return {
        "command": " ".join(["benchmarks/locomo.py", *sys.argv[1:]]),
        "provider": provider_name,
        "config": {
            "decay": args.decay,
            "keyword_backend": args.keyword_backend,
            "fusion": args.fusion,
            "weights": args.weights or "default",
            "calibrated": not args.no_calibrate,
            "max_results": args.max_results,
        },
        "metrics": table,
        "index_seconds": index_seconds,
        "search_ms_p50": statistics.median(latencies) * 1000 if latencies else None,
        "search_ms_p95": (
            statistics.quantiles(latencies, n=20)[18] * 1000 if len(latencies) > 20 else None
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("data_dir")
    parser.add_argument("--provider", default="none")
    parser.add_argument("--decay", choices=["bounded", "classic", "off"], default="bounded")
    parser.add_argument("--keyword-backend", choices=["memory", "fts5"], default="memory")
    parser.add_argument("--fusion", choices=["normalized", "rrf", "weighted"], default="normalized")
    parser.add_argument("--weights", help="VECTOR,TEXT weights (default: the config default)")
    parser.add_argument(
        "--no-calibrate", action="store_true", help="raw cosines (as HybridConfig.classic())"
    )
    parser.add_argument("--max-results", type=int, default=6)
    parser.add_argument("--store-backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--limit", type=int, default=0, help="only the first N questions")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument(
        "--state-dir",
        help="keep indexes here (the embedding cache makes re-runs fast); default: a temp dir",
    )
    parser.add_argument(
        "--hnsw-min-vectors", type=int,
        help="PostgreSQL: search agents with this many vectors or more by HNSW (default"
        " memmw.store.vectorsearch.HNSW_MIN_VECTORS; LoCoMo's agents are far smaller, so 1"
        " measures the HNSW leg and its centroid calibration)",
    )
    args = parser.parse_args()
    if args.hnsw_min_vectors is not None:
        import memmw.store.vectorsearch

        memmw.store.vectorsearch.HNSW_MIN_VECTORS = args.hnsw_min_vectors
    result = run(args)
    k = args.max_results
    print(f"provider: {result['provider']}  config: {result['config']}")
    print(
        f"{'category':<14}{'n':>5}{f'snippet@{k}':>12}{f'line@{k}':>10}{'ev.recall':>11}"
        f"{f'chunk@{k}':>10}"
    )
    order = ["overall", "multi-hop", "temporal", "open-domain", "single-hop", "adversarial"]
    for cat in order + sorted(set(result["metrics"]) - set(order)):
        m = result["metrics"].get(cat)
        if m:
            print(
                f"{cat:<14}{m['n']:>5}{m['snippet_hit']:>12.3f}{m['line_hit']:>10.3f}"
                f"{m['evidence_recall']:>11.3f}{m['chunk_hit']:>10.3f}"
            )
    idx = result["index_seconds"]
    print(
        f"index time: {sum(idx.values()):.2f}s total ({len(idx)} workspaces); "
        f"search p50 {result['search_ms_p50']:.2f} ms, p95 {result['search_ms_p95'] or 0:.2f} ms"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
