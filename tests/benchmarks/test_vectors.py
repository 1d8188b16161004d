"""benchmarks/vectors.py runs end to end on a tiny workspace (it broke once unnoticed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_vector_benchmark_runs_on_a_tiny_workspace(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "vectors.py"), "--sizes", "120",
         "--dims", "16", "--queries", "3", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    row = out.stdout.strip().splitlines()[-1]
    assert "'load_blocks_ms'" in row and "'load_rows_ms'" in row and "'hybrid_p50_ms'" in row
