"""Search orchestration: keyword and vector legs, merge, decay, importance, MMR, snippets."""

from __future__ import annotations

import logging
import math
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from memmw.config import MemoryConfig, candidate_count
from memmw.errors import ConfigError
from memmw.search.keyword import KeywordHit, KeywordMatrix, bm25_to_score, fts_search
from memmw.search.ranking import decay_multiplier, importance_multiplier, mmr_order
from memmw.search.snippets import build_snippet
from memmw.store.sqlite.store import ChunkRow, IndexStore
from memmw.store.sqlite.vectors import VectorMatrix, load_vectors
from memmw.text.analysis import normalize, query_terms
from memmw.types import SearchHit, citation_for

log = logging.getLogger(__name__)

#: Indexes up to this many chunks build the keyword matrix in the searching thread.
SYNC_BUILD_MAX_CHUNKS = 20_000

#: (generation, sources, epoch): what a keyword matrix was built from.
_MatrixKey = tuple[int, tuple[str, ...], "str | None"]

#: ``(limit) -> [(rowid, cosine similarity)]``, best first.
VectorLeg = Callable[[int], list[tuple[int, float]]]


@dataclass
class _Candidate:
    chunk: ChunkRow
    text_score: float | None = None
    text_rank: int | None = None
    keyword_raw: float = 0.0
    vector_score: float | None = None
    vector_rank: int | None = None
    score: float = 0.0
    order: float = 0.0


@dataclass(frozen=True)
class SearchOutcome:
    """Hits plus how they were found (``hybrid`` or ``fts-only``)."""

    hits: list[SearchHit]
    mode: str


def lexical_score(hit: KeywordHit, chunk: ChunkRow, n_query: int, path_hits: int) -> float:
    """The reference's boosted keyword score, before its cap at 1.

    ``bm25/(1+bm25) + 0.45*coverage + 0.2*overlap/len + 0.18*path matches +
    min(len/160, 0.18)``. Ranking uses the uncapped value so that capped ties still
    order by relevance; the reported score is capped.
    """
    overlap = hit.matched
    return (
        bm25_to_score(hit.bm25)
        + 0.45 * overlap / max(n_query, 1)
        + 0.2 * overlap / max(chunk.n_terms, 1)
        + 0.18 * path_hits
        + min(len(chunk.text) / 160.0, 0.18)
    )


