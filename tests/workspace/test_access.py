"""The one privacy gate (issue 19 item 2): decided on the resolved file, used by every reader.

Property (a): no spelling of a private file (``..``, ``./``, ``//``, backslashes, absolute
paths, trailing slashes and dots, case, full-width and NFC/NFD/NFKC forms) and no symlink
or hard link to one is readable or searchable from a group session, through the gate or
any reader built on it (``memory_get``, ``memory_search``, ``memory_facts``, the graph view).
"""

from __future__ import annotations

import ast
import json
import os
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memmw import Memory, MemoryConfig
from memmw.agent.tools import build_memory_tools, tools_by_name
from memmw.chat_type import group_scope
from memmw.config import ExtraPath
from memmw.workspace.access import SessionAccess
from memmw.workspace.layout import fold_path

from ..conftest import make_memory, write

GROUP_KEY = "agent:main:telegram:group:42"
SECRETS = (
    "SECRET-MEMORY-ORCHID",
    "SECRET-USER-TULIP",
    "SECRET-DAILY-LOTUS",
    "SECRET-CONTEXT-IRIS",
    "Orv",  # an alias only MEMORY.md holds
)
MEMORY_MD = """# Memory

## Orchid Vance (Orv)
- city: SECRET-MEMORY-ORCHID
"""
SHARED_MD = """## Orchid Vance
- team: platform squad
"""
#: Private files and links to them, as a group might name them.
TARGETS = (
    "MEMORY.md",
    "USER.md",
    "active-context.md",
    "memory/2026-03-10.md",
    "memory/hard-user.md",
    "memory/hard-memory.md",
    "memory/sym-user.md",
    "memory/up/USER.md",
    "memory/up/MEMORY.md",
    "shared/hard-daily.md",
)
PRIVATE_FILES = ("MEMORY.md", "USER.md", "active-context.md", "memory/2026-03-10.md")


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("access") / "ws"
    write(root / "MEMORY.md", MEMORY_MD)
    write(root / "USER.md", "# User\n- pin: SECRET-USER-TULIP\n")
    write(root / "active-context.md", "Working on SECRET-CONTEXT-IRIS\n")
    write(root / "memory" / "2026-03-10.md", "- daily SECRET-DAILY-LOTUS\n")
    write(root / "memory" / "topics" / "shared.md", SHARED_MD)
    write(root / "memory" / "topics" / "lunch.md", "- lunch is at noon\n")
    os.link(root / "USER.md", root / "memory" / "hard-user.md")
    os.link(root / "MEMORY.md", root / "memory" / "hard-memory.md")
    os.symlink("../USER.md", root / "memory" / "sym-user.md")
    os.symlink("..", root / "memory" / "up")
    (root / "shared").mkdir()
    os.link(root / "memory" / "2026-03-10.md", root / "shared" / "hard-daily.md")
    return root


