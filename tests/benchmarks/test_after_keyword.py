"""benchmarks/after_keyword.py runs end to end on a tiny index (a benchmark nothing runs breaks unnoticed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from memmw import MemoryConfig

from ..conftest import make_memory

ROOT = Path(__file__).resolve().parents[2]


def test_the_after_keyword_benchmark_runs_on_a_tiny_index(tmp_path: Path) -> None:
    ws, state = tmp_path / "ws", tmp_path / "state"
    (ws / "memory").mkdir(parents=True)
    words = "harbour lighthouse tea basil gateway zeppelin hangar orchard".split()
    for day in range(1, 9):
        lines = [f"- {words[(day + i) % len(words)]} note {i} of day {day}" for i in range(12)]
        (ws / "memory" / f"2026-01-{day:02d}.md").write_text("\n".join(lines) + "\n")
    with make_memory(workspace=ws, state_dir=state, config=MemoryConfig(provider="none")) as mem:
        mem.sync()
    queries = tmp_path / "queries.jsonl"
    queries.write_text(
        "".join(json.dumps({"query": f"{w} day {i}"}) + "\n" for i in range(4) for w in words)
    )
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "after_keyword.py"), str(ws), str(state),
         str(queries), "--rounds", "1"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().endswith("same hits in every run: True")
