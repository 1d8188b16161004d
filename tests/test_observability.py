"""OpenTelemetry spans of memory operations: names, attributes, errors, and no memory text."""

from __future__ import annotations

import datetime as dt
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memmw import observability
from memmw.agent.tools import append_tool_payload
from memmw.config import ActiveMemoryConfig, FlushConfig, MemoryConfig, TracingConfig
from memmw.engine.memory import Memory
from memmw.errors import PathPolicyError
from memmw.hooks.active_memory import ActiveMemory
from memmw.middleware import MemoryMiddleware
from memmw.testing import require_optional
from memmw.text.tokens import TokenCounter

from .conftest import make_memory as shared_make_memory

require_optional("opentelemetry.sdk.trace", "test")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

NOW = dt.datetime(2026, 3, 10, 14, 5, tzinfo=dt.timezone.utc)
ROOMY = ActiveMemoryConfig(deadline_ms=60_000)
FLUSH = FlushConfig(context_window=3000, reserve_tokens_floor=1000, soft_threshold_tokens=500)


class Traced:
    """The spans exported while the fixture is active."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def all(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.all() if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name)
        assert len(found) == 1, [s.name for s in self.all()]
        return found[0]

    def clear(self) -> None:
        self.exporter.clear()


@pytest.fixture
def traced() -> Iterator[Traced]:
    t = Traced()
    observability.use_tracer_provider(t.provider)
    yield t
    observability.use_tracer_provider(None)
    t.provider.shutdown()


def make_memory(root: Path, *, config: MemoryConfig | None = None, **files: str) -> Memory:
    """The shared ``make_memory`` with this module's flush settings (``a__b.md``: ``a/b.md``)."""
    cfg = config or MemoryConfig(provider="none", user_timezone="Europe/Paris", flush=FLUSH)
    return shared_make_memory(
        root, {rel.replace("__", "/"): text for rel, text in files.items()}, config=cfg
    )


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    m = make_memory(
        tmp_path,
        **{
            "MEMORY.md": "# Memory\n\n## Alice Martin (Ali)\n- city: Berlin\n",
            "memory__2026-03-01.md": "- the deploy port is 8443\n- the cache is SQLite\n",
        },
    )
    yield m
    m.close()


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def appending_model(content: str) -> Any:
    """A flush model that appends ``content`` once, then says NO_REPLY."""

    def model(messages: list[dict[str, Any]], tools: Any = None) -> Any:
        if messages[-1]["role"] == "tool":
            return "NO_REPLY"
        return {
            "content": "",
            "tool_calls": [{"id": "w", "name": "memory_append", "args": {"content": content}}],
        }

    return model


def middleware(memory: Memory, **kw: Any) -> MemoryMiddleware:
    kw.setdefault("clock", lambda: NOW)
    kw.setdefault("token_counter", TokenCounter(use_tiktoken=False))
    return MemoryMiddleware(memory, **kw)


# ---------------------------------------------------------------------------------------
# Each operation's span


def test_sync_span_counts_files_and_chunks(memory: Memory, traced: Traced) -> None:
    report = memory.sync()
    span = traced.one("memmw.sync")
    a = attrs(span)
    assert span.kind == SpanKind.INTERNAL
    assert a["gen_ai.operation.name"] == "memmw.sync" and a["memmw.operation"] == "sync"
    assert a["gen_ai.agent.id"] == a["gen_ai.memory.store.id"] == "main"
    assert a["memmw.sync.files_added"] == report.files_added == 2
    assert a["memmw.sync.chunks_indexed"] == report.chunks_indexed > 0
    assert a["memmw.sync.chunks_total"] == report.chunks_total
    assert a["memmw.sync.full_rebuild"] is report.full_rebuild
    assert a["memmw.sync.embeddings"] == "wait" and a["memmw.sync.force"] is False
    assert span.status.status_code == StatusCode.UNSET
    traced.clear()
    memory.sync()
    assert attrs(traced.one("memmw.sync"))["memmw.sync.files_unchanged"] == 2