@pytest.fixture(scope="module")
def mem(ws: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    config = MemoryConfig(provider="none", extra_paths=(ExtraPath(path="shared"),))
    m = make_memory(workspace=ws, state_dir=tmp_path_factory.mktemp("state"), config=config)
    m.sync()
    yield m
    m.close()


def group_gate(ws: Path) -> SessionAccess:
    return SessionAccess.for_session(
        ws, (ExtraPath(path="shared"),), session_key=GROUP_KEY
    )


def _fullwidth(ch: str) -> str:
    return chr(ord(ch) + 0xFEE0) if "!" <= ch <= "~" and ch not in "/\\" else ch


@st.composite
def spellings(draw: st.DrawFn, ws: Path) -> str:
    """Another way of writing one of the private targets."""
    target = draw(st.sampled_from(TARGETS))
    out: list[str] = []
    for part in target.split("/"):
        for _ in range(draw(st.integers(0, 2))):
            out.append(draw(st.sampled_from([".", "memory/..", "memory/topics/../..", "x/.."])))
        style = draw(st.sampled_from(["same", "upper", "lower", "swap", "wide"]))
        part = {
            "same": part,
            "upper": part.upper(),
            "lower": part.lower(),
            "swap": part.swapcase(),
            "wide": "".join(_fullwidth(c) for c in part),
        }[style]
        out.append(part)
    path = draw(st.sampled_from(["/", "//", "\\", "/./"])).join(out)
    if draw(st.booleans()):
        path = "./" + path
    if draw(st.booleans()):
        path = f"{ws}/{path}"
    path += draw(st.sampled_from(["", "/", ".", " ", "//", "/."]))
    return unicodedata.normalize(draw(st.sampled_from(["NFC", "NFD", "NFKC", "NFKD"])), path)


# -- the issue's spellings, one by one ------------------------------------------------------

ISSUE_SPELLINGS = [
    "memory/../MEMORY.md",
    "./MEMORY.md",
    "memory//../USER.md",
    "memory\\..\\USER.md",
    "MEMORY.md/",
    "user.md",
    "Memory.MD",
    "USER.md.",
    "ＵＳＥＲ.md",
    "memory/./2026-03-10.md",
    "memory/sym-user.md",
    "memory/hard-user.md",
    "memory/up/USER.md",
    "active-context.md",
    "shared/hard-daily.md",
]


@pytest.mark.parametrize("spelling", ISSUE_SPELLINGS)
def test_group_gate_refuses_every_spelling_and_link(ws: Path, spelling: str) -> None:
    assert not group_gate(ws).may_read(spelling)
    assert not group_gate(ws).may_read(f"{ws}/{spelling}")  # absolute too


@pytest.mark.parametrize("spelling", ISSUE_SPELLINGS)
def test_group_memory_get_refuses_every_spelling(mem: Memory, spelling: str) -> None:
    get = tools_by_name(build_memory_tools(mem, session_key=GROUP_KEY))["memory_get"]
    payload = get.invoke({"path": spelling})
    assert payload.get("error") and not payload.get("text")
    assert not any(s in json.dumps(payload) for s in SECRETS)


def test_private_session_reads_them_all(ws: Path, mem: Memory) -> None:
    gate = SessionAccess.for_session(ws, session_key="agent:main:telegram:dm:7")
    assert all(gate.may_read(t) for t in TARGETS)
    get = tools_by_name(build_memory_tools(mem, session_key="main"))["memory_get"]
    assert "SECRET-MEMORY-ORCHID" in get.invoke({"path": "memory/../MEMORY.md"})["text"]


def test_shared_files_stay_readable_from_groups(ws: Path, mem: Memory) -> None:
    gate = group_gate(ws)
    assert gate.may_read("memory/topics/lunch.md") and gate.may_read("./memory/topics/shared.md")
    get = tools_by_name(build_memory_tools(mem, session_key=GROUP_KEY))["memory_get"]
    assert "noon" in get.invoke({"path": "memory/topics/lunch.md"})["text"]


def test_hard_link_under_memory_is_not_searchable_from_groups(mem: Memory) -> None:
    """memory/hard-user.md is USER.md: its chunks are indexed, but never shown to a group."""
    search = tools_by_name(build_memory_tools(mem, session_key=GROUP_KEY))["memory_search"]
    payload = search.invoke({"query": "pin SECRET-USER-TULIP"})
    assert not any(s in json.dumps(payload) for s in SECRETS)
    private = tools_by_name(build_memory_tools(mem, session_key="main"))["memory_search"]
    assert "SECRET-USER-TULIP" in json.dumps(private.invoke({"query": "pin SECRET-USER-TULIP"}))


def test_group_facts_and_graph_view_hold_no_private_name_alias_or_citation(mem: Memory, ws: Path) -> None:
    facts = tools_by_name(build_memory_tools(mem, session_key=GROUP_KEY))["memory_facts"]
    for query in ("Orv", "Orchid Vance city", "where does Orchid Vance live"):
        text = json.dumps(facts.invoke({"query": query}))
        assert not any(s in text for s in SECRETS) and "MEMORY.md" not in text
    view = mem.graph_engine.view(group_gate(ws).may_read)
    names = {n.casefold() for n in view.names}
    assert "orv" not in names and "orchid vance" in names
    cites = [c for e in view.entities.values() for c in e.citations]
    assert cites and not any(c.startswith(("MEMORY.md", "USER.md")) for c in cites)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_property_no_spelling_of_a_private_file_is_readable_from_a_group(
    ws: Path, mem: Memory, data: st.DataObject
) -> None:
    path = data.draw(spellings(ws))
    if group_gate(ws).may_read(path):
        # Only a name of no file at all (a case or width variant on a case-sensitive
        # disk, a trailing space) may pass: never one that is a private file.
        named = os.path.join(ws, path.strip().replace("\\", "/"))
        assert not os.path.exists(named) or not any(
            os.path.samefile(named, ws / p) for p in PRIVATE_FILES
        ), path
    tools = tools_by_name(build_memory_tools(mem, session_key=GROUP_KEY))
    payload = tools["memory_get"].invoke({"path": path})
    assert not payload.get("text") and not any(s in json.dumps(payload) for s in SECRETS)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.sampled_from(["SECRET-MEMORY-ORCHID", "SECRET-USER-TULIP", "pin", "daily",
                              "SECRET-DAILY-LOTUS", "Orchid Vance", "Orv city", "city"]),
       key=st.sampled_from([GROUP_KEY, "agent:main:slack:mpim:x", "agent:main:discord:guild:1",
                            "agent:main:whatsapp:12036@g.us", "agent:main:telegram:-1001234567"]))
