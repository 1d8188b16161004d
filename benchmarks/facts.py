"""Fact benchmark: the injected [GRAPH MEMORY] block and memory_facts versus plain memory_search.

Usage:
    python benchmarks/facts.py [--provider none] [--repeat 5] [--tiktoken] [--scale N] [--json OUT]

The workspace (benchmarks/facts/workspace: people, projects, decisions, preferences,
aliases, superseded values, several languages) is copied to a temporary folder and
indexed there; each question in benchmarks/facts/questions.json lists the answer
strings that count as a hit and, for superseded facts, the stale values.

A method *hits* a question when one of its expected strings appears in what it returns
(the injected block; the top-5 memory_facts texts; the top-6 memory_search snippets).
``stale`` counts answers whose returned text shows an outdated value before (search,
facts) or beside (block) the current one. Negative questions (no answer in memory)
measure how often the block injects anything at all.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import memmw
from memmw.hooks.active_memory import ActiveMemory
from memmw.text.tokens import TokenCounter

HERE = Path(__file__).resolve().parent / "facts"
#: The questions are asked "on" 2026-11-30 (retention is measured against this day).
NOW = 1_795_996_800.0  # 2026-11-30T00:00:00Z


def first_pos(text: str, needles: list[str]) -> int | None:
    low = text.casefold()
    found = [low.find(n.casefold()) for n in needles]
    found = [p for p in found if p >= 0]
    return min(found) if found else None


def judge(text: str, expect: list[str], stale: list[str], *, ordered: bool) -> tuple[bool, bool]:
    """``(hit, stale_shown)``: stale means an old value comes first (ordered) or appears at all."""
    hit_at = first_pos(text, expect)
    stale_at = first_pos(text, stale) if stale else None
    if ordered:
        return hit_at is not None, stale_at is not None and (hit_at is None or stale_at < hit_at)
    return hit_at is not None, stale_at is not None


def add_synthetic_people(ws: Path, n: int) -> None:
    """``n`` more people with six facts, an alias and a relation each (a bigger graph).

    Their names are generated from syllables, so they never collide with the questions.
    """
    rng = random.Random(13)
    syll = ["ka", "lo", "mi", "ren", "ta", "vo", "shi", "dar", "el", "qu", "zu", "bo"]
    cities = ["Tallinn", "Porto", "Quito", "Hanoi", "Perth", "Bergen", "Cusco", "Tartu"]
    lines = ["# Contacts (synthetic)\n"]
    for i in range(n):
        first = "".join(rng.choice(syll) for _ in range(2)).capitalize()
        last = "".join(rng.choice(syll) for _ in range(3)).capitalize()
        lines.append(
            f"\n## {first} {last} {i} ({first[:3]}{i})\n- city: {rng.choice(cities)}\n"
            f"- role: contractor #{i}\n- email: p{i}@example.net\n- phone: +1 555 {i:04d}\n"
            f"- [preference] tea number {i}\n- team: squad {i % 17}\n- knows [[{first} {last} {(i + 1) % n}]]\n"
        )
    (ws / "memory" / "contacts.md").write_text("".join(lines), encoding="utf-8")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def run(args: argparse.Namespace) -> dict[str, Any]:
    questions = json.loads((HERE / "questions.json").read_text(encoding="utf-8"))
    tmp = Path(tempfile.mkdtemp(prefix="memmw-facts-"))
    try:
        ws = tmp / "ws"
        shutil.copytree(HERE / "workspace", ws)
        if args.scale:
            add_synthetic_people(ws, args.scale)
        config = memmw.MemoryConfig(provider=args.provider)
        counter = TokenCounter(use_tiktoken=args.tiktoken)
        with memmw.Memory(workspace=ws, state_dir=tmp / "state", config=config) as mem:
            started = time.perf_counter()
            mem.sync()
            sync_s = time.perf_counter() - started
            mem.graph_engine.graph()  # load once, as a running agent has it loaded
            active = ActiveMemory(mem, token_counter=counter.count, now=lambda: NOW)
            rows = []
            inject_ms: list[float] = []
            facts_ms: list[float] = []
            search_ms: list[float] = []
            for item in questions:
                q, expect, stale = item["q"], item["expect"], item.get("stale", [])
                for _ in range(args.repeat):
                    inj = active.build(q)
                    inject_ms.append(inj.ms)
                t0 = time.perf_counter()
                facts = mem.facts(q, 5)
                facts_ms.append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                hits = mem.search(q, 6)
                search_ms.append((time.perf_counter() - t0) * 1000)
                facts_text = "\n".join(f"{h.entity} {h.key} {h.value}" for h in facts)
                search_text = "\n".join(h.snippet for h in hits)
                row = {
                    "q": q,
                    "kind": item["kind"],
                    "tokens": inj.tokens,
                    "block": judge(inj.text, expect, stale, ordered=False) if expect else (False, False),
                    "facts": judge(facts_text, expect, stale, ordered=True) if expect else (False, False),
                    "search": judge(search_text, expect, stale, ordered=True) if expect else (False, False),
                    "injected": bool(inj.text),
                }
                rows.append(row)
                if args.verbose:
                    print(json.dumps({k: v for k, v in row.items()}, ensure_ascii=False))
            answerable = [r for r in rows if r["kind"] != "negative"]
            negative = [r for r in rows if r["kind"] == "negative"]
            superseded = [r for r in answerable if r["kind"] == "superseded"]

            def rate(method: str, subset: list[dict[str, Any]]) -> float:
                return round(sum(1 for r in subset if r[method][0]) / len(subset), 4) if subset else 0.0

            def stale_rate(method: str) -> float:
                return round(sum(1 for r in superseded if r[method][1]) / len(superseded), 4)

            by_kind: dict[str, dict[str, float]] = defaultdict(dict)
            for kind in sorted({r["kind"] for r in answerable}):
                subset = [r for r in answerable if r["kind"] == kind]
                by_kind[kind] = {m: rate(m, subset) for m in ("block", "facts", "search")}
                by_kind[kind]["n"] = len(subset)
            tokens = [r["tokens"] for r in answerable]
            graph = mem.graph_engine.graph()
            return {
                "questions": len(rows),
                "answerable": len(answerable),
                "graph": {
                    "entities": len(graph.entities),
                    "facts": len(graph.facts),
                    "relations": len(graph.relations),
                    "aliases": sum(len(e.aliases) for e in graph.entities.values()),
                    "triggers": len(graph.triggers),
                },
                "sync_s": round(sync_s, 3),
                "hit_rate": {m: rate(m, answerable) for m in ("block", "facts", "search")},
                "stale_first_on_superseded": {
                    m: stale_rate(m) for m in ("block", "facts", "search")
                },
                "superseded_questions": len(superseded),
                "by_kind": dict(by_kind),
                "injection_ms": {
                    "p50": round(statistics.median(inject_ms), 3),
                    "p95": round(pct(inject_ms, 0.95), 3),
                },
                "facts_ms": {"p50": round(statistics.median(facts_ms), 3), "p95": round(pct(facts_ms, 0.95), 3)},
                "search_ms": {"p50": round(statistics.median(search_ms), 3), "p95": round(pct(search_ms, 0.95), 3)},
                "tokens_per_turn": {
                    "mean": round(statistics.mean(tokens), 1),
                    "p50": statistics.median(tokens),
                    "p95": pct([float(t) for t in tokens], 0.95),
                    "counter": counter.backend,
                },
                "negative_injection_rate": round(
                    sum(1 for r in negative if r["injected"]) / len(negative), 4
                )
                if negative
                else None,
                "misses": {
                    m: [r["q"] for r in answerable if not r[m][0]] for m in ("block", "facts")
                },
            }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--provider", default="none")
    parser.add_argument("--repeat", type=int, default=5, help="injection builds per question (latency)")
    parser.add_argument(
        "--tiktoken", action="store_true", help="count tokens with tiktoken (needs its cached encoding)"
    )
    parser.add_argument("--scale", type=int, default=0, help="add N synthetic people (a larger graph)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    result = run(args)
    text = json.dumps(result, indent=2, ensure_ascii=False)
    print(text)
    if args.json is not None:
        args.json.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
