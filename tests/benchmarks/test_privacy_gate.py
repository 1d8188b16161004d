"""benchmarks/privacy_gate.py runs end to end on a tiny workspace (a benchmark nothing runs breaks unnoticed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_privacy_gate_benchmark_runs() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "privacy_gate.py"), "--notes", "5", "--rounds", "2"],
        capture_output=True, text=True, timeout=300, check=True, cwd=ROOT,
    ).stdout
    assert "private: 6 paths" in out and "group: 6 paths" in out