def test_property_group_search_and_facts_never_return_private_text(
    mem: Memory, query: str, key: str
) -> None:
    tools = tools_by_name(build_memory_tools(mem, session_key=key))
    for name in ("memory_search", "memory_facts"):
        text = json.dumps(tools[name].invoke({"query": query}))
        assert not any(s in text for s in SECRETS), (name, query, text)


def test_group_notes_are_readable_only_by_their_own_group(ws: Path) -> None:
    mine = group_scope(GROUP_KEY)
    write(ws / "memory" / "groups" / mine / "2026-03-10.md", "- group note\n")
    write(ws / "memory" / "groups" / "someone-else-12345678" / "2026-03-10.md", "- theirs\n")
    gate = group_gate(ws)
    assert gate.may_read(f"memory/groups/{mine}/2026-03-10.md")
    assert not gate.may_read("memory/groups/someone-else-12345678/2026-03-10.md")
    verdict = gate.check(f"memory/groups/{mine}/2026-03-10.md")
    assert verdict.readable and not verdict.trusted
    owner = SessionAccess(workspace=ws, private=True)
    assert owner.may_read("memory/groups/someone-else-12345678/2026-03-10.md")
    assert not owner.check("memory/groups/someone-else-12345678/2026-03-10.md").trusted


def test_extra_paths_are_never_trusted_even_inside_memory(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws / "memory" / "inbox" / "mail.md", "- imported\n")
    write(ws / "memory" / "topic.md", "- mine\n")
    gate = SessionAccess(workspace=ws, extra_paths=(ExtraPath(path="memory/inbox"),))
    assert not gate.check("memory/inbox/mail.md").trusted
    assert gate.check("memory/topic.md").trusted
    assert not gate.check("sessions/x.jsonl", "sessions").trusted


def test_fold_path() -> None:
    assert fold_path("ＵＳＥＲ.md. ") == "user.md"
    assert fold_path("memory/./2026-03-10.MD") == "memory/2026-03-10.md"


# -- no reader bypasses the gate ------------------------------------------------------------

PACKAGE = Path(__file__).resolve().parents[2] / "memmw"
#: Every place session code reads memory, and the gate each one goes through.
GATED = {
    # memory.get: get_tool_payload checks the gate on the asked and on the resolved path.
    ("agent/tools.py", "memory.get", "get_tool_payload"),
    # search_payload gets the session gate's Visibility from search_tool_payload (the search
    # keeps only hits the gate shows); the owner's CLI calls it too.
    ("agent/tools.py", "memory.search_result", "search_payload"),
    # memory.facts runs on the gate's graph view (visible=gate.may_read); hits checked again.
    ("agent/tools.py", "getattr:facts", "facts_tool_payload"),
    ("agent/tools.py", "getattr:facts", "graph_tools"),  # only whether the tool exists
    # The [GRAPH MEMORY] block reads the graph only through view(access.injectable).
    ("hooks/active_memory.py", "getattr:graph_engine", "build"),
    ("hooks/active_memory.py", "engine.view", "build"),
    # Prompt files are read only through SessionAccess.prompt_text (gate + inert text).
    ("hooks/bootstrap.py", "gate.prompt_text", "build_bootstrap"),
    ("hooks/bootstrap.py", "gate.prompt_text", "build_startup_context"),
    ("hooks/working_memory.py", "gate.prompt_text", "working_memory_section"),
    # Lists project files only; working_memory_section reads each through the gate.
    ("hooks/working_memory.py", "folder.glob", "working_files"),
    # The MCP HTTP server's bearer token in the state folder, not a memory file.
    ("adapters/mcp.py", "os.open", "http_token"),
    ("adapters/mcp.py", "os.open", "_read_token"),
}
#: Modules whose file reads are not memory reads (state files, explicit extraction runs).
EXEMPT = {"hooks/flush.py", "hooks/extractor.py"}
ENGINE_READS = {"get", "search_result", "facts", "graph", "view", "prompt_text"}
RECEIVERS = {"memory", "self.memory", "mem", "engine", "gate", "access", "graph_engine"}
FILE_READS = {"read_text", "read_bytes", "open", "listdir", "scandir", "iterdir", "glob"}


