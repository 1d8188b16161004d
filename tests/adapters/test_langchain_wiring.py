"""The LangChain wiring a user copies from the README: compaction guard, restarts, NO_REPLY."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import FLUSH_MARK, NO_REPLY_FORMS, Scenario

pytestmark = pytest.mark.optional

try:
    from langchain.agents import create_agent
    from langchain.agents.middleware import SummarizationMiddleware
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
    )
    from langgraph.checkpoint.memory import InMemorySaver

    from memmw.adapters.langchain import LangChainMemoryMiddleware, is_summary_message
    from memmw.middleware import WiringError

    from .lc_fakes import scripted

    LANGCHAIN_ERROR: str | None = None
except ImportError as exc:  # pragma: no cover - only without the extra
    LANGCHAIN_ERROR = str(exc)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _require_langchain() -> None:
    if LANGCHAIN_ERROR is not None:
        pytest.fail(
            "these tests need the langchain extra (pip install 'memmw[langchain]'): "
            + LANGCHAIN_ERROR
        )


def readme_langchain_block() -> str:
    """The LangChain code block of the README section "Wrapping an agent", verbatim."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Wrapping an agent", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    return next(b for b in blocks if "LangChainMemoryMiddleware(" in b)


def readme_wiring(block: str) -> str:
    """The block's wiring, verbatim: its imports and everything from ``memory = Memory(``
    up to the example call, without the lines that make real models and the checkpointer
    (the test puts scripted models and its own checkpointer in those names)."""
    head, wiring = block.split("memory = Memory(", 1)
    wiring = "memory = Memory(" + wiring.split("\nreply = agent.invoke(", 1)[0]
    made_here = ("model =", "summary_model =", "checkpointer =")
    imports = [ln for ln in head.splitlines() if ln and not ln.startswith(made_here)]
    assert all(ln.startswith(("from ", "import ")) for ln in imports), imports
    return "\n".join(imports) + "\n" + wiring


