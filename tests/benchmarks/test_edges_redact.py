"""benchmarks/edges.py --only redact: every credential form through every conversation path
leaves nothing in the index file, snippets, telemetry, notes or filtered logs (issue 20)."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]


@functools.cache
def _edges() -> Any:
    spec = importlib.util.spec_from_file_location("bench_edges", ROOT / "benchmarks" / "edges.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@given(st.floats(min_value=0, max_value=1e6), st.sampled_from(["4821", "hunter2", "Stockholm1"]))
def test_a_secret_inside_a_number_or_word_is_not_a_leak(number: float, secret: str) -> None:
    """Log records and telemetry hold float timings (``seconds=0.0378482100``): a PIN found
    inside one is chance, not a leak; the same PIN between spaces or after ``=`` is one."""
    in_text = _edges()._in_text
    noise = f"seconds={number}{secret}7 id=ab{secret}cd".encode()
    assert not in_text(secret, noise)
    assert in_text(secret, noise + f" pin={secret}.".encode())
    assert in_text(secret, f"my PIN is {secret}\n".encode())


def test_the_redact_scenario_finds_no_leak() -> None:
    result = _edges().bench_redact()
    assert result["formsTried"] >= 100 and result["flushTurns"] == 1 and result["archives"]
    assert result["leakedForms"] == {}, result["leakedForms"]
    assert set(result["leaks"].values()) == {0}
    assert result["rawLogLeaks"] == []
