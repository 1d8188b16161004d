"""Search through the Memory facade (keyword only): hostile queries, CJK, decay, importance."""

from __future__ import annotations

import calendar
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memmw import Memory, MemoryConfig, StoreConfig
from memmw.agent.tools import search_payload
from memmw.config import MMRConfig, QueryConfig, TemporalDecayConfig
from memmw.search.searcher import (
    SECOND_WINDOW_MIN_RESULTS,
    SHOWN_MIN,
    _Candidate,
    _choose,
    _keep_best_semantic,
    _newer_statements,
    _second_window,
    lexical_score,
)
from memmw.store.protocol import ChunkRow
from memmw.text.analysis import utf16_len
from memmw.workspace.layout import file_date

from ..conftest import make_memory, write

BACKENDS = {
    "memory": StoreConfig(keyword_backend="memory"),
    "fts5": StoreConfig(keyword_backend="fts5"),
    "fts5-trigram": StoreConfig(keyword_backend="fts5", fts_tokenizer="trigram"),
    "auto": StoreConfig(),
}


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    write(
        root / "MEMORY.md",
        "# Facts\n"
        "- The gateway runs on port 8080 on the NAS.\n"
        "- 私の猫の名前はミケです。東京に住んでいます。\n"
        "- 我喜欢吃北京烤鸭。\n"
        "- 나는 서울에 살고 있어요. 김치찌개를 좋아해요.\n",
    )
    write(root / "USER.md", "# User\n- Prefers short answers.\n")
    write(root / "memory" / "2026-01-02.md", "# Jan 2\nWe planned the kubernetes migration.\n")
    write(root / "memory" / "2026-01-03.md", "# Jan 3\nBob fixed the backup cron job on the NAS.\n")
    return root


def memory(ws: Path, tmp_path: Path, store: StoreConfig | None = None, **query) -> Memory:
    cfg = MemoryConfig(provider="none", store=store or StoreConfig())
    if query:
        cfg = cfg.replace(query=QueryConfig(**query))
    name = (
        f"state-{store.keyword_backend if store else 'auto'}-{store.fts_tokenizer if store else ''}"
    )
    return make_memory(workspace=ws, state_dir=tmp_path / name, config=cfg)


HOSTILE = [
    '"',
    '""',
    "'",
    "NEAR(",
    "NEAR(gateway",
    "*",
    "gateway*",
    "-",
    "-gateway",
    ":",
    "port:8080",
    "(((",
    ")",
    "(gateway",
    "gateway)",
    'a" OR "b',
    "gateway AND OR NOT",
    "^gateway",
    "{col}: gateway",
    "",
    "   ",
    "\x00",
    "\\",
    "%_%",
    "x" * 10_240,
    ("gateway " * 1300)[:10_240],
]


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_hostile_queries_never_raise(ws: Path, tmp_path: Path, backend: str) -> None:
    with memory(ws, tmp_path, BACKENDS[backend]) as mem:
        mem.sync()
        for query in HOSTILE:
            hits = mem.search(query)
            assert isinstance(hits, list) and len(hits) <= 6, query
            payload = search_payload(mem, query)
            assert payload["mode"] == "keyword-only"


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize(
    "query",
    ["NEAR(gateway", "gateway*", "-gateway", "port:8080", "(gateway", "gateway)", '"gateway"'],
)
def test_operator_characters_are_plain_text(
    ws: Path, tmp_path: Path, backend: str, query: str
) -> None:
    with memory(ws, tmp_path, BACKENDS[backend]) as mem:
        hits = mem.search(query)
        # Line 1 is the "# Memory"-style heading the entry on line 2 carries with it.
        assert hits[0].citation == "MEMORY.md#L1-L2"


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("query", ["", "   ", '"', "*", "-", ":", "(((", "NEAR("])
def test_queries_without_terms_return_nothing(
    ws: Path, tmp_path: Path, backend: str, query: str
) -> None:
    with memory(ws, tmp_path, BACKENDS[backend]) as mem:
        mem.sync()
        assert mem.search(query) == []


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize(
    ("query", "line"),
    [
        ("ミケ", 3),
        ("猫の名前", 3),
        ("東京", 3),
        ("北京烤鸭", 4),
        ("烤鸭", 4),
        ("서울", 5),
        ("김치찌개", 5),
    ],
)
def test_cjk_queries_find_their_text(
    ws: Path, tmp_path: Path, backend: str, query: str, line: int
) -> None:
    with memory(ws, tmp_path, BACKENDS[backend]) as mem:
        hits = mem.search(query)
        assert hits, query
        assert hits[0].citation == f"MEMORY.md#L{line}"
        assert hits[0].text_score is not None and hits[0].text_score > 0


