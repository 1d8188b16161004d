"""A consolidation run with scripted models: each gate refuses (nothing written, gate named),
a good run supersedes a stale value with the newer one and its citation, undo restores."""

from __future__ import annotations

import hashlib
from pathlib import Path

from memmw.consolidation.journal import runs
from memmw.consolidation.run import consolidate, lock_path, undo
from memmw.engine.memory import Memory
from memmw.workspace.locks import exclusive_lock

from .conftest import GOOD_EDIT as GOOD
from .conftest import make_memory, record_recalls, scripted, snapshot


def assert_refused(mem: Memory, ws: Path, model: object, gate: str) -> None:
    before = snapshot(ws)
    report = consolidate(mem, model)  # type: ignore[arg-type]
    assert report.status == "refused", report
    assert report.gate == gate, report
    assert snapshot(ws) == before
    assert not [r for r in runs(mem.state_dir) if r.data.get("state") == "applied"]


def test_a_good_run_supersedes_the_stale_value_with_the_newer_one_and_its_citation(
    mem: Memory, ws: Path
) -> None:
    report = consolidate(mem, scripted(GOOD))
    assert report.status == "applied", report
    lines = (ws / "MEMORY.md").read_text(encoding="utf-8").splitlines()
    day = report.changes["MEMORY.md"][0].rsplit("(superseded ", 1)[1][:10]
    assert lines[3] == (
        "- Deploy target: production (source: memory/2026-11-28.md#L2)"
        f" ~~Deploy target: staging~~ (superseded {day})"
    )
    assert lines[:3] == ["# Memory", "", "## Work"] and lines[4:] == [
        "- Editor: vim",
        "- Team lead: Alice",
        "- Standup at 09:30",
    ]
    # The index follows: the newer value leads the entry, the old one stays as history.
    hits = mem.search("deploy target", min_score=0.0)
    memory_hits = [h for h in hits if h.path == "MEMORY.md"]
    assert memory_hits
    snippet = memory_hits[0].snippet
    assert snippet.index("production") < snippet.index("staging")
    assert all(g.passed for g in report.gates)


def test_undo_restores_byte_for_byte(ws: Path, tmp_path: Path) -> None:
    odd = b"# Memory\r\n\r\n## Work\r\n- Deploy target: staging\r\n- Editor: vim\xc2\xa0\r\n- x"
    (ws / "MEMORY.md").write_bytes(odd)
    mem = make_memory(ws, tmp_path)
    record_recalls(mem, "memory/2026-11-28.md", 2, ["a", "b", "c"])
    add_context = {
        "op": "add",
        "file": "active-context.md",
        "text": "Now: moving the deploy to production",
        "sources": ["memory/2026-11-28.md#L2"],
    }
    report = consolidate(mem, scripted(GOOD, add_context))
    assert report.status == "applied", report
    assert (ws / "MEMORY.md").read_bytes() != odd
    assert (ws / "active-context.md").exists()
    back = undo(mem)
    assert back.status == "undone", back
    assert (ws / "MEMORY.md").read_bytes() == odd
    assert not (ws / "active-context.md").exists()  # it did not exist before the run
    assert undo(mem).status == "nothing"
    mem.close()


def test_undo_refuses_when_a_target_was_edited_since(mem: Memory, ws: Path) -> None:
    assert consolidate(mem, scripted(GOOD)).applied
    with (ws / "MEMORY.md").open("a", encoding="utf-8") as fh:
        fh.write("- added by a person\n")
    edited = (ws / "MEMORY.md").read_bytes()
    assert undo(mem).status == "refused"
    assert (ws / "MEMORY.md").read_bytes() == edited


def test_a_model_that_drops_entries_is_refused_by_keep(mem: Memory, ws: Path) -> None:
    text = (ws / "MEMORY.md").read_text(encoding="utf-8").replace("- Editor: vim\n", "")
    assert_refused(mem, ws, scripted({"op": "rewrite", "file": "MEMORY.md", "text": text}), "keep")


def test_a_model_that_edits_an_entry_in_place_is_refused_by_keep(mem: Memory, ws: Path) -> None:
    edit = {"op": "edit", "file": "MEMORY.md", "line": 4, "text": "- Deploy target: production"}
    assert_refused(mem, ws, scripted(edit), "keep")


def test_supersede_without_a_cited_reason_is_refused_by_keep(mem: Memory, ws: Path) -> None:
    assert_refused(
        mem, ws, scripted({"op": "supersede", "file": "MEMORY.md", "line": 5, "reason": "old"}), "keep"
    )


def test_too_many_changes_in_one_run_are_refused_by_keep(ws: Path, tmp_path: Path) -> None:
    mem = make_memory(ws, tmp_path, max_change_fraction=0.25)  # 4 live entries: 1 change
    record_recalls(mem, "memory/2026-11-28.md", 2, ["a", "b", "c"])
    cite = ["memory/2026-11-28.md#L2"]
    model = scripted(
        {"op": "supersede", "file": "MEMORY.md", "line": 4, "reason": "moved", "sources": cite},
        {"op": "supersede", "file": "MEMORY.md", "line": 5, "reason": "moved", "sources": cite},
    )
    assert_refused(mem, ws, model, "keep")
    mem.close()


