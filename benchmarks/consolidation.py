"""How long ``memmw consolidate --dry-run`` takes to judge a 2,000-note workspace.

Usage::

    python benchmarks/consolidation.py [--notes 2000] [--events 20000] [--runs 5] [--dir DIR]

Generates (seeded) a workspace of ``--notes`` dated notes (daily notes and session
archives over several years, 12-20 entries each: facts, decisions and chatter), a
MEMORY.md of 60 entries, and a telemetry log of ``--events`` searches whose hits cite
random lines of the notes (most recalls on a few hundred notes, as in real use). Then it
measures, median of ``--runs``:

* ``judge_ms``: :func:`memmw.consolidation.candidates_for` in one open ``Memory`` (what
  the dry run computes: read the telemetry, read every recalled note, judge and explain
  every recalled entry, count the others);
* ``cli_ms``: the whole command, ``memmw consolidate --dry-run --json`` in a fresh
  process (interpreter start, imports, opening the memory, judging, printing the best 50
  entries and the counts of every condition), after one uncounted run that caches the
  compiled modules, as an installed package has them.

Wall time (``*_ms``) and CPU time (``*_cpu_ms``: this process's, or the child's user +
system time) are both printed, with the load average: on a shared machine the wall time
grows with the load, the CPU time much less.

The promise is a dry run under 2 s on 2,000 notes.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
SEED = 26
FACTS = [
    "Deploy target: {w}",
    "Decided: we switch the build to {w}",
    "Alice prefers {w} for reviews",
    "The {w} service runs on port {n}",
    "Budget for {w} is {n} EUR",
    "Meeting with Dana about {w}",
    "Chatted about the weather and {w}",
    "Lunch at the {w} place was nice",
]
WORDS = "atlas heron nimbus quartz willow ember falcon juniper orbit prism tundra zephyr".split()


def generate(root: Path, notes: int, rng: random.Random) -> None:
    (root / "memory").mkdir(parents=True)
    lines = ["# Memory", ""] + [
        "- " + rng.choice(FACTS).format(w=rng.choice(WORDS), n=rng.randint(1, 9999)) for _ in range(60)
    ]
    (root / "MEMORY.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    day = dt.date(2024, 1, 1)
    for i in range(notes):
        name = f"{day.isoformat()}.md" if i % 3 else f"{day.isoformat()}-session-{i}.md"
        if i % 3:
            day += dt.timedelta(days=1)
        body = [f"# {day.isoformat()}"] + [
            "- " + rng.choice(FACTS).format(w=rng.choice(WORDS), n=rng.randint(1, 9999))
            for _ in range(rng.randint(12, 20))
        ]
        (root / "memory" / name).write_text("\n".join(body) + "\n", encoding="utf-8")


def write_telemetry(log: Path, paths: list[tuple[str, int]], events: int, rng: random.Random) -> None:
    from memmw.graph.telemetry import query_key

    hot = rng.sample(paths, min(300, len(paths)))
    now = time.time()
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w", encoding="utf-8") as fh:
        for _ in range(events):
            cites = []
            for _ in range(rng.randint(1, 6)):
                path, n = rng.choice(hot) if rng.random() < 0.8 else rng.choice(paths)
                start = rng.randint(2, n)
                cites.append(f"{path}#L{start}-L{min(n, start + rng.randint(0, 3))}")
            event = {
                "ts": now - rng.uniform(0, 90) * 86400,
                "event": "search",
                "ms": 3.2,
                "hits": len(cites),
                "chars": 20,
                "q": query_key(f"query {rng.randint(0, events // 4)}"),
                "cites": cites,
            }
            fh.write(json.dumps(event) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=2000)
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from memmw import MemoryConfig
    from memmw.consolidation import candidates_for
    from memmw.engine.memory import Memory

    rng = random.Random(SEED)
    base = args.dir or Path(tempfile.mkdtemp(prefix="memmw-consolidation-"))
    ws, state = base / "ws", base / "state"
    if not ws.exists():
        generate(ws, args.notes, rng)
    paths = []
    for p in sorted((ws / "memory").glob("*.md")):
        paths.append((f"memory/{p.name}", len(p.read_text(encoding="utf-8").splitlines())))
    config = MemoryConfig(provider="none")
    with Memory(workspace=ws, state_dir=state, agent_id="main", config=config) as mem:
        write_telemetry(Path(mem.graph_engine.telemetry.path), paths, args.events, rng)
        mem.sync()
        judge, judge_cpu = [], []
        for _ in range(args.runs):
            t, c = time.perf_counter(), time.process_time()
            report = candidates_for(mem)
            judge.append((time.perf_counter() - t) * 1000)
            judge_cpu.append((time.process_time() - c) * 1000)
    env = dict(os.environ, PYTHONPATH=str(HERE), MEMMW__PROVIDER="none")
    # As installed: compiled modules are cached (a first, uncounted run writes them).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    cli, cli_cpu = [], []
    for i in range(args.runs + 1):
        t = time.perf_counter()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(
            [sys.executable, "-m", "memmw", "-w", str(ws), "--state-dir", str(state),
             "consolidate", "--dry-run", "--json"],
            capture_output=True, env=env, check=True,
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if i == 0:
            continue  # the warm-up run
        cli.append((time.perf_counter() - t) * 1000)
        cli_cpu.append(
            (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000
        )
    data = json.loads(done.stdout)
    print(json.dumps({
        "notes": report.notes,
        "events": args.events,
        "judged_entries": len(report.entries),
        "candidates": len(report.candidates),
        "never_recalled": report.never_recalled,
        "cli_candidates": sum(1 for c in data["candidates"] if c["candidate"]),
        "judge_ms_median": round(statistics.median(judge), 1),
        "judge_ms_runs": [round(x, 1) for x in judge],
        "judge_cpu_ms_median": round(statistics.median(judge_cpu), 1),
        "cli_ms_median": round(statistics.median(cli), 1),
        "cli_ms_runs": [round(x, 1) for x in cli],
        "cli_cpu_ms_median": round(statistics.median(cli_cpu), 1),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }, indent=2))


if __name__ == "__main__":
    main()