def test_default_config_finds_cjk_in_daily_notes(ws: Path, tmp_path: Path) -> None:
    write(ws / "memory" / "2026-01-04.md", "# 会議\n来週の会議は大阪で行います。\n")
    with make_memory(
        workspace=ws, state_dir=tmp_path / "s", config=MemoryConfig(provider="none")
    ) as mem:
        (hit, *_) = mem.search("大阪")
        assert hit.path == "memory/2026-01-04.md"
        assert "大阪" in hit.snippet


def test_results_shape_and_limits(ws: Path, tmp_path: Path) -> None:
    with memory(ws, tmp_path) as mem:
        hits = mem.search("the NAS gateway kubernetes backup")
        assert 1 <= len(hits) <= 6
        assert len(mem.search("the NAS gateway kubernetes backup", max_results=1)) == 1
        for h in hits:
            assert h.source == "memory"
            assert 0 < h.score <= 1.0
            assert h.citation in (
                f"{h.path}#L{h.start_line}",
                f"{h.path}#L{h.start_line}-L{h.end_line}",
            )
            assert h.chunk_start_line <= h.start_line <= h.end_line <= h.chunk_end_line
            assert utf16_len(h.snippet) <= 700
        # Not necessarily sorted by score: MMR reorders for diversity without rescoring.
        with pytest.raises(ValueError, match="max_results"):
            mem.search("gateway", max_results=0)


def test_keyword_relaxation_fills_slots_below_min_score(ws: Path, tmp_path: Path) -> None:
    with memory(ws, tmp_path) as mem:
        strict = mem.search("nas", min_score=0.0)
        assert {h.path for h in strict} == {"MEMORY.md", "memory/2026-01-03.md"}
        # An explicit min_score is strict: nothing reaches 1.0 ...
        assert mem.search("nas", min_score=1.0) == []
        with pytest.raises(ValueError, match="min_score"):
            mem.search("nas", min_score=1.5)
    # ... while the configured default threshold lets keyword hits fill the empty slots.
    cfg = MemoryConfig(provider="none", query=QueryConfig(min_score=1.0))
    with make_memory(workspace=ws, state_dir=tmp_path / "relaxed", config=cfg) as mem:
        assert {h.path for h in mem.search("nas")} == {h.path for h in strict}


def test_lexical_score_formula() -> None:
    from memmw.search.keyword import KeywordHit
    chunk = ChunkRow(
        rowid=1,
        id="x",
        path="memory/a.md",
        source="memory",
        start_line=1,
        end_line=1,
        text="t" * 80,
        line_map=None,
        importance=None,
        n_terms=10,
        decay_ts=None,
    )
    hit = KeywordHit(rowid=1, bm25=1.0, matched=2)
    expected = 0.5 + 0.45 * 2 / 4 + 0.2 * 2 / 10 + 0.18 * 1 + 0.18
    assert lexical_score(hit, chunk, 4, 1) == pytest.approx(expected)


# -- temporal decay and importance ------------------------------------------------------

OLD_RELEVANT = (
    "# Cluster runbook\n"
    "Kubernetes cluster upgrade: drain the kubernetes nodes, upgrade the control plane,\n"
    "then the kubernetes cluster rollback steps if the upgrade fails.\n"
)
NEW_WEAK = "# Lunch\nLunch with Dana; she mentioned a phone upgrade and a new case.\n"
FILLER = "# Day {i}\nWatered the garden and read a novel about sailing ships number {i}.\n"


