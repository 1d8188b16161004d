"""benchmarks/edges.py --only redact: every credential form through every conversation path
leaves nothing in the index file, snippets, telemetry, notes or filtered logs (issue 20)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_redact_scenario_finds_no_leak() -> None:
    spec = importlib.util.spec_from_file_location("bench_edges", ROOT / "benchmarks" / "edges.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    result = module.bench_redact()
    assert result["formsTried"] >= 100 and result["flushTurns"] == 1 and result["archives"]
    assert result["leakedForms"] == {}, result["leakedForms"]
    assert set(result["leaks"].values()) == {0}
    assert result["rawLogLeaks"] == []