class Searcher:
    """Runs searches over one index, caching the keyword matrix per index generation."""

    def __init__(
        self,
        config: MemoryConfig,
        *,
        connect: Callable[[], sqlite3.Connection] | None = None,
        sync_build_max_chunks: int = SYNC_BUILD_MAX_CHUNKS,
    ) -> None:
        """Create a searcher.

        Args:
            config: Memory settings.
            connect: Opens a new connection to the index; enables building a large keyword
                matrix in a background thread (FTS5 answers meanwhile).
            sync_build_max_chunks: Indexes up to this size build the matrix in the calling
                thread (a few hundred milliseconds at most).
        """
        self.config = config
        self._connect = connect
        self._sync_build_max = sync_build_max_chunks
        self._matrix: KeywordMatrix | None = None
        self._matrix_key: _MatrixKey | None = None
        self._vectors: VectorMatrix | None = None
        self._vectors_key: tuple[object, ...] | None = None
        self._lock = threading.Lock()
        self._building: threading.Thread | None = None

    def invalidate(self) -> None:
        """Forget the cached matrices (the index file was replaced or its WAL lost)."""
        with self._lock:
            self._matrix = self._matrix_key = None
            self._vectors = self._vectors_key = None

    def keyword_matrix(self, store: IndexStore, sources: Sequence[str]) -> KeywordMatrix | None:
        """The BM25 matrix of the current generation, or None while a first build runs.

        After a sync the previous matrix is updated incrementally (new chunks form a small
        segment, deleted ones are masked); a full rebuild happens when segments pile up
        (in the background for large indexes) or after a full rebuild of the index (a new
        ``epoch``).
        """
        key: _MatrixKey = (store.generation(), tuple(sources), store.get_meta("epoch"))
        with self._lock:
            current = self._matrix
            if current is not None and self._matrix_key == key:
                return current
            same_base = self._matrix_key is not None and self._matrix_key[1:] == key[1:]
            if current is not None and same_base:
                alive = np.asarray(store.chunk_rowids(sources), dtype=np.int64)
                fresh = current.updated(alive, store.term_blobs(sources, after=current.max_rowid))
                self._matrix, self._matrix_key = fresh, key
                if fresh.needs_compaction():
                    if fresh.n_docs <= self._sync_build_max or self._connect is None:
                        self._matrix = KeywordMatrix(store.term_blobs(sources))
                    else:
                        self._start_build(key)
                return self._matrix
            if self._connect is None or store.chunk_count(sources) <= self._sync_build_max:
                started = time.perf_counter()
                self._matrix = KeywordMatrix(store.term_blobs(sources))
                self._matrix_key = key
                log.debug(
                    "keyword matrix: %d chunks in %.3fs",
                    self._matrix.n_docs,
                    time.perf_counter() - started,
                )
                return self._matrix
            self._start_build(key)
            return None

    def _start_build(self, key: _MatrixKey) -> None:
        """Build a full matrix in a thread; it replaces the current one when done."""
        if self._building is not None and self._building.is_alive():
            return
        connect = self._connect
        assert connect is not None

        def build() -> None:
            try:
                conn = connect()
                try:
                    conn.execute("BEGIN")
                    store = IndexStore(conn)
                    built: _MatrixKey = (store.generation(), key[1], store.get_meta("epoch"))
                    matrix = KeywordMatrix(store.term_blobs(key[1]))
                    conn.execute("COMMIT")
                finally:
                    conn.close()
                with self._lock:
                    # Keep a newer incremental matrix if one was published meanwhile.
                    cur = self._matrix_key
                    if cur is None or cur[1:] != built[1:] or cur[0] <= built[0]:
                        self._matrix, self._matrix_key = matrix, built
            except Exception:  # never raised into a search; the next search retries
                log.exception("building the keyword matrix failed")

        self._building = threading.Thread(target=build, name="memmw-bm25", daemon=True)
        self._building.start()

    def wait_ready(self, timeout: float | None = None) -> None:
        """Wait for a background matrix build (tests and benchmarks)."""
        thread = self._building
        if thread is not None:
            thread.join(timeout)

    def vector_matrix(
        self, store: IndexStore, sources: Sequence[str], dims: int | None
    ) -> VectorMatrix:
        """Stored vectors of the current generation (reloaded when a sync or backfill wrote)."""
        # The epoch is the rebuild id: counters restart after a reset, the epoch never
        # repeats, so a long-lived process never keeps another index's vectors.
        key = (
            store.generation(),
            store.get_meta("vector_generation"),
            tuple(sources),
            store.get_meta("epoch"),
            dims,
        )
        with self._lock:
            if self._vectors is None or self._vectors_key != key:
                self._vectors = load_vectors(store.conn, sources, dims)
                self._vectors_key = key
            return self._vectors

    def search(
        self,
        store: IndexStore,
        query: str,
        *,
        max_results: int | None = None,
        min_score: float | None = None,
        sources: Sequence[str] | None = None,
        vector_leg: VectorLeg | None = None,
        now: float | None = None,
    ) -> SearchOutcome:
        """Search the index; see ``Memory.search`` for the semantics.

        The caller holds a read snapshot of ``store`` so both legs see one generation.
        """
        cfg = self.config.query
        limit = max_results if max_results is not None else cfg.max_results
        if min_score is not None and not 0.0 <= min_score <= 1.0:
            raise ConfigError(f"min_score must be between 0 and 1; got {min_score}")
        threshold = cfg.min_score if min_score is None else min_score
        srcs = tuple(sources or self.config.sources)
        mode = "hybrid" if vector_leg is not None else "fts-only"
        q_terms = query_terms(query)
        if not q_terms and vector_leg is None:
            return SearchOutcome([], mode)
        n_candidates = candidate_count(limit, cfg.hybrid)

        matrix = self.keyword_matrix(store, srcs)
        if self.config.store.keyword_backend == "fts5" or matrix is None:
            kw_hits = fts_search(store, q_terms, n_candidates, srcs)
        else:
            kw_hits = matrix.search(q_terms, n_candidates)
        vec_hits = vector_leg(n_candidates) if vector_leg is not None else []

        rows = store.chunks([h.rowid for h in kw_hits] + [r for r, _ in vec_hits])
        cands: dict[int, _Candidate] = {}
        for rank, kw in enumerate(kw_hits):
            chunk = rows.get(kw.rowid)
            if chunk is None:
                continue
            path_norm = normalize(chunk.path)
            raw = lexical_score(kw, chunk, len(q_terms), sum(1 for t in q_terms if t in path_norm))
            cands[kw.rowid] = _Candidate(
                chunk=chunk, text_score=min(1.0, raw), text_rank=rank, keyword_raw=raw
            )
        for rank, (rowid, sim) in enumerate(vec_hits):
            chunk = rows.get(rowid)
            if chunk is None:
                continue
            cand = cands.setdefault(rowid, _Candidate(chunk=chunk))
            cand.vector_score = max(0.0, min(1.0, sim))
            cand.vector_rank = rank
        if not cands:
            return SearchOutcome([], mode)
        hybrid = vector_leg is not None
        self._score(list(cands.values()), hybrid=hybrid)
        now_ts = time.time() if now is None else now
        newest = store.newest_decay_ts()
        for cand in cands.values():
            mult = decay_multiplier(
                cand.chunk.decay_ts, config=cfg.temporal_decay, now=now_ts, newest=newest
            ) * importance_multiplier(cand.chunk.importance)
            cand.order *= mult
            # Keyword-only: tanh maps the uncapped ranking score into 0..1 without the
            # saturation of a cap (most good matches would all print 1.000) and keeps
            # its order; tanh(x) ~ x below 0.5, so low thresholds keep their meaning.
            cand.score = cand.order if hybrid else math.tanh(cand.order)

        ordered = sorted(cands.values(), key=lambda c: (-c.order, -c.score, c.chunk.rowid))
        if cfg.mmr.enabled:
            ordered = mmr_order(
                ordered,
                [c.order for c in ordered],
                [c.chunk.term_set() for c in ordered],
                cfg.mmr.lambda_,
            )
        strict = [c for c in ordered if c.score >= threshold]
        if min_score is None:
            # Keyword relaxation, for the default threshold only: a pure keyword hit can
            # never pass 0.35 on a weighted score, so keyword-leg hits below it fill the
            # remaining slots. An explicit min_score is a strict filter.
            spare = [c for c in ordered if c.score < threshold and c.text_score is not None]
            strict = strict + spare
        chosen = strict[:limit]
        # Snippets weigh the query's terms by idf; compute each once per search.
        weights = {
            t: (matrix.idf(t) if matrix is not None and matrix.n_docs else 1.0) for t in q_terms
        }

        def idf(term: str) -> float:
            return weights.get(term, 0.0)

        return SearchOutcome([self._hit(c, q_terms, idf) for c in chosen], mode)

    def _score(self, cands: list[_Candidate], *, hybrid: bool) -> None:
        """Set the ``order`` each candidate is ranked by (0..1 in hybrid mode).

        The reported score is this ranking score (after decay and importance), so printed
        scores follow the printed order (up to MMR's diversity swaps) and ``min_score``
        filters on what the user sees. Keyword-only: the boosted keyword score (reported
        as ``tanh`` of it, which keeps the order and never saturates). Hybrid: depends on the fusion method
        (``normalized`` scores are relative to this query's candidates; ``weighted`` is the
        reference's weighted sum; ``rrf`` is rescaled so a first place on both legs is 1).
        """
        hy = self.config.query.hybrid
        if not hybrid:
            for c in cands:
                c.order = c.keyword_raw
            return
        if hy.fusion == "normalized":
            self._order_normalized(cands)
        elif hy.fusion == "rrf":
            best = (hy.vector_weight + hy.text_weight) / (hy.rrf_k + 1)
            for c in cands:
                c.order = sum(
                    w / (hy.rrf_k + r + 1)
                    for w, r in ((hy.vector_weight, c.vector_rank), (hy.text_weight, c.text_rank))
                    if r is not None
                ) / best
        else:
            for c in cands:
                c.order = hy.vector_weight * (c.vector_score or 0.0) + hy.text_weight * (
                    c.text_score or 0.0
                )

    def _order_normalized(self, cands: list[_Candidate]) -> None:
        """Min-max normalise each leg over the candidates it found, then weight them.

        The boosted keyword score is capped at 1 and most good keyword hits reach the cap,
        so a weighted sum of raw scores lets cosine alone decide. Each leg is rescaled over
        its own candidates (its weakest candidate maps to 0, like a chunk it did not find)
        so both legs use their whole 0..1 range; a chunk both legs found gets both parts.
        Each leg's range is then scaled by its best absolute score (capped keyword score,
        calibrated cosine), so the fused score stays an absolute one: a query nothing
        matches well scores low and ``min_score`` still filters it, and a leg's best
        candidate scores exactly what the reference's weighted sum gives it.
        """
        hy = self.config.query.hybrid

        def scaled(values: list[float | None]) -> list[float]:
            present = [v for v in values if v is not None]
            if not present:
                return [0.0] * len(values)
            lo, hi = min(present), max(present)
            return [
                0.0 if v is None else (1.0 if hi == lo else (v - lo) / (hi - lo)) for v in values
            ]

        text = scaled([c.keyword_raw if c.text_score is not None else None for c in cands])
        vec = scaled([c.vector_score for c in cands])
        t_best = max((c.text_score for c in cands if c.text_score is not None), default=0.0)
        v_best = max((c.vector_score for c in cands if c.vector_score is not None), default=0.0)
        for c, t, v in zip(cands, text, vec, strict=True):
            c.order = hy.vector_weight * v * v_best + hy.text_weight * t * t_best

    def _hit(self, cand: _Candidate, q_terms: list[str], idf: Callable[[str], float]) -> SearchHit:
        chunk = cand.chunk
        snip = build_snippet(
            chunk.text,
            chunk.piece_lines(),
            q_terms,
            idf=idf,
            max_chars=self.config.query.snippet_max_chars,
        )
        return SearchHit(
            path=chunk.path,
            start_line=snip.start_line,
            end_line=snip.end_line,
            score=cand.score,
            snippet=snip.text,
            source=chunk.source,
            citation=citation_for(chunk.path, snip.start_line, snip.end_line),
            chunk_id=chunk.id,
            chunk_start_line=chunk.start_line,
            chunk_end_line=chunk.end_line,
            text_score=cand.text_score,
            vector_score=cand.vector_score,
            importance=chunk.importance,
        )