def decay_ws(tmp_path: Path) -> Path:
    root = tmp_path / "decay-ws"
    write(root / "memory" / "2024-03-01.md", OLD_RELEVANT)
    write(root / "memory" / "2026-01-10.md", NEW_WEAK)
    for i in range(1, 9):
        write(root / "memory" / f"2025-06-{i:02d}.md", FILLER.format(i=i))
    write(root / "MEMORY.md", "- Evergreen: the kubernetes upgrade window is Sunday.\n")
    return root


QUERY = "kubernetes cluster upgrade rollback"


def test_bounded_decay_lets_an_old_relevant_memory_win(tmp_path: Path) -> None:
    root = decay_ws(tmp_path)
    cfg = MemoryConfig(provider="none")
    with make_memory(workspace=root, state_dir=tmp_path / "s1", config=cfg) as mem:
        paths = [h.path for h in mem.search(QUERY, max_results=10)]
    assert paths.index("memory/2024-03-01.md") < paths.index("memory/2026-01-10.md")


def test_classic_decay_buries_the_old_memory(tmp_path: Path) -> None:
    root = decay_ws(tmp_path)
    query_cfg = QueryConfig(temporal_decay=TemporalDecayConfig.classic())
    cfg = MemoryConfig(provider="none", query=query_cfg)
    with make_memory(workspace=root, state_dir=tmp_path / "s2", config=cfg) as mem:
        shown = {h.path for h in mem.search(QUERY, max_results=10)}
        hits = {h.path: h for h in mem.search(QUERY, max_results=10, min_score=0.0)}
    old, new = hits["memory/2024-03-01.md"], hits["memory/2026-01-10.md"]
    assert old.score < new.score
    assert old.text_score is not None and old.score < old.text_score * 0.01
    # Buried below 0.0005 it would print as 0.000: shown only when asked (min_score 0).
    assert old.score < 0.0005 and "memory/2024-03-01.md" not in shown


def test_decay_uses_the_date_in_the_name_and_keeps_curated_files_evergreen(tmp_path: Path) -> None:
    root = tmp_path / "dated"
    line = "The release checklist lives in the ops binder.\n"
    write(root / "MEMORY.md", "- " + line)
    write(root / "memory" / "2024-03-01.md", line)
    write(root / "memory" / "2026-01-10.md", line)
    cfg = MemoryConfig(provider="none", query=QueryConfig(mmr=MMRConfig(enabled=False)))
    with make_memory(workspace=root, state_dir=tmp_path / "s3", config=cfg) as mem:
        hits = {h.path: h for h in mem.search("release checklist binder", max_results=10)}
    floor = TemporalDecayConfig().floor
    newest = calendar.timegm((2026, 1, 10, 0, 0, 0))
    age_days = (newest - calendar.timegm((2024, 3, 1, 0, 0, 0))) / 86400
    mult = floor + (1 - floor) * 2 ** (-age_days / 30)
    # Keyword-only scores are tanh(ranking score): undo it to compare the multipliers.
    old = math.atanh(hits["memory/2024-03-01.md"].score)
    fresh = math.atanh(hits["memory/2026-01-10.md"].score)
    assert old == pytest.approx(fresh * mult, rel=1e-4)
    assert 0 < hits["memory/2024-03-01.md"].score < hits["memory/2026-01-10.md"].score < 1
    evergreen = math.atanh(hits["MEMORY.md"].score)
    assert evergreen >= fresh * 0.99  # undecayed (its "- " prefix changes little)


def test_importance_annotations_weigh_entries(tmp_path: Path) -> None:
    root = tmp_path / "imp"
    write(
        root / "MEMORY.md",
        "- The deploy key lives in the old wiki. <!-- importance: 1 -->\n"
        "- The deploy key lives in the vault. <!-- importance: 10 -->\n"
        "- The deploy key lives in a drawer.\n",
    )
    with make_memory(
        workspace=root, state_dir=tmp_path / "s", config=MemoryConfig(provider="none")
    ) as mem:
        hits = mem.search("deploy key lives")
    assert [h.start_line for h in hits] == [2, 3, 1]
    assert [h.importance for h in hits] == [10, None, 1]
    assert "<!--" not in "".join(h.snippet for h in hits)
    # Printed scores are the ranking scores: they follow the printed order.
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == 3


