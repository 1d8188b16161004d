"""Memory with an embedding provider: backfill, cache, outages, identity, vector backends."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest

from memmw import Memory, MemoryConfig, StoreConfig
from memmw.agent.tools import search_payload
from memmw.config import CacheConfig, HybridConfig, QueryConfig, RemoteConfig
from memmw.errors import ProviderError
from memmw.testing import FakeEmbeddingProvider

from ..conftest import make_memory, write

FAKE = MemoryConfig(provider="fake", remote=RemoteConfig(dimensions=32))


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    # 4 chunks: "# Facts" joins the first entry, the second entry, and the two notes.
    root = tmp_path / "ws"
    write(
        root / "MEMORY.md", "# Facts\n- The gateway runs on the Mac Studio.\n- Backups at 02:00.\n"
    )
    write(root / "memory" / "2026-01-02.md", "We planned the kubernetes migration.\n")
    write(root / "memory" / "2026-01-03.md", "The heron nests by the lake.\n")
    return root


def fake(mem: Memory) -> FakeEmbeddingProvider:
    provider = mem.provider
    assert isinstance(provider, FakeEmbeddingProvider)
    return provider


def count(db: Path, sql: str) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute(sql).fetchone()[0])
    finally:
        conn.close()


def test_sync_embeds_and_search_is_hybrid(ws: Path, tmp_path: Path) -> None:
    with make_memory(workspace=ws, state_dir=tmp_path / "s", config=FAKE) as mem:
        report = mem.sync()
        assert report.embedded == report.chunks_total == 4
        payload = search_payload(mem, "gateway Mac Studio")
        assert payload["mode"] == "hybrid"
        assert (payload["provider"], payload["model"]) == ("fake", fake(mem).model)
        top = payload["results"][0]
        assert top["path"] == "MEMORY.md" and top["vectorScore"] > 0 and top["textScore"] > 0
        status = mem.status().to_dict()
        assert status["vector"]["vectors"] == 4 and status["vector"]["pending"] == 0
        assert status["vector"]["dims"] == 32 and status["custom"]["searchMode"] == "hybrid"


def test_provider_outage_keeps_the_index_and_catches_up_later(ws: Path, tmp_path: Path) -> None:
    with make_memory(workspace=ws, state_dir=tmp_path / "s", config=FAKE) as mem:
        fake(mem).fail()  # every call fails from now on
        report = mem.sync()
        assert report.chunks_total == 4 and report.embedded == 0
        # Keyword search works on the same index while vectors are missing.
        assert [h.path for h in mem.search("kubernetes migration")] == ["memory/2026-01-02.md"]
        status = mem.status().to_dict()["vector"]
        assert status["pending"] == 4 and "ProviderError" in status["lastError"]
        conn = sqlite3.connect(mem.db_path)
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.close()
        fake(mem).recover()
        mem.sync()
        assert mem.status().to_dict()["vector"]["pending"] == 0
        assert search_payload(mem, "heron lake")["mode"] == "hybrid"


def test_query_embedding_failure_falls_back_to_keywords(ws: Path, tmp_path: Path) -> None:
    with make_memory(workspace=ws, state_dir=tmp_path / "s", config=FAKE) as mem:
        mem.sync()
        fake(mem).fail(error=ProviderError("429 rate limit"))
        payload = search_payload(mem, "kubernetes migration")
        assert payload["mode"] == "keyword-only"
        assert "keyword-only" in payload["warning"]
        assert payload["results"][0]["path"] == "memory/2026-01-02.md"


def test_zero_query_vector_uses_the_keyword_leg_only(ws: Path, tmp_path: Path) -> None:
    with make_memory(workspace=ws, state_dir=tmp_path / "s", config=FAKE) as mem:
        mem.sync()
        fake(mem).embed_query = lambda text: [0.0] * 32  # type: ignore[method-assign]
        payload = search_payload(mem, "kubernetes migration")
        assert payload["mode"] == "keyword-only" and "warning" not in payload
        assert payload["results"][0]["path"] == "memory/2026-01-02.md"


def test_forced_rebuild_reembeds_nothing_cached(ws: Path, tmp_path: Path) -> None:
    with make_memory(workspace=ws, state_dir=tmp_path / "s", config=FAKE) as mem:
        mem.sync()
        embedded = fake(mem).texts_embedded
        report = mem.sync(force=True)
        assert report.full_rebuild and report.embedded == 0
        assert fake(mem).texts_embedded == embedded
        assert mem.status().to_dict()["vector"]["vectors"] == 4
        write(ws / "memory" / "2026-01-04.md", "A new otter appeared.\n")
        assert mem.sync().embedded == 1  # only the new chunk


def test_model_change_rebuilds_and_never_mixes_vectors(ws: Path, tmp_path: Path) -> None:
    with make_memory(workspace=ws, state_dir=tmp_path / "s", config=FAKE) as mem:
        mem.sync()
    other = FAKE.replace(model="fake-other", remote=RemoteConfig(dimensions=16))
    with make_memory(workspace=ws, state_dir=tmp_path / "s", config=other) as mem:
        report = mem.sync()
        assert report.full_rebuild and report.reason == "identity:model"
        conn = sqlite3.connect(mem.db_path)
        lengths = {r[0] for r in conn.execute("SELECT LENGTH(embedding) FROM chunk_vectors")}
        models = {r[0] for r in conn.execute("SELECT model FROM chunks")}
        conn.close()
        assert lengths == {16 * 4} and models == {"fake-other"}
        assert search_payload(mem, "gateway")["mode"] == "hybrid"


def test_cache_is_pruned_to_its_cap(ws: Path, tmp_path: Path) -> None:
    config = FAKE.replace(cache=CacheConfig(max_entries=2))
    with make_memory(workspace=ws, state_dir=tmp_path / "s", config=config) as mem:
        mem.sync()
        assert count(mem.db_path, "SELECT COUNT(*) FROM embedding_cache") == 2
        assert count(mem.db_path, "SELECT COUNT(*) FROM chunk_vectors") == 4


@pytest.mark.optional
def test_sqlite_vec_backend_matches_numpy(ws: Path, tmp_path: Path) -> None:
    from memmw.store.sqlite.sqlitevec import sqlite_vec_status
    from memmw.testing import require_optional

    require_optional("sqlite_vec", "vec")
    loadable, why = sqlite_vec_status()
    assert loadable, why
    results = {}
    for backend in ("numpy", "sqlite-vec"):
        config = FAKE.replace(
            store=StoreConfig(vector_backend=backend),
            query=QueryConfig(hybrid=HybridConfig(calibrate_vectors=False)),
        )
        with make_memory(workspace=ws, state_dir=tmp_path / backend, config=config) as mem:
            mem.sync()
            results[backend] = [
                (r["path"], r["startLine"], round(r["vectorScore"], 4))
                for r in search_payload(mem, "where does the gateway run", min_score=0)["results"]
                if "vectorScore" in r
            ]
            assert mem.status().to_dict()["vector"]["backend"] == backend
    assert results["numpy"] == results["sqlite-vec"] and results["numpy"]


def test_calibrated_vector_scores_measure_how_far_a_chunk_stands_out() -> None:
    import numpy as np

    from memmw.store.vectors import VectorMatrix, to_blob

    rows = [(i + 1, to_blob([1.0, 0.2 * i, 0.0])) for i in range(5)]
    matrix = VectorMatrix(rows, 3)
    query = np.asarray([1.0, 0.0, 0.0], dtype=np.float32)
    raw = matrix.search(query, 5)
    calibrated = matrix.search(query, 5, calibrate=True)
    assert [r for r, _ in raw] == [r for r, _ in calibrated] == [1, 2, 3, 4, 5]
    median = raw[2][1]
    assert calibrated[0][1] == pytest.approx((raw[0][1] - median) / (1 - median))
    assert calibrated[2][1] == 0.0 and calibrated[4][1] == 0.0  # at or below the median


def test_unrelated_chunks_do_not_pass_the_threshold_on_vectors_alone(
    ws: Path, tmp_path: Path
) -> None:
    with make_memory(workspace=ws, state_dir=tmp_path / "s", config=FAKE) as mem:
        mem.sync()
        results = search_payload(mem, "zzqx unrelated words")["results"]
        assert results == []  # no keyword match, and no vector score stands out enough


def test_runtime_fallback_switches_model_rebuilds_and_says_so(ws: Path, tmp_path: Path) -> None:
    from memmw.embeddings import register_provider
    from memmw.embeddings.registry import unregister_provider

    primary = FakeEmbeddingProvider(dims=32, model="primary-v1")
    backup = FakeEmbeddingProvider(dims=16, model="backup-v1", provider_id="backup")
    register_provider("flaky", lambda config: primary, replace=True)
    register_provider("backup", lambda config: backup, replace=True)
    try:
        config = MemoryConfig(provider="flaky", fallback="backup")
        with make_memory(workspace=ws, state_dir=tmp_path / "s", config=config) as mem:
            assert mem.sync().embedded == 4  # the primary works at first
            primary.fail()  # from now on every call fails (after its retries)
            write(ws / "memory" / "2026-01-04.md", "An otter appeared at dawn.\n")
            # The backfill hits the failure and the wrapper switches to backup: the index
            # is rebuilt for the backup's identity and embedded again in the same call.
            assert mem.sync().embedded > 0
            assert count(mem.db_path, "SELECT COUNT(*) FROM chunk_vectors") == 5
            assert not mem.sync().full_rebuild  # nothing left to do
            payload = search_payload(mem, "otter dawn")
            assert (payload["provider"], payload["model"]) == ("backup", "backup-v1")
            assert payload["fallback"]["from"] == primary.id  # the provider that failed
            assert payload["mode"] == "hybrid"
            assert payload["results"][0]["path"] == "memory/2026-01-04.md"
            status = mem.status().to_dict()
            assert status["embedding"]["fallback_from"] == primary.id
            conn = sqlite3.connect(mem.db_path)
            lengths = {r[0] for r in conn.execute("SELECT LENGTH(embedding) FROM chunk_vectors")}
            conn.close()
            assert lengths == {16 * 4}  # never a mix of the two models' vectors
    finally:
        unregister_provider("flaky")
        unregister_provider("backup")


# -- vectors that can be trusted (issue 9, item 4) ----------------------------------------


class Lying(FakeEmbeddingProvider):
    """Answers texts that mention ``trigger`` with a bad vector."""

    def __init__(self, bad: list[float], trigger: str = "heron", **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.bad, self.trigger = bad, trigger

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        good = super().embed_documents(texts)
        return [self.bad if self.trigger in t else v for t, v in zip(texts, good, strict=True)]


@pytest.mark.parametrize(
    ("bad", "why"),
    [([float("nan")] * 32, "NaN"), ([float("inf")] + [0.0] * 31, "NaN or infinite"),
     ([0.0] * 32, "zero vector"), ([0.1] * 24, "24 dimensions")],
    ids=["nan", "inf", "zero", "wrong-dims"],
)
def test_bad_vectors_are_never_stored_or_cached(
    ws: Path, tmp_path: Path, bad: list[float], why: str
) -> None:
    with make_memory(workspace=ws, state_dir=tmp_path / "s", config=FAKE) as mem:
        mem.embeddings.selection = dataclasses.replace(mem.selection, provider=Lying(bad, dims=32))
        report = mem.sync()
        assert report.embedded == 3  # the heron chunk was refused
        assert count(mem.db_path, "SELECT COUNT(*) FROM chunk_vectors") == 3
        assert count(mem.db_path, "SELECT COUNT(*) FROM embedding_cache") == 3
        assert count(mem.db_path, "SELECT COUNT(*) FROM chunk_vectors WHERE"
                     " length(embedding) != 128") == 0
        vector = mem.status().to_dict()["vector"]
        assert vector["pending"] == 1 and why in vector["lastError"]
        # The refused chunk is still found by keywords.
        assert mem.search("heron lake")[0].path == "memory/2026-01-03.md"


def test_a_server_that_changes_dimension_never_mixes_sizes(ws: Path, tmp_path: Path) -> None:
    with make_memory(workspace=ws, state_dir=tmp_path / "s", config=FAKE) as mem:
        mem.embeddings.selection = dataclasses.replace(mem.selection, provider=Lying([0.1] * 24, "otter", dims=32))
        mem.sync()
        # The server now answers 24-dim vectors for the same model and endpoint.
        write(ws / "memory" / "2026-01-04.md", "The otter swims upstream.\n")
        mem.sync()
        assert count(mem.db_path, "SELECT COUNT(DISTINCT length(embedding)) FROM chunk_vectors") == 1
        assert count(mem.db_path, "SELECT COUNT(*) FROM chunk_vectors") == 4
        assert "24 dimensions" in mem.status().to_dict()["vector"]["lastError"]


def test_a_stale_embedder_never_writes_into_an_index_rebuilt_for_another_model(
    ws: Path, tmp_path: Path
) -> None:
    state = tmp_path / "s"
    with make_memory(workspace=ws, state_dir=state, config=FAKE) as primary, make_memory(workspace=ws, state_dir=state, config=FAKE) as other:
        primary.sync(embeddings="skip")
        fake(other).model = "fake-other-model"  # e.g. a fallback provider took over
        other.sync(embeddings="skip")  # rebuilds the index for the other model
        report = primary.embed_pending()  # the first process's background embedder runs
        assert report is not None and report.error is not None
        assert "fake-other-model" in report.error
        assert count(primary.db_path, "SELECT COUNT(*) FROM chunk_vectors") == 0
        other.embed_pending()
        assert count(other.db_path, "SELECT COUNT(*) FROM chunk_vectors") == 4


def test_vector_cache_follows_a_reset_even_when_counters_restart(ws: Path, tmp_path: Path) -> None:
    state = tmp_path / "s"
    with make_memory(workspace=ws, state_dir=state, config=FAKE) as long_lived:
        long_lived.sync()
        long_lived.search("gateway")  # caches the vector matrix
        cached = long_lived._agent_search.own.vectors._vectors
        assert cached is not None and len(cached) == 4
        # Another process: reset (delete the index) and index different notes.
        for suffix in ("", "-wal", "-shm"):
            Path(f"{long_lived.db_path}{suffix}").unlink(missing_ok=True)
        write(ws / "memory" / "2026-01-02.md", "The otter swims upstream at dawn.\n")
        with make_memory(workspace=ws, state_dir=state, config=FAKE) as cli:
            cli.sync()
        long_lived.search("otter")
        fresh = long_lived._agent_search.own.vectors._vectors
        assert fresh is not cached


def test_last_embedding_error_survives_a_restart(ws: Path, tmp_path: Path) -> None:
    with make_memory(workspace=ws, state_dir=tmp_path / "s", config=FAKE) as mem:
        fake(mem).fail(error=ProviderError("HTTP 401: bad key sk-abc123def456ghi"))
        mem.sync()
    with make_memory(workspace=ws, state_dir=tmp_path / "s", config=FAKE) as fresh:
        vector = fresh.status().to_dict()["vector"]
        assert vector["pending"] == 4 and "401" in vector["lastError"]
        assert "sk-abc123def456ghi" not in vector["lastError"]


def test_one_process_embeds_an_index_at_a_time(ws: Path, tmp_path: Path) -> None:
    """A second embedder (another `memmw index`, an agent) leaves the work to the first."""
    from memmw.engine.memory import EMBEDDING_BUSY
    from memmw.workspace.locks import exclusive_lock, lock_path_for

    with make_memory(workspace=ws, state_dir=tmp_path / "s", config=FAKE) as mem:
        mem.sync(embeddings="skip")
        holder = lock_path_for(mem.db_path.with_suffix(".embed"))
        done: list[bool] = []

        def other_process_embedding() -> None:
            with exclusive_lock(holder):
                ready.set()
                release.wait(10)
            done.append(True)

        import threading

        ready, release = threading.Event(), threading.Event()
        t = threading.Thread(target=other_process_embedding)
        t.start()
        ready.wait(10)
        try:
            report = mem.embed_pending()
        finally:
            release.set()
            t.join()
        assert report is not None and report.error == EMBEDDING_BUSY and report.embedded == 0
        assert count(mem.db_path, "SELECT COUNT(*) FROM chunk_vectors") == 0
        report = mem.embed_pending()
        assert report is not None and report.error is None and report.embedded > 0


def test_hybrid_disabled_searches_the_vector_leg_alone(ws: Path, tmp_path: Path) -> None:
    # query.hybrid.enabled = false (a reference setting): vector hits only while vectors
    # answer, keyword hits when they cannot.
    config = dataclasses.replace(
        FAKE, query=QueryConfig(hybrid=HybridConfig(enabled=False), min_score=0.0)
    )
    with make_memory(workspace=ws, state_dir=tmp_path / "s", config=config) as mem:
        mem.sync()
        payload = search_payload(mem, "gateway Mac Studio")
        assert payload["mode"] == "vector"
        assert payload["results"]
        assert all("textScore" not in r for r in payload["results"])  # no keyword leg
        assert all("vectorScore" in r for r in payload["results"])
        assert payload["results"][0]["path"] == "MEMORY.md"
    keyword_only = dataclasses.replace(config, provider="none")
    with make_memory(workspace=ws, state_dir=tmp_path / "s2", config=keyword_only) as mem:
        mem.sync()
        payload = search_payload(mem, "gateway Mac Studio")
        assert payload["mode"] == "keyword-only"
        assert payload["results"][0]["path"] == "MEMORY.md"


def test_a_search_with_shared_namespaces_embeds_the_query_once(tmp_path: Path) -> None:
    team_ws, alice_ws, state = tmp_path / "team", tmp_path / "alice", tmp_path / "state"
    write(team_ws / "MEMORY.md", "# Team\n- The staging cluster is called heron.\n")
    write(team_ws / "memory" / "2026-01-02.md", "- Heron moved to the new rack.\n")
    write(alice_ws / "MEMORY.md", "# Alice\n- Alice waters the heron plants on Fridays.\n")
    shared = dataclasses.replace(FAKE, store=StoreConfig(shared=("team", "crew")))
    for name, ws in (("team", team_ws), ("crew", team_ws)):
        with make_memory(workspace=ws, state_dir=state, agent_id=name, config=FAKE) as other:
            other.sync()
    with make_memory(workspace=alice_ws, state_dir=state, agent_id="alice", config=shared) as alice:
        alice.sync()
        before = fake(alice).query_calls
        hits = alice.search("heron")
        assert {h.namespace for h in hits} == {"alice", "team", "crew"}
        assert all(h.vector_score is not None for h in hits)
        assert fake(alice).query_calls == before + 1


def test_a_failed_query_embedding_is_not_retried_for_each_shared_namespace(
    tmp_path: Path,
) -> None:
    team_ws, alice_ws, state = tmp_path / "team", tmp_path / "alice", tmp_path / "state"
    write(team_ws / "MEMORY.md", "# Team\n- The staging cluster is called heron.\n")
    write(alice_ws / "MEMORY.md", "# Alice\n- Alice waters the heron plants on Fridays.\n")
    shared = dataclasses.replace(FAKE, store=StoreConfig(shared=("team", "crew")))
    for name in ("team", "crew"):
        with make_memory(workspace=team_ws, state_dir=state, agent_id=name, config=FAKE) as other:
            other.sync()
    with make_memory(workspace=alice_ws, state_dir=state, agent_id="alice", config=shared) as alice:
        alice.sync()
        provider = fake(alice)
        calls: list[str] = []

        def broken(text: str) -> list[float]:
            calls.append(text)
            raise ProviderError("provider down")

        provider.embed_query = broken  # type: ignore[method-assign]
        result = alice.search_result("heron")
        assert calls == ["heron"]
        assert {h.namespace for h in result.hits} == {"alice", "team", "crew"}
        assert result.warning is not None and "keyword-only" in result.warning
