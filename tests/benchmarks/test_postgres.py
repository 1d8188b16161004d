"""benchmarks/postgres.py runs end to end on a tiny workload (it imports scale.py helpers)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "postgres.py"


def test_the_many_agents_benchmark_runs_and_checks_its_rows(pg_database: str) -> None:
    out = subprocess.run(
        [sys.executable, str(BENCH), "--dsn", pg_database, "--agents", "2", "--chunks", "60",
         "--dims", "16", "--searchers", "1", "--syncers", "1", "--seconds", "2",
         "--sqlite-queries", "5"],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "errors 0" in out.stdout
    assert "rows equal to a clean recomputation: yes" in out.stdout