# -- snippets through search ------------------------------------------------------------


def test_snippet_lines_match_the_file(tmp_path: Path) -> None:
    root = tmp_path / "snip"
    lines = [
        f"Line {i}: routine notes about errands and chores, nothing else." for i in range(1, 200)
    ]
    lines[149] = "Line 150: the zeppelin hangar door code is 4471."
    write(root / "memory" / "2026-02-01.md", "\n".join(lines) + "\n")
    with make_memory(
        workspace=root, state_dir=tmp_path / "s", config=MemoryConfig(provider="none")
    ) as mem:
        (hit,) = mem.search("zeppelin hangar code")
        assert hit.start_line <= 150 <= hit.end_line
        assert utf16_len(hit.snippet) <= 700
        assert hit.snippet == "\n".join(lines[hit.start_line - 1 : hit.end_line])
        assert hit.citation == f"memory/2026-02-01.md#L{hit.start_line}-L{hit.end_line}"
        assert hit.chunk_start_line < hit.start_line or hit.chunk_end_line > hit.end_line
        # The citation can be opened with get() and shows the same text.
        got = mem.get(hit.path, from_line=hit.start_line, lines=hit.end_line - hit.start_line + 1)
        assert got.text.startswith(hit.snippet)


def test_the_top_chunk_shows_its_second_window_in_place_of_the_last_hit(tmp_path: Path) -> None:
    root = tmp_path / "two"
    lines = [f"Line {i}: routine notes about errands and chores, nothing else." for i in range(1, 21)]
    lines[2] = "Line 3: the zeppelin hangar door code is 4471."
    lines[17] = "Line 18: the hangar door needs new hinges."
    write(root / "memory" / "2026-02-01.md", "\n".join(lines) + "\n")
    for day in range(2, 9):
        write(root / "memory" / f"2026-02-0{day}.md", f"# Feb {day}\nA zeppelin flew over, day {day}.\n")
    with Memory(
        workspace=root, state_dir=tmp_path / "s", config=MemoryConfig(provider="none")
    ) as mem:
        hits = mem.search("zeppelin hangar door code", max_results=6)
        assert len(hits) == 6
        first, second = hits[:2]
        assert first.path == second.path == "memory/2026-02-01.md"
        assert first.chunk_id == second.chunk_id and first.score == second.score
        assert first.chunk_start_line == 1 and first.chunk_end_line >= 20  # one chunk
        assert first.start_line <= 3 <= first.end_line
        assert second.start_line <= 18 <= second.end_line
        assert second.start_line > first.end_line
        assert second.snippet == "\n".join(lines[second.start_line - 1 : second.end_line])
        # Five distinct chunks: the second window took the last chunk's place.
        assert len({h.chunk_id for h in hits}) == 5
        # Below SECOND_WINDOW_MIN_RESULTS results, every hit is its own chunk.
        assert SECOND_WINDOW_MIN_RESULTS == 3
        few = mem.search("zeppelin hangar door code", max_results=2)
        assert len({h.chunk_id for h in few}) == 2


# -- the keyword matrix follows syncs incrementally --------------------------------------


def _ranked(mem: Memory, queries: list[str]) -> list[list[tuple[str, int, float]]]:
    return [
        [(h.path, h.start_line, round(h.score, 6)) for h in mem.search(q, max_results=6)]
        for q in queries
    ]


