"""Embedding backfill, store-agnostic: embed chunks without a vector, cache first."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from memmw.redaction import redact_secrets
from memmw.store.protocol import Store, StoreWriter
from memmw.store.vectors import Embedder, blob_ok, to_blob, vector_problem

log = logging.getLogger(__name__)

#: Rows deleted per transaction when pruning the cache.
PRUNE_BATCH = 100
#: Chunks embedded between two commits of the backfill.
EMBED_BATCH = 32

#: ``(provider, model, provider_key, hashes) -> {hash: blob}``: another cache to ask.
CacheLookup = Callable[[str, str, str, Sequence[str]], dict[str, bytes]]


@dataclass
class BackfillReport:
    """What one backfill run did.

    Attributes:
        rejected: Vectors refused (NaN/inf, zero, wrong dimension); their chunks stay
            keyword-searchable and pending.
        error: Why the run stopped early (redacted of secrets), or None.
    """

    embedded: int = 0
    from_cache: int = 0
    remaining: int = 0
    dims: int | None = None
    error: str | None = None
    seconds: float = 0.0
    rejected: int = 0


#: Meta key holding the last embedding error (so a fresh process's status can say why).
EMBEDDING_ERROR_KEY = "last_embedding_error"


class IndexIdentityChanged(Exception):
    """The index was rebuilt for another provider or model while this run embedded."""


class Backfill:
    """Embeds chunks that have no vector, reusing the embedding cache.

    The writer lock is held only while reading a batch and while writing its vectors,
    never during the (slow) embedding call, so syncs of new files are never blocked by
    a long first backfill. A provider failure stops the run; the chunks stay
    keyword-searchable and are embedded by a later run. Every write re-checks the
    index identity (provider, model, endpoint, dimensions) in its own transaction, so
    two processes on different providers never mix vectors in one index, and vectors
    that are non-finite, zero or of the wrong size are never stored or cached.
    """


    def __init__(
        self,
        *,
        store: Store,
        provider: Embedder,
        provider_key: str,
        cache_enabled: bool = True,
        cache_max_entries: int = 50_000,
        seed: CacheLookup | None = None,
    ) -> None:
        self.store = store
        #: Other caches asked for what this one misses (a new state folder of a moved
        #: workspace: :class:`memmw.engine.statefolders.SiblingCaches`); their hits are
        #: copied into this cache and count as cache hits, not embeddings.
        self.seed = seed
        self.provider = provider
        self.provider_key = provider_key
        self.cache_enabled = cache_enabled
        self.cache_max_entries = cache_max_entries
        self._dims: int | None = None
        self._rejected: list[str] = []

    def run(
        self,
        *,
        progress: Callable[[int, int], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> BackfillReport:
        """Embed every pending chunk (or until ``should_stop`` returns True)."""
        report = BackfillReport()
        started = time.perf_counter()
        with self.store.read() as reader:
            total = reader.pending_count()
            dims = (reader.identity() or {}).get("vectorDims")
        self._dims = dims if isinstance(dims, int) and dims > 0 else None
        done = 0
        after = 0  # rowid cursor: chunks whose vectors were rejected are not retried
        while not (should_stop and should_stop()):
            with self.store.read() as reader:
                batch = reader.pending_chunks(after, EMBED_BATCH)
            if not batch:
                break
            after = int(batch[-1][0])
            try:
                vectors, cached = self._vectors([(h, t) for _, h, t in batch])
                self._write(batch, vectors)
            except IndexIdentityChanged as exc:
                report.error = str(exc)
                log.warning("embedding stopped: %s", exc)
                break
            except Exception as exc:  # a provider outage never corrupts the index
                report.error = redact_secrets(f"{type(exc).__name__}: {exc}")
                log.warning("embedding stopped, chunks stay keyword-searchable: %s", report.error)
                break
            good = sum(1 for v in vectors if v is not None)
            report.embedded += good - cached
            report.from_cache += cached
            report.dims = self._dims or report.dims
            done += len(batch)
            if progress is not None:
                progress(done, max(total, done))
        report.rejected = len(self._rejected)
        if self._rejected and report.error is None:
            report.error = (
                f"{len(self._rejected)} vectors rejected ({self._rejected[0]}); those chunks"
                " stay keyword-searchable"
            )
            log.warning("embedding: %s", report.error)
        with self.store.read() as reader:
            report.remaining = reader.pending_count()
        self._record_error(report.error, stored=report.embedded + report.from_cache)
        if self.cache_enabled:
            self._prune()
        report.seconds = time.perf_counter() - started
        return report

    def _record_error(self, error: str | None, stored: int = 0) -> None:
        """Persist the last error (or clear it) so any process's status can show it.

        A run that stored vectors also moves ``last_sync`` (the time the index last
        changed) to its end: a long first embedding would otherwise leave ``status``
        showing the end of the file pass, minutes before the index was complete.
        """
        with self.store.write(what="embed") as writer, writer.transaction():
            if stored:
                writer.set_meta("last_sync", repr(time.time()))
            if error is None:
                writer.delete_meta(EMBEDDING_ERROR_KEY)
            else:
                record = {"error": error, "at": time.time(), "provider": self.provider.id}
                writer.set_meta(EMBEDDING_ERROR_KEY, json.dumps(record))

    def _check(self, vector: Sequence[float]) -> bytes | None:
        """The vector as a blob, or None (recorded as rejected) when it must not be stored."""
        problem = vector_problem(vector, self._dims)
        if problem is not None:
            self._rejected.append(f"the provider returned {problem}")
            return None
        blob = to_blob(vector)
        if self._dims is None:
            self._dims = len(blob) // 4
        return blob

    def _seeded(self, hashes: Sequence[str]) -> dict[str, bytes]:
        """Vectors of ``hashes`` found by ``seed`` (checked like the cache's own rows)."""
        if self.seed is None or not hashes:
            return {}
        try:
            hits = self.seed(self.provider.id, self.provider.model, self.provider_key, hashes)
        except Exception as exc:  # a hint only: never stops the embedding
            log.warning("looking up other embedding caches failed: %s", exc)
            return {}
        return self._usable(hashes, hits)

    def _usable(self, hashes: Sequence[str], hits: Mapping[str, bytes]) -> dict[str, bytes]:
        """The blobs of ``hits`` fit to serve for ``hashes``: older versions cached zero
        vectors, and another model's may have another size; never serve those. The first
        one fixes the dimension when it is still unknown."""
        found: dict[str, bytes] = {}
        for h in hashes:
            blob = hits.get(h)
            if blob is not None and blob_ok(blob, self._dims):
                found[h] = blob
                if self._dims is None:
                    self._dims = len(blob) // 4
        return found

    def _vectors(self, items: Sequence[tuple[str, str]]) -> tuple[list[bytes | None], int]:
        found: dict[str, bytes] = {}
        hashes = list(dict.fromkeys(h for h, _ in items))
        if self.cache_enabled:
            with self.store.read() as reader:
                hits = reader.cached_embeddings(
                    self.provider.id, self.provider.model, self.provider_key, hashes
                )
            found = self._usable(hashes, hits)
            seeded = self._seeded([h for h in hashes if h not in found])
            found.update(seeded)
        else:
            seeded = {}
        cached = sum(1 for h, _ in items if h in found)
        missing = list(dict.fromkeys((h, t) for h, t in items if h not in found))
        texts = [t for _, t in missing]
        identity = (self.provider.id, self.provider.model)
        fresh: dict[str, bytes] = {}
        if texts:
            # Providers bound their own requests (bytes per request, batch sizes).
            vectors = self.provider.embed_documents(texts)
            if (self.provider.id, self.provider.model) != identity:
                # A fallback took over mid-run: these vectors belong to another model and
                # must not mix with the index's; the next sync rebuilds for the new model.
                raise IndexIdentityChanged("embedding provider switched during the run")
            if len(vectors) != len(texts):
                raise ValueError(f"provider returned {len(vectors)} vectors for {len(texts)} texts")
            for (digest, _text), vec in zip(missing, vectors, strict=True):
                blob = self._check(vec)
                if blob is not None:
                    fresh[digest] = blob
        if (fresh or seeded) and self.cache_enabled:
            with self.store.write(what="embed") as writer, writer.transaction():
                writer.put_embeddings(
                    self.provider.id, self.provider.model, self.provider_key, {**seeded, **fresh}
                )
        found.update(fresh)
        return [found.get(h) for h, _ in items], cached

    def _write(
        self, batch: Sequence[tuple[int, str, str]], vectors: Sequence[bytes | None]
    ) -> None:
        with self.store.write(what="embed") as writer, writer.transaction():
            self._write_locked(writer, batch, vectors)

    def _write_locked(
        self,
        writer: StoreWriter,
        batch: Sequence[tuple[int, str, str]],
        vectors: Sequence[bytes | None],
    ) -> None:
        # Same transaction as the writes: another process may have rebuilt the index
        # for another provider, model or dimension since this run began.
        stored = writer.identity() or {}
        mine = {
            "provider": self.provider.id,
            "model": self.provider.model,
            "providerKey": self.provider_key,
        }
        for key, value in mine.items():
            if stored.get(key) != value:
                raise IndexIdentityChanged(
                    f"the index now belongs to {stored.get('provider')}/"
                    f"{stored.get('model')} ({key} changed); vectors of "
                    f"{self.provider.id}/{self.provider.model} were not written"
                )
        stored_dims = stored.get("vectorDims")
        rows: list[tuple[int, str, bytes]] = []
        for (rowid, digest, _text), blob in zip(batch, vectors, strict=True):
            if blob is None:
                continue
            if isinstance(stored_dims, int) and len(blob) != stored_dims * 4:
                self._rejected.append(
                    f"{len(blob) // 4} dimensions where the index has {stored_dims}"
                )
                continue
            rows.append((rowid, digest, blob))
        writer.write_vectors(rows)
        if stored_dims is None and self._dims is not None:
            stored["vectorDims"] = self._dims
            writer.set_identity(stored)
        writer.bump_vector_generation()

    def _prune(self) -> None:
        while True:
            with self.store.write(what="embed") as writer, writer.transaction():
                if not writer.prune_embedding_cache(self.cache_max_entries, PRUNE_BATCH):
                    return


def pending_warning(report: BackfillReport | None) -> str | None:
    """What a sync says when its embedding stopped with chunks left pending."""
    if report is None or not report.error or not report.remaining:
        return None
    return f"{report.remaining} chunks stay keyword-only until embedded: {report.error}"


class BoundedEmbedding:
    """One embedding run in its own thread, waited for at most ``wait_s`` (a sync's wait).

    A hung provider must not hold the caller: past ``wait_s`` :meth:`wait` returns with
    a warning while the run goes on (its chunks stay pending, keyword-searchable, until
    their vectors land); ``stalled`` then says whether no batch came back at all.

    Args:
        embed: Runs the embedding with a ``(done, total)`` progress callback.
        wait_s: Longest wait (``remote.sync_wait_s``).
        progress: The caller's own progress callback (called from the thread).
    """

    def __init__(
        self,
        embed: Callable[[Callable[[int, int], None]], BackfillReport | None],
        *,
        wait_s: float,
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        self.wait_s = wait_s
        self.done = 0
        self.stalled = False
        self._report: BackfillReport | None = None
        self._embed = embed
        self._progress = progress
        self.thread = threading.Thread(target=self._work, name="memmw-embed", daemon=True)
        self.thread.start()

    def _counted(self, done: int, total: int) -> None:
        self.done = done
        if self._progress is not None:
            self._progress(done, total)

    def _work(self) -> None:
        try:
            self._report = self._embed(self._counted)
        except Exception:  # logged; the sync has its keyword index already
            log.exception("embedding after sync failed")

    def wait(self) -> tuple[BackfillReport | None, str | None]:
        """The run's report and warning, or a warning of its own past ``wait_s``."""
        self.thread.join(self.wait_s)
        if not self.thread.is_alive():
            return self._report, pending_warning(self._report)
        self.stalled = self.done == 0
        warning = (
            f"the embedding provider did not finish within remote.sync_wait_s "
            f"({self.wait_s:g}s); the new chunks are keyword-searchable now and get their "
            "vectors in the background"
        )
        log.warning("sync: %s", warning)
        return BackfillReport(embedded=self.done, error=warning), warning
