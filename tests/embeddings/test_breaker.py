"""The provider circuit breaker: opens on repeated failures, fails fast, a probe closes it."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from memmw import MemoryConfig
from memmw.agent.tools import search_payload
from memmw.config import RemoteConfig
from memmw.embeddings.breaker import (
    SHARED_CIRCUIT_FILE,
    BreakerPolicy,
    CircuitBreaker,
    CircuitOpenError,
    SharedCircuit,
)
from memmw.errors import ProviderError
from memmw.testing import require_optional

from ..conftest import make_memory


def test_opens_after_the_threshold_and_fails_fast() -> None:
    calls: list[str] = []
    breaker = CircuitBreaker(lambda: None, BreakerPolicy(failure_threshold=2, probe_interval_s=60))

    def boom() -> None:
        calls.append("x")
        raise ProviderError("timed out")

    for _ in range(2):
        with pytest.raises(ProviderError):
            breaker.call(boom)
    assert breaker.is_open
    with pytest.raises(CircuitOpenError, match="timed out"):
        breaker.call(boom)
    assert len(calls) == 2  # the third call never reached the provider
    breaker._stop.set()


def test_a_success_resets_the_count() -> None:
    breaker = CircuitBreaker(lambda: None, BreakerPolicy(failure_threshold=2))
    with pytest.raises(ValueError):
        breaker.call(lambda: (_ for _ in ()).throw(ValueError("x")))
    assert breaker.call(lambda: 7) == 7
    with pytest.raises(ValueError):
        breaker.call(lambda: (_ for _ in ()).throw(ValueError("x")))
    assert not breaker.is_open


def test_background_probe_closes_the_circuit() -> None:
    healthy = threading.Event()

    def probe() -> None:
        if not healthy.is_set():
            raise ProviderError("still down")

    stop = threading.Event()
    breaker = CircuitBreaker(
        probe, BreakerPolicy(failure_threshold=1, probe_interval_s=0.02), stop=stop
    )
    breaker.failure(ProviderError("down with key sk-abc123def456ghi"))
    assert breaker.is_open and "sk-abc123def456ghi" not in (breaker.last_error or "")
    time.sleep(0.1)
    assert breaker.is_open and breaker.probes >= 1
    healthy.set()
    deadline = time.monotonic() + 5
    while breaker.is_open and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not breaker.is_open
    stop.set()


def test_search_on_a_hung_provider_is_fast_once_the_breaker_opens(
    openai_stub: Any, tmp_path: Path
) -> None:
    require_optional("openai", "openai")
    server, app = openai_stub
    hang = threading.Event()
    answer = app._embeddings

    def embeddings(body: Any) -> Any:
        if hang.is_set():
            time.sleep(3)  # far beyond timeout_s: the client gives up first
        return answer(body)

    app._embeddings = embeddings
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "2026-01-02.md").write_text("We planned the kubernetes migration.\n")
    config = MemoryConfig(
        provider="openai",
        remote=RemoteConfig(base_url=server.url + "/v1", api_key="sk-test", timeout_s=0.2),
    )
    with make_memory(workspace=ws, state_dir=tmp_path / "state", config=config) as mem:
        mem.breaker_policy = BreakerPolicy(failure_threshold=2, probe_interval_s=60)
        assert mem.sync().embedded == 1
        assert search_payload(mem, "kubernetes")["mode"] == "hybrid"
        hang.set()
        (ws / "memory" / "2026-01-03.md").write_text("The heron nests by the lake.\n")
        started = time.monotonic()
        report = mem.sync()  # waits for embeddings: bounded by timeout_s x tries
        sync_s = time.monotonic() - started
        assert report.embedded == 0
        # 3 tries x 0.2 s + 0.6 s + 1.2 s backoff (jitter included) = 2.4 s at most, plus slack
        assert sync_s < 4.0
        started = time.monotonic()
        first = search_payload(mem, "kubernetes")  # second failure: the circuit opens
        assert first["mode"] == "keyword-only"
        assert time.monotonic() - started < 1.0  # one timeout (0.2 s), not the retry budget
        timings = []
        for _ in range(10):
            t0 = time.monotonic()
            payload = search_payload(mem, "kubernetes migration")
            timings.append(time.monotonic() - t0)
        assert payload["results"][0]["path"] == "memory/2026-01-02.md"
        assert payload["mode"] == "keyword-only" and "circuit open" in payload["warning"]
        assert max(timings) < 1.0
        started = time.monotonic()
        mem.sync()  # a sync while open does not wait on the provider either
        assert time.monotonic() - started < 1.0
        status = mem.status().to_dict()
        assert status["embedding"]["circuit"]["state"] == "open"


# -- the breaker shared by the processes of one state folder ------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _process(path: Path, clock: _Clock, calls: list[str], name: str) -> CircuitBreaker:
    """A breaker as one process of the state folder has it (its own probe and count)."""

    def probe() -> None:
        calls.append(f"{name} probe")
        raise ProviderError("still down")

    return CircuitBreaker(
        probe,
        BreakerPolicy(failure_threshold=2, probe_interval_s=600, shared_open_s=60),
        shared=SharedCircuit(path, "provider-identity", clock=clock),
    )


def test_an_open_breaker_is_shared_by_the_processes_of_a_state_folder(tmp_path: Path) -> None:
    path, clock, calls = tmp_path / "state" / SHARED_CIRCUIT_FILE, _Clock(), []
    first = _process(path, clock, calls, "first")
    second = _process(path, clock, calls, "second")
    for _ in range(2):
        first.failure(ProviderError("timed out with key sk-abc123def456ghi789"))
    assert first.is_open
    with pytest.raises(CircuitOpenError, match="circuit opened by memmw process"):
        second.call(lambda: calls.append("second call"))
    assert "second call" not in calls  # failed fast: nothing sent
    assert second.to_dict()["state"] == "open"
    assert "sk-abc123def456ghi789" not in path.read_text()
    clock.now += 61  # the shared window ends: the second process may try again
    assert second.call(lambda: 7) == 7
    # ... and its success closes the first process's breaker too, before any probe.
    first.check()
    assert not first.is_open
    first._stop.set()


def test_failures_of_one_shot_processes_add_up(tmp_path: Path) -> None:
    path, clock, calls = tmp_path / SHARED_CIRCUIT_FILE, _Clock(), []
    _process(path, clock, calls, "cli-1").failure(ProviderError("timed out"))
    later = _process(path, clock, calls, "cli-2")
    later.failure(ProviderError("timed out"))  # the second failure of the folder
    assert later.is_open
    with pytest.raises(CircuitOpenError):
        _process(path, clock, calls, "cli-3").check()
    later._stop.set()


def test_an_unwritable_state_folder_only_loses_the_sharing(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    breaker = _process(blocker / SHARED_CIRCUIT_FILE, _Clock(), [], "p")
    breaker.failure(ProviderError("timed out"))
    breaker.failure(ProviderError("timed out"))
    assert breaker.is_open
    with pytest.raises(CircuitOpenError):
        breaker.check()
    breaker.success()
    breaker.check()
    breaker._stop.set()