def test_incremental_matrix_matches_a_fresh_build(ws: Path, tmp_path: Path) -> None:
    queries = ["gateway port", "kubernetes migration", "zeppelin hangar", "short answers"]
    config = MemoryConfig(provider="none")
    with make_memory(workspace=ws, state_dir=tmp_path / "a", config=config) as mem:
        mem.sync()
        mem.search("warm")  # builds the first matrix
        write(ws / "memory" / "2026-01-09.md", "# Jan 9\nThe zeppelin hangar opened.\n")
        (ws / "USER.md").unlink()
        write(ws / "memory" / "2026-01-02.md", "# Jan 2\nThe gateway migration slipped.\n")
        mem.sync()
        incremental = _ranked(mem, queries)
    with make_memory(workspace=ws, state_dir=tmp_path / "b", config=config) as fresh:
        fresh.sync()
        assert _ranked(fresh, queries) == incremental
    assert incremental[2][0][0] == "memory/2026-01-09.md"
    assert incremental[3] == []  # USER.md is gone


def test_matrix_reloads_after_a_full_rebuild(ws: Path, tmp_path: Path) -> None:
    with make_memory(
        workspace=ws, state_dir=tmp_path / "s", config=MemoryConfig(provider="none")
    ) as mem:
        mem.sync()
        before = _ranked(mem, ["gateway port", "kubernetes"])
        mem.sync(force=True)
        assert _ranked(mem, ["gateway port", "kubernetes"]) == before


def test_a_fresh_process_ranks_like_a_warm_one(ws: Path, tmp_path: Path) -> None:
    # No matrix to build and no fallback path: the first search of a new Memory reads
    # the stored postings and answers exactly what a long-lived one does.
    queries = ["kubernetes migration", "gateway port", "zeppelin hangar"]
    config = MemoryConfig(provider="none")
    with make_memory(workspace=ws, state_dir=tmp_path / "s", config=config) as mem:
        mem.sync()
        warm = _ranked(mem, queries)
        assert _ranked(mem, queries) == warm
    with make_memory(workspace=ws, state_dir=tmp_path / "s", config=config) as fresh:
        assert _ranked(fresh, queries) == warm
    assert warm[0][0][0] == "memory/2026-01-02.md"


def test_normalized_fusion_rescales_each_leg_over_its_own_candidates() -> None:
    from memmw.config import HybridConfig
    from memmw.search.searcher import Searcher

    def cand(rowid: int, raw: float | None, cos: float | None) -> _Candidate:
        c = _Candidate(chunk=_one_line_chunk(rowid), vector_score=cos)
        if raw is not None:
            c.text_score, c.keyword_raw = min(1.0, raw), raw
        return c

    config = MemoryConfig(query=QueryConfig(hybrid=HybridConfig()))
    # Both keyword hits saturate the capped score (1.0); cosines sit in a narrow band.
    both = cand(1, 1.8, 0.85)
    keyword_only = cand(2, 1.9, None)
    vector_only = cand(3, None, 0.86)
    weak = cand(4, 1.2, 0.78)
    Searcher(config)._score([both, keyword_only, vector_only, weak], hybrid=True)
    # Each leg's 0..1 range is scaled by its best absolute score (keyword 1.0, cosine 0.86).
    assert [round(c.order, 3) for c in (both, keyword_only, vector_only, weak)] == [
        round(0.5 * (0.07 / 0.08) * 0.86 + 0.5 * (0.6 / 0.7), 3),
        0.5,
        0.43,
        0.0,
    ]
    assert both.order > keyword_only.order  # strong on both legs beats the best of one leg

    # The original merge on raw scores: both keyword scores are capped at 1.0, so the
    # much better keyword match loses on a small cosine difference.
    strong_kw, strong_cos = cand(5, 1.9, 0.80), cand(6, 1.1, 0.84)
    classic = MemoryConfig(query=QueryConfig(hybrid=HybridConfig.classic()))
    Searcher(classic)._score([strong_kw, strong_cos], hybrid=True)
    assert strong_cos.order > strong_kw.order
    Searcher(config)._score([strong_kw, strong_cos], hybrid=True)
    # Each leg wins one part; the keyword leg's best is 1.0 while the cosine leg's is 0.84,
    # so the much better keyword match now ranks first.
    assert strong_kw.order == pytest.approx(0.5)
    assert strong_cos.order == pytest.approx(0.5 * 0.84)


# -- choosing the shown hits -------------------------------------------------------------


