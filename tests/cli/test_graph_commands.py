"""The knowledge-graph commands: memmw facts, forget, graph and stats (issue 13)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memmw.cli import main
from memmw.cli.commands.stats import parse_since
from memmw.cli.common import EXIT_ERROR, EXIT_OK, EXIT_USAGE, iso

MEMORY_MD = """# Memory

## Alice Martin (Ali)
- aka: 爱丽丝
- city: Berlin
- employer: Acme Corp
- works_at [[Acme Corp]]

## Project Atlas
- status: design review
"""

DAILY = """# 2026-05-01
## Alice Martin
- city: Lisbon
Alice and Bob had lunch in Lisbon.
"""


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text(MEMORY_MD, encoding="utf-8")
    (root / "memory" / "2026-05-01.md").write_text(DAILY, encoding="utf-8")
    return root


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, object]]:
    code, out, _err = run(capsys, *args, "--json")
    data = json.loads(out)
    assert isinstance(data, dict), out
    return code, data


# -- conventions ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["facts", "forget", "graph", "stats"])
def test_each_command_has_help_with_examples(capsys: pytest.CaptureFixture[str], name: str) -> None:
    code, out, _ = run(capsys, name, "--help")
    assert code == EXIT_OK
    assert "Examples:" in out and f"memmw {name}" in out
    assert "--workspace" in out and "--json" in out and "--quiet" in out


def test_top_level_help_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "--help")
    for name in ("facts", "forget", "graph", "stats"):
        assert f"  {name} " in out
    assert 'memmw facts "' in out


# -- facts ---------------------------------------------------------------------------------
def test_facts_text_marks_current_and_cites(capsys: pytest.CaptureFixture[str], ws: Path) -> None:
    code, out, _ = run(capsys, "facts", "-w", str(ws), "where", "does", "Ali", "live")
    assert code == EXIT_OK
    lines = out.splitlines()
    assert lines[0] == "current     Alice Martin: city = Lisbon  memory/2026-05-01.md#L3"
    assert not any("Berlin" in line for line in lines)  # superseded: only with --history
    code, out, _ = run(capsys, "facts", "-w", str(ws), "Alice city", "--history")
    assert code == EXIT_OK
    assert "superseded  Alice Martin: city = Berlin  MEMORY.md#L5" in out.splitlines()


def test_facts_json_is_the_memory_facts_tool_payload(
    capsys: pytest.CaptureFixture[str], ws: Path, tmp_path: Path
) -> None:
    from memmw import Memory
    from memmw.agent.tools import facts_tool_payload

    state = tmp_path / "state"
    common = ("-w", str(ws), "--state-dir", str(state))
    code, data = run_json(capsys, "facts", "Alice city", "--history", "-n", "3", *common)
    assert code == EXIT_OK
    assert set(data) == {"results"}
    results = data["results"]
    assert isinstance(results, list) and len(results) == 3
    first = results[0]
    assert first["citation"] == "memory/2026-05-01.md#L3" and first["current"] is True
    assert {"kind", "entity", "key", "value", "text", "path", "line", "tier"} <= set(first)
    assert any(r["value"] == "Berlin" and r["current"] is False for r in results)
    with Memory(workspace=ws, state_dir=state) as mem:
        again = facts_tool_payload(
            mem, {"query": "Alice city", "history": True, "maxResults": 3}, citations=True
        )
    # Activation moves with each lookup; everything else is the same payload.
    strip = [{k: v for k, v in r.items() if k not in ("activation", "tier", "score")}
             for r in again["results"]]
    assert strip == [{k: v for k, v in r.items() if k not in ("activation", "tier", "score")}
                     for r in results]


def test_facts_needs_a_query_and_finds_nothing_quietly(
    capsys: pytest.CaptureFixture[str], ws: Path
) -> None:
    assert run(capsys, "facts", "-w", str(ws))[0] == EXIT_USAGE
    code, out, err = run(capsys, "facts", "-w", str(ws), "zebra quantum")
    assert code == EXIT_OK and out == "" and "No facts found." in err
    code, data = run_json(capsys, "facts", "-w", str(ws), "zebra quantum")
    assert code == EXIT_OK and data == {"results": []}


def test_facts_refreshes_the_index_when_files_changed(
    capsys: pytest.CaptureFixture[str], ws: Path
) -> None:
    assert run(capsys, "index", "-w", str(ws))[0] == EXIT_OK
    with (ws / "MEMORY.md").open("a", encoding="utf-8") as fh:
        fh.write("- database: Postgres\n")
    code, out, _ = run(capsys, "facts", "-w", str(ws), "Project Atlas database")
    assert code == EXIT_OK
    assert "Project Atlas: database = Postgres  MEMORY.md#L11" in out


def test_facts_does_not_embed(
    capsys: pytest.CaptureFixture[str], ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMMW__PROVIDER", "fake")
    assert run(capsys, "index", "-w", str(ws), "--no-embed")[0] == EXIT_OK
    assert run(capsys, "facts", "-w", str(ws), "Alice")[0] == EXIT_OK
    _, status = run_json(capsys, "status", "-w", str(ws))
    vector = status["vector"]
    assert isinstance(vector, dict) and vector["vectors"] == 0 and vector["pending"] > 0


# -- forget --------------------------------------------------------------------------------
def test_forget_by_citation_strikes_the_line_through(
    capsys: pytest.CaptureFixture[str], ws: Path
) -> None:
    before = (ws / "MEMORY.md").read_text(encoding="utf-8").splitlines()
    code, out, err = run(capsys, "forget", "-w", str(ws), "MEMORY.md#L6", "--reason", "left")
    assert code == EXIT_OK
    assert out == "retracted MEMORY.md#L6\n" and "struck through" in err
    after = (ws / "MEMORY.md").read_text(encoding="utf-8").splitlines()
    assert len(after) == len(before)  # nothing deleted
    assert after[5].startswith("- ~~employer: Acme Corp~~") and "left" in after[5]
    _, out, _ = run(capsys, "facts", "-w", str(ws), "Alice employer")
    assert "employer" not in out  # the index was synced at once


def test_forget_by_entity_and_key_json(capsys: pytest.CaptureFixture[str], ws: Path) -> None:
    code, data = run_json(capsys, "forget", "-w", str(ws), "--entity", "Ali", "--key", "city",
                          "--reason", "asked")
    assert code == EXIT_OK
    assert data["status"] == "ok" and data["reason"] == "asked"
    assert sorted(data["retracted"]) == ["MEMORY.md#L5", "memory/2026-05-01.md#L3"]  # type: ignore[arg-type]
    _, out, _ = run(capsys, "facts", "-w", str(ws), "Alice city", "--history")
    assert "city" not in out


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("notacitation", "citation must look like path#L12"),
        ("MEMORY.md#L1", "only list entries"),
        ("MEMORY.md#L99", "the file has"),
        ("memory/nope.md#L1", "no such memory file"),
        ("../outside.md#L1", "outside the workspace"),
    ],
)
def test_forget_bad_citation_exits_1_and_changes_nothing(
    capsys: pytest.CaptureFixture[str], ws: Path, target: str, message: str
) -> None:
    (ws.parent / "outside.md").write_text("- secret: 1\n", encoding="utf-8")
    before = (ws / "MEMORY.md").read_bytes()
    code, out, err = run(capsys, "forget", "-w", str(ws), target)
    assert code == EXIT_ERROR and out == ""
    assert err.startswith("memmw: error: ") and message in err
    code, data = run_json(capsys, "forget", "-w", str(ws), target)
    assert code == EXIT_ERROR and data["status"] == "error" and message in str(data["error"])
    assert (ws / "MEMORY.md").read_bytes() == before
    assert (ws.parent / "outside.md").read_text(encoding="utf-8") == "- secret: 1\n"


def test_forget_twice_and_unknown_fact_exit_1(capsys: pytest.CaptureFixture[str], ws: Path) -> None:
    assert run(capsys, "forget", "-w", str(ws), "MEMORY.md#L5")[0] == EXIT_OK
    code, _, err = run(capsys, "forget", "-w", str(ws), "MEMORY.md#L5")
    assert code == EXIT_ERROR and "already retracted" in err
    code, _, err = run(capsys, "forget", "-w", str(ws), "--entity", "Alice", "--key", "shoe size")
    assert code == EXIT_ERROR and "no fact 'shoe size'" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "say what to forget"),
        (("--entity", "Alice"), "--entity needs --key"),
        (("--key", "city"), "--key needs --entity"),
        (("MEMORY.md#L5", "--entity", "Alice", "--key", "city"), "not both"),
    ],
)
def test_forget_usage_errors(
    capsys: pytest.CaptureFixture[str], ws: Path, args: tuple[str, ...], message: str
) -> None:
    before = (ws / "MEMORY.md").read_bytes()
    code, _, err = run(capsys, "forget", "-w", str(ws), *args)
    assert code == EXIT_USAGE and message in err
    assert (ws / "MEMORY.md").read_bytes() == before


# -- graph ---------------------------------------------------------------------------------
def test_graph_writes_the_page(capsys: pytest.CaptureFixture[str], ws: Path, tmp_path: Path) -> None:
    target = tmp_path / "out" / "graph.html"
    code, out, _ = run(capsys, "graph", "-w", str(ws), "--html", str(target))
    assert code == EXIT_OK and out == f"{target}\n"
    page = target.read_text(encoding="utf-8")
    assert page.lstrip().lower().startswith("<!doctype html") and "Alice Martin" in page
    code, data = run_json(capsys, "graph", "-w", str(ws), "--html", str(target))
    assert code == EXIT_OK and data["path"] == str(target)
    assert data["entities"] == 2 and data["relations"] == 1  # Alice Martin, Project Atlas
    assert isinstance(data["facts"], int) and data["facts"] >= 4


def test_graph_unwritable_path_and_missing_option(
    capsys: pytest.CaptureFixture[str], ws: Path
) -> None:
    bad = ws / "MEMORY.md" / "graph.html"  # its "folder" is a file (fails as root too)
    code, out, err = run(capsys, "graph", "-w", str(ws), "--html", str(bad))
    assert code == EXIT_ERROR and out == ""
    assert "memmw: error: cannot write the graph page" in err and "File exists" in err
    assert (ws / "MEMORY.md").read_text(encoding="utf-8") == MEMORY_MD
    code, _, err = run(capsys, "graph", "-w", str(ws))
    assert code == EXIT_USAGE and "--html" in err


# -- stats ---------------------------------------------------------------------------------
def test_stats_empty_then_after_lookups(capsys: pytest.CaptureFixture[str], ws: Path) -> None:
    code, out, _ = run(capsys, "stats", "-w", str(ws))
    assert code == EXIT_OK and "No events recorded yet." in out
    for query in ("Alice city", "zebra quantum"):
        assert run(capsys, "facts", "-w", str(ws), query)[0] == EXIT_OK
    code, out, _ = run(capsys, "stats", "-w", str(ws))
    assert code == EXIT_OK
    header, row = out.splitlines()[2:4]
    assert header.split() == ["Event", "Count", "p50", "ms", "p95", "ms", "Hit", "rate",
                              "Avg", "hits"]
    assert row.split()[:2] == ["facts", "2"] and row.split()[4] == "50%"
    code, data = run_json(capsys, "stats", "-w", str(ws))
    assert code == EXIT_OK
    assert {"path", "events", "badLines", "byEvent", "injection", "since", "enabled"} <= set(data)
    facts = data["byEvent"]["facts"]  # type: ignore[index]
    assert facts["count"] == 2 and facts["hitRate"] == 0.5 and facts["p50Ms"] > 0
    assert data["since"] is None and data["enabled"] is True


def test_stats_since(capsys: pytest.CaptureFixture[str], ws: Path) -> None:
    assert run(capsys, "facts", "-w", str(ws), "Alice")[0] == EXIT_OK
    _, data = run_json(capsys, "stats", "-w", str(ws), "--since", "1h")
    assert data["events"] == 1
    _, data = run_json(capsys, "stats", "-w", str(ws), "--since", "2999-01-01T00:00:00Z")
    assert data["events"] == 0 and data["since"] == "2999-01-01T00:00:00Z"
    code, out, _ = run(capsys, "stats", "-w", str(ws), "--since", "2999-01-01")
    assert code == EXIT_OK and "No events recorded in that period." in out
    code, _, err = run(capsys, "stats", "-w", str(ws), "--since", "last tuesday")
    assert code == EXIT_USAGE and "neither a duration" in err


def test_parse_since() -> None:
    now = 1_800_000_000.0
    assert parse_since("90s", now) == now - 90
    assert parse_since("1.5h", now) == now - 5400
    assert parse_since("2w", now) == now - 2 * 604800
    assert parse_since("1970-01-02") == 86400.0  # naive means UTC
    assert parse_since("1970-01-02T02:00:00+02:00") == 86400.0
    assert abs(parse_since("1d") - (time.time() - 86400)) < 5
    assert parse_since("1000000d") == 0.0 == parse_since("1960-01-01")  # everything
    with pytest.raises(click.BadParameter):
        parse_since("-3d")


def test_one_shot_graph_commands_start_no_background_embedding(
    capsys: pytest.CaptureFixture[str], ws: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from memmw.engine.memory import Memory

    monkeypatch.setenv("MEMMW__PROVIDER", "fake")
    assert run(capsys, "index", "-w", str(ws), "--no-embed")[0] == EXIT_OK
    started: list[str] = []
    monkeypatch.setattr(Memory, "_start_background_embedding", lambda self: started.append("x"))
    assert run(capsys, "facts", "-w", str(ws), "Alice")[0] == EXIT_OK
    assert run(capsys, "forget", "-w", str(ws), "MEMORY.md#L6")[0] == EXIT_OK
    assert run(capsys, "graph", "-w", str(ws), "--html", str(tmp_path / "g.html"))[0] == EXIT_OK
    assert run(capsys, "stats", "-w", str(ws))[0] == EXIT_OK
    assert started == []


@given(st.one_of(
    st.text(max_size=40),
    st.from_regex(r"\A\s*[0-9]{1,400}(\.[0-9]{1,5})?\s*[smhdwSMHDW]\s*\Z"),
    st.datetimes(timezones=st.timezones()).map(lambda d: d.isoformat()),
))
def test_parse_since_accepts_or_refuses_cleanly(value: str) -> None:
    """Any --since either parses to a time that prints as ISO, or is a usage error."""
    try:
        start = parse_since(value)
    except click.BadParameter:
        return
    assert iso(start) is not None


def test_forget_expect_refuses_a_line_that_no_longer_holds_the_entry(
    capsys: pytest.CaptureFixture[str], ws: Path
) -> None:
    before = (ws / "MEMORY.md").read_bytes()
    code, _out, err = run(capsys, "forget", "-w", str(ws), "MEMORY.md#L6", "--expect", "city: Berlin")
    assert code == EXIT_ERROR and "no longer holds the cited entry 'city: Berlin'" in err
    assert (ws / "MEMORY.md").read_bytes() == before
    code, out, _err = run(capsys, "forget", "-w", str(ws), "MEMORY.md#L6", "--expect", "employer: Acme")
    assert code == EXIT_OK and out == "retracted MEMORY.md#L6\n"
