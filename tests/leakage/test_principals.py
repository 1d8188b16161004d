"""The leakage suite (issue 24): one agent, many people; nothing crosses between them.

Hypothesis generates multi-principal conversations: the owner, two DM peers whose
principal comes from the session key (``dm_scope = "per-peer"``), one DM whose principal
the host names, and two groups. Steps: plain messages, saved notes and facts
(``memory_append``), searches and reads aimed at other people's text and files, fact
lookups, questions that fire the ``[GRAPH MEMORY]`` block, flushes (a small transcript
trigger), ``/new`` archives, restarts of the whole stack, and deleting one principal's
memory. They run through the custom loop, the LangChain adapter and the MCP server (a
principal per server), against SQLite and PostgreSQL.

The invariant, checked after every step: everything a principal's session was shown (each
model input: system prompt with bootstrap and graph block, tool results; the reply; the
MCP tool results) holds no text another principal said. The owner alone may see what a
group said (marked untrusted, as before principals existed); nobody sees a person's DM.
After a deletion nothing of that principal is left in the files, the index chunks or the
graph rows, in either store.

On e552b82 (before principals) the suite fails at once: every DM is the owner's, so a
DM's first prompt holds the owner's MEMORY.md and bob's search returns alice's note.
``MEMMW_LEAK_EXAMPLES=200`` runs more generated conversations than the default 8.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memmw import Memory, MemoryConfig
from memmw.adapters.custom_loop import MemoryAgent
from memmw.config import ActiveMemoryConfig, FlushConfig, StoreConfig
from memmw.middleware import MemoryMiddleware
from memmw.text.tokens import TokenCounter

from ..adapters.conftest import FLUSH_MARK, TODAY, fixed_clock
from ..conftest import make_memory


@dataclass(frozen=True)
class Who:
    key: str
    principal: str | None = None  # what the host says (None: the key and dm_scope decide)


PEOPLE: dict[str, Who] = {
    "owner": Who("main"),
    "alice": Who("agent:main:telegram:dm:101"),  # principal telegram-101, from the key
    "bob": Who("agent:main:telegram:dm:202"),  # principal telegram-202, from the key
    "carol": Who("agent:main:web:dm:c7", principal="carol"),  # named by the host
    "group": Who("agent:main:telegram:group:42"),
    "team": Who("agent:main:slack:channel:c1"),
}
#: Each person's principal id (their folder is memory/principals/<id>/).
PRINCIPAL_IDS = {"alice": "telegram-101", "bob": "telegram-202", "carol": "carol"}
#: Whose text each one may see: their own; the owner also sees groups' (untrusted).
ALLOWED = {name: {name} for name in PEOPLE} | {"owner": {"owner", "group", "team"}}
MARK = re.compile(r"\b(owner|alice|bob|carol|group|team)zq\d+")
ENTITY = "Quinn Ode"


def marks(text: str) -> set[str]:
    """Whose markers ``text`` holds."""
    return {m.group(1) for m in MARK.finditer(text)}


def _text(content: Any) -> str:
    return content if isinstance(content, str) else json.dumps(content, default=str)


@dataclass
class Harness:
    root: Path
    store: StoreConfig
    agent_id: str
    seen: list[str] = field(default_factory=list)
    memory: Memory | None = None
    middleware: MemoryMiddleware | None = None
    agents: dict[str, Any] = field(default_factory=dict)
    step: int = 0

    @property
    def workspace(self) -> Path:
        return self.root / "ws"

    def open(self) -> None:
        config = MemoryConfig(
            provider="none",
            user_timezone="Europe/Paris",
            sources=("memory", "sessions"),
            dm_scope="per-peer",
            store=self.store,
            active_memory=ActiveMemoryConfig(deadline_ms=60_000),
            flush=FlushConfig(
                context_window=4000,
                reserve_tokens_floor=1000,
                soft_threshold_tokens=500,
                force_flush_transcript_bytes=700,
            ),
        )
        self.memory = make_memory(
            workspace=self.workspace, state_dir=self.root / "state", agent_id=self.agent_id,
            config=config,
        )
        self.middleware = MemoryMiddleware(
            self.memory, clock=fixed_clock, token_counter=TokenCounter(use_tiktoken=False)
        )
        self.agents = {}

    def restart(self) -> None:
        assert self.memory is not None
        self.memory.close()
        self.open()

    def close(self) -> None:
        if self.memory is not None:
            self.memory.close()

    # -- the scripted model: runs the tool a message names, writes flushes -----------------
    def policy(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        self.seen.append("\n".join(_text(m.get("content")) for m in messages))
        self.seen.append(json.dumps([m.get("tool_calls") for m in messages], default=str))
        system = " ".join(_text(m["content"]) for m in messages if m["role"] == "system")
        last = messages[-1]
        if FLUSH_MARK in system:  # the flush turn saves the markers it was shown
            if last["role"] == "tool":
                return {"content": "NO_REPLY"}
            said = sorted({
                m.group(0)
                for msg in messages
                if msg["role"] != "system"
                for m in MARK.finditer(_text(msg.get("content")))
            })
            if not said:
                return {"content": "NO_REPLY"}
            note = "- remembered " + " ".join(said)
            return {"content": "", "tool_calls": [
                {"id": f"f{len(self.seen)}", "name": "memory_append", "args": {"content": note}}
            ]}
        if last["role"] == "tool":
            return {"content": "TOOL " + _text(last["content"])}
        call = command(_text(last["content"]))
        if call is None:
            return {"content": "ack"}
        return {"content": "", "tool_calls": [{"id": f"c{len(self.seen)}", **call}]}


def command(text: str) -> dict[str, Any] | None:
    """``GET path`` / ``SEARCH q`` / ``FACTS q`` / ``SAVE text`` as a tool call."""
    verb, _, rest = text.partition(" ")
    if verb == "GET":
        return {"name": "memory_get", "args": {"path": rest}}
    if verb == "SEARCH":
        return {"name": "memory_search", "args": {"query": rest, "corpus": "all"}}
    if verb == "FACTS":
        return {"name": "memory_facts", "args": {"query": rest}}
    if verb == "SAVE":
        return {"name": "memory_append", "args": {"content": rest.replace("\\n", "\n")}}
    return None


# -- the three surfaces ---------------------------------------------------------------------


def loop_say(h: Harness, name: str, text: str) -> str:
    agent = h.agents.get(name)
    if agent is None:
        who = PEOPLE[name]

        def model(messages: list[dict[str, Any]], tools: Any = None) -> Any:
            return h.policy(messages)

        agent = MemoryAgent(model, h.memory, middleware=h.middleware, system_prompt="You help.",
                            session_key=who.key, principal=who.principal)
        h.agents[name] = agent
    return agent.chat(text) or ""


def langchain_say(h: Harness, name: str, text: str) -> str:
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from memmw.adapters.langchain import LangChainMemoryMiddleware, message_to_dict

    from ..adapters.lc_fakes import scripted

    agent = h.agents.get(name)
    if agent is None:
        who = PEOPLE[name]
        model = scripted(lambda msgs: h.policy([message_to_dict(m) for m in msgs]))
        mw = LangChainMemoryMiddleware(
            middleware=h.middleware,
            session_key=lambda _thread: who.key,
            principal=lambda _thread: who.principal,
        )
        agent = create_agent(model, middleware=[mw], system_prompt="You help.",
                             checkpointer=InMemorySaver())
        h.agents[name] = agent
    out = agent.invoke({"messages": [HumanMessage(text)]},
                       {"configurable": {"thread_id": name}})
    return _text(out["messages"][-1].content)


def mcp_say(h: Harness, name: str, text: str) -> str:
    """One MCP connection per principal: a server built for it, a client session."""
    import anyio
    from mcp import ClientSession
    from mcp.shared.memory import create_client_server_memory_streams

    from memmw.adapters.mcp import build_server

    call = command(text) or {"name": "memory_append", "args": {"content": text}}
    who = PEOPLE[name]

    async def drive() -> str:
        server = build_server(h.memory, session_key=who.key, principal=who.principal)
        async with create_client_server_memory_streams() as (client, srv), \
                anyio.create_task_group() as tg:
            tg.start_soon(lambda: server.run(srv[0], srv[1], server.create_initialization_options()))
            async with ClientSession(client[0], client[1]) as session:
                await session.initialize()
                result = await session.call_tool(call["name"], call["args"])
            tg.cancel_scope.cancel()
        return "\n".join(getattr(c, "text", "") for c in result.content)

    return anyio.run(drive)


SURFACES: dict[str, Callable[[Harness, str, str], str]] = {
    "custom_loop": loop_say,
    "langchain": langchain_say,
    "mcp": mcp_say,
}


# -- steps ----------------------------------------------------------------------------------

NAMES = sorted(PEOPLE)
ACTIONS = ("say", "save", "fact", "search", "get", "facts", "ask", "new", "restart", "delete")
steps = st.lists(
    st.tuples(st.sampled_from(ACTIONS), st.sampled_from(NAMES), st.sampled_from(NAMES),
              st.integers(0, 50)),
    min_size=3,
    max_size=9,
)


def memory_files(h: Harness) -> list[str]:
    return sorted(p.relative_to(h.workspace).as_posix() for p in h.workspace.rglob("*.md"))


def index_text(h: Harness) -> str:
    """Every chunk and graph row the index holds, as text."""
    assert h.memory is not None
    with h.memory.store.read() as reader:
        texts = [
            chunk.text
            for source in sorted(reader.sources_present())
            for chunk in reader.chunks(reader.chunk_rowids([source])).values()
        ]
        rows = reader.graph_rows()
    return "\n".join(texts) + json.dumps([rows.facts, rows.entities, rows.aliases], default=str)


def run_step(h: Harness, say: Callable[[Harness, str, str], str], action: str, name: str,
             other: str, pick: int) -> None:
    h.step += 1
    mark = f"{name}zq{h.step}"
    text = {
        "say": f"I want to remember {mark} today",
        "save": f"SAVE - note {mark}",
        "fact": f"SAVE ## {ENTITY}\\n- city: {mark}",
        # Upper case: the index folds it to the other's markers, the leak check does not
        # count the question itself as their text.
        "search": "SEARCH quinn ode city "
        + " ".join(f"{other}zq{i}".upper() for i in range(h.step + 1)),
        "facts": f"FACTS {ENTITY}",
        "ask": f"Where does {ENTITY} live? quinn ode city",
        "new": "/new",
    }.get(action)
    if action == "get":
        files = memory_files(h)
        text = f"GET {files[pick % len(files)]}" if files else f"GET MEMORY.md {mark}"
    if action == "restart":
        h.restart()
        return
    if action == "delete":
        if name in PRINCIPAL_IDS:
            delete_and_check(h, name)
        return
    assert text is not None
    before = len(h.seen)
    reply = say(h, name, text)
    shown = "\n".join([*h.seen[before:], reply])
    leaked = marks(shown) - ALLOWED[name]
    assert not leaked, f"step {h.step}: {name} ({action}) was shown text of {sorted(leaked)}"
    assert h.memory is not None
    h.memory.sync()


def delete_and_check(h: Harness, name: str) -> None:
    from memmw.engine.principals import delete_principal, list_principals

    assert h.memory is not None
    report = delete_principal(h.memory, PRINCIPAL_IDS[name])
    assert report.remaining == 0
    h.agents.pop(name, None)  # the host forgets the conversation too
    files = "\n".join((h.workspace / f).read_text("utf-8") for f in memory_files(h))
    assert name not in marks(files), f"{name}'s text is still in the files"
    assert name not in marks(index_text(h)), f"{name}'s text is still in the index"
    assert PRINCIPAL_IDS[name] not in {p.principal for p in list_principals(h.memory)}
    transcripts = h.root / "state" / "agents" / h.agent_id / "sessions"
    for path in transcripts.glob("*"):
        if path.is_file() and ".jsonl" in path.name:
            assert name not in marks(path.read_text("utf-8", errors="replace")), path.name


def seed(h: Harness) -> None:
    ws = h.workspace
    (ws / "memory" / "topics").mkdir(parents=True)
    (ws / "MEMORY.md").write_text(f"# Memory\n\n## {ENTITY}\n- city: ownerzq0\n", "utf-8")
    (ws / "USER.md").write_text("# User\n- name: ownerzq0 prefers tea\n", "utf-8")
    (ws / "memory" / f"{TODAY}.md").write_text("- the owner said ownerzq0\n", "utf-8")
    (ws / "memory" / "topics" / "shared.md").write_text(
        f"## {ENTITY}\n- team: platform (shared, undated)\n", "utf-8"
    )
    for name, pid in PRINCIPAL_IDS.items():
        folder = ws / "memory" / "principals" / pid
        folder.mkdir(parents=True)
        (folder / "USER.md").write_text(f"# {name}\n- pin: {name}zq0\n", "utf-8")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_for(request: pytest.FixtureRequest) -> Callable[[], StoreConfig]:
    if request.param == "sqlite":
        return StoreConfig
    dsn = request.getfixturevalue("pg_database")
    return lambda: StoreConfig(backend="postgres", dsn=dsn)


@pytest.fixture
def harnesses(tmp_path_factory: pytest.TempPathFactory,
              store_for: Callable[[], StoreConfig]) -> Iterator[Callable[[], Harness]]:
    made: list[Harness] = []

    def make() -> Harness:
        h = Harness(root=tmp_path_factory.mktemp("leak"), store=store_for(),
                    agent_id=f"leak-{uuid.uuid4().hex[:10]}")
        seed(h)
        h.open()
        assert h.memory is not None
        h.memory.sync()
        made.append(h)
        return h

    yield make
    for h in made:
        h.close()


@pytest.mark.parametrize("surface", sorted(SURFACES))
@settings(max_examples=int(os.environ.get("MEMMW_LEAK_EXAMPLES", "8")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(plan=steps)
def test_property_no_principal_is_shown_another_principals_text(
    harnesses: Callable[[], Harness], surface: str, plan: list[tuple[str, str, str, int]]
) -> None:
    if surface == "langchain":
        pytest.importorskip("langchain")
    if surface == "mcp":
        pytest.importorskip("mcp")
    h = harnesses()
    try:
        for action, name, other, pick in plan:
            run_step(h, SURFACES[surface], action, name, other, pick)
    finally:
        h.close()
        h.memory = None


# -- fixed cases: each failed on e552b82 ------------------------------------------------------


@pytest.mark.parametrize("surface", sorted(SURFACES))
def test_bob_never_recalls_alices_dm(harnesses: Callable[[], Harness], surface: str) -> None:
    if surface == "langchain":
        pytest.importorskip("langchain")
    if surface == "mcp":
        pytest.importorskip("mcp")
    h = harnesses()
    say = SURFACES[surface]
    say(h, "alice", "SAVE - my doctor appointment is alicezq1")
    say(h, "alice", f"SAVE ## {ENTITY}\\n- city: alicezq2")
    h.memory.sync()  # type: ignore[union-attr]
    for action in ("search", "facts", "ask", "get"):
        run_step(h, say, action, "bob", "alice", 0)
    files = memory_files(h)
    assert any(f.startswith("memory/principals/telegram-101/") for f in files)
    folder = h.workspace / "memory" / "principals" / "telegram-101"
    saved = "".join(p.read_text("utf-8") for p in folder.glob("2*.md"))  # MCP: today's date
    assert "alicezq1" in saved and "alicezq2" in saved  # alice's own note, in her folder
    reply = say(h, "alice", "SEARCH alicezq1 appointment")
    assert "alicezq1" in reply  # she still recalls it herself


def test_alices_archive_and_flush_stay_in_her_folder(harnesses: Callable[[], Harness]) -> None:
    h = harnesses()
    for i in range(6):
        loop_say(h, "alice", f"I want to remember alicezq{10 + i} " + "x" * 120)
    loop_say(h, "alice", "/new")
    holders = {
        f for f in memory_files(h) if "alicezq1" in (h.workspace / f).read_text("utf-8")
    }
    assert holders and all(f.startswith("memory/principals/telegram-101/") for f in holders)
    assert any("-" in Path(f).stem[10:] for f in holders)  # the /new archive is among them
    notes = (h.workspace / "memory" / "principals" / "telegram-101" / f"{TODAY}.md").read_text()
    assert "- remembered alicezq1" in notes  # the flush wrote her note, in her folder
    h.memory.sync()  # type: ignore[union-attr]
    for name in ("owner", "bob", "carol", "group"):
        run_step(h, loop_say, "search", name, "alice", 0)
        run_step(h, loop_say, "ask", name, "alice", 0)


def test_deleting_a_principal_leaves_nothing(harnesses: Callable[[], Harness]) -> None:
    h = harnesses()
    loop_say(h, "carol", "SAVE - carol keeps carolzq5")
    loop_say(h, "carol", f"SAVE ## {ENTITY}\\n- city: carolzq6")
    loop_say(h, "carol", "/new")
    loop_say(h, "bob", "SAVE - bob keeps bobzq7")
    h.memory.sync()  # type: ignore[union-attr]
    assert "carol" in marks(index_text(h))
    delete_and_check(h, "carol")
    assert "bob" in marks(index_text(h))  # the others keep theirs
    assert "owner" in marks(index_text(h))


def test_the_owners_forget_never_touches_a_persons_memory(tmp_path: Path) -> None:
    from memmw.agent.tools import build_memory_tools, tools_by_name

    ws = tmp_path / "ws"
    (ws / "memory" / "principals" / "alice").mkdir(parents=True)
    (ws / "MEMORY.md").write_text(f"## {ENTITY}\n- city: ownerzq1\n", "utf-8")
    alice_note = ws / "memory" / "principals" / "alice" / "2026-03-10.md"
    alice_note.write_text(f"## {ENTITY}\n- city: alicezq1\n", "utf-8")
    config = MemoryConfig(provider="none", active_memory=ActiveMemoryConfig(edit_tools=True))
    with make_memory(workspace=ws, state_dir=tmp_path / "state", config=config) as mem:
        mem.sync()
        owner = tools_by_name(build_memory_tools(mem, session_key="main"))
        done = owner["memory_forget"].invoke({"entity": ENTITY, "key": "city"})
        assert done["status"] == "ok" and "alice" not in json.dumps(done)
        refused = owner["memory_forget"].invoke(
            {"citation": "memory/principals/alice/2026-03-10.md#L2"}
        )
        assert refused["status"] == "error" and "not readable" in refused["error"]
        alice = tools_by_name(build_memory_tools(mem, session_key="main", principal="alice"))
        assert "memory_forget" not in alice and "memory_set_context" not in alice
    assert alice_note.read_text("utf-8") == f"## {ENTITY}\n- city: alicezq1\n"
    assert "~~" in (ws / "MEMORY.md").read_text("utf-8")


def test_a_person_still_finds_their_note_among_many_others(tmp_path: Path) -> None:
    from memmw.agent.tools import build_memory_tools, tools_by_name

    ws = tmp_path / "ws"
    for i in range(60):  # sixty people wrote about the same thing, more than any fetch
        folder = ws / "memory" / "principals" / f"p{i:02d}"
        folder.mkdir(parents=True)
        (folder / "2026-03-10.md").write_text(f"- the launch codeword is pzq{i}\n", "utf-8")
    (ws / "memory" / "principals" / "alice").mkdir()
    (ws / "memory" / "principals" / "alice" / "2026-03-10.md").write_text(
        "- the launch codeword is alicezq1 (mine)\n", "utf-8"
    )
    with make_memory(workspace=ws, state_dir=tmp_path / "state",
                config=MemoryConfig(provider="none")) as mem:
        mem.sync()
        search = tools_by_name(
            build_memory_tools(mem, session_key="main", principal="alice")
        )["memory_search"]
        found = search.invoke({"query": "launch codeword", "maxResults": 1})
    assert [r["path"] for r in found["results"]] == ["memory/principals/alice/2026-03-10.md"]


def test_a_key_that_changes_hands_never_continues_the_other_conversation(tmp_path: Path) -> None:
    """A key that was alice's (dm_scope per-peer) is the owner's after dm_scope = main."""
    from memmw.errors import ConfigError

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    key = "agent:main:telegram:dm:101"
    for scope, said in (("per-peer", "alicezq1"), ("main", "ownerzq2")):
        config = MemoryConfig(provider="none", dm_scope=scope)  # type: ignore[arg-type]
        with make_memory(workspace=ws, state_dir=tmp_path / "state", config=config) as mem:
            mw = MemoryMiddleware(mem, clock=fixed_clock)
            session = mw.start_session(key)
            mw.record(session, {"role": "user", "content": f"remember {said}"})
            if scope == "main":
                with pytest.raises(ConfigError, match="another principal"):
                    mw.start_session(key, session_id="20260310T140530-abcd1234=telegram-101")
                archive = mw.reset_session(session, source="/new").previous_archive
                assert archive is not None and archive.parent == ws / "memory"
                text = archive.read_text("utf-8")
                assert "ownerzq2" in text and "alicezq1" not in text
