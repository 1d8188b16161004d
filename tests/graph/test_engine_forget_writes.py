"""Issue 20: forget writes like memory_append (note lock, no lost line, bytes kept) and
refuses a citation whose line changed since it was cited."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from memmw import ForgetError, Memory
from memmw.agent.tools import build_memory_tools, tools_by_name
from memmw.graph import engine as graph_engine
from memmw.workspace.files import append_text

DAY = "memory/2026-05-01.md"


def test_forget_keeps_lines_appended_while_it_rewrites(
    mem: Memory, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    note = ws / DAY
    original = graph_engine.retract_line
    agent = threading.Thread(target=append_text, args=(note, "- agent line acknowledged"))

    def retract_with_company(line: str, **kwargs: str) -> str:
        # While forget holds the note: a shell appends with >> (no lock) and the agent's
        # memory_append runs in another thread.
        with open(note, "ab") as fh:
            fh.write(b"shell line\n")
        agent.start()
        agent.join(0.3)
        return original(line, **kwargs)

    monkeypatch.setattr(graph_engine, "retract_line", retract_with_company)
    mem.forget(f"{DAY}#L3", reason="moved")
    agent.join()
    lines = note.read_text().splitlines()
    assert "shell line" in lines and "- agent line acknowledged" in lines
    assert lines[2].startswith("- ~~city: Lisbon~~ (retracted ")


def test_forget_keeps_crlf_and_lone_cr_and_strikes_the_line_search_cites(
    mem: Memory, ws: Path
) -> None:
    note = ws / "memory" / "crlf.md"
    before = b"# Bob Stone\r\n- city: Paris\r- email: bob@example.org\r\n- phone: 123"
    note.write_bytes(before)
    mem.sync()
    # The chunker and memory_get count the lone CR as a line break: L3 is the email.
    assert mem.get("memory/crlf.md", 3, 1).text.startswith("- email: bob@example.org\n")
    mem.forget("memory/crlf.md#L3", reason="old")
    after = note.read_bytes()
    head, tail = b"# Bob Stone\r\n- city: Paris\r", b"\r\n- phone: 123"
    assert after.startswith(head) and after.endswith(tail)
    assert after[len(head) : -len(tail)].startswith(b"- ~~email: bob@example.org~~ (retracted ")


def test_a_citation_made_stale_by_an_edit_is_refused(mem: Memory, ws: Path) -> None:
    note = ws / "MEMORY.md"
    cited = mem.facts("Where does Alice live", include_history=True)
    berlin = next(h for h in cited if h.value == "Berlin")
    assert berlin.citation == "MEMORY.md#L5"
    # Someone inserts a line above it; the index has not seen the edit yet.
    text = note.read_text()
    note.write_text(text.replace("- aka: 爱丽丝\n", "- aka: 爱丽丝\n- pet: a cat named Miso\n"))
    edited = note.read_bytes()
    with pytest.raises(ForgetError, match="changed since it was indexed"):
        mem.forget(berlin.citation)  # L5 is now the cat, not Berlin
    assert note.read_bytes() == edited
    # With the text that was cited, the line is checked instead of the whole note.
    with pytest.raises(ForgetError, match="no longer holds the cited entry"):
        mem.forget("MEMORY.md#L5", expect="city: Berlin")
    assert note.read_bytes() == edited
    mem.forget("MEMORY.md#L6", expect="city: Berlin")
    assert note.read_text().splitlines()[5].startswith("- ~~city: Berlin~~ (retracted ")


def test_appends_since_indexing_do_not_make_a_citation_stale(mem: Memory, ws: Path) -> None:
    append_text(ws / DAY, "- later: appended after the sync")
    result = mem.forget(f"{DAY}#L3")
    assert result.retracted == (f"{DAY}#L3",)


def test_forget_tool_takes_expect(mem: Memory, ws: Path) -> None:
    tools = tools_by_name(build_memory_tools(mem))
    assert "expect" in tools["memory_forget"].parameters["properties"]
    bad = tools["memory_forget"].invoke({"citation": f"{DAY}#L3", "expect": "city: Berlin"})
    assert bad["status"] == "error" and "no longer holds" in bad["error"]
    ok = tools["memory_forget"].invoke({"citation": f"{DAY}#L3", "expect": "city: Lisbon"})
    assert ok["status"] == "ok"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"citation": "MEMORY.md#L5-L7"}, "names lines 5 to 7; cite the one entry"),
        ({"citation": "MEMORY.md#L0"}, "line numbers start at 1"),
        ({"citation": "MEMORY.md#L999"}, "MEMORY.md#L999: the file has 17 lines"),
        ({"citation": "memory/nope.md#L1"}, "memory/nope.md: no such memory file"),
        ({"entity": "Nobody", "key": "city"}, "no entity named 'Nobody'"),
        ({"entity": "Alice Martin", "key": "shoe size"}, "'Alice Martin' has no fact 'shoe size'"),
        ({"entity": "Alice Martin"}, "an entity needs a key"),
        ({"entity": "Ali", "key": "city", "expect": "Berlin"}, "expect goes with a citation"),
        ({"citation": "MEMORY.md#L5", "expect": "  "}, "expect is empty"),
    ],
)
def test_forget_errors_name_the_real_problem(
    mem: Memory, ws: Path, kwargs: dict[str, str], message: str
) -> None:
    before = (ws / "MEMORY.md").read_bytes()
    with pytest.raises(ForgetError, match=message):
        mem.forget(**kwargs)
    assert (ws / "MEMORY.md").read_bytes() == before


def test_forgetting_a_retracted_fact_again_says_so(mem: Memory) -> None:
    mem.forget(entity="Ali", key="city")
    with pytest.raises(ForgetError, match="every 'city' fact of 'Ali' is already retracted"):
        mem.forget(entity="Ali", key="city")