class Log:
    """What the fake models saw, in order: flush turns, summaries, main calls."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.flush_turns = 0
        self.flushed_labels: set[str] = set()

    def policy(self, messages: list[BaseMessage]) -> Any:
        system = messages[0].text if isinstance(messages[0], SystemMessage) else ""
        last = messages[-1]
        if FLUSH_MARK in system:
            if isinstance(last, ToolMessage):
                return "NO_REPLY"
            self.flush_turns += 1
            self.events.append("flush")
            self.flushed_labels |= {lbl for m in messages for lbl in labels(m.text)}
            note = f"- flush note {self.flush_turns}"
            call = {"id": f"f{self.flush_turns}", "name": "memory_append", "args": {"content": note}}
            return {"content": "", "tool_calls": [call]}
        self.events.append("model")
        if isinstance(last, ToolMessage):
            return "Found it."
        if isinstance(last, HumanMessage) and "gateway" in last.text:
            call = {"id": f"s{len(self.events)}", "name": "memory_search", "args": {"query": "gateway"}}
            return {"content": "", "tool_calls": [call]}
        return "NO_REPLY" if "quiet" in last.text else "ack"

    def summary(self, messages: list[BaseMessage]) -> str:
        self.events.append("summary")
        return "Summary: a long talk about the gateway."


def labels(text: str) -> set[str]:
    """The ``turn N:`` labels in a text."""
    return set(re.findall(r"\bturn \d+:", text))


OPENED: list[Any] = []


def readme_agent(log: Log, checkpointer: Any) -> Any:
    """Run the README block as written, with scripted models in its free names."""
    namespace: dict[str, Any] = {
        "model": scripted(log.policy),
        "summary_model": scripted(log.summary),
        "checkpointer": checkpointer,
    }
    exec(readme_wiring(readme_langchain_block()), namespace)  # the README's own code
    OPENED.append(namespace["memory"])
    return namespace["agent"]


@pytest.fixture
def readme_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMMW_PROVIDER", "none")
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "MEMORY.md").write_text("# Memory\n\n- The gateway runs on port 8443.\n")
    yield tmp_path
    while OPENED:  # the README's Memory watches files: stop its threads
        OPENED.pop().close()


#: ~7500 estimated tokens: 20 of them reach the README's 150_000-token trigger.
BIG = "The gateway migration notes continue at length. " * 612


def drive(agent: Any, log: Log, mode: str, summaries: int = 10, limit: int = 300) -> list[str]:
    """Send turns until ``summaries`` summarizations happened; returns streamed texts.

    After every turn: a new summary message in the state is a summarization, and every
    turn it evicted must have been seen by a flush turn before (nothing lost unflushed).
    """
    cfg = {"configurable": {"thread_id": "readme"}}
    streamed: list[str] = []
    present: set[str] = set()
    summary_ids: set[str] = set()
    turn = 0
    while len(summary_ids) < summaries and turn < limit:
        text = f"turn {turn}: {'gateway ' if turn % 7 == 3 else ''}{BIG}"
        payload = {"messages": [HumanMessage(text)]}
        if mode == "invoke":
            agent.invoke(payload, cfg)
        elif mode == "ainvoke":
            asyncio.run(agent.ainvoke(payload, cfg))
        else:
            for chunk, _meta in agent.stream(payload, cfg, stream_mode="messages"):
                streamed.append(chunk.text)
        messages = agent.get_state(cfg).values["messages"]
        now = {lbl for m in messages for lbl in labels(m.text) if not is_summary_message(m)}
        assert present - now <= log.flushed_labels, "a turn was evicted unflushed"
        present = now
        for m in messages:
            if is_summary_message(m) and m.id not in summary_ids:
                summary_ids.add(m.id)
                log.events.append("summary")
        turn += 1
    return streamed


@pytest.mark.parametrize("mode", ["invoke", "ainvoke", "stream"])
def test_readme_wiring_flushes_before_every_summarization(readme_dir: Path, mode: str) -> None:
    log = Log()
    agent = readme_agent(log, InMemorySaver())
    streamed = drive(agent, log, mode)
    order = [e for e in log.events if e in ("flush", "summary")]
    assert order == ["flush", "summary"] * 10
    daily = (readme_dir / "ws" / "memory").glob("*.md")
    notes = "".join(p.read_text(encoding="utf-8") for p in daily)
    assert all(f"flush note {n}\n" in notes for n in range(1, 11))
    if mode == "stream":
        joined = "".join(streamed)
        assert "ack" in joined and "NO_REPLY" not in joined and "flush note" not in joined


# -- restarts -------------------------------------------------------------------------

RESTART_SCRIPT = textwrap.dedent(
    """
    import json, sqlite3, sys
    sys.path[:0] = [{root!r}, {tests!r}]
    from langchain.agents import create_agent
    from langchain.agents.middleware import SummarizationMiddleware
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.sqlite import SqliteSaver
    from memmw import Memory
    from memmw.adapters.langchain import LangChainMemoryMiddleware
    from memmw.hooks import Event
    from adapters.lc_fakes import scripted
    from adapters.test_langchain_wiring import Log

    log = Log()
    conn = sqlite3.connect(sys.argv[1], check_same_thread=False)
    with Memory(workspace="ws", state_dir="state") as memory:
        mw = LangChainMemoryMiddleware(
            memory,
            summarization=SummarizationMiddleware(
                scripted(log.summary), trigger=("tokens", 6000), keep=("messages", 2)
            ),
        )
        mw.core.hooks.on(Event.FLUSH, lambda ctx: log.events.append("FLUSH"))
        mw.core.hooks.on(Event.COMPACTION, lambda ctx: log.events.append("COMPACTION"))
        agent = create_agent(scripted(log.policy), middleware=[mw], checkpointer=SqliteSaver(conn))
        cfg = {{"configurable": {{"thread_id": "t"}}}}
        for text in sys.argv[2:]:
            agent.invoke({{"messages": [HumanMessage(text)]}}, cfg)
    print(json.dumps(log.events))
    """
)


def test_restart_with_sqlite_checkpointer_flushes_on_first_call(readme_dir: Path) -> None:
    """Process 1 stops below the flush threshold; the first call of process 2 pushes the
    thread past both the flush threshold and the trigger, with no model seen yet."""
    import langgraph.checkpoint.sqlite  # noqa: F401 - the test extra; fail loudly without it
    script = readme_dir / "run.py"
    script.write_text(RESTART_SCRIPT.format(root=str(ROOT), tests=str(ROOT / "tests")))
    db = str(readme_dir / "checkpoints.sqlite")
    env = {"MEMMW_PROVIDER": "none", "PATH": "/usr/bin:/bin"}

    def run(*texts: str) -> list[str]:
        out = subprocess.run(
            [sys.executable, "-W", "error", str(script), db, *texts],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
            env=env,
        )
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]

    first = run("hello", "x " * 4000)  # ~2000 tokens: below the flush threshold (4000)
    assert "FLUSH" not in first and "COMPACTION" not in first
    second = run("y " * 12000, "and after")  # first call: ~8000 tokens, past 6000
    assert second.count("FLUSH") == 1 and second.count("COMPACTION") == 1
    assert second.index("FLUSH") < second.index("COMPACTION")
    # The flush ran in the first call of process 2, before its model answered.
    assert second[: second.index("FLUSH") + 1] == ["flush", "FLUSH"]
    assert "flush note 1" in (readme_dir / "ws" / "memory" / f"{_today()}.md").read_text()


def _today() -> str:
    import datetime as dt

    return dt.datetime.now().astimezone().date().isoformat()


# -- wrong wiring ---------------------------------------------------------------------


def summarizer(log: Log, trigger: int) -> Any:
    return SummarizationMiddleware(
        scripted(log.summary), trigger=("tokens", trigger), keep=("messages", 2)
    )


def turns_until_error(agent: Any, log: Log, texts: list[str] | None = None) -> WiringError:
    cfg = {"configurable": {"thread_id": "w"}}
    texts = texts or [f"turn {i}: {'z ' * 600}" for i in range(40)]
    with pytest.raises(WiringError) as info:
        for text in texts:
            agent.invoke({"messages": [HumanMessage(text)]}, cfg)
    return info.value


#: A short turn, then one that jumps past the flush threshold and the trigger at once.
JUMP = ["hello", "z " * 8000, "after"]


def test_summarizer_listed_before_memmw_is_an_error(scenario_factory) -> None:
    sc: Scenario = scenario_factory()
    log = Log()
    agent = create_agent(
        scripted(log.policy),
        middleware=[summarizer(log, 3000), LangChainMemoryMiddleware(middleware=sc.middleware)],
        checkpointer=InMemorySaver(),
    )
    # The trigger (3000) is above the flush threshold (2500), but the summarizer runs
    # first: it evicts before memmw can flush.
    error = turns_until_error(agent, log, JUMP)
    assert "without the memory flush" in str(error) and "summarization=" in str(error)
    assert log.events.count("summary") == 1  # at the first summarization


def test_trigger_below_the_flush_threshold_is_an_error(scenario_factory) -> None:
    sc: Scenario = scenario_factory()  # flush threshold 2500 (window 4000, reserve 1000)
    log = Log()
    agent = create_agent(
        scripted(log.policy),
        middleware=[LangChainMemoryMiddleware(middleware=sc.middleware), summarizer(log, 1200)],
        checkpointer=InMemorySaver(),
    )
    error = turns_until_error(agent, log)
    assert "trigger below the flush threshold" in str(error)
    assert log.events.count("summary") == 1 and "flush" not in log.events


def test_flush_model_that_cannot_call_tools_is_refused(scenario_factory) -> None:
    sc: Scenario = scenario_factory()
    with pytest.raises(WiringError, match="cannot bind tools"):
        LangChainMemoryMiddleware(middleware=sc.middleware, flush_model=object())  # type: ignore[arg-type]


def test_lenient_mode_logs_the_wiring_error(scenario_factory, caplog) -> None:
    sc: Scenario = scenario_factory()
    log = Log()
    agent = create_agent(
        scripted(log.policy),
        middleware=[
            summarizer(log, 3000),
            LangChainMemoryMiddleware(middleware=sc.middleware, strict=False),
        ],
        checkpointer=InMemorySaver(),
    )
    cfg = {"configurable": {"thread_id": "w"}}
    with caplog.at_level(logging.ERROR, logger="memmw.adapters.langchain"):
        for text in JUMP:
            agent.invoke({"messages": [HumanMessage(text)]}, cfg)
    assert log.events.count("summary") >= 1
    assert any("without the memory flush" in r.message for r in caplog.records)


def test_owned_summarizer_with_a_message_trigger_still_flushes_first(scenario_factory) -> None:
    sc: Scenario = scenario_factory()
    log = Log()
    mw = LangChainMemoryMiddleware(
        middleware=sc.middleware,
        summarization=SummarizationMiddleware(
            scripted(log.summary), trigger=("messages", 6), keep=("messages", 2)
        ),
    )
    agent = create_agent(scripted(log.policy), middleware=[mw], checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "m"}}
    for i in range(12):
        agent.invoke({"messages": [HumanMessage(f"short {i}")]}, cfg)
    order = [e for e in log.events if e in ("flush", "summary")]
    assert order and order == ["flush", "summary"] * (len(order) // 2)


# -- NO_REPLY -------------------------------------------------------------------------


def reply_agent(sc: Scenario, reply: str) -> Any:
    model = scripted(lambda messages: reply)
    mw = LangChainMemoryMiddleware(middleware=sc.middleware)
    return create_agent(model, middleware=[mw], checkpointer=InMemorySaver())


@pytest.mark.parametrize(("text", "shown"), NO_REPLY_FORMS)
@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_no_reply_forms_invoke(scenario_factory, text: str, shown: str | None, mode: str) -> None:
    sc: Scenario = scenario_factory()
    agent = reply_agent(sc, text)
    cfg = {"configurable": {"thread_id": "n"}}
    payload = {"messages": [HumanMessage("hi")]}
    if mode == "invoke":
        result = agent.invoke(payload, cfg)
    else:
        result = asyncio.run(agent.ainvoke(payload, cfg))
    last = result["messages"][-1]
    assert isinstance(last, AIMessage)  # never the user's own message
    assert last.text == (shown or "")
    # The placeholder of a dropped reply is not sent to the model on the next turn.
    again = agent.invoke({"messages": [HumanMessage("next")]}, cfg)["messages"]
    assert all(m.text for m in again if isinstance(m, AIMessage) and m is not again[-1])


@pytest.mark.parametrize(("text", "shown"), NO_REPLY_FORMS)
def test_no_reply_forms_streamed(scenario_factory, text: str, shown: str | None) -> None:
    sc: Scenario = scenario_factory()
    agent = reply_agent(sc, text)
    cfg = {"configurable": {"thread_id": "s"}}
    pieces = [
        chunk.text
        for chunk, meta in agent.stream(
            {"messages": [HumanMessage("hi")]}, cfg, stream_mode="messages"
        )
        if isinstance(chunk, AIMessage) or chunk.type == "AIMessageChunk"
    ]
    assert "".join(pieces).strip() == (shown or "")


@pytest.mark.parametrize(("text", "shown"), NO_REPLY_FORMS)
def test_no_reply_forms_async_streamed(scenario_factory, text: str, shown: str | None) -> None:
    sc: Scenario = scenario_factory()
    agent = reply_agent(sc, text)
    cfg = {"configurable": {"thread_id": "as"}}

    async def collect() -> list[str]:
        out: list[str] = []
        async for chunk, _meta in agent.astream(
            {"messages": [HumanMessage("hi")]}, cfg, stream_mode="messages"
        ):
            if chunk.type == "AIMessageChunk":
                out.append(chunk.text)
        return out

    assert "".join(asyncio.run(collect())).strip() == (shown or "")


SILENT_WITH_CALLS = ["NO_REPLY", "“NO_REPLY”", " ", "NO_REPLY<|im_end|>", '{"action":"NO_REPLY","why":"x"}']


@pytest.mark.parametrize("text", SILENT_WITH_CALLS)
@pytest.mark.parametrize("mode", ["invoke", "stream"])
def test_silent_text_beside_tool_calls_keeps_the_calls_in_state(
    scenario_factory, text: str, mode: str
) -> None:
    """Issue 19: state kept AIMessage('NO_REPLY', tool_calls=[...])."""
    sc: Scenario = scenario_factory()
    call = {"id": "c1", "name": "memory_search", "args": {"query": "gateway"}}

    def policy(messages: list[BaseMessage]) -> Any:
        if isinstance(messages[-1], ToolMessage):
            return "ack"
        return {"content": text, "tool_calls": [call]}

    mw = LangChainMemoryMiddleware(middleware=sc.middleware)
    agent = create_agent(scripted(policy), middleware=[mw], checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": f"calls-{mode}"}}
    payload = {"messages": [HumanMessage("hi")]}
    if mode == "invoke":
        messages = agent.invoke(payload, cfg)["messages"]
    else:
        pieces = [
            chunk.text
            for chunk, _meta in agent.stream(payload, cfg, stream_mode="messages")
            if chunk.type == "AIMessageChunk"
        ]
        assert "".join(pieces) == "ack"
        messages = agent.get_state(cfg).values["messages"]
    with_calls = [m for m in messages if isinstance(m, AIMessage) and m.tool_calls]
    assert len(with_calls) == 1 and with_calls[0].tool_calls[0]["name"] == "memory_search"
    assert with_calls[0].text == ""
    assert any(isinstance(m, ToolMessage) for m in messages)
    assert messages[-1].text == "ack"
    session = mw.session_for(f"calls-{mode}")
    recorded = [r.content for r in sc.middleware.transcripts.read(session.session_id)]
    assert not any("NO_REPLY" in str(c) or "<|" in str(c) for c in recorded)


# -- bootstrap freshness and room -----------------------------------------------------


@pytest.mark.parametrize("mode", ["invoke", "stream"])
def test_bootstrap_follows_every_edit_in_a_thread(scenario_factory, mode: str) -> None:
    """Issue 19: after an edit to MEMORY.md a thread kept the old text."""
    sc: Scenario = scenario_factory()
    seen: list[str] = []

    def policy(messages: list[BaseMessage]) -> Any:
        seen.append(messages[0].text if isinstance(messages[0], SystemMessage) else "")
        return "ack"

    mw = LangChainMemoryMiddleware(middleware=sc.middleware)
    agent = create_agent(scripted(policy), middleware=[mw], checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": f"fresh-{mode}"}}
    memory_md = sc.workspace / "MEMORY.md"
    for version in range(1, 5):  # same size each time, written right before the turn
        memory_md.write_text(f"# Memory\n\n- fact version {version}\n", encoding="utf-8")
        payload = {"messages": [HumanMessage(f"hello {version}")]}
        if mode == "invoke":
            agent.invoke(payload, cfg)
        else:
            list(agent.stream(payload, cfg, stream_mode="messages"))
        assert [v for v in range(1, 5) if f"fact version {v}" in seen[-1]] == [version]
    (sc.workspace / "USER.md").unlink()
    agent.invoke({"messages": [HumanMessage("and now")]}, cfg)
    assert "Name: Ada" not in seen[-1]


def test_a_window_the_bootstrap_fills_is_refused_at_the_first_call(tmp_path: Path) -> None:
    """Issue 19: a large MEMORY.md on an 8k window failed 12 of 20 turns with overflows."""
    from memmw.config import FlushConfig, MemoryConfig
    from memmw.engine.memory import Memory
    from memmw.errors import ConfigError
    from memmw.middleware import MemoryMiddleware
    from memmw.text.tokens import TokenCounter

    from .conftest import fixed_clock, make_workspace

    ws = make_workspace(tmp_path)
    (ws / "MEMORY.md").write_text("# Memory\n" + "- a long curated line\n" * 1200, encoding="utf-8")
    config = MemoryConfig(provider="none", flush=FlushConfig(context_window=8000))
    memory = Memory(workspace=ws, state_dir=tmp_path / "state", config=config)
    core = MemoryMiddleware(memory, clock=fixed_clock, token_counter=TokenCounter(use_tiktoken=False))
    calls: list[int] = []

    def policy(messages: list[BaseMessage]) -> Any:
        calls.append(1)
        return "ack"

    mw = LangChainMemoryMiddleware(middleware=core)
    agent = create_agent(scripted(policy), middleware=[mw], checkpointer=InMemorySaver())
    try:
        with pytest.raises(ConfigError, match=r"context window 8000 with reserve 4000 .*bootstrap"):
            agent.invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "w"}})
        assert calls == []  # refused before any model call (no flush, no turn)
    finally:
        memory.close()


# -- privacy --------------------------------------------------------------------------


def test_group_prompt_has_no_private_line(scenario_factory) -> None:
    sc: Scenario = scenario_factory()
    seen: list[str] = []

    def policy(messages: list[BaseMessage]) -> Any:
        seen.append(messages[0].text if isinstance(messages[0], SystemMessage) else "")
        return "ack"

    mw = LangChainMemoryMiddleware(middleware=sc.middleware)
    agent = create_agent(scripted(policy), middleware=[mw], checkpointer=InMemorySaver())

    def say(text: str, thread: str) -> None:
        agent.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}})

    say("my locker number is 1234", "telegram:dm:7")  # private, not a secret: archived
    say("/new", "telegram:dm:7")
    say("hello everyone", "telegram:group:42")
    system = seen[-1]
    private = [sc.workspace / "MEMORY.md", sc.workspace / "USER.md"]
    private += sorted((sc.workspace / "memory").glob("*.md"))
    assert any("1234" in p.read_text(encoding="utf-8") for p in private)  # the archive
    lines = {
        ln.strip()
        for p in private
        for ln in p.read_text(encoding="utf-8").splitlines()
        if len(ln.strip()) > 3 and not ln.startswith("# ")
    }
    assert "1234" not in system and [ln for ln in lines if ln in system] == []
    assert "## Memory Recall" in system
