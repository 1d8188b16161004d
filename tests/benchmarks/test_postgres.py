"""benchmarks/postgres.py runs end to end on a tiny workload (it imports scale.py helpers)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_the_recomputation_catches_a_missing_posting_and_a_wrong_count(
    pg_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    monkeypatch.syspath_prepend(str(BENCH.parent))
    bench = importlib.import_module("postgres")
    from memmw.store.postgres.connection import open_pool

    open_pool(pg_database, max_size=1).close()
    chunks, _ = bench.load_agent(pg_database, 0, 60, 16, tmp_path)
    assert chunks > 0
    assert bench.verify(pg_database, 1) == []
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute(
            "DELETE FROM memmw.postings_segments WHERE ctid IN"
            " (SELECT ctid FROM memmw.postings_segments LIMIT 1)"
        )
        conn.execute("UPDATE memmw.source_stats SET total_len = total_len + 1")
    problems = bench.verify(pg_database, 1)
    assert any("postings" in p and "expected" in p for p in problems)
    assert any("stats" in p for p in problems)
