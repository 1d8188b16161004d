"""Search orchestration: keyword and vector legs, merge, decay, importance, MMR, snippets."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from memmw.config import MemoryConfig, candidate_count
from memmw.search.expansion import (
    AliasIndex,
    asks_present,
    lexical_synonyms,
    lexical_vector_words,
    merge_postings,
    merge_synonyms,
    newest_first,
    present_terms,
    subject_terms,
)
from memmw.search.keyword import KeywordHit, bm25_search, bm25_to_score, fts_search
from memmw.search.keyword import idf as bm25_idf
from memmw.search.ranking import decay_multiplier, importance_multiplier, mmr_picks
from memmw.search.snippets import build_snippets
from memmw.store.arena import Arena
from memmw.store.protocol import EMPTY_POSTINGS as EMPTY
from memmw.store.protocol import ChunkRow, StoreReader
from memmw.store.terms import term_hash
from memmw.store.vectorsearch import VectorLeg
from memmw.text import lexicon
from memmw.text.analysis import STOP_WORDS, normalize, query_terms, terms
from memmw.types import KEYWORD_ONLY, SearchHit, citation_for
from memmw.workspace.layout import file_date

log = logging.getLogger(__name__)

#: The lowest score a search shows unless its caller asked for less: below it a score
#: prints as 0.000.
SHOWN_MIN = 0.0005
#: From this many results on, the top hit's chunk also shows its second-best window (when
#: lines outside its first window match the query and it is the best keyword match of the
#: hits), right after the first, in place of the last hit. Measured on LoCoMo dev
#: (evidence in the snippets; keyword / hybrid / the original weighted merge): at 6
#: results 0.786 -> 0.825 / 0.815 -> 0.863 / 0.632 -> 0.641, at 4 0.746 -> 0.764 /
#: 0.782 -> 0.819 / 0.462 -> 0.468, at 3 0.696 -> 0.719 / 0.752 -> 0.767 / 0.379 -> 0.385;
#: at 2 the last chunk is worth as much (hybrid 0.699 -> 0.689). Without the keyword
#: condition the weighted merge lost (0.632 -> 0.558 at 6): its order puts the evidence
#: in the last hit as often as in the first.
SECOND_WINDOW_MIN_RESULTS = 3
#: A present-tense question reads this many times the keyword candidates, for newer
#: statements of what its top hit says (they never enter the ranking itself).
PRESENT_POOL_FACTOR = 4


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
    """Hits plus how they were found (``hybrid`` or ``keyword-only``)."""

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


def evidence(keyword_raw: float, vector_score: float | None, multiplier: float = 1.0) -> float:
    """A hit's score: how strongly the legs that found it match, on one 0..1 scale.

    Keyword evidence is ``tanh`` of the boosted keyword score (0 when the keyword leg did
    not find the chunk), vector evidence the calibrated cosine (0 when the vector leg did
    not find it or found it below the corpus median); each is weighted by decay and
    importance (``multiplier``) and they combine as independent evidence,
    ``1 - (1 - k) * (1 - v)``. A chunk only the keyword leg found therefore scores the same
    in hybrid and keyword-only searches, and a second leg's agreement only raises it. The
    fusion method decides the order; it never enters the score.
    """
    k = math.tanh(keyword_raw * multiplier)
    v = min(1.0, (vector_score or 0.0) * multiplier)
    return 1.0 - (1.0 - k) * (1.0 - v)


def _place(chunk: ChunkRow) -> tuple[str, int, int, str]:
    """A chunk's stable tie-break key: path, lines, then its content-derived id."""
    return (chunk.path, chunk.start_line, chunk.end_line, chunk.id)


#: A path NFKC case-folded, for the path boost (paths repeat across candidates and
#: searches).
_folded_path = lru_cache(maxsize=8192)(normalize)


def _choose(
    ranked: Iterable[_Candidate], limit: int, threshold: float, *, relax: bool
) -> list[_Candidate]:
    """The first ``limit`` candidates of ``ranked`` whose score passes ``threshold``.

    ``relax`` (the default threshold, not one the caller gave): when fewer than ``limit``
    candidates pass, the best-ranked keyword matches below it fill the empty slots, after
    them, except those whose score would print as 0.000 (``SHOWN_MIN``). A chunk only
    the vector leg found must pass: below the threshold it is most likely unrelated (see
    :func:`_keep_best_semantic` for the one exception). An explicit min_score is a strict
    filter. Reading stops once ``limit`` candidates pass, so a lazy MMR order
    computes only the picks it shows.
    """
    passed: list[_Candidate] = []
    spare: list[_Candidate] = []
    for cand in ranked:
        if cand.score >= threshold:
            passed.append(cand)
            if len(passed) == limit:
                break
        elif relax and cand.text_score is not None and cand.score >= SHOWN_MIN:
            spare.append(cand)
    return (passed + spare)[:limit]


