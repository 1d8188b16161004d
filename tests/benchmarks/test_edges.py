"""benchmarks/edges.py's forget scenario runs and loses nothing (a benchmark nothing runs breaks unnoticed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_forget_scenario_runs_and_loses_no_line(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "edges.py"), "--only", "forget",
         "--seconds", "2", "--json", str(tmp_path / "edges.json")],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads((tmp_path / "edges.json").read_text())["forget"]
    assert result["linesLost"] == 0 and result["headerUnchanged"]
    assert result["forgetsDone"] >= 1 and result["agentLinesWritten"] >= 1
    assert result["entriesIntact"] == result["entries"]
