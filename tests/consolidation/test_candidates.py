"""Promotion candidates without a model: recalled often, by distinct queries, lately, facts
or decisions from trusted notes, not yet promoted; each entry says why."""

from __future__ import annotations

import time
from pathlib import Path

from memmw.consolidation.candidates import find_candidates
from memmw.consolidation.run import candidates_for, consolidate
from memmw.engine.memory import Memory
from memmw.graph.telemetry import iter_events

from .conftest import make_memory, record_recalls, scripted


def by_cite(mem: Memory, **kwargs: object) -> dict[str, object]:
    return {c.citation: c for c in candidates_for(mem, **kwargs).entries}  # type: ignore[arg-type]


def test_a_search_records_its_query_key_and_cited_lines(mem: Memory) -> None:
    mem.search("deploy target production", min_score=0.0)
    events = [e for e in iter_events(mem.graph_engine.telemetry.path, event="search") if e.get("chars")]
    last = events[-1]
    assert "deploy" not in str(last)  # no query text, only its key
    assert len(last["q"]) == 16 and any(c.startswith("memory/2026-11-28.md#L") for c in last["cites"])


def test_real_searches_make_a_candidate(ws: Path, tmp_path: Path) -> None:
    mem = make_memory(ws, tmp_path)
    for q in ("deploy target production", "where do we deploy now", "production deploy decision"):
        mem.search(q, min_score=0.0)
    found = by_cite(mem)
    assert found["memory/2026-11-28.md#L2"].candidate  # type: ignore[attr-defined]
    mem.close()


def test_every_condition_is_explained(mem: Memory, ws: Path) -> None:
    record_recalls(mem, "memory/2026-11-28.md", 3, ["lunch", "food"])  # chatter
    record_recalls(mem, "memory/2026-11-28.md", 4, ["reviews"])  # one query only
    found = by_cite(mem)
    lunch = found["memory/2026-11-28.md#L3"]
    assert not lunch.candidate and "no: holds no fact or decision" in lunch.reasons  # type: ignore[attr-defined]
    reviews = found["memory/2026-11-28.md#L4"]
    assert not reviews.candidate  # type: ignore[attr-defined]
    assert "no: by 1 distinct queries (needs 2)" in reviews.reasons  # type: ignore[attr-defined]
    assert "no: recalled 1x (needs 2)" in reviews.reasons  # type: ignore[attr-defined]


def test_old_recalls_do_not_count_as_recent(ws: Path, tmp_path: Path) -> None:
    mem = make_memory(ws, tmp_path, recency_days=7)
    record_recalls(mem, "memory/2026-11-28.md", 2, ["a", "b", "c"], ts=time.time() - 30 * 86400)
    entry = by_cite(mem)["memory/2026-11-28.md#L2"]
    assert not entry.candidate  # type: ignore[attr-defined]
    assert any(r.startswith("no: last recalled 30.0 days ago") for r in entry.reasons)  # type: ignore[attr-defined]
    mem.close()


def test_group_written_entries_are_never_candidates(mem: Memory) -> None:
    record_recalls(mem, "memory/groups/team/2026-11-28.md", 2, ["a", "b", "c", "d"])
    entry = by_cite(mem)["memory/groups/team/2026-11-28.md#L2"]
    assert not entry.candidate  # type: ignore[attr-defined]
    assert any("untrusted" in r for r in entry.reasons)  # type: ignore[attr-defined]


def test_a_promoted_entry_is_no_longer_a_candidate(mem: Memory) -> None:
    model = scripted(
        {
            "op": "update",
            "file": "MEMORY.md",
            "line": 4,
            "text": "Deploy target: production",
            "sources": ["memory/2026-11-28.md#L2"],
        }
    )
    assert consolidate(mem, model).applied
    entry = by_cite(mem)["memory/2026-11-28.md#L2"]
    assert not entry.candidate and "no: already in a target file" in entry.reasons  # type: ignore[attr-defined]
    assert consolidate(mem, model).status == "nothing"


def test_never_recalled_entries_are_counted_and_listed_on_request(mem: Memory, ws: Path) -> None:
    report = find_candidates(ws, mem.graph_engine.telemetry.path, mem.config.consolidation)
    assert report.never_recalled == 3 and report.notes == 2  # L3, L4 and the group line
    full = find_candidates(
        ws, mem.graph_engine.telemetry.path, mem.config.consolidation, include_unrecalled=True
    )
    assert {c.citation for c in full.entries} >= {"memory/2026-11-28.md#L3", "memory/2026-11-28.md#L4"}
    assert all("no: never recalled" in c.reasons for c in full.entries if c.recalls == 0)


def test_hits_of_other_namespaces_are_not_this_workspace_s(mem: Memory) -> None:
    import json

    log = Path(mem.graph_engine.telemetry.path)
    with log.open("a", encoding="utf-8") as fh:
        for q in "xyz":
            fh.write(json.dumps({"ts": time.time(), "event": "search", "q": q,
                                 "cites": ["other:memory/2026-11-28.md#L4-L4"]}) + "\n")
    assert by_cite(mem).get("memory/2026-11-28.md#L4") is None


def test_activation_raises_the_score(mem: Memory, ws: Path) -> None:
    log, cfg = mem.graph_engine.telemetry.path, mem.config.consolidation
    plain = find_candidates(ws, log, cfg).entries[0]
    hot = find_candidates(ws, log, cfg, activation={(plain.path, plain.line): 3.0}).entries[0]
    assert hot.citation == plain.citation and hot.score > plain.score
    assert any("activation 1.00" in r for r in hot.reasons)


def test_memory_md_spelled_in_lower_case_is_the_target(ws: Path, tmp_path: Path) -> None:
    (ws / "MEMORY.md").rename(ws / "memory.md")
    mem = make_memory(ws, tmp_path)
    record_recalls(mem, "memory/2026-11-28.md", 2, ["a", "b", "c"])
    edit = {"op": "add", "file": "memory.md", "text": "Deploy target: production",
            "sources": ["memory/2026-11-28.md#L2"]}
    assert consolidate(mem, scripted(edit)).applied
    assert not (ws / "MEMORY.md").exists() or (ws / "MEMORY.md").samefile(ws / "memory.md")
    assert "Deploy target: production" in (ws / "memory.md").read_text(encoding="utf-8")
    mem.close()
