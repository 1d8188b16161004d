"""Recall never holds the reply: a search's query embedding has its own short deadline.

Against a provider on 127.0.0.1 that accepts requests and holds them, at the default
per-request timeout (60 s): the search answers keyword-only within
``remote.query_timeout_s`` and says the vector leg timed out; the next searches do not
wait again and open the breaker; a second process of the same state folder sees the
open breaker without sending a request; a sync returns within ``remote.sync_wait_s``.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memmw import Memory, MemoryConfig
from memmw.agent.tools import search_payload
from memmw.config import RemoteConfig
from memmw.embeddings.breaker import (
    SHARED_CIRCUIT_FILE,
    BreakerPolicy,
    CircuitBreaker,
    CircuitOpenError,
)
from memmw.embeddings.query import QueryEmbedder, QueryTimeoutError
from memmw.errors import ProviderError
from memmw.testing import fake_vector, require_optional

from ..conftest import make_memory

ROOT = Path(__file__).resolve().parents[2]
QUERY = "kubernetes migration"


@dataclass
class Hangable:
    """The OpenAI stub, told to hold every embeddings request until released."""

    server: Any
    hang: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    held: list[int] = field(default_factory=list)  # requests waiting right now

    def embedding_requests(self) -> int:
        return sum(1 for p in self.server.paths("POST") if p.endswith("/embeddings"))


@pytest.fixture
def hangable(openai_stub: Any) -> Iterator[Hangable]:
    require_optional("openai", "openai")
    server, app = openai_stub
    stub = Hangable(server)
    answer = app._embeddings

    def embeddings(body: Any) -> Any:
        if stub.hang.is_set() and not stub.release.is_set():
            stub.held.append(1)
            try:
                stub.release.wait(60)  # far past every deadline under test
            finally:
                stub.held.pop()
        return answer(body)

    app._embeddings = embeddings
    try:
        yield stub
    finally:
        stub.release.set()  # free the stub's threads


def _config(stub: Hangable, **remote: Any) -> MemoryConfig:
    # Default timeout_s (60 s per request, 3 tries): only the new deadlines are short.
    settings = {"query_timeout_s": 0.5, "sync_wait_s": 0.5, **remote}
    return MemoryConfig(
        provider="openai",
        remote=RemoteConfig(base_url=stub.server.url + "/v1", api_key="sk-test", **settings),
    )


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "2026-01-02.md").write_text("We planned the kubernetes migration.\n")
    (ws / "memory" / "2026-01-03.md").write_text("Lunch was a sandwich by the river.\n")
    return ws


def _embedded(mem: Memory) -> Memory:
    mem.breaker_policy = BreakerPolicy(failure_threshold=2, probe_interval_s=600)
    mem.sync(embeddings="skip")
    report = mem.embed_pending()  # healthy: every chunk gets its vector, no deadline
    assert report is not None and report.remaining == 0 and report.embedded >= 2
    return mem


def test_a_search_on_a_hung_provider_answers_keyword_only_and_says_the_vector_leg_timed_out(
    hangable: Hangable, tmp_path: Path
) -> None:
    with _embedded(make_memory(workspace=_workspace(tmp_path), state_dir=tmp_path / "state", config=_config(hangable))) as mem:
        hangable.hang.set()
        payload = search_payload(mem, QUERY)
        assert hangable.held, "the search returned while the provider still held its request"
        assert payload["mode"] == "keyword-only"
        assert payload["partial"] is True
        assert "vector leg timed out" in payload["warning"]
        assert "remote.query_timeout_s" in payload["warning"]
        assert payload["results"][0]["path"] == "memory/2026-01-02.md"

        # The late answer arrives: kept for the next identical query (no new request).
        hangable.release.set()
        deadline = time.monotonic() + 30
        while not mem.embeddings.query_embedder(mem.provider)._kept(QUERY):  # type: ignore[arg-type]
            assert time.monotonic() < deadline, "the late answer was never kept"
            time.sleep(0.02)
        sent = hangable.embedding_requests()
        again = search_payload(mem, QUERY)
        assert again["mode"] == "hybrid" and "partial" not in again
        assert hangable.embedding_requests() == sent
        assert mem.status().details["embedding"]["circuit"]["state"] == "closed"


def test_while_a_query_embedding_is_late_searches_do_not_wait_again_and_open_the_breaker(
    hangable: Hangable, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    with _embedded(make_memory(workspace=_workspace(tmp_path), state_dir=state, config=_config(hangable))) as mem:
        hangable.hang.set()
        first = search_payload(mem, QUERY)
        assert first["partial"] is True
        sent = hangable.embedding_requests()
        second = search_payload(mem, "the river sandwich")  # the first call is still out
        assert second["partial"] is True and "has not answered" in second["warning"]
        assert second["results"][0]["path"] == "memory/2026-01-03.md"
        # Two failures: the breaker is open, here and for the state folder.
        assert mem.status().details["embedding"]["circuit"]["state"] == "open"
        third = search_payload(mem, QUERY)
        assert third["mode"] == "keyword-only" and "circuit open" in third["warning"]
        assert "partial" not in third
        assert hangable.embedding_requests() == sent  # neither search sent a request
        shared = json.loads((state / SHARED_CIRCUIT_FILE).read_text())
        (entry,) = shared.values()
        assert entry["openUntil"] > time.time() and entry["pid"] == os.getpid()
        assert "sk-test" not in json.dumps(shared)

        # A second Memory over the same state folder fails fast from its first search.
        with make_memory(workspace=mem.workspace, state_dir=state, config=_config(hangable)) as other:
            payload = search_payload(other, QUERY)
            assert payload["mode"] == "keyword-only" and "circuit open" in payload["warning"]
            assert other.status().details["embedding"]["circuit"]["state"] == "open"
        assert hangable.embedding_requests() == sent


_SECOND_PROCESS = """
import json, sys
from memmw import Memory, MemoryConfig
from memmw.agent.tools import search_payload
from memmw.config import RemoteConfig
ws, state, url = sys.argv[1:4]
config = MemoryConfig(
    provider="openai",
    remote=RemoteConfig(base_url=url, api_key="sk-test", query_timeout_s=30.0, sync_wait_s=30.0),
)
with Memory(ws, state, config=config) as mem:
    print(json.dumps(search_payload(mem, "kubernetes migration")))
