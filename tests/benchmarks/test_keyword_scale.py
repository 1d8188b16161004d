"""benchmarks/keyword_scale.py: the check against a clean rebuild finds a damaged index; the
summaries of several fresh runs take each query's best and median time."""

from __future__ import annotations

import importlib
import sqlite3
from pathlib import Path

import pytest

from memmw.store.terms import term_hash
from memmw.text.analysis import query_terms

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def test_the_clean_rebuild_check_counts_a_lost_segment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    bench = importlib.import_module("keyword_scale")
    notes = tmp_path / "ws" / "memory"
    notes.mkdir(parents=True)
    for day in range(1, 6):
        (notes / f"2026-01-0{day}.md").write_text(
            "".join(f"- [D{day}:{t}] Ana: kayaks and lighthouses, turn {t}\n" for t in range(40)),
            encoding="utf-8",
        )
    spec = {
        "workspace": str(tmp_path / "ws"), "state": str(tmp_path / "state"),
        "clean_state": str(tmp_path / "clean"), "queries": ["kayaks lighthouses turn"],
    }
    healthy = bench._check(spec)
    assert healthy["terms_differ"] == 0 and healthy["stats_equal"]
    assert healthy["postings_checked"] > 0
    (db,) = [p for p in (tmp_path / "state").rglob("*.sqlite")]
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM postings WHERE term = ?", (term_hash(query_terms("kayaks")[0]),))
    damaged = bench._check(spec)
    assert damaged["terms_differ"] == 1


def test_the_segment_layout_counts_terms_short_before_their_last_segment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    bench = importlib.import_module("keyword_scale")
    db = tmp_path / "state" / "memory" / f"{bench.AGENT}.sqlite"
    db.parent.mkdir(parents=True)
    full = bench.SEGMENT_FULL
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE postings (source TEXT, term INTEGER, seg INTEGER, n INTEGER,"
                     " data BLOB)")
        conn.executemany("INSERT INTO postings VALUES ('memory', ?, ?, ?, x'')", [
            (1, 0, full), (1, full, 10),  # full, then a short last one: fine
            (2, 0, 10), (2, 10, full),  # a short one before the last
            (3, 0, 5),
        ])
    layout = bench.segment_layout({"state": str(tmp_path / "state")})
    assert layout["segments"] == 5 and layout["full"] == 2
    assert layout["terms_short_inside"] == 1
    assert layout["mean_n"] == (2 * full + 25) / 5


def test_several_fresh_runs_are_summarised_by_each_querys_best_and_median_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    bench = importlib.import_module("keyword_scale")
    runs = [[10.0, 50.0, 3.0], [12.0, 20.0, 9.0], [30.0, 40.0, 6.0]]
    report = {
        "codes": {"new": "."}, "postgres": {}, "concurrent": {}, "check": {},
        "sqlite": {"1000": {"new": {"index": {}, "search": {"keyword_ms": runs[0]},
                                    "search_runs": runs}}},
    }
    bench._summaries(report)
    srch = report["sqlite"]["1000"]["new"]["search"]
    assert srch["keyword"]["p50"] == 10.0  # the first run, as with one run
    assert srch["keyword_best"]["p50"] == 10.0  # of 10, 20, 3
    assert srch["keyword_best"]["n"] == 3
    assert srch["keyword_median"]["p50"] == 12.0  # of 12, 40, 6
    text = bench.table(report)
    assert "each query's best of its runs | 10.00 |" in text
    one = {**report, "sqlite": {"1000": {"new": {"index": {}, "search": {"keyword_ms": [1.0]},
                                                 "search_runs": [[1.0]]}}}}
    bench._summaries(one)
    assert "keyword_best" not in one["sqlite"]["1000"]["new"]["search"]
    assert "best of its runs" not in bench.table(one)
