"""Plain-notes benchmark: recall over a workspace written the way people write (no fact markup).

Usage:
    python benchmarks/plain_notes.py [--providers none,offline] [--state-dir DIR]
                                     [--tiktoken] [--verbose] [--json OUT]

The workspace (``benchmarks/plain_notes/workspace``: MEMORY.md with People / Projects /
Decisions in prose, USER.md, four months of daily notes and ``/new`` archives, lines in
German and Chinese, nicknames, names in other scripts, roles such as "our CTO", values
that change over time, including MEMORY.md lines never updated) is copied to a temporary
folder and indexed there. ``benchmarks/plain_notes/questions.json`` holds the questions;
each names ONE answer line (``answer.path`` and ``answer.text``, a string of that line)
and a kind: ``plain``, ``alias`` (the question names an entity by another name than the
answer line), ``cross-language``, ``current-value`` (``stale`` names the outdated lines)
or ``past-value``. The questions are asked "on" 2026-11-30, in a private session.

Per provider (``none`` = keyword only; ``offline`` = hybrid with the bundled e5 model):

* ``block``: the ``[GRAPH MEMORY]`` block holds the answer text;
* ``bootstrap_block``: the session bootstrap (MEMORY.md, USER.md, the last two days of
  notes) plus the block hold it (what the model has before it calls a tool);
* ``facts``: the top-5 ``memory_facts`` texts hold it;
* ``search``: one of the top-6 ``memory_search`` snippets holds it (hit@6);
* ``stale_first``: on current-value questions, the number whose search results show a
  stale value before the current one (or only the stale one); ``block_stale_only``: the
  block shows a stale value without the current one;
* ``tokens_per_turn``: the block's tokens (mean, p50, p95).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
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
from memmw.config import ActiveMemoryConfig, BootstrapConfig
from memmw.hooks.active_memory import ActiveMemory
from memmw.hooks.bootstrap import build_bootstrap
from memmw.text.tokens import TokenCounter

HERE = Path(__file__).resolve().parent / "plain_notes"
#: The questions are asked "on" 2026-11-30.
NOW = 1_795_996_800.0  # 2026-11-30T00:00:00Z
TODAY = dt.date(2026, 11, 30)
KINDS = ("plain", "alias", "cross-language", "current-value", "past-value")
METHODS = ("block", "bootstrap_block", "facts", "search")


def load_questions(workspace: Path) -> list[dict[str, Any]]:
    """The questions, each checked: its answer (and stale) text stands on a line of its file
    (the first such line is the answer line)."""
    questions: list[dict[str, Any]] = json.loads((HERE / "questions.json").read_text(encoding="utf-8"))
    for item in questions:
        if item["kind"] not in KINDS:
            raise SystemExit(f"unknown kind {item['kind']!r}: {item['q']}")
        for ref in [item["answer"], *item.get("stale", [])]:
            lines = (workspace / ref["path"]).read_text(encoding="utf-8").splitlines()
            found = [i + 1 for i, line in enumerate(lines) if ref["text"] in line]
            if not found:
                raise SystemExit(f"{ref['path']}: {ref['text']!r} is on no line: {item['q']}")
            ref["line"] = found[0]
        if item["kind"] == "current-value" and not item.get("stale"):
            raise SystemExit(f"current-value question without a stale line: {item['q']}")
    return questions


def first_pos(text: str, needles: list[str]) -> int | None:
    low = text.casefold()
    found = [p for p in (low.find(n.casefold()) for n in needles) if p >= 0]
    return min(found) if found else None


def judge(text: str, answer: str, stale: list[str]) -> tuple[bool, bool]:
    """``(hit, stale_first)``: stale first means an old value shows before the answer, or alone."""
    hit_at = first_pos(text, [answer])
    stale_at = first_pos(text, stale) if stale else None
    return hit_at is not None, stale_at is not None and (hit_at is None or stale_at < hit_at)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def run_provider(provider: str, questions: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="memmw-plain-"))
    try:
        # With --state-dir the copy keeps one path, so its index (and embedding cache) is reused.
        base = args.state_dir / provider if args.state_dir else tmp
        ws, state = base / "ws", base / "state"
        shutil.rmtree(ws, ignore_errors=True)
        shutil.copytree(HERE / "workspace", ws)
        config = memmw.MemoryConfig(provider=provider)
        counter = TokenCounter(use_tiktoken=args.tiktoken)
        boot = build_bootstrap(ws, BootstrapConfig(), private=True, today=TODAY).text
        with memmw.Memory(workspace=ws, state_dir=state, config=config) as mem:
            started = time.perf_counter()
            mem.sync()
            sync_s = time.perf_counter() - started
            mem.graph_engine.graph()  # loaded once, as a running agent has it
            block_config = ActiveMemoryConfig(deadline_ms=args.deadline_ms) if args.deadline_ms else None
            active = ActiveMemory(mem, config=block_config, token_counter=counter.count, now=lambda: NOW)
            mem.search("warm up", 6)
            active.build("warm up")  # a running agent has its block machinery warm
            rows: list[dict[str, Any]] = []
            block_ms: list[float] = []
            search_ms: list[float] = []
            for item in questions:
                q = item["q"]
                answer = item["answer"]["text"]
                stale = [s["text"] for s in item.get("stale", [])]
                inj = active.build(q)
                block_ms.append(inj.ms)
                facts = mem.facts(q, 5)
                t0 = time.perf_counter()
                hits = mem.search(q, 6)
                search_ms.append((time.perf_counter() - t0) * 1000)
                facts_text = "\n".join(h.text for h in facts)
                search_text = "\n".join(h.snippet for h in hits)
                block_hit, block_stale = judge(inj.text, answer, stale)
                row = {
                    "q": q,
                    "kind": item["kind"],
                    "tokens": inj.tokens,
                    "deadline_hit": inj.deadline_hit,
                    "block": block_hit,
                    "block_stale_only": block_stale and not block_hit,
                    "bootstrap_block": judge(boot + "\n" + inj.text, answer, [])[0],
                    "facts": judge(facts_text, answer, stale)[0],
                    "search": judge(search_text, answer, stale)[0],
                    "stale_first": judge(search_text, answer, stale)[1],
                    "top": [f"{h.path}#L{h.start_line}" for h in hits],
                }
                rows.append(row)
                if args.verbose:
                    print(json.dumps(row, ensure_ascii=False), file=sys.stderr)

            def rate(method: str, subset: list[dict[str, Any]]) -> float:
                return round(sum(1 for r in subset if r[method]) / len(subset), 4) if subset else 0.0

            by_kind: dict[str, dict[str, float]] = defaultdict(dict)
            for kind in KINDS:
                subset = [r for r in rows if r["kind"] == kind]
                by_kind[kind] = {m: rate(m, subset) for m in METHODS}
                by_kind[kind]["n"] = len(subset)
            current = [r for r in rows if r["kind"] == "current-value"]
            tokens = [float(r["tokens"]) for r in rows]
            return {
                "provider": provider,
                "mode": mem.search_result("warm up").mode,
                "sync_s": round(sync_s, 3),
                "hit_rate": {m: rate(m, rows) for m in METHODS},
                "hits": {m: sum(1 for r in rows if r[m]) for m in METHODS},
                "stale_first": sum(1 for r in current if r["stale_first"]),
                "block_stale_only": sum(1 for r in current if r["block_stale_only"]),
                "block_deadline_hit": sum(1 for r in rows if r["deadline_hit"]),
                "current_value_questions": len(current),
                "by_kind": dict(by_kind),
                "tokens_per_turn": {
                    "mean": round(statistics.mean(tokens), 1),
                    "p50": statistics.median(tokens),
                    "p95": pct(tokens, 0.95),
                    "counter": counter.backend,
                },
                "block_ms": {"p50": round(statistics.median(block_ms), 3), "p95": round(pct(block_ms, 0.95), 3)},
                "search_ms": {"p50": round(statistics.median(search_ms), 3), "p95": round(pct(search_ms, 0.95), 3)},
                "misses": {m: [r["q"] for r in rows if not r[m]] for m in METHODS},
                "stale_first_questions": [r["q"] for r in current if r["stale_first"]],
            }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(args: argparse.Namespace) -> dict[str, Any]:
    questions = load_questions(HERE / "workspace")
    counts = {k: sum(1 for q in questions if q["kind"] == k) for k in KINDS}
    return {
        "questions": len(questions),
        "kinds": counts,
        "block_deadline_ms": args.deadline_ms or ActiveMemoryConfig().deadline_ms,
        "results": {p: run_provider(p, questions, args) for p in args.providers.split(",") if p},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--providers", default="none,offline", help="comma-separated providers to run")
    parser.add_argument(
        "--state-dir", type=Path, default=None, help="keep each provider's index (and embedding cache) here"
    )
    parser.add_argument(
        "--tiktoken", action="store_true", help="count tokens with tiktoken (needs its cached encoding)"
    )
    parser.add_argument(
        "--deadline-ms",
        type=int,
        default=0,
        help="the block's per-turn deadline (default: the configured 150 ms; a loaded machine cuts it)",
    )
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--verbose", action="store_true", help="one JSON row per question on stderr")
    args = parser.parse_args()
    result = run(args)
    text = json.dumps(result, indent=2, ensure_ascii=False)
    print(text)
    if args.json is not None:
        args.json.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