def test_search_span_counts_hits_and_mode(memory: Memory, traced: Traced) -> None:
    memory.sync()
    traced.clear()
    result = memory.search_result("deploy port", max_results=3)
    span = traced.one("search_memory")
    a = attrs(span)
    assert a["gen_ai.operation.name"] == "search_memory" and a["memmw.operation"] == "search"
    assert a["gen_ai.memory.record.count"] == len(result.hits) >= 1
    assert a["memmw.search.mode"] == result.mode == "keyword-only"
    assert a["memmw.search.partial"] is False
    assert a["memmw.search.max_results"] == 3
    assert "gen_ai.memory.query.text" not in a  # opt-in only
    traced.clear()
    memory.search("")  # the plain search goes through the same span; nothing to find
    assert attrs(traced.one("search_memory"))["gen_ai.memory.record.count"] == 0


def test_query_text_is_opt_in_and_redacted(tmp_path: Path, traced: Traced) -> None:
    config = MemoryConfig(provider="none", tracing=TracingConfig(capture_query_text=True))
    m = make_memory(tmp_path, config=config, **{"memory__n.md": "- deploy notes\n"})
    try:
        secret = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6"
        m.search_result(f"deploy key {secret}")
    finally:
        m.close()
    query = attrs(traced.one("search_memory"))["gen_ai.memory.query.text"]
    assert query.startswith("deploy key ") and secret not in query and "[REDACTED]" in query


def test_query_text_flag_loads_from_toml_and_environment(tmp_path: Path) -> None:
    assert MemoryConfig().tracing.capture_query_text is False
    env = {"MEMMW__TRACING__CAPTURE_QUERY_TEXT": "true"}
    assert MemoryConfig.load(environ=env).tracing.capture_query_text is True
    (tmp_path / "memmw.toml").write_text("[tracing]\ncapture_query_text = true\n")
    assert MemoryConfig.load(workspace=tmp_path, environ={}).tracing.capture_query_text is True


def test_get_span_ok_not_found_and_refused(memory: Memory, traced: Traced) -> None:
    read = memory.get("memory/2026-03-01.md", lines=1)
    a = attrs(traced.one("memmw.get"))
    assert a["gen_ai.operation.name"] == "memmw.get" and a["memmw.get.status"] == "ok"
    assert a["memmw.get.lines"] == read.lines == 1 and a["memmw.get.total_lines"] == 2
    assert a["memmw.get.truncated"] is True and a["memmw.get.chars"] == len(read.text)
    assert a["gen_ai.memory.record.count"] == 1 and a["memmw.get.shared"] is False
    traced.clear()
    memory.get("memory/absent.md")
    a = attrs(traced.one("memmw.get"))
    assert a["memmw.get.status"] == "not_found" and a["gen_ai.memory.record.count"] == 0
    traced.clear()
    with pytest.raises(PathPolicyError):
        memory.get("../outside-secret-name.md")
    span = traced.one("memmw.get")
    assert span.status.status_code == StatusCode.ERROR
    assert attrs(span)["error.type"] == "memmw.errors.PathPolicyError"
    assert span.status.description == "memmw.errors.PathPolicyError"  # type, never message
    assert span.events == ()  # no exception event: its message would name the path


def test_append_span_ok_and_rejected(memory: Memory, traced: Traced) -> None:
    payload = append_tool_payload(memory, {"content": "- remember this"}, clock=lambda: NOW)
    assert payload["status"] == "ok"
    span = traced.one("create_memory")
    a = attrs(span)
    assert a["gen_ai.operation.name"] == "create_memory" and a["memmw.operation"] == "append"
    assert a["memmw.append.status"] == "ok" and a["memmw.append.chars"] == payload["appended"]
    assert a["memmw.append.source"] == "tool" and a["memmw.append.group"] is False
    assert a["gen_ai.memory.record.count"] == 1
    assert span.status.status_code == StatusCode.UNSET
    traced.clear()
    refused = append_tool_payload(memory, {"content": "x", "path": "MEMORY.md"})
    assert refused["status"] == "error"
    span = traced.one("create_memory")
    assert attrs(span)["memmw.append.status"] == "error"
    assert attrs(span)["error.type"] == "rejected" and span.status.status_code == StatusCode.ERROR


