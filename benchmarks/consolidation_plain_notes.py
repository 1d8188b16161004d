"""Does one consolidation stop stale MEMORY.md values from outranking their newer values?

Usage::

    python benchmarks/consolidation_plain_notes.py [--data DIR] [--providers none,offline]
        [--fraction 0.5] [--targets MEMORY.md] [--json OUT]

``DIR`` is the plain-notes benchmark's folder (default ``benchmarks/plain_notes``:
``workspace/`` and ``questions.json``); it is read where it is and copied to a temporary
folder, never changed. Per provider:

1. *before*: index the copy and ask every question once (``memory_search``, top 6; the
   searches also leave the recall telemetry consolidation reads);
2. one consolidation with a scripted model that applies the updates the notes support:
   for every current-value question whose stale line is in a target file and whose
   answer line is in a note, an ``update`` of the stale line to the answer line's text,
   citing that line (questions naming one stale line are merged into one update);
   promotion thresholds are 1 recall by 1 query (the benchmark's own questions are the
   only recall history), ``max_change_fraction`` is ``--fraction``;
3. *after*: ask every question again.

Printed, before and after: ``memory_stale_first`` (current-value questions whose top-6
snippets show a stale value of a target file before the current one, or alone),
``stale_first`` (the same over every stale line, daily notes and USER.md included),
``hit_at_6`` over all questions, and the run's status and gate verdicts. The judge (a
value "shows" when its text is in the joined snippets; first position wins) is the
plain-notes benchmark's.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from plain_notes import NOW, judge  # the same "today" and the same judge of a hit

import memmw
from memmw.consolidation import consolidate


def line_of(ws: Path, path: str, text: str) -> tuple[int, str]:
    for n, line in enumerate((ws / path).read_text(encoding="utf-8").splitlines(), 1):
        if text in line:
            return n, line
    raise SystemExit(f"{path}: {text!r} is on no line")


def ask(mem: memmw.Memory, questions: list[dict[str, Any]], targets: set[str]) -> dict[str, Any]:
    hits = memory_stale = stale_first = 0
    rows = []
    for item in questions:
        found = mem.search(item["q"], 6)
        text = "\n".join(h.snippet for h in found)
        answer = item["answer"]["text"]
        stale = [s["text"] for s in item.get("stale", [])]
        target_stale = [s["text"] for s in item.get("stale", []) if s["path"] in targets]
        hit, first = judge(text, answer, stale)
        hits += hit
        mem_first = False
        if item["kind"] == "current-value":
            stale_first += first
            mem_first = judge(text, answer, target_stale)[1] if target_stale else False
            memory_stale += mem_first
        rows.append({"q": item["q"], "kind": item["kind"], "hit": hit, "stale_first": first,
                     "memory_stale_first": mem_first,
                     "top": [f"{h.path}#L{h.start_line}" for h in found]})
    current = [q for q in questions if q["kind"] == "current-value"]
    return {
        "hit_at_6": round(hits / len(questions), 4),
        "hits": hits,
        "stale_first": stale_first,
        "memory_stale_first": memory_stale,
        "current_value_questions": len(current),
        "with_a_stale_target_line": sum(
            1 for q in current if any(s["path"] in targets for s in q.get("stale", []))
        ),
        "rows": rows,
    }


def scripted_updates(ws: Path, questions: list[dict[str, Any]], targets: set[str]) -> list[dict[str, Any]]:
    """The updates the notes support: each stale target line -> the newer lines' text."""
    by_line: dict[tuple[str, int], list[tuple[str, int, str, str]]] = defaultdict(list)
    for item in questions:
        if item["kind"] != "current-value":
            continue
        ans = item["answer"]
        if ans["path"] in targets:
            continue
        a_line, a_text = line_of(ws, ans["path"], ans["text"])
        for stale in item.get("stale", []):
            if stale["path"] in targets:
                s_line, _ = line_of(ws, stale["path"], stale["text"])
                entry = (ans["path"], a_line, a_text, ans["text"])
                if (ans["path"], a_line) not in {(p, n) for p, n, _t, _q in by_line[(stale["path"], s_line)]}:
                    by_line[(stale["path"], s_line)].append(entry)
    edits = []
    for (path, line), answers in sorted(by_line.items()):
        text = " / ".join(a_text.lstrip("-* ").strip() for _p, _n, a_text, _q in answers)
        edits.append({
            "op": "update", "file": path, "line": line, "text": text,
            "sources": [{"path": p, "line": n, "quote": q} for p, n, _t, q in answers],
        })
    return edits


def run_provider(provider: str, args: argparse.Namespace) -> dict[str, Any]:
    questions = json.loads((args.data / "questions.json").read_text(encoding="utf-8"))
    targets = set(args.targets.split(","))
    tmp = Path(tempfile.mkdtemp(prefix="memmw-consolidation-plain-"))
    try:
        ws, state = tmp / "ws", tmp / "state"
        shutil.copytree(args.data / "workspace", ws)
        config = memmw.MemoryConfig.from_dict({
            "provider": provider,
            "consolidation": {
                "targets": sorted(targets), "min_recalls": 1, "min_queries": 1,
                "recency_days": 3650, "min_score": 0.0, "max_change_fraction": args.fraction,
            },
        })
        with memmw.Memory(workspace=ws, state_dir=state, config=config) as mem:
            mem.sync()
            before = ask(mem, questions, targets)
            edits = scripted_updates(ws, questions, targets)
            report = consolidate(mem, lambda messages: json.dumps({"edits": edits}), now=NOW)
            mem.sync()
            after = ask(mem, questions, targets)
        return {
            "provider": provider,
            "edits": len(edits),
            "run": {"status": report.status, "gate": report.gate, "detail": report.detail,
                    "gates": [(g.gate, g.passed) for g in report.gates],
                    "changes": {k: list(v) for k, v in report.changes.items()}},
            "before": {k: v for k, v in before.items() if k != "rows"},
            "after": {k: v for k, v in after.items() if k != "rows"},
            "after_rows": after["rows"] if args.verbose else None,
            "before_rows": before["rows"] if args.verbose else None,
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--data",
        type=Path,
        default=Path(__file__).resolve().parent / "plain_notes",
        help="the plain-notes folder (default: benchmarks/plain_notes)",
    )
    parser.add_argument("--providers", default="none")
    parser.add_argument("--targets", default="MEMORY.md")
    parser.add_argument("--fraction", type=float, default=0.5)
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    out = {p: run_provider(p, args) for p in args.providers.split(",") if p}
    text = json.dumps(out, indent=2, ensure_ascii=False)
    print(text)
    if args.json is not None:
        args.json.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