def _one_line_chunk(rowid: int) -> ChunkRow:
    return ChunkRow(
        rowid=rowid,
        id=str(rowid),
        path="memory/x.md",
        source="memory",
        start_line=1,
        end_line=1,
        text="x",
        line_map=None,
        importance=None,
        n_terms=1,
        decay_ts=None,
    )


def _cand(score: float, keyword: bool) -> _Candidate:
    return _Candidate(chunk=_one_line_chunk(1), text_score=0.5 if keyword else None, score=score)


@settings(max_examples=300, deadline=None)
@given(
    cands=st.lists(
        st.tuples(
            st.sampled_from([0.0, 0.0004, 0.0005, 0.2, 0.35, 0.5, 1.0, math.nan]), st.booleans()
        ),
        max_size=12,
    ),
    limit=st.integers(-2, 8),
    threshold=st.sampled_from([0.0, 0.35, 0.5, 1.0]),
    relax=st.booleans(),
)
def test_choose_equals_filtering_the_whole_order(
    cands: list[tuple[float, bool]], limit: int, threshold: float, relax: bool
) -> None:
    """The passing candidates, then (relaxed) the keyword matches below that would not
    print as 0.000, cut at ``limit``; reading stops at the ``limit``-th passing
    candidate."""
    ordered = [_cand(score, keyword) for score, keyword in cands]
    strict = [c for c in ordered if c.score >= threshold]
    if relax:
        strict = strict + [
            c for c in ordered if threshold > c.score >= SHOWN_MIN and c.text_score is not None
        ]
    read: list[_Candidate] = []

    def reading() -> Iterator[_Candidate]:
        for c in ordered:
            read.append(c)
            yield c

    chosen = _choose(reading(), limit, threshold, relax=relax)
    assert [id(c) for c in chosen] == [id(c) for c in strict[:limit]]
    passing = [i for i, c in enumerate(ordered) if c.score >= threshold]
    if limit >= 1 and len(passing) >= limit:
        assert len(read) == passing[limit - 1] + 1


@settings(max_examples=300, deadline=None)
@given(
    cands=st.lists(
        st.tuples(
            st.floats(0.0, 1.0), st.one_of(st.none(), st.floats(0.0, 1.0)), st.booleans()
        ),
        min_size=1,
        max_size=12,
    ),
    limit=st.integers(1, 6),
    threshold=st.sampled_from([0.0, 0.35, 0.6]),
    relax=st.booleans(),
)
def test_the_strongest_semantic_hit_is_never_dropped_for_a_weaker_one(
    cands: list[tuple[float, float | None, bool]], limit: int, threshold: float, relax: bool
) -> None:
    """Whatever the fusion order, the candidate with the best vector score is shown
    whenever it passes the filter and a shown hit scores lower (issue 22, item 4)."""
    ordered = []
    for i, (score, vector, keyword) in enumerate(cands):
        c = _Candidate(chunk=_one_line_chunk(i + 1), score=score, vector_score=vector)
        c.text_score = 0.5 if keyword else None
        ordered.append(c)
    chosen = _choose(iter(ordered), limit, threshold, relax=relax)
    floor = SHOWN_MIN if relax else threshold
    kept = _keep_best_semantic(chosen, ordered, floor)
    assert len(kept) == len(chosen) and len({id(c) for c in kept}) == len(kept)
    vectored = [c for c in ordered if c.vector_score]
    if not vectored or not chosen:
        assert kept == chosen
        return
    best = max(vectored, key=lambda c: (c.vector_score or 0.0, c.score))
    if best.score >= floor and min(c.score for c in chosen) < best.score:
        assert any(c is best for c in kept)
    # Told the limit, a best semantic hit that passes the floor also takes an empty place.
    filled = _keep_best_semantic(chosen, ordered, floor, limit)
    if any(c is best for c in chosen) or best.score < floor:
        assert filled == chosen
    elif len(chosen) < limit:
        assert filled == [*chosen, best]
    else:
        assert [id(c) for c in filled] == [id(c) for c in kept]
    # Only the weakest shown hit can give way, and only to that one candidate.
    assert sum(1 for a, b in zip(chosen, kept, strict=True) if a is not b) <= 1