def test_flush_span_with_the_append_inside(memory: Memory, traced: Traced) -> None:
    mw = middleware(memory, flush_model=appending_model("- the user likes tea"))
    session = mw.start_session("main")
    traced.clear()
    convo = [{"role": "user", "content": "I like tea"}, {"role": "assistant", "content": "ok"}]
    outcome = mw.before_model(session, convo, force=True)
    assert outcome.ran and outcome.ok
    flush = traced.one("upsert_memory")
    a = attrs(flush)
    assert a["gen_ai.operation.name"] == "upsert_memory" and a["memmw.operation"] == "flush"
    # "silent": the turn ended in a bare NO_REPLY, as it should; the note was written.
    assert a["memmw.flush.status"] == "silent" and a["memmw.flush.messages"] == 2
    assert a["memmw.flush.writes"] == 1 and a["gen_ai.memory.record.count"] == 1
    assert a["memmw.flush.messages_seen"] == 2 and a["memmw.flush.messages_missed"] == 0
    assert a["memmw.flush.turns"] == 1 and a["gen_ai.conversation.id"] == session.session_id
    append = traced.one("create_memory")
    assert append.parent is not None and append.parent.span_id == flush.context.span_id
    assert attrs(append)["memmw.append.source"] == "flush"


def test_flush_span_silent_failed_and_delta(memory: Memory, traced: Traced) -> None:
    mw = middleware(memory, flush_model=lambda messages, tools=None: "NO_REPLY")
    session = mw.start_session("main")
    convo = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    mw.before_model(session, convo, force=True)
    assert attrs(traced.one("upsert_memory"))["memmw.flush.status"] == "silent"
    traced.clear()
    convo += [{"role": "user", "content": "more"}, {"role": "assistant", "content": "sure"}]
    assert mw.flush_before_eviction(session, convo, range(4)) is not None
    a = attrs(traced.one("upsert_memory"))
    assert a["memmw.flush.reason"] == "delta" and a["memmw.flush.messages"] == 2

    def down(messages: Any, tools: Any = None) -> Any:
        raise ConnectionError("the model is down: I like tea")

    broken = middleware(memory, flush_model=down)
    other = broken.start_session("other")
    traced.clear()
    assert not broken.flush_before_eviction(other, convo, range(2)).ok  # type: ignore[union-attr]
    span = traced.one("upsert_memory")
    assert attrs(span)["memmw.flush.status"] == "failed"
    assert attrs(span)["memmw.flush.messages_missed"] == 2
    assert attrs(span)["error.type"] == "flush_failed"
    assert span.status.status_code == StatusCode.ERROR and span.status.description == "flush_failed"


def test_injection_spans_graph_block_and_bootstrap(memory: Memory, traced: Traced) -> None:
    memory.sync()
    mw = middleware(memory)
    traced.clear()
    session = mw.start_session("main")
    boot = [s for s in traced.named("memmw.inject") if attrs(s)["memmw.inject.kind"] == "bootstrap"]
    assert len(boot) == 1
    a = attrs(boot[0])
    assert a["gen_ai.operation.name"] == "memmw.inject"
    assert a["memmw.inject.files"] == len(session.bootstrap.files) >= 1
    assert a["memmw.inject.chars"] > 0 and a["memmw.inject.truncated"] is False
    traced.clear()
    am = ActiveMemory(memory, config=ROOMY)
    s = SimpleNamespace(session_id="s1", session_key="main", chat_type="direct")
    am.observe(s, {"role": "user", "content": "Where does Ali live?"})
    block = am.block(s)
    assert block
    a = attrs(traced.one("memmw.inject"))
    assert a["memmw.inject.kind"] == "graph" and a["gen_ai.conversation.id"] == "s1"
    assert a["memmw.inject.tokens"] == am.last.tokens > 0  # type: ignore[union-attr]
    assert a["memmw.inject.facts"] >= 1 and a["gen_ai.memory.record.count"] >= 1
    traced.clear()
    am.block(s)  # the same message: cached, no second build and no span
    assert traced.named("memmw.inject") == []