def _keep_best_semantic(
    chosen: list[_Candidate], cands: Sequence[_Candidate], floor: float, limit: int | None = None
) -> list[_Candidate]:
    """``chosen``, with the candidate of the strongest vector score in it when it scores
    at least ``floor`` (an explicit min_score, else ``SHOWN_MIN``) and either scores higher
    than a chosen hit or fits in a place ``chosen`` left empty (fewer than ``limit``).

    The fusion order can rank several weak keyword matches above the one chunk that
    means what the question asks ("food allergies" -> "Allergic to peanuts"); that chunk
    then takes the place of the lowest-scoring chosen hit, or an empty place after the
    chosen ones, rather than be dropped. A search nothing else matches still shows
    nothing.
    """
    vectored = [c for c in cands if c.vector_score]
    if not chosen or not vectored:
        return chosen
    best = max(vectored, key=lambda c: (c.vector_score or 0.0, c.score))
    if any(c is best for c in chosen) or best.score < floor:
        return chosen
    if limit is not None and len(chosen) < limit:
        return [*chosen, best]
    weakest = min(range(len(chosen)), key=lambda i: (chosen[i].score, -i))
    if chosen[weakest].score >= best.score:
        return chosen
    return [best if i == weakest else c for i, c in enumerate(chosen)]


def _newer_statements(
    chosen: list[_Candidate],
    pool: Sequence[_Candidate],
    subject_of: Callable[[_Candidate], frozenset[int]],
    anchors: frozenset[int],
    statement: Callable[[_Candidate], frozenset[int]],
) -> list[_Candidate]:
    """``chosen`` with newer statements about what its top hit says in the places of hits
    that do not hold the top hit's subject (the last such places; the best-ranked
    statement in the first of them).

    The top hit's subject is the salient query terms it holds (``subject_of``). A newer
    statement is a candidate of ``pool`` (best-ranked first) dated after the top hit (an
    undated file counts as the oldest) that holds that subject, or that names the same
    entities (``anchors``) and holds at least half the other words of the top hit's
    best line (``statement``: "Harbor hit 65k events/sec in the load test" restates
    "Harbor ingest reached 40k events/sec in the load test"). The hit of the strongest
    vector score keeps its place (what the question means, see
    :func:`_keep_best_semantic`).
    """
    if len(chosen) < 2:
        return chosen
    top = chosen[0]
    subject = subject_of(top)
    if not subject:
        return chosen
    vectored = [c for c in chosen if c.vector_score]
    semantic = max(vectored, key=lambda c: c.vector_score or 0.0) if vectored else None
    free = [
        i for i in reversed(range(1, len(chosen)))
        if not subject <= subject_of(chosen[i]) and chosen[i] is not semantic
    ]  # fmt: skip
    if not free:
        return chosen
    since = file_date(top.chunk.path)
    names = subject & anchors
    words = statement(top) if names else frozenset()
    taken = {id(c) for c in chosen}
    newer: list[_Candidate] = []
    for cand in pool:
        if len(newer) == len(free):
            break
        day = file_date(cand.chunk.path)
        if id(cand) in taken or day is None or (since is not None and day <= since):
            continue
        held = subject_of(cand)
        if subject <= held or (
            names
            and names <= held
            and len(words) >= 2
            and 2 * len(words.intersection(cand.chunk.term_hashes().tolist())) >= len(words)
        ):
            newer.append(cand)
            taken.add(id(cand))
    out = list(chosen)
    # The weakest places give way; the best-ranked newer statement takes the first of them.
    for place, cand in zip(sorted(free[: len(newer)]), newer, strict=True):
        out[place] = cand
    return out


def _second_window(chosen: Sequence[_Candidate], limit: int) -> bool:
    """Whether the top hit also shows its second window (see SECOND_WINDOW_MIN_RESULTS).

    The top chunk is the likeliest to hold the answer, and a snippet shows only part of
    it: when it is also the best keyword match of the hits (its other lines match the
    words too), its second window is worth more than the last of several chunks.
    """
    return (
        limit >= SECOND_WINDOW_MIN_RESULTS
        and bool(chosen)
        and chosen[0].keyword_raw > 0
        and chosen[0].keyword_raw >= max(c.keyword_raw for c in chosen)
    )