_PATHS = st.one_of(
    st.just("MEMORY.md"), st.integers(1, 28).map(lambda d: f"memory/2026-10-{d:02d}.md")
)
_HELD = st.frozensets(st.integers(0, 3), max_size=3)


@settings(max_examples=300, deadline=None)
@given(
    chosen=st.lists(st.tuples(_PATHS, _HELD, st.booleans(), st.booleans()), max_size=6),
    pool=st.lists(st.tuples(_PATHS, _HELD, st.booleans(), st.booleans()), max_size=10),
    anchors=st.frozensets(st.integers(0, 3)),
    statement_share=st.booleans(),
)
def test_newer_statements_only_take_the_places_of_hits_off_the_subject(
    chosen: list[tuple[str, frozenset[int], bool, bool]],
    pool: list[tuple[str, frozenset[int], bool, bool]],
    anchors: frozenset[int],
    statement_share: bool,
) -> None:
    """The top hit, every hit holding its subject and the strongest semantic hit keep
    their places; every other place keeps its hit or holds a distinct candidate of the
    pool dated after the top hit that holds the top hit's subject (or names its entities
    and restates its line); candidates are taken in pool order."""
    held: dict[int, frozenset[int]] = {}

    def make(i: int, path: str, groups: frozenset[int], vector: bool, says: bool) -> _Candidate:
        chunk = _one_line_chunk(i + 1)
        blob = np.array([7, 9] if says else [9], dtype="<i8").tobytes()
        chunk = ChunkRow(**{**chunk.__dict__, "path": path, "terms_blob": blob})
        cand = _Candidate(chunk=chunk, vector_score=(0.1 + i / 100) if vector else None)
        held[id(cand)] = groups
        return cand

    picked = [make(i, *c) for i, c in enumerate(chosen)]
    rest = [make(100 + i, *c) for i, c in enumerate(pool)]
    # The top hit's line: two words, one of which a restatement holds (half of them).
    words = frozenset({7, 8}) if statement_share else frozenset()

    def statement(_c: _Candidate) -> frozenset[int]:
        return words

    def subject_of(c: _Candidate) -> frozenset[int]:
        return held[id(c)]

    out = _newer_statements(picked, [*picked, *rest], subject_of, anchors, statement)
    assert len(out) == len(picked) and len({id(c) for c in out}) == len(out)
    if len(picked) < 2 or not held[id(picked[0])]:
        assert out == picked
        return
    top = picked[0]
    subject = held[id(top)]
    vectored = [c for c in picked if c.vector_score]
    semantic = max(vectored, key=lambda c: c.vector_score or 0.0) if vectored else None
    since = file_date(top.chunk.path)
    taken = []
    for before, after in zip(picked, out, strict=True):
        if before is top or subject <= held[id(before)] or before is semantic:
            assert after is before
        elif after is not before:
            day = file_date(after.chunk.path)
            assert after in rest and day is not None and (since is None or day > since)
            names = subject & anchors
            restates = bool(words) and 7 in after.chunk.term_hashes().tolist()
            assert subject <= held[id(after)] or (names and names <= held[id(after)] and restates)
            taken.append(rest.index(after))
    assert taken == sorted(taken)


@settings(max_examples=200, deadline=None)
@given(
    keyword=st.lists(st.sampled_from([0.0, 0.3, 0.9, 1.4]), max_size=7),
    limit=st.integers(1, 8),
)
def test_only_the_best_keyword_match_on_top_shows_a_second_window(
    keyword: list[float], limit: int
) -> None:
    """A second window needs enough results and a top hit whose words match best: when
    another order (cosine, decay) put a weaker keyword match first, its other lines are
    no better evidence than the last hit."""
    chosen = [_Candidate(chunk=_one_line_chunk(i + 1), keyword_raw=k) for i, k in enumerate(keyword)]
    expected = (
        limit >= SECOND_WINDOW_MIN_RESULTS
        and bool(keyword)
        and keyword[0] > 0
        and all(keyword[0] >= k for k in keyword)
    )
    assert _second_window(chosen, limit) == expected