def test_invented_citations_are_refused(mem: Memory, ws: Path) -> None:
    for source in (
        "memory/2026-11-28.md#L40",  # past the end
        "memory/2026-11-29.md#L1",  # no such note
        "memory/2026-11-28.md#L1",  # a heading
        "../outside.md#L1",
    ):
        add = {"op": "add", "file": "MEMORY.md", "text": "Deploy target: mars", "sources": [source]}
        assert_refused(mem, ws, scripted(add), "citations")
    misquoted = dict(GOOD, sources=[{"path": "memory/2026-11-28.md", "line": 3, "quote": "production"}])
    assert_refused(mem, ws, scripted(misquoted), "citations")
    assert_refused(mem, ws, scripted({"op": "add", "file": "MEMORY.md", "text": "no source"}), "citations")


def test_a_private_line_never_moves_into_a_shared_file(ws: Path, tmp_path: Path) -> None:
    (ws / "memory" / "team.md").write_text("# Team notes\n- We ship on Fridays\n", encoding="utf-8")
    mem = make_memory(ws, tmp_path, targets=["MEMORY.md", "memory/team.md"])
    record_recalls(mem, "memory/2026-11-28.md", 2, ["a", "b", "c"])
    by_citation = {
        "op": "add",
        "file": "memory/team.md",
        "text": "Deploy target is production",
        "sources": ["memory/2026-11-28.md#L2"],
    }
    assert_refused(mem, ws, scripted(by_citation), "privacy")
    by_copy = {
        "op": "add",
        "file": "memory/team.md",
        "text": "Decided: the deploy target is now production (switched from staging)",
        "sources": ["memory/team.md#L2"],
    }
    assert_refused(mem, ws, scripted(by_copy), "privacy")
    mem.close()


def test_a_group_written_line_is_never_promoted(mem: Memory, ws: Path) -> None:
    add = {
        "op": "add",
        "file": "MEMORY.md",
        "text": "Deploy target: the moon",
        "sources": ["memory/groups/team/2026-11-28.md#L2"],
    }
    assert_refused(mem, ws, scripted(add), "provenance")


def test_a_result_over_the_bootstrap_budget_is_refused(ws: Path, tmp_path: Path) -> None:
    from memmw import MemoryConfig

    config = MemoryConfig.from_dict(
        {
            "provider": "none",
            "bootstrap": {"max_chars_per_file": 200},
            "consolidation": {"min_recalls": 2, "min_queries": 2},
        }
    )
    mem = Memory(workspace=ws, state_dir=tmp_path / "state", agent_id="main", config=config)
    record_recalls(mem, "memory/2026-11-28.md", 2, ["a", "b", "c"])
    add = {"op": "add", "file": "MEMORY.md", "text": "Deploy " + "x" * 150, "sources": ["memory/2026-11-28.md#L2"]}
    assert_refused(mem, ws, scripted(add), "budget")
    mem.close()


def test_a_human_edit_during_the_run_is_kept_and_the_run_refused(mem: Memory, ws: Path) -> None:
    def human() -> None:
        with (ws / "MEMORY.md").open("a", encoding="utf-8") as fh:
            fh.write("- Deploy target: production (typed by hand)\n")

    before = (ws / "MEMORY.md").read_bytes()
    report = consolidate(mem, scripted(GOOD, during=human))
    assert report.status == "refused" and report.gate == "unchanged", report
    assert (ws / "MEMORY.md").read_bytes() == before + b"- Deploy target: production (typed by hand)\n"
    assert not [r for r in runs(mem.state_dir) if r.data.get("state") == "applied"]


def test_a_malformed_reply_is_refused_by_proposal(mem: Memory, ws: Path) -> None:
    assert_refused(mem, ws, lambda messages: "I think it is fine", "proposal")
    assert_refused(mem, ws, scripted({"op": "update", "file": "MEMORY.md", "line": 99, "text": "x"}), "proposal")
    assert_refused(mem, ws, scripted({"op": "add", "file": "USER.md", "text": "x"}), "proposal")


def test_one_run_per_workspace_at_a_time(mem: Memory, ws: Path) -> None:
    path = lock_path(ws)
    path.parent.mkdir(parents=True, exist_ok=True)
    before = snapshot(ws)
    with exclusive_lock(path):
        report = consolidate(mem, scripted(GOOD))
        assert report.status == "busy"
        assert undo(mem).status == "busy"
    assert snapshot(ws) == before


def test_dry_run_explains_and_writes_nothing(mem: Memory, ws: Path) -> None:
    before = snapshot(ws)
    called = []
    report = consolidate(mem, lambda m: called.append(m) or "{}", dry_run=True)
    assert report.status == "dry-run" and not called
    assert snapshot(ws) == before
    best = report.candidates.candidates[0] if report.candidates else None
    assert best is not None and best.citation == "memory/2026-11-28.md#L2"
    assert any("recalled 3x" in r for r in best.reasons)