class Searcher:
    """Ranks one index's answer to a query: both legs, fusion, decay, MMR, snippets.

    Keyword statistics and postings are read per query; the vector leg comes ready-made
    (``memmw.search.retriever`` binds the query vector to the store's vector index).
    """

    def __init__(self, config: MemoryConfig) -> None:
        """Create a searcher.

        Args:
            config: Memory settings.
        """
        self.config = config
        self._local = threading.local()  # each thread's search arena
        self._lock = threading.Lock()
        self._aliases: tuple[tuple[object, ...], AliasIndex] | None = None
        lexicon.warm()  # the Chinese <-> English dictionary, read off the turn's path

    def _arena(self) -> Arena:
        """This thread's search arena, emptied for a new search."""
        arena: Arena | None = getattr(self._local, "arena", None)
        if arena is None:
            arena = self._local.arena = Arena()
        arena.reset()
        return arena

    def invalidate(self) -> None:
        """Forget the entity names read from the index (the index file was replaced)."""
        with self._lock:
            self._aliases = None

    def vector_text(self, store: StoreReader, query: str) -> tuple[str, AliasIndex | None]:
        """The text the vector leg embeds for ``query`` (with the other names of the
        entities it names; see :meth:`AliasIndex.vector_text`), and the names read for it
        (give them to :meth:`search` with the same reader: they are read once a search)."""
        try:
            aliases = self.alias_index(store)
            text = aliases.vector_text(query)
            srcs = tuple(self.config.sources)

            def known(words: Sequence[str]) -> set[str]:
                held = store.postings([term_hash(w) for w in words], srcs)
                return {w for w in words if term_hash(w) in held}

            extra = lexical_vector_words(query, known)
            return (f"{text} ({', '.join(extra)})" if extra else text), aliases
        except Exception:  # the names only add recall: never fail a search for them
            log.debug("query expansion failed", exc_info=True)
            return query, None

    def alias_index(self, store: StoreReader) -> AliasIndex:
        """The entity names of the index (query expansion), read once per generation."""
        key = (store.generation(), store.get_meta("epoch"))
        with self._lock:
            cached = self._aliases
        if cached is not None and cached[0] == key:
            return cached[1]
        index = AliasIndex.from_store(store)
        with self._lock:
            self._aliases = (key, index)
        return index

    def search(
        self,
        store: StoreReader,
        query: str,
        *,
        max_results: int,
        min_score: float | None = None,
        sources: Sequence[str] | None = None,
        vector_leg: VectorLeg | None = None,
        now: float | None = None,
        aliases: AliasIndex | None = None,
    ) -> SearchOutcome:
        """Search the index; see ``Memory.search`` for the semantics.

        The caller holds a read snapshot of ``store`` so both legs see one generation, and
        has resolved ``max_results`` and checked ``min_score``
        (:meth:`memmw.config.QueryConfig.results_wanted` and ``check_min_score``).
        """
        cfg = self.config.query
        limit = max_results
        threshold = cfg.min_score if min_score is None else min_score
        srcs = tuple(sources or self.config.sources)
        mode = "hybrid" if vector_leg is not None else KEYWORD_ONLY
        # query.hybrid.enabled = false: the vector leg alone while it answers.
        vector_only = vector_leg is not None and not cfg.hybrid.enabled
        if vector_only:
            mode = "vector"
        q_terms = query_terms(query)
        if not q_terms and vector_leg is None:
            return SearchOutcome([], mode)
        present = asks_present(query)
        now_words: tuple[str, ...] = ()
        if present:  # "these days" is not what the question is about
            q_terms, now_words = present_terms(q_terms)
        n_candidates = candidate_count(limit, cfg.hybrid)

        # Only the query's terms are read: a fresh process answers as fast as a warm one.
        hashes = [term_hash(t) for t in q_terms]
        # A term naming an entity is searched with the entity's other names (one group).
        if q_terms and aliases is None:
            aliases = self.alias_index(store)
        names = aliases.synonyms(query, q_terms) if q_terms and aliases is not None else {}
        # A Chinese word is also searched in English, a romanised name also in Chinese.
        lexical = lexical_synonyms(query, q_terms) if q_terms else {}
        words = merge_synonyms(names, lexical) if lexical else names
        synonyms = {**words, q_terms[-1]: now_words} if now_words else words
        groups = {term_hash(t): [term_hash(x) for x in synonyms.get(t, ())] for t in q_terms}
        # Postings and BM25's working arrays live in this thread's arena until its next
        # search: nothing below keeps them past this call.
        arena = self._arena()
        wanted = hashes + [h for extra in groups.values() for h in extra]
        postings = dict(store.postings(wanted, srcs, arena)) if q_terms else {}
        for h, extra in groups.items():
            if extra:
                postings[h] = merge_postings([postings.get(x, EMPTY) for x in (h, *extra)])
        n_docs, total_terms = store.keyword_stats(srcs) if q_terms else (0, 0.0)
        # A present-tense question also reads the keyword matches below the candidates:
        # the newer statement of a value may share only the subject's name with it
        # (see _newer_statements); they never enter the ranking itself.
        n_keyword = n_candidates * PRESENT_POOL_FACTOR if present else n_candidates
        if vector_only:
            kw_hits = []
        elif self.config.store.keyword_backend == "fts5":
            # FTS5 knows no synonym groups: the subject alone, not the literal "now".
            kw_hits = fts_search(store, q_terms[:-1] if now_words else q_terms, n_keyword, srcs)
        else:
            kw_hits = bm25_search(
                [postings.get(h, EMPTY) for h in dict.fromkeys(hashes)],
                n_docs,
                total_terms,
                n_keyword,
                arena,
            )
        vec_hits = vector_leg(n_candidates) if vector_leg is not None else []

        rows = store.chunks([h.rowid for h in kw_hits] + [r for r, _ in vec_hits])
        # Ties (equal scores) break by where the chunk is, never by its rowid: the same
        # files give the same answer whatever the index's history.
        kw_hits = sorted(
            (h for h in kw_hits if h.rowid in rows),
            key=lambda h: (-h.bm25, _place(rows[h.rowid])),
        )
        kw_hits, kw_below = kw_hits[:n_candidates], kw_hits[n_candidates:]
        vec_hits = sorted(
            ((r, s) for r, s in vec_hits if r in rows), key=lambda v: (-v[1], _place(rows[v[0]]))
        )
        cands: dict[int, _Candidate] = {}
        below: list[_Candidate] = []
        for rank, kw in enumerate(kw_hits + kw_below):
            chunk = rows.get(kw.rowid)
            if chunk is None:
                continue
            path_norm = _folded_path(chunk.path)
            raw = lexical_score(kw, chunk, len(q_terms), sum(1 for t in q_terms if t in path_norm))
            cand = _Candidate(
                chunk=chunk, text_score=min(1.0, raw), text_rank=rank, keyword_raw=raw
            )
            if rank < len(kw_hits):
                cands[kw.rowid] = cand
            else:
                below.append(cand)
        for rank, (rowid, sim) in enumerate(vec_hits):
            chunk = rows.get(rowid)
            if chunk is None:
                continue
            cand = cands.setdefault(rowid, _Candidate(chunk=chunk))
            cand.vector_score = max(0.0, min(1.0, sim))
            cand.vector_rank = rank
        if now_words:
            # The words for "now" only count beside the subject: a note that says "jetzt"
            # about something else is not a newer statement about it.
            subject = {h for t in q_terms[:-1] for h in (term_hash(t), *groups[term_hash(t)])}

            def about(c: _Candidate) -> bool:
                return not subject.isdisjoint(c.chunk.term_hashes().tolist())

            cands = {r: c for r, c in cands.items() if c.vector_score is not None or about(c)}
            below = [c for c in below if about(c)]
        if not cands:
            return SearchOutcome([], mode)
        hybrid = vector_leg is not None
        self._score(list(cands.values()), hybrid=hybrid)
        now_ts = time.time() if now is None else now
        newest = store.newest_decay_ts()
        for cand in [*cands.values(), *below]:
            mult = decay_multiplier(
                cand.chunk.decay_ts, config=cfg.temporal_decay, now=now_ts, newest=newest
            ) * importance_multiplier(cand.chunk.importance)
            cand.order *= mult
            cand.score = evidence(cand.keyword_raw, cand.vector_score, mult)

        ordered = sorted(cands.values(), key=lambda c: (-c.order, -c.score, _place(c.chunk)))
        ranked: Iterable[_Candidate] = ordered
        if cfg.mmr.enabled:
            picks = mmr_picks(
                [c.order for c in ordered],
                [c.chunk.term_hashes() for c in ordered],
                cfg.mmr.lambda_,
            )
            ranked = (ordered[i] for i in picks)
        chosen = _choose(ranked, limit, threshold, relax=min_score is None)
        chosen = _keep_best_semantic(
            chosen, ordered, SHOWN_MIN if min_score is None else threshold, limit
        )
        # Snippets weigh the query's terms by idf; compute each once per search.
        weights = {
            t: (bm25_idf(len(postings.get(h, EMPTY)), n_docs) if n_docs else 1.0)
            for t, h in zip(q_terms, hashes, strict=True)
        }
        if present:
            found = {c.chunk.id for c in ordered}
            pool = ordered + [c for c in below if c.chunk.id not in found]
            chosen = self._newest_first(chosen, pool, q_terms, groups, weights, names)
        snippet_terms = list(q_terms)
        for t, extra_terms in synonyms.items():
            for x in extra_terms:
                weights.setdefault(x, weights.get(t, 0.0))
                snippet_terms.append(x)

        def idf(term: str) -> float:
            return weights.get(term, 0.0)

        windows = 2 if _second_window(chosen, limit) else 1
        hits = [
            hit
            for i, c in enumerate(chosen)
            for hit in self._hits(c, snippet_terms, idf, windows if i == 0 else 1)
        ]
        return SearchOutcome(hits[:limit], mode)

    @staticmethod
    def _newest_first(
        chosen: list[_Candidate],
        pool: Sequence[_Candidate],
        q_terms: list[str],
        groups: dict[int, list[int]],
        weights: dict[str, float],
        names: Iterable[str],
    ) -> list[_Candidate]:
        """A present-tense question: newer statements about a subject before older ones.

        First, a chosen hit that holds none of the question's salient subject terms (see
        :func:`newest_first`) gives way to a newer statement about a chosen hit's subject:
        the best-ranked candidate further down that holds every salient term that hit
        holds and is dated after it (an undated file counts as the oldest), so the newer
        value is shown even when other words of the question rank it low. Then the hits
        are ordered newest first within each subject.
        """
        subjects = subject_terms(q_terms)
        members = {term_hash(t): (term_hash(t), *groups.get(term_hash(t), ())) for t in subjects}
        weight_of = {term_hash(t): weights.get(t, 0.0) for t in subjects}
        anchors = frozenset(term_hash(t) for t in names)
        memo: dict[int, frozenset[int]] = {}

        def held(cand: _Candidate) -> frozenset[int]:
            key = id(cand)
            if key not in memo:
                chunk_terms = set(cand.chunk.term_hashes().tolist())
                memo[key] = frozenset(
                    g for g, hs in members.items() if not chunk_terms.isdisjoint(hs)
                )
            return memo[key]

        strongest = max(weight_of.values(), default=0.0)
        salient = {g for g in members if g in anchors or 0 < strongest / 2 <= weight_of[g]}
        query_words = {h for hs in members.values() for h in hs} | {
            term_hash(t) for t in q_terms
        }

        def statement(cand: _Candidate) -> frozenset[int]:
            """The words of the candidate's line that best matches the question, without
            the question's own words."""
            best = max(
                cand.chunk.text.split("\n"),
                key=lambda line: len(query_words.intersection(term_hash(t) for t in terms(line))),
            )
            return frozenset(term_hash(t) for t in terms(best) if t not in STOP_WORDS) - query_words

        chosen = _newer_statements(
            chosen, pool, lambda c: held(c) & salient, anchors, statement
        )
        return newest_first(
            chosen,
            path_of=lambda c: c.chunk.path,
            groups_of=held,
            weight=lambda g: weight_of.get(g, 0.0),
            anchors=anchors,
        )

    def _score(self, cands: list[_Candidate], *, hybrid: bool) -> None:
        """Set the ``order`` each candidate is ranked by.

        Keyword-only: the boosted keyword score. Hybrid: depends on the fusion method
        (``normalized`` orders are relative to this query's candidates; ``weighted`` is the
        reference's weighted sum; ``rrf`` is rescaled so a first place on both legs is 1).
        The order is not the reported score: that is :func:`evidence`, one absolute 0..1
        scale for every mode and fusion, so ``min_score`` means the same everywhere.
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

    def _hits(
        self, cand: _Candidate, q_terms: list[str], idf: Callable[[str], float], windows: int
    ) -> list[SearchHit]:
        """The hits of one chosen chunk: its best window, and with ``windows`` 2 its
        second-best one when lines outside the first match the query (same score)."""
        chunk = cand.chunk
        snips = build_snippets(
            chunk.text,
            chunk.piece_lines(),
            q_terms,
            idf=idf,
            max_chars=self.config.query.snippet_max_chars,
            count=windows,
        )
        return [
            SearchHit(
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
                text_score=None if cand.text_score is None else math.tanh(cand.keyword_raw),
                vector_score=cand.vector_score,
                importance=chunk.importance,
            )
            for snip in snips
        ]
