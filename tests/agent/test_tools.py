"""The memory tools: schemas, parameter aliases, payloads, errors and append rules."""

from __future__ import annotations

import datetime as dt
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memmw.agent.tools import (
    build_memory_tools,
    flush_tools,
    tools_by_name,
    unavailable_payload,
)
from memmw.config import MemoryConfig
from memmw.engine.memory import Memory
from memmw.errors import ConfigError
from memmw.graph.telemetry import telemetry_path
from memmw.workspace.transcripts import transcripts_dir

from ..conftest import make_memory

NOW = dt.datetime(2026, 3, 10, 23, 30, tzinfo=dt.timezone.utc)  # already the 11th in Paris


def clock() -> dt.datetime:
    return NOW


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    lines = "\n".join(f"line {i}" for i in range(1, 301))
    mem = make_memory(
        tmp_path,
        {
            "MEMORY.md": "# Memory\n\n- The gateway listens on port 8443.\n",
            "memory/2026-03-01.md": lines + "\n",
        },
        config=MemoryConfig(provider="none", user_timezone="Europe/Paris"),
    )
    yield mem
    mem.close()


def tools(memory: Any, **kwargs: Any) -> dict[str, Any]:
    return tools_by_name(build_memory_tools(memory, clock=clock, **kwargs))


def test_schemas_are_strict_json_schema(memory: Memory) -> None:
    t = tools(memory)
    assert set(t) == {"memory_search", "memory_get", "memory_append", "memory_facts"}
    assert set(tools(memory, include_graph=False)) == {"memory_search", "memory_get", "memory_append"}
    for tool in t.values():
        assert tool.parameters["type"] == "object"
        assert tool.parameters["additionalProperties"] is False
        assert tool.openai_schema()["function"]["name"] == tool.name
    assert t["memory_search"].parameters["required"] == ["query"]
    assert set(t["memory_get"].parameters["properties"]) == {"path", "from", "lines"}
    assert "MEMORY.md" in t["memory_search"].description


def test_search_payload_and_param_aliases(memory: Memory) -> None:
    search = tools(memory)["memory_search"]
    camel = search.invoke({"query": "  gateway port ", "maxResults": "2", "minScore": "0"})
    snake = search.invoke({"query": "gateway port", "max_results": 2.9, "min_score": 0})
    assert camel["results"] == snake["results"]
    assert {"results", "provider", "model", "fallback", "citations", "mode"} <= set(camel)
    hit = camel["results"][0]
    assert hit["path"] == "MEMORY.md" and hit["citation"].startswith("MEMORY.md#L")
    assert "Source: MEMORY.md#L" in hit["snippet"]
    text = search.invoke_json(query="gateway")
    assert text.startswith("{\n  ") and json.loads(text)["results"]


def test_search_argument_errors(memory: Memory) -> None:
    search = tools(memory)["memory_search"]
    assert "query" in search.invoke({"query": "   "})["error"]
    assert ">= 1" in search.invoke({"query": "x", "maxResults": 0})["error"]
    assert "number" in search.invoke({"query": "x", "minScore": "abc"})["error"]
    assert "corpus" in search.invoke({"query": "x", "corpus": "wiki"})["error"]
    sessions = search.invoke({"query": "x", "corpus": "sessions"})
    assert sessions["unavailable"] is True and sessions["action"]