"""


def test_a_new_process_of_the_state_folder_sees_the_open_breaker_without_a_request(
    hangable: Hangable, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    with _embedded(make_memory(workspace=_workspace(tmp_path), state_dir=state, config=_config(hangable))) as mem:
        hangable.hang.set()
        search_payload(mem, QUERY)
        search_payload(mem, QUERY)  # the second failure opens the breaker
        sent = hangable.embedding_requests()
        # A deadline of 30 s in the new process: were it to call the hung provider, this
        # search would be partial after 30 s; it must answer from the shared state.
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        out = subprocess.run(
            [sys.executable, "-c", _SECOND_PROCESS, str(mem.workspace), str(state),
             hangable.server.url + "/v1"],
            capture_output=True, text=True, env=env, timeout=120, check=True,
        )
        payload = json.loads(out.stdout.strip().splitlines()[-1])
        assert payload["mode"] == "keyword-only" and "circuit open" in payload["warning"]
        assert "partial" not in payload
        assert payload["results"][0]["path"] == "memory/2026-01-02.md"
        assert hangable.embedding_requests() == sent


def test_a_sync_against_a_hung_provider_returns_within_sync_wait_s(
    hangable: Hangable, tmp_path: Path
) -> None:
    with _embedded(make_memory(workspace=_workspace(tmp_path), state_dir=tmp_path / "state", config=_config(hangable))) as mem:
        hangable.hang.set()
        (mem.workspace / "memory" / "2026-01-04.md").write_text("The heron nests by the lake.\n")
        report = mem.sync()  # embeddings="wait", the default
        assert hangable.held, "the sync returned while the provider still held its request"
        assert report.files_added == 1 and report.embedded == 0
        assert report.warning is not None and "remote.sync_wait_s" in report.warning
        hits = mem.search("heron lake")
        assert hits and hits[0].path == "memory/2026-01-04.md"  # keyword-searchable now
        assert mem.status().details["vector"]["pending"] >= 1  # its vector comes later
        hangable.release.set()
        deadline = time.monotonic() + 30  # the background embedding finishes the job
        while mem.status().details["vector"]["pending"]:
            assert time.monotonic() < deadline, "the pending chunk was never embedded"
            time.sleep(0.05)


def test_closing_while_the_sync_embedding_is_held_logs_no_error(
    hangable: Hangable, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The sync's embedding thread outlives ``close``; when its request finally returns it
    stops quietly (the chunks stay pending) instead of logging a failed embedding."""
    mem = _embedded(make_memory(workspace=_workspace(tmp_path), state_dir=tmp_path / "state", config=_config(hangable)))
    hangable.hang.set()
    (mem.workspace / "memory" / "2026-01-04.md").write_text("The heron nests by the lake.\n")
    mem.sync()
    thread = mem._backfill_thread
    assert thread is not None and thread.is_alive()
    mem.close()
    with caplog.at_level(logging.DEBUG, logger="memmw"):
        hangable.release.set()
        thread.join(30)
    assert not thread.is_alive()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


