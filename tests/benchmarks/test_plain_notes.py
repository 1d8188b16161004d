"""benchmarks/plain_notes.py: the data set is sound and the benchmark runs (keyword only)."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_plain_notes", ROOT / "benchmarks" / "plain_notes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


plain_notes = _load()


def test_questions_name_one_answer_line_each_and_cover_every_kind() -> None:
    questions = plain_notes.load_questions(plain_notes.HERE / "workspace")  # exits on a bad one
    assert len(questions) >= 60
    assert {q["kind"] for q in questions} == set(plain_notes.KINDS)
    assert all(q.get("stale") for q in questions if q["kind"] == "current-value")
    planted = next(q for q in questions if q["q"] == "does the user have any food allergies?")
    assert planted["answer"]["text"] == "Allergic to peanuts"
    # No fact markup: the workspace is prose (no "key: value (since ...)" or [[links]]).
    for path in (plain_notes.HERE / "workspace").rglob("*.md"):
        text = path.read_text(encoding="utf-8")
        assert "[[" not in text and "(since " not in text and "<!--" not in text, path


def test_the_benchmark_reports_every_measure(tmp_path: Path) -> None:
    args = argparse.Namespace(
        providers="none", state_dir=tmp_path, tiktoken=False, verbose=False, deadline_ms=0
    )
    result = plain_notes.run(args)["results"]["none"]
    assert set(result["hit_rate"]) == {"block", "bootstrap_block", "facts", "search"}
    assert result["current_value_questions"] >= 12
    assert {"stale_first", "tokens_per_turn", "search_ms", "block_ms", "by_kind"} <= set(result)