def test_an_exception_leaving_a_span_is_recorded_by_type_and_reraised(traced: Traced) -> None:
    with pytest.raises(KeyError), observability.span("sync", "main"):
        raise KeyError("the note says: my pin is 4711")
    span = traced.one("memmw.sync")
    assert attrs(span)["error.type"] == "KeyError" and span.status.description == "KeyError"
    assert span.events == ()


def test_attributes_must_be_scalars(traced: Traced) -> None:
    with pytest.raises(TypeError), observability.span("get", "main", get_status=["x"]):  # type: ignore[arg-type]
        pass


# ---------------------------------------------------------------------------------------
# Without the extra, and without an SDK


def test_without_opentelemetry_every_operation_works_with_the_shared_no_op(
    memory: Memory, monkeypatch: pytest.MonkeyPatch, traced: Traced
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # import fails: no extra
    monkeypatch.setitem(sys.modules, "opentelemetry.trace", None)  # and nothing loaded it
    monkeypatch.setattr(observability, "_tracer", observability._UNRESOLVED)
    assert not observability.tracing_available()
    assert observability.span("search", "main") is observability.NO_SPAN
    memory.sync()
    assert memory.search_result("deploy port").hits
    assert memory.get("memory/2026-03-01.md").status == "ok"
    mw = middleware(memory, flush_model=appending_model("- noted"))
    session = mw.start_session("main")
    assert mw.before_model(session, [{"role": "user", "content": "x"}], force=True).ok
    assert traced.all() == []


def test_with_the_api_but_no_sdk_spans_are_opentelemetry_no_ops(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from opentelemetry import trace

    observability.use_tracer_provider(trace.NoOpTracerProvider())
    try:
        with observability.span("search", "main") as sp:
            assert sp.recording is False
        memory.sync()
        assert memory.search_result("deploy port").hits
    finally:
        observability.use_tracer_provider(None)


# ---------------------------------------------------------------------------------------
# The promise: no span ever carries memory text (notes, queries, paths, messages)

marker = st.text(alphabet="abcdefghijklmnopqrstuvwxyzéüß", min_size=6, max_size=10).map(
    lambda s: "mk" + s
)


def span_texts(spans: Sequence[ReadableSpan], skip: str | None = None) -> list[str]:
    """Every string a span exports: name, attribute values, events, links, status (less
    the value of attribute ``skip``)."""
    out: list[str] = []

    def values(mapping: Any) -> None:
        for key, value in dict(mapping or {}).items():
            if key == skip:
                continue
            out.append(str(key))
            items = value if isinstance(value, (tuple, list)) else (value,)
            out.extend(str(v) for v in items)

    for s in spans:
        out.append(s.name)
        values(s.attributes)
        for event in s.events:
            out.append(event.name)
            values(event.attributes)
        for link in s.links:
            values(link.attributes)
        out.append(s.status.description or "")
    return out


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(words=st.lists(marker, min_size=6, max_size=6, unique=True), capture=st.booleans())
def test_no_span_contains_note_query_or_path_text(
    traced: Traced, words: list[str], capture: bool
) -> None:
    """Notes, file names, queries, appended text and conversation carry unique marker
    words; no exported span string contains any of them. With the opt-in
    ``tracing.capture_query_text``, the query appears only as ``gen_ai.memory.query.text``
    on ``search_memory`` spans, and nothing else changes."""
    note, topic, query, appended, said, entity = words
    Entity = entity.capitalize()
    config = MemoryConfig(
        provider="none",
        user_timezone="Europe/Paris",
        flush=FLUSH,
        tracing=TracingConfig(capture_query_text=capture),
        active_memory=ROOMY,  # the block's 150 ms deadline is missed on a loaded machine
    )
    traced.clear()
    with tempfile.TemporaryDirectory() as tmp:
        m = make_memory(
            Path(tmp),
            config=config,
            **{
                "MEMORY.md": f"# Memory\n\n## {Entity} Person\n- city: {note}\n- {note} rule\n",
                f"memory__{topic}-notes.md": f"- {note} and {topic} details\n",
                "memory__2026-03-09.md": f"- yesterday {note}\n",
            },
        )
        try:
            m.sync()
            m.search_result(f"{query} {note}")
            m.search(f"{topic} {note}")
            m.get(f"memory/{topic}-notes.md")
            m.get(f"memory/{query}.md")
            with pytest.raises(PathPolicyError):
                m.get(f"../{query}/{topic}.md")
            append_tool_payload(m, {"content": f"- {appended}"}, clock=lambda: NOW)
            append_tool_payload(m, {"content": f"- {appended}", "path": f"{topic}/{query}.txt"})
            mw = middleware(m, flush_model=appending_model(f"- {appended} {said}"))
            session = mw.start_session("main")
            convo = [
                {"role": "user", "content": f"{said} about {Entity} Person"},
                {"role": "assistant", "content": f"noted {said}"},
            ]
            mw.record(session, convo[0])
            mw.system_prompt(session, "base")  # the [GRAPH MEMORY] block for the message
            mw.before_model(session, convo, force=True)
            convo.append({"role": "user", "content": f"then {said} {query}"})
            mw.flush_before_eviction(session, convo, range(3))

            def down(messages: Any, tools: Any = None) -> Any:
                raise RuntimeError(f"failed on {said} {note} {query}")

            broken = middleware(m, flush_model=down)
            broken.flush_before_eviction(broken.start_session("other"), convo, range(3))
            m.sync(force=True)
        finally:
            m.close()
    spans = traced.all()
    names = {s.name for s in spans}
    assert {"memmw.sync", "search_memory", "memmw.get", "create_memory"} <= names
    assert {"upsert_memory", "memmw.inject"} <= names
    kinds = {(attrs(s).get("memmw.inject.kind"), attrs(s).get("memmw.inject.facts")) for s in spans}
    assert any(kind == "graph" and (facts or 0) >= 1 for kind, facts in kinds)
    carriers = {s.name for s in spans if observability.QUERY_TEXT in attrs(s)}
    assert carriers == ({"search_memory"} if capture else set())
    texts = [t.casefold() for t in span_texts(spans, skip=observability.QUERY_TEXT)]
    for word in words:
        leaked = [t for t in texts if word.casefold() in t]
        assert leaked == [], (word, leaked)


def test_a_process_that_never_loads_opentelemetry_searches_without_importing_it(
    tmp_path: Path,
) -> None:
    """memmw does not import the API itself (it cost the first search ~15 ms); a tracer
    provider set up after the first search still gets every later span."""
    import subprocess

    code = f"""
import sys
from pathlib import Path
from memmw import Memory, MemoryConfig
ws = Path({str(tmp_path / "ws")!r}); (ws / "memory").mkdir(parents=True)
(ws / "MEMORY.md").write_text("- The gateway runs on port 8443.\\n")
with Memory(workspace=ws, state_dir={str(tmp_path / "state")!r},
            config=MemoryConfig(provider="none")) as mem:
    mem.sync()
    assert mem.search("gateway port"), "no hit"
    print("loaded" if "opentelemetry.trace" in sys.modules else "not loaded")
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    mem.search("gateway port")
    print(sorted(s.name for s in exporter.get_finished_spans()))
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    ).stdout.split("\n")
    assert out[0] == "not loaded"
    assert out[1] == "['search_memory']"
