"""benchmarks/flush_coverage.py runs end to end on a handful of conversations."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.optional  # the LangChain half needs the langchain extra

ROOT = Path(__file__).resolve().parents[2]


def test_the_flush_coverage_benchmark_runs_on_a_few_conversations(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "flush_coverage.py"),
         "--conversations", "6", "--seed", "3", "--json", str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:] + run.stdout[-2000:]
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["conversations"] == 6
    assert set(report["by_adapter"]) == {"loop", "langchain"}
    total = report["total"]
    assert total["evicted"] > 0 and total["compactions"] > 0 and total["flushes"] > 0
    assert total["evicted_unseen"] == 0 and total["failed_turns"] == 0
    assert "evicted-unseen: 0" in run.stdout