def reads_in(tree: ast.AST, rel: str) -> set[tuple[str, str, str]]:
    found: set[tuple[str, str, str]] = set()
    for func in ast.walk(tree):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(func):
            if not isinstance(node, ast.Call):
                continue
            target = node.func
            if isinstance(target, ast.Name) and target.id == "open":
                found.add((rel, "open", func.name))
            elif isinstance(target, ast.Name) and target.id == "getattr" and len(node.args) > 1:
                name = node.args[1]
                if isinstance(name, ast.Constant) and name.value in ("facts", "graph_engine", "get"):
                    found.add((rel, f"getattr:{name.value}", func.name))
            elif isinstance(target, ast.Attribute):
                receiver = ast.unparse(target.value)
                if target.attr in FILE_READS:
                    found.add((rel, f"{receiver}.{target.attr}", func.name))
                elif target.attr in ENGINE_READS and receiver in RECEIVERS:
                    found.add((rel, f"{receiver}.{target.attr}", func.name))
    return found


def test_no_session_reader_bypasses_the_gate() -> None:
    """Every memory read in the session surface is one of the gated call sites above.

    A new reader (a hook reading a file, a tool calling ``memory.get`` or the graph)
    fails here until it goes through :class:`SessionAccess` and is listed in ``GATED``.
    """
    modules = sorted((PACKAGE / "hooks").glob("*.py")) + sorted((PACKAGE / "agent").glob("*.py"))
    modules += [PACKAGE / "middleware.py", *sorted((PACKAGE / "adapters").glob("*.py"))]
    found: set[tuple[str, str, str]] = set()
    for path in modules:
        rel = path.relative_to(PACKAGE).as_posix()
        if rel not in EXEMPT:
            found |= reads_in(ast.parse(path.read_text(encoding="utf-8")), rel)
    assert found - GATED == set(), f"memory reads outside the privacy gate: {found - GATED}"
    assert GATED - found == set(), f"stale entries (update GATED): {GATED - found}"


def test_the_bypass_check_catches_a_new_reader() -> None:
    code = "def hook(memory, path):\n    return memory.get(path), Path(path).read_text()\n"
    found = reads_in(ast.parse(code), "hooks/new.py")
    assert ("hooks/new.py", "memory.get", "hook") in found
    assert ("hooks/new.py", "Path(path).read_text", "hook") in found


def test_bootstrap_and_working_memory_refuse_links_to_private_files(tmp_path: Path) -> None:
    import datetime as dt

    from memmw.config import ActiveMemoryConfig, BootstrapConfig
    from memmw.hooks.bootstrap import build_bootstrap
    from memmw.hooks.working_memory import working_memory_section

    ws = tmp_path / "ws"
    write(ws / "USER.md", "- pin: SECRET-USER-TULIP\n")
    scope = group_scope(GROUP_KEY)
    (ws / "memory" / "groups" / scope).mkdir(parents=True)
    os.link(ws / "USER.md", ws / "memory" / "groups" / scope / "2026-03-10.md")
    os.link(ws / "USER.md", ws / "SOUL.md")
    gate = SessionAccess.for_session(ws, session_key=GROUP_KEY)
    boot = build_bootstrap(ws, BootstrapConfig(), private=False, today=dt.date(2026, 3, 10),
                           access=gate)
    soul, _loaded, _cut = working_memory_section(ws, ActiveMemoryConfig(), private=False,
                                                 access=gate)
    assert "SECRET" not in boot.text and "SECRET" not in soul
    write(ws / "memory" / "groups" / scope / "2026-03-09.md", "- group chat line\n")
    boot = build_bootstrap(ws, BootstrapConfig(), private=False, today=dt.date(2026, 3, 10),
                           access=gate)
    assert "group chat line" in boot.text and "untrusted" in boot.text


def test_private_memory_get_marks_untrusted_text(ws: Path, mem: Memory) -> None:
    scope = group_scope(GROUP_KEY)
    write(ws / "memory" / "groups" / scope / "2026-03-11.md", "- said in the group\n")
    get = tools_by_name(build_memory_tools(mem, session_key="main"))["memory_get"]
    payload = get.invoke({"path": f"memory/groups/{scope}/2026-03-11.md"})
    assert payload["untrusted"] is True and "said in the group" in payload["text"]
    assert "untrusted" not in get.invoke({"path": "MEMORY.md"})


def test_facts_from_an_extra_path_inside_memory_are_reported_untrusted(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws / "memory" / "inbox" / "mail.md", "## Quinn Ode\n- city: Lima\n")
    write(ws / "memory" / "people.md", "## Quinn Ode\n- team: ops\n")
    config = MemoryConfig(provider="none", extra_paths=(ExtraPath(path="memory/inbox"),))
    with make_memory(workspace=ws, state_dir=tmp_path / "state", config=config) as mem:
        mem.sync()
        facts = tools_by_name(build_memory_tools(mem, session_key="main"))["memory_facts"]
        results = facts.invoke({"query": "Quinn Ode"})["results"]
    origins = {r["value"]: r["origin"] for r in results}
    assert origins == {"Lima": "untrusted", "ops": "agent"}
