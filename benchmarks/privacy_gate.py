"""What the privacy gate costs per turn: the session's graph view and the [GRAPH MEMORY] block.

Usage::

    python benchmarks/privacy_gate.py [--notes 500] [--rounds 30]

Builds a workspace of ``--notes`` topic notes (one person with three facts each) plus the
curated files and a hard link, indexes it keyword-only, then times (CPU,
``time.process_time``) for a private and a group session: ``SessionAccess.check`` over every
indexed path, ``GraphEngine.view`` (the gate asked about every path each turn), and a whole
``ActiveMemory.build``. Prints the median over ``--rounds`` of each, in milliseconds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()

    from memmw import Memory, MemoryConfig
    from memmw.config import ActiveMemoryConfig
    from memmw.hooks.active_memory import ActiveMemory
    from memmw.workspace.access import SessionAccess

    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        (ws / "memory" / "people").mkdir(parents=True)
        (ws / "MEMORY.md").write_text("## Person 0 (P0)\n- city: Oslo\n", encoding="utf-8")
        (ws / "USER.md").write_text("- name: Ada\n", encoding="utf-8")
        for i in range(args.notes):
            (ws / "memory" / "people" / f"p{i}.md").write_text(
                f"## Person {i}\n- city: City{i}\n- team: Team{i % 7}\n- role: engineer\n",
                encoding="utf-8",
            )
        os.link(ws / "USER.md", ws / "memory" / "profile.md")
        config = MemoryConfig(provider="none", active_memory=ActiveMemoryConfig(deadline_ms=60_000))
        with Memory(workspace=ws, state_dir=Path(tmp) / "state", config=config) as mem:
            mem.sync()
            graph = mem.graph_engine.graph()
            paths = sorted({f.path for f in graph.facts})
            am = ActiveMemory(mem)
            for label, key in (("private", "main"), ("group", "agent:main:telegram:group:1")):
                gate = SessionAccess.for_session(ws, session_key=key)
                checks, views, builds = [], [], []
                for n in range(args.rounds):
                    t = time.process_time()
                    for p in paths:
                        gate.check(p)
                    checks.append(time.process_time() - t)
                    t = time.process_time()
                    mem.graph_engine.view(gate.injectable)
                    views.append(time.process_time() - t)
                    t = time.process_time()
                    am.build(f"Where does Person {n % args.notes} live?", session_key=key)
                    builds.append(time.process_time() - t)
                print(
                    f"{label}: {len(paths)} paths; check all {statistics.median(checks) * 1000:.2f} ms,"
                    f" view {statistics.median(views) * 1000:.2f} ms,"
                    f" block {statistics.median(builds) * 1000:.2f} ms (median of {args.rounds})"
                )


if __name__ == "__main__":
    main()