def test_a_group_session_gets_the_count_it_asks_for_resolved_once(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The search resolves count and threshold once, and fetches more for a session whose
    gate hides hits: a group session gets the default or asked count of hits it may see
    while private dated notes outrank them; the tool resolves nothing itself."""
    ws = memory.workspace
    today = dt.date.today().isoformat()
    for n in range(30):  # today's session archives: private, and the best matches
        (ws / "memory" / f"{today}-notes-{n}.md").write_text(
            f"- The ferry schedule changed again: ferry schedule {n}.\n"
        )
    for n in range(10):  # shared topic notes: a group may read them
        (ws / "memory" / f"topic-{n}.md").write_text(
            f"- Ferry schedule {n} for the office trip, the parking, lunch and the rest of the day.\n"
        )
    memory.sync()
    calls: list[str] = []
    query_config = type(memory.config.query)
    for name in ("results_wanted", "check_min_score"):
        real = getattr(query_config, name)
        monkeypatch.setattr(
            query_config,
            name,
            lambda self, value, _real=real, _name=name: calls.append(_name) or _real(self, value),
        )
    group = tools(memory, session_key="agent:main:discord:channel:9")["memory_search"]
    default = group.invoke({"query": "ferry schedule"})["results"]
    assert len(default) == memory.config.query.max_results == 6
    assert all(r["path"].startswith("memory/topic-") for r in default)
    assert calls == ["results_wanted", "check_min_score"]  # once, though it asked twice
    # One search event, and it books what the session was shown, not what the gate hid.
    events = [json.loads(x) for x in telemetry_path(memory.state_dir, "main").read_text().splitlines()]
    searches = [e for e in events if e.get("event") == "search"]
    assert len(searches) == 1 and searches[0]["hits"] == 6
    assert all(c.startswith("memory/topic-") for c in searches[0]["cites"])
    assert len(group.invoke({"query": "ferry schedule", "maxResults": 3})["results"]) == 3
    direct = tools(memory)["memory_search"].invoke({"query": "ferry schedule", "maxResults": 6})
    # The group's gate hid the best hits: the first ask (4 x 6) held none it may see.
    assert all(r["path"].startswith(f"memory/{today}") for r in direct["results"])


def test_a_bad_count_or_threshold_is_refused_by_the_search_alone(memory: Memory) -> None:
    search = tools(memory)["memory_search"]
    for args, kwargs in (({"minScore": 2}, {"min_score": 2.0}), ({"maxResults": 0}, {"max_results": 0})):
        with pytest.raises(ConfigError) as raised:
            memory.search("gateway", **kwargs)
        assert search.invoke({"query": "gateway", **args}) == {
            "results": [],
            "error": str(raised.value),
        }


def test_citations_auto_off_in_groups(memory: Memory) -> None:
    (memory.workspace / "memory" / "ops.md").write_text("- The proxy listens on port 9443.\n")
    group = tools(memory, session_key="agent:main:discord:channel:9")["memory_search"]
    hit = group.invoke({"query": "proxy port"})["results"][0]
    assert hit["path"] == "memory/ops.md"
    assert "citation" not in hit and "Source:" not in hit["snippet"]


def test_group_sessions_never_get_private_files(memory: Memory) -> None:
    ws = memory.workspace
    (ws / "USER.md").write_text("- The user's bank PIN is 1234.\n")
    (ws / "memory" / "2026-03-02-bank.md").write_text('user: "my bank PIN is 1234"\n')
    (ws / "memory" / "2026-03-03.md").write_text("- Told the bank the PIN 1234 again.\n")
    (ws / "memory" / "bank.md").write_text("- The bank branch opens at 9; PIN pads are at the desk.\n")
    memory.sync()
    for key in ("agent:main:telegram:group:7", "agent:main:discord:channel:9"):
        group = tools(memory, session_key=key)
        found = group["memory_search"].invoke({"query": "bank PIN", "maxResults": 10})
        assert [r["path"] for r in found["results"]] == ["memory/bank.md"]
        assert "1234" not in json.dumps(found)
        for path in ("MEMORY.md", "USER.md", "memory/2026-03-02-bank.md", "./memory/2026-03-03.md"):
            got = group["memory_get"].invoke({"path": path})
            assert got["text"] == "" and "private to direct sessions" in got["error"], path
        assert group["memory_get"].invoke({"path": "memory/bank.md"})["status"] == "ok"
    direct = tools(memory, session_key="agent:main:telegram:dm:7")
    paths = {r["path"] for r in direct["memory_search"].invoke({"query": "bank PIN"})["results"]}
    assert {"USER.md", "memory/2026-03-02-bank.md", "memory/bank.md"} <= paths
    assert "1234" in direct["memory_get"].invoke({"path": "USER.md"})["text"]


class Broken:
    def __init__(self, memory: Memory, error: Exception) -> None:
        self.workspace, self.state_dir = memory.workspace, memory.state_dir
        self.agent_id, self.config = memory.agent_id, memory.config
        self.error = error

    def search_result(self, *args: Any, **kwargs: Any) -> Any:
        raise self.error

    def get(self, *args: Any, **kwargs: Any) -> Any:
        raise self.error

    def sync(self, force: bool = False) -> None:
        return None


def test_unavailable_payloads(memory: Memory) -> None:
    quota = tools(Broken(memory, RuntimeError("429 insufficient_quota")))["memory_search"]
    payload = quota.invoke({"query": "x"})
    assert payload["results"] == [] and payload["disabled"] and payload["unavailable"]
    assert "quota" in payload["warning"] and "Top up" in payload["action"]
    generic = unavailable_payload(OSError("db locked"))
    assert "configuration" in generic["action"] and generic["error"] == "db locked"
    get = tools(Broken(memory, OSError("disk")))["memory_get"]
    assert get.invoke({"path": "MEMORY.md"})["error"].startswith("OSError")


def test_get_window_continuation_and_errors(memory: Memory) -> None:
    get = tools(memory)["memory_get"]
    first = get.invoke({"path": "memory/2026-03-01.md"})
    assert first["status"] == "ok" and first["truncated"] is True
    nxt = get.invoke({"path": "memory/2026-03-01.md", "from": first["nextFrom"], "lines": "5"})
    assert nxt["from"] == first["nextFrom"] and nxt["lines"] == 5
    assert get.invoke({"path": "memory/2026-01-01.md"})["status"] == "not_found"
    bad = get.invoke({"path": "../etc/passwd.md"})
    assert bad["disabled"] is True and bad["text"] == "" and "outside" in bad["error"]
    assert "empty" in get.invoke({"path": " "})["error"]
    assert "required" in get.invoke({})["error"]
    assert "from" in get.invoke({"path": "MEMORY.md", "from": 0})["error"]


def test_append_defaults_to_today_in_user_timezone(memory: Memory) -> None:
    append = tools(memory)["memory_append"]
    out = append.invoke({"content": "- likes tea"})
    assert out == {"status": "ok", "path": "memory/2026-03-11.md", "appended": 12}
    again = append.invoke({"content": "- likes jazz\n", "path": "memory/2026-03-11.md"})
    assert again["status"] == "ok"
    text = (memory.workspace / "memory" / "2026-03-11.md").read_text()
    assert text == "- likes tea\n- likes jazz\n"
    topic = append.invoke({"content": "x", "path": "memory/projects.md"})
    assert topic["status"] == "ok"


def test_append_refuses_curated_escapes_and_read_only(memory: Memory) -> None:
    append = tools(memory)["memory_append"]
    before = (memory.workspace / "MEMORY.md").read_text()
    for path in ("MEMORY.md", "USER.md", "../x.md", "notes.md", "memory/x.txt"):
        out = append.invoke({"content": "x", "path": path})
        assert out["status"] == "error", path
    assert (memory.workspace / "MEMORY.md").read_text() == before
    assert not (memory.workspace / "USER.md").exists()
    assert "content" in append.invoke({"content": "  "})["error"]
    curated = tools(memory, allow_curated_append=True)["memory_append"]
    assert curated.invoke({"content": "- new fact", "path": "MEMORY.md"})["status"] == "ok"
    assert (memory.workspace / "MEMORY.md").read_text().startswith(before)
    ro = tools(memory, read_only=True)["memory_append"]
    assert "read-only" in ro.invoke({"content": "x"})["error"]


def test_flush_tools_only_write_the_target(memory: Memory) -> None:
    t = tools_by_name(flush_tools(memory, "memory/2026-03-11.md", clock=clock))
    assert set(t) == {"memory_append", "memory_get"}
    wrong = t["memory_append"].invoke({"content": "x", "path": "memory/2026-03-11-1200.md"})
    assert wrong["status"] == "error" and "memory/2026-03-11.md" in wrong["error"]
    assert t["memory_append"].invoke({"content": "x"})["status"] == "ok"


def test_disabled_memory_has_no_tools(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    mem = make_memory(
        workspace=tmp_path / "ws",
        state_dir=tmp_path / "s",
        config=MemoryConfig(provider="none", enabled=False),
    )
    try:
        assert build_memory_tools(mem) == []
    finally:
        mem.close()


def test_unexpected_handler_errors_become_payloads(memory: Memory) -> None:
    tool = tools(memory)["memory_search"]
    exploding = type(tool)(tool.name, "d", {}, lambda args: 1 / 0)  # type: ignore[arg-type,return-value]
    assert "ZeroDivisionError" in exploding.invoke({})["error"]


@pytest.mark.parametrize(
    "path",
    [
        "memory/.drafts/idea.md",
        "memory/.git/notes.md",
        "memory/node_modules/x.md",
        "memory/__pycache__/x.md",
        "memory/.hidden.md",
        "memory/caf\udce9.md",
        "memory/tab\there.md",
    ],
)
def test_append_refuses_targets_discovery_never_indexes(memory: Memory, path: str) -> None:
    out = tools(memory)["memory_append"].invoke({"content": "x", "path": path})
    assert out["status"] == "error", path
    assert "memory/2026-03-11.md" in out["error"]  # says where to write instead
    assert not any(p.name.startswith(("idea", "notes", "x.md", ".hidden", "caf", "tab"))
                   for p in (memory.workspace / "memory").rglob("*"))


@pytest.mark.parametrize(
    ("content", "why"),
    [("a\x00b", "NUL"), ("\x1b[31mred", "control character"), ("x" * (2 << 20), "too large")],
)
def test_append_reports_refused_content(memory: Memory, content: str, why: str) -> None:
    out = tools(memory)["memory_append"].invoke({"content": content})
    assert out["status"] == "error" and why in out["error"]
    assert "nothing was written" in out["error"]
    assert not (memory.workspace / "memory" / "2026-03-11.md").exists()


def test_appended_note_is_found_by_search(memory: Memory) -> None:
    # The round trip an agent relies on: what it appends, search finds.
    out = tools(memory)["memory_append"].invoke({"content": "- the badger code is 7-alpha"})
    assert out["status"] == "ok"
    memory.sync()
    assert any(h.path == "memory/2026-03-11.md" for h in memory.search("badger"))


def test_appended_notes_pass_the_one_redaction(memory: Memory) -> None:
    # Issue 20: what the agent (or the flush turn) appends from the conversation goes
    # through the same redaction as transcripts: the note and the index never hold it.
    out = tools(memory)["memory_append"].invoke(
        {"content": "- deploy key ghp_abcdefghijklmnopqrstuvwxyz0123456789\n"
                    "- DB_PASSWORD=hunter2 and mot de passe : chaton42\n- the badger code word"}
    )
    assert out["status"] == "ok"
    text = (memory.workspace / "memory" / "2026-03-11.md").read_text(encoding="utf-8")
    for secret in ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "hunter2", "chaton42"):
        assert secret not in text
    assert "[REDACTED]" in text and "the badger code word" in text


@settings(max_examples=25, deadline=None)
@given(
    private=st.integers(0, 30),
    shared=st.integers(0, 8),
    wanted=st.one_of(st.none(), st.integers(1, 10)),
)
def test_every_session_gets_its_count_of_hits_it_may_see(
    private: int, shared: int, wanted: int | None
) -> None:
    """Whatever the gate hides, a session gets ``min(count, hits it may see)`` hits, and
    only those: the search fetches more for it (``Visibility``), the tool cuts nothing."""
    today = dt.date.today().isoformat()
    files = {f"memory/{today}-notes-{n}.md": f"- The ferry schedule changed: ferry {n}.\n"
             for n in range(private)}
    files.update({f"memory/topic-{n}.md": f"- Ferry schedule {n} for the office trip.\n"
                  for n in range(shared)})
    files.update({f"memory/other-{n}.md": f"- Lunch is at {n} in the canteen.\n" for n in range(20)})
    count = 6 if wanted is None else wanted
    args: dict[str, Any] = {"query": "ferry schedule"}
    if wanted is not None:
        args["maxResults"] = wanted
    with tempfile.TemporaryDirectory() as root, make_memory(Path(root), files, sync=True) as mem:
        group = tools(mem, session_key="agent:main:discord:channel:9")["memory_search"]
        seen = [r["path"] for r in group.invoke(args)["results"]]
        assert len(seen) == min(count, shared)
        assert all(p.startswith("memory/topic-") for p in seen)
        direct = tools(mem)["memory_search"].invoke(args)["results"]
        assert len(direct) == min(count, private + shared)


def test_a_corpus_gets_its_count_when_the_other_source_ranks_higher(tmp_path: Path) -> None:
    """``corpus = memory`` beside indexed transcripts: the search fetches more (the corpus
    hides transcript hits), so the owner gets the count of notes asked for."""
    config = MemoryConfig(provider="none", sources=("memory", "sessions"))
    files = {f"memory/topic-{n}.md": f"- Ferry schedule {n} for the office trip, parking.\n"
             for n in range(4)}
    with make_memory(tmp_path, files, config=config) as mem:
        folder = transcripts_dir(mem.state_dir, "main")
        folder.mkdir(parents=True)
        for n in range(8):
            line = {"type": "message",
                    "message": {"role": "user", "content": f"ferry schedule, ferry schedule {n}"}}
            (folder / f"s{n}.jsonl").write_text(json.dumps(line) + "\n", encoding="utf-8")
        mem.sync()
        search = tools(mem)["memory_search"]
        every = search.invoke({"query": "ferry schedule", "maxResults": 3, "corpus": "all"})
        assert {r["source"] for r in every["results"]} == {"sessions"}  # transcripts rank first
        notes = search.invoke({"query": "ferry schedule", "maxResults": 3})["results"]
        assert [r["source"] for r in notes] == ["memory"] * 3
        talk = search.invoke({"query": "ferry schedule", "maxResults": 3, "corpus": "sessions"})
        assert [r["source"] for r in talk["results"]] == ["sessions"] * 3
        assert all(r["untrusted"] for r in talk["results"])
