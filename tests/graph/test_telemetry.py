"""Telemetry log: append, summarise (percentiles, hit and injection rates), bad lines, rotation."""

from __future__ import annotations

from pathlib import Path

from memmw import Memory
from memmw.graph import telemetry as tel
from memmw.graph.telemetry import TelemetryLog, summarize_telemetry


def test_summary_of_a_log(tmp_path: Path) -> None:
    log = TelemetryLog(tmp_path / "t.jsonl")
    for ms in (1, 2, 3, 4, 100):
        log.record("search", ms=ms, hits=1 if ms < 4 else 0)
    log.record("inject", ms=5, hits=2, tokens=40)
    log.record("inject", ms=7, hits=0, tokens=0, deadline=True)
    with open(tmp_path / "t.jsonl", "a") as fh:
        fh.write("not json\n[1]\n")
    s = summarize_telemetry(tmp_path / "t.jsonl")
    assert s["events"] == 7 and s["bad_lines"] == 2
    search = s["by_event"]["search"]
    assert (search["count"], search["p50_ms"], search["p95_ms"], search["hit_rate"]) == (5, 3.0, 100.0, 0.6)
    assert s["injection"] == {
        "turns": 2,
        "injected_turns": 1,
        "injection_rate": 0.5,
        "avg_tokens": 20.0,
        "deadline_hits": 1,
    }
    assert summarize_telemetry(tmp_path / "missing.jsonl")["events"] == 0


def test_disabled_and_rotation(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    off = TelemetryLog(tmp_path / "off.jsonl", enabled=False)
    off.record("search", ms=1)
    assert not (tmp_path / "off.jsonl").exists()
    monkeypatch.setattr(tel, "MAX_BYTES", 200)
    log = TelemetryLog(tmp_path / "r.jsonl")
    for _ in range(20):
        log.record("search", ms=1.0, hits=3)
    assert (tmp_path / "r.jsonl.1").exists() and (tmp_path / "r.jsonl").stat().st_size < 400


def test_memory_stats_counts_searches_and_facts(mem: Memory) -> None:
    mem.search("Lisbon")
    mem.facts("Where does Ali live")
    stats = mem.stats()
    assert stats["by_event"]["search"]["count"] == 1 and stats["by_event"]["facts"]["count"] == 1


def test_telemetry_text_fields_pass_the_redaction(tmp_path: Path) -> None:
    log = TelemetryLog(tmp_path / "t.jsonl")
    log.record("search", ms=1.0, error="provider said: bad key sk-abc123def456", hits=0)
    text = (tmp_path / "t.jsonl").read_text(encoding="utf-8")
    assert "sk-abc123def456" not in text and '"hits": 0' in text


def test_the_query_key_is_kept_as_is_and_skips_the_secret_scanner(
    tmp_path: Path, monkeypatch  # type: ignore[no-untyped-def]
) -> None:
    """``q`` is memmw's own hash: recorded exactly, never sent through redaction (its first
    call imports the secret scanner, which a fresh process's first search paid for)."""
    import json

    seen: list[str] = []

    def spy(text: str) -> str:
        seen.append(text)
        return text.replace("hunter2", "[REDACTED]")

    monkeypatch.setattr(tel, "redact_secrets", spy)
    log = TelemetryLog(tmp_path / "t.jsonl")
    key = tel.query_key("password is hunter2, what is the gateway port?")
    log.record("search", q=key, error="login failed: password=hunter2")
    event = json.loads((tmp_path / "t.jsonl").read_text(encoding="utf-8"))
    assert event["q"] == key and len(key) == 16 and int(key, 16) >= 0
    assert key not in seen and event["error"] == "login failed: password=[REDACTED]"