def test_the_pre_image_is_kept_in_the_state_folder(mem: Memory, ws: Path) -> None:
    before = (ws / "MEMORY.md").read_bytes()
    report = consolidate(mem, scripted(GOOD))
    record = runs(mem.state_dir)[0]
    assert record.run_id == report.run_id and record.data["state"] == "applied"
    assert record.pre_image(0) == before
    assert record.data["targets"][0]["post_sha"] == hashlib.sha256(
        (ws / "MEMORY.md").read_bytes()
    ).hexdigest()


def test_a_human_edit_between_the_gates_and_the_write_is_caught_under_the_lock(
    mem: Memory, ws: Path, monkeypatch: object
) -> None:
    """The second target changes after the gates ran: the note writer refuses it under the
    note's lock, and the first target, already written, is put back byte for byte."""
    import memmw.consolidation.run as run_mod

    (ws / "active-context.md").write_text("# Now\n- Working on the deploy\n", encoding="utf-8")
    real = run_mod.run_gates

    def gates_then_human(data: object) -> object:
        results = real(data)  # type: ignore[arg-type]
        with (ws / "active-context.md").open("a", encoding="utf-8") as fh:
            fh.write("- typed by hand\n")
        return results

    monkeypatch.setattr(run_mod, "run_gates", gates_then_human)  # type: ignore[attr-defined]
    before = (ws / "MEMORY.md").read_bytes()
    context = {
        "op": "add",
        "file": "active-context.md",
        "text": "Deploying to production",
        "sources": ["memory/2026-11-28.md#L2"],
    }
    report = consolidate(mem, scripted(GOOD, context))
    assert report.status == "refused" and report.gate == "unchanged", report
    assert (ws / "MEMORY.md").read_bytes() == before
    assert (ws / "active-context.md").read_text(encoding="utf-8").endswith("- typed by hand\n")
    assert "Deploying to production" not in (ws / "active-context.md").read_text(encoding="utf-8")


def test_a_second_update_keeps_the_whole_history_newest_first(mem: Memory, ws: Path) -> None:
    assert consolidate(mem, scripted(GOOD)).applied
    record_recalls(mem, "memory/2026-11-28.md", 4, ["x", "y", "z"])
    newer = dict(GOOD, text="Deploy target: eu-west production", sources=["memory/2026-11-28.md#L4"])
    report = consolidate(mem, scripted(newer))
    assert report.applied, report
    line = (ws / "MEMORY.md").read_text(encoding="utf-8").splitlines()[3]
    assert line.startswith("- Deploy target: eu-west production (source: memory/2026-11-28.md#L4) ~~")
    assert line.index("Deploy target: production") < line.index("Deploy target: staging")
    assert line.count("(superseded ") == 2


def test_a_run_killed_while_writing_can_be_undone(
    mem: Memory, ws: Path, monkeypatch: object
) -> None:
    import pytest

    import memmw.consolidation.run as run_mod

    before = (ws / "MEMORY.md").read_bytes()
    real = run_mod.write_note
    calls = []

    def dies_on_the_second(path: Path, **kwargs: object) -> object:
        calls.append(path.name)
        if len(calls) == 2:
            raise KeyboardInterrupt  # the process is stopped between two files
        return real(path, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(run_mod, "write_note", dies_on_the_second)  # type: ignore[attr-defined]
    context = {"op": "add", "file": "active-context.md", "text": "Deploying to production",
               "sources": ["memory/2026-11-28.md#L2"]}
    with pytest.raises(KeyboardInterrupt):
        consolidate(mem, scripted(GOOD, context))
    assert (ws / "MEMORY.md").read_bytes() != before
    assert runs(mem.state_dir)[0].data["state"] == "writing"
    back = undo(mem)
    assert back.status == "undone" and back.restored == ("MEMORY.md",)
    assert (ws / "MEMORY.md").read_bytes() == before
    assert not (ws / "active-context.md").exists()


def test_a_persons_line_never_moves_into_the_owners_memory(mem: Memory, ws: Path) -> None:
    """A principal's notes (``memory/principals/<id>/``) are read by that person only: a
    consolidation never promotes them into the owner's files, cited or copied."""
    alice = ws / "memory" / "principals" / "alice"
    alice.mkdir(parents=True)
    (alice / "2026-11-28.md").write_text(
        "# Alice\n- Alice's new door code is 4417, decided today\n", encoding="utf-8"
    )
    cited = {
        "op": "add",
        "file": "MEMORY.md",
        "text": "Alice's door code: 4417",
        "sources": ["memory/principals/alice/2026-11-28.md#L2"],
    }
    before = snapshot(ws)
    report = consolidate(mem, scripted(cited))
    assert report.status == "refused" and report.gate in {"privacy", "provenance"}, report
    assert snapshot(ws) == before
    # Recalled often, it is still never a candidate, so it is never shown to the model.
    from memmw.consolidation.run import candidates_for

    record_recalls(mem, "memory/principals/alice/2026-11-28.md", 2, ["a", "b", "c", "d"])
    report_c = candidates_for(mem)
    assert not [e for e in report_c.entries if e.path.startswith("memory/principals/")]
