"""benchmarks/noreply_fuzz.py runs end to end on a few forms and finds nothing (a benchmark
nothing runs breaks unnoticed)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.optional  # the LangChain modes need the langchain extra

ROOT = Path(__file__).resolve().parents[2]


def test_the_noreply_fuzz_runs_and_reports_zero(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("noreply_fuzz", ROOT / "benchmarks" / "noreply_fuzz.py")
    assert spec is not None and spec.loader is not None
    fuzz = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fuzz)
    out = tmp_path / "fuzz.json"
    assert fuzz.main(["--forms", "15", "--seed", "3", "--json", str(out)]) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["forms"] == 15 and set(report["kinds"]) == {"silent", "cut", "blank", "ordinary"}
    assert report["forms_with"] == dict.fromkeys(fuzz.COUNTERS, 0), report["examples"]
    assert all(v == 0 for counts in report["by_mode"].values() for v in counts.values())