# -- the choke point: QueryEmbedder.embed, every search's query embedding ---------------


class _Remote:
    """A remote-looking provider (id ``openai``) driven by a script of behaviours."""

    id = "openai"
    model = "m"
    dims = 4
    max_input_bytes = 8000

    def __init__(self) -> None:
        self.script: list[str] = []
        self.calls = 0
        self.gates: list[threading.Event] = []

    def embed_query(self, text: str) -> list[float]:
        self.calls += 1
        step = self.script.pop(0) if self.script else "ok"
        if step == "fail":
            raise ProviderError("boom")
        if step == "hang":
            gate = threading.Event()
            self.gates.append(gate)
            gate.wait(30)
            raise ProviderError("hung up")
        return fake_vector(text, 4)

    def embed_documents(self, texts: Any) -> list[list[float]]:
        return [fake_vector(t, 4) for t in texts]

    def cache_key_data(self) -> dict[str, object]:
        return {}


def _embedder(provider: _Remote, threshold: int = 2) -> tuple[QueryEmbedder, CircuitBreaker]:
    breaker = CircuitBreaker(
        lambda: None, BreakerPolicy(failure_threshold=threshold, probe_interval_s=600)
    )
    return QueryEmbedder(provider, breaker, timeout_s=0.02), breaker


@settings(max_examples=40, deadline=None)
@given(
    steps=st.lists(st.sampled_from(["ok", "fail", "hang"]), min_size=1, max_size=8),
    threshold=st.integers(1, 3),
)
def test_a_search_never_waits_twice_on_a_hung_provider(steps: list[str], threshold: int) -> None:
    """Invariant: each embed returns a vector or one of three errors, and no call is ever
    started while an earlier one is out past its deadline (at most one hung call)."""
    provider = _Remote()
    provider.script = list(steps)
    embedder, breaker = _embedder(provider, threshold)
    try:
        for i in range(len(steps) + 2):
            hung_before = sum(1 for g in provider.gates if not g.is_set())
            calls_before = provider.calls
            try:
                vector = embedder.embed(f"query {i}")
            except QueryTimeoutError:
                pass
            except CircuitOpenError:
                assert provider.calls == calls_before  # open: nothing was sent
            except ProviderError:
                pass
            else:
                assert vector == fake_vector(f"query {i}", 4)
            if hung_before:
                assert provider.calls == calls_before, "a call started behind a hung one"
            assert sum(1 for g in provider.gates if not g.is_set()) <= 1
    finally:
        for gate in provider.gates:
            gate.set()
        breaker._stop.set()


def test_a_late_answer_closes_the_breaker_and_serves_the_identical_query() -> None:
    provider = _Remote()
    release = threading.Event()
    answered = threading.Event()
    original = provider.embed_query

    def slow(text: str) -> list[float]:
        release.wait(30)
        try:
            return original(text)
        finally:
            answered.set()

    provider.embed_query = slow  # type: ignore[method-assign]
    embedder, breaker = _embedder(provider, threshold=1)
    with pytest.raises(QueryTimeoutError):
        embedder.embed("where is the heron")
    assert breaker.is_open
    release.set()
    assert answered.wait(10)
    _wait_for(lambda: not breaker.is_open)
    calls = provider.calls
    assert embedder.embed("where is the heron") == fake_vector("where is the heron", 4)
    assert provider.calls == calls  # the kept late answer, not a new call
    breaker._stop.set()


def test_in_process_providers_are_called_directly() -> None:
    provider = _Remote()
    provider.id = "fake"  # type: ignore[misc]
    embedder, _breaker = _embedder(provider)
    assert embedder.embed("x") == fake_vector("x", 4)
    provider.script = ["fail"]
    with pytest.raises(ProviderError):
        embedder.embed("y")


def _wait_for(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.01)


# -- the explicit embedding run and the health probes are bounded too ---------------------


def _big_workspace(tmp_path: Path, notes: int = 40) -> Path:
    """Notes of ~1.2 kB: one backfill batch (32 chunks) is several requests of <= 8 kB."""
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    for i in range(notes):
        line = f"Day {i}: the heron {i} nests by the lake with the kubernetes gateway. "
        (ws / "memory" / f"2026-01-{i % 28 + 1:02d}-n{i}.md").write_text(line * 16 + "\n")
    return ws


def test_embed_pending_on_a_hung_provider_sends_one_wave_then_stops_and_leaves_chunks_pending(
    hangable: Hangable, tmp_path: Path
) -> None:
    """At the default 3 tries and 4 requests in flight, a hung provider used to get every
    request of the batch three times, in waves (``memmw index`` of 40 such notes at
    default settings: 15 requests, 364 s of embedding; now 4 requests, 60 s)."""
    state = tmp_path / "state"
    config = _config(hangable, timeout_s=0.5)
    with make_memory(workspace=_big_workspace(tmp_path), state_dir=state, config=config) as mem:
        mem.breaker_policy = BreakerPolicy(failure_threshold=2, probe_interval_s=600)
        mem.sync(embeddings="skip")
        pending = mem.status().details["vector"]["pending"]
        assert pending >= 32
        hangable.hang.set()
        sent = hangable.embedding_requests()
        report = mem.embed_pending()
        assert report is not None and report.embedded == 0
        assert report.remaining == pending  # nothing lost, nothing half-written
        assert report.error is not None and "Timeout" in report.error
        # One request per slot of the first wave, none retried, no second wave.
        first_wave = hangable.embedding_requests() - sent
        assert 1 <= first_wave <= config.remote.non_batch_concurrency
        # The failure is shared with the other processes of the state folder.
        (entry,) = json.loads((state / SHARED_CIRCUIT_FILE).read_text()).values()
        assert entry["failures"] == 1 and "Timeout" in entry["lastError"]
        hits = mem.search("heron nests lake")
        assert hits and mem.status().details["vector"]["pending"] == pending

        # A second run opens the breaker; a third sends nothing at all.
        second = mem.embed_pending()
        assert second is not None and second.remaining == pending
        assert mem.status().details["embedding"]["circuit"]["state"] == "open"
        sent = hangable.embedding_requests()
        third = mem.embed_pending()
        assert third is not None and third.remaining == pending
        assert third.error is not None and "circuit open" in third.error
        assert hangable.embedding_requests() == sent


def test_status_deep_probes_within_the_query_deadline(
    hangable: Hangable, tmp_path: Path
) -> None:
    # timeout_s of 5 s x 3 tries: the unbounded probe took ~16 s and said APITimeoutError.
    config = _config(hangable, timeout_s=5.0)
    with _embedded(make_memory(workspace=_workspace(tmp_path), state_dir=tmp_path / "state", config=config)) as mem:
        probe = mem.status(deep=True).details["embedding"]["probe"]
        assert probe["ok"] is True and probe["dims"] > 0
        hangable.hang.set()
        sent = hangable.embedding_requests()
        probe = mem.status(deep=True).details["embedding"]["probe"]
        assert probe["ok"] is False and "remote.query_timeout_s" in probe["error"]
        assert hangable.embedding_requests() == sent + 1
        assert hangable.held, "the probe returned while the provider still held its request"
        # A probe is never answered by a kept late answer: it asks the provider again.
        hangable.release.set()  # the late answer comes back and clears the failure
        _wait_for(lambda: mem.status().details["embedding"]["circuit"]["failures"] == 0)
        probe = mem.status(deep=True).details["embedding"]["probe"]
        assert probe["ok"] is True
        assert hangable.embedding_requests() == sent + 2
