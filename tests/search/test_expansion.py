"""Query expansion: entities by any name in both legs' keyword side, current values first."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from memmw import Memory, MemoryConfig
from memmw.search.expansion import (
    NOW_WORDS,
    asks_present,
    merge_postings,
    newest_first,
    present_terms,
    subject_terms,
)
from memmw.store.protocol import Postings
from memmw.text.analysis import query_terms
from tests.conftest import write

from ..conftest import make_memory

PEOPLE = """# Memory

## People
- Dmitri Volkov (Dima) — our CTO and co-founder. Based in Lisbon.
- Katharina Braun, the Berlin office lead. Everyone calls her Kat.
- 王芳 (Fang, goes by Fiona in English emails) — designer in the Shanghai studio.
- Ben Okafor — my partner. Firefighter.

## Projects
- Harbor: the data pipeline rebuild. The Berlin team calls it "Hafen".

## Decisions
- Standup is at 9:30 every weekday.
"""


def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    write(root / "MEMORY.md", PEOPLE)
    write(root / "USER.md", "# About me\n- Allergic to peanuts.\n")
    write(root / "memory" / "2026-08-26.md", "# 2026-08-26\n- Dima: we are not adding Kafka yet.\n")
    write(root / "memory" / "2026-09-02.md", "# 2026-09-02\n- Fiona sent the jade mockups.\n")
    write(root / "memory" / "2026-09-10.md", "# 2026-09-10\n- Hafen verliert Events, Platte voll.\n")
    write(root / "memory" / "2026-10-05.md", "# 2026-10-05\n- Standup moves to 10:15 from Monday.\n")
    write(root / "memory" / "2026-10-06.md", "# 2026-10-06\n- Lunch with Kat, she hires two engineers.\n")
    for day in range(10, 28):  # other notes, so a name is not simply in every file
        write(root / "memory" / f"2026-07-{day}.md", f"# 2026-07-{day}\n- Groceries and laundry {day}.\n")
    return root


def top(mem: Memory, query: str, k: int = 6) -> list[str]:
    return [h.path for h in mem.search(query, k)]


def test_a_role_a_nickname_or_another_script_finds_the_note_that_uses_another_name(
    tmp_path: Path,
) -> None:
    with make_memory(workspace=workspace(tmp_path), state_dir=tmp_path / "s", config=MemoryConfig(provider="none")) as mem:
        mem.sync()
        assert "memory/2026-08-26.md" in top(mem, "What did our CTO say about Kafka?")
        assert "memory/2026-08-26.md" in top(mem, "Что сказал Дмитрий Волков?")
        assert "memory/2026-09-02.md" in top(mem, "What did 王芳 send?")
        assert "memory/2026-09-10.md" in top(mem, "Why is Harbor losing events?")
        assert "memory/2026-10-06.md" in top(mem, "Who is Katharina hiring?")
        # The note is matched through the name, and its snippet shows the line.
        hit = next(h for h in mem.search("our CTO Kafka", 6) if h.path == "memory/2026-08-26.md")
        assert "Dima" in hit.snippet


def test_a_present_tense_question_shows_the_newer_note_before_the_curated_line(
    tmp_path: Path,
) -> None:
    with make_memory(workspace=workspace(tmp_path), state_dir=tmp_path / "s", config=MemoryConfig(provider="none")) as mem:
        mem.sync()
        for query in ("What time is standup now?", "Um wie viel Uhr ist das Standup jetzt?", "standup 现在"):
            paths = top(mem, query)
            assert paths.index("memory/2026-10-05.md") < paths.index("MEMORY.md"), (query, paths)
        # A question about the past keeps the ranking's order (both lines still found).
        paths = top(mem, "What time was standup before?")
        assert {"memory/2026-10-05.md", "MEMORY.md"} <= set(paths)


def test_present_and_past_cues() -> None:
    for query in ("Where does she live now?", "these days", "Wo wohnt sie zurzeit?", "他现在住哪里", "¿Dónde vive ahora?"):
        assert asks_present(query), query
    for query in ("Where did she live before?", "What was it originally?", "früher jetzt", "以前现在", "where does she live"):
        assert not asks_present(query), query
    assert subject_terms(query_terms("What time is standup these days?")) == ["time", "standup"]


def test_a_present_question_searches_the_words_for_now_instead_of_its_cue_words() -> None:
    subject, others = present_terms(query_terms("What time is standup these days?"))
    assert subject == ["time", "standup", "now"]  # "day" of "these days" is not searched
    assert {"jetzt", "现在", "current"} <= set(others) and "now" not in others
    assert all(len(t) > 1 for t in others)  # a CJK word's bigram, never one character
    assert len(others) == len(NOW_WORDS) - 1
    # Only cue words: nothing else to search for, the terms stay.
    assert present_terms(query_terms("what now?")) == (query_terms("what now?"), ())


def _changing_values(tmp_path: Path) -> Path:
    """The workspace, with a value restated months later in other words, and many notes
    on the same subject (the restatement ranks far below the old line) or saying "now"
    about something else."""
    root = workspace(tmp_path)
    write(
        root / "memory" / "2026-08-12.md",
        "# 2026-08-12\n- Harbor ingest reached 40k events/sec in the load test. Target is 60k.\n",
    )
    write(
        root / "memory" / "2026-11-17.md",
        "# 2026-11-17\n- Harbor hit 65k events/sec in the load test, above target.\n",
    )
    for day in range(1, 29):
        write(
            root / "memory" / f"2026-06-{day:02d}.md",
            f"# 2026-06-{day:02d}\n- Harbor review {day}, Harbor dashboards fine, Harbor ok.\n",
        )
    for day in range(1, 10):
        write(root / "memory" / f"2026-05-0{day}.md", f"# 2026-05-0{day}\n- Now the tea kettle works again {day}.\n")
    return root


def test_a_present_question_finds_the_newer_statement_of_the_top_hits_value(tmp_path: Path) -> None:
    with Memory(workspace=_changing_values(tmp_path), state_dir=tmp_path / "s", config=MemoryConfig(provider="none")) as mem:
        mem.sync()
        for query in ("How fast is Harbor ingest currently?", "What time is standup these days?"):
            text = "\n".join(h.snippet for h in mem.search(query, 6))
            new, old = ("65k", "40k") if "Harbor" in query else ("10:15", "9:30")
            assert new in text and (old not in text or text.index(new) < text.index(old)), (query, text)
            # A note that says "now" about something else is not a newer statement.
            assert "tea" not in text
        # A question about the past still finds the old value.
        past = "\n".join(h.snippet for h in mem.search("How fast was Harbor ingest in the first load test?", 6))
        assert "40k" in past


# Days of one year (a leap day of another year would make an impossible 2026 date, which
# names no day: such a note is undated).
DAYS = st.one_of(
    st.none(),
    st.dates(dt.date(2026, 1, 1), dt.date(2026, 12, 31)).map(lambda d: f"memory/{d}.md"),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(DAYS.map(lambda p: p or "MEMORY.md"), st.frozensets(st.integers(0, 5), max_size=3)),
        max_size=8,
    ),
    st.lists(st.floats(0, 5), min_size=6, max_size=6),
    st.frozensets(st.integers(0, 5)),
)
def test_newest_first_only_reorders_within_a_subject(
    items: list[tuple[str, frozenset[int]]], weights: list[float], anchors: frozenset[int]
) -> None:
    """Invariant: a permutation; a hit holding no query term keeps its place; hits that
    share a salient term (an anchor, or at least half the strongest weight) end up newest
    first, undated after dated."""
    tagged = [(i, path, groups) for i, (path, groups) in enumerate(items)]
    out = newest_first(tagged, path_of=lambda t: t[1], groups_of=lambda t: t[2], weight=lambda g: weights[g], anchors=anchors)
    assert sorted(out) == sorted(tagged)
    for place, item in enumerate(tagged):
        if not item[2]:
            assert out[place] == item
    present = set().union(*(g for _i, _p, g in tagged)) if tagged else set()
    strongest = max((weights[g] for g in present), default=0.0)
    salient = {g for g in present if g in anchors or 0 < strongest / 2 <= weights[g]}

    for a in range(len(out)):
        for b in range(a + 1, len(out)):
            first, later = out[a][1], out[b][1]
            if out[a][2] & out[b][2] & salient and later != "MEMORY.md":
                # Dated paths sort by date; an undated one never precedes a dated one.
                assert first != "MEMORY.md" and first >= later, out


POSTINGS = st.lists(st.tuples(st.integers(0, 50), st.integers(1, 9)), max_size=20).map(
    lambda pairs: Postings(
        np.array(sorted({r for r, _ in pairs}), dtype=np.int64),
        np.array([dict(pairs)[r] for r in sorted({r for r, _ in pairs})], dtype=np.int32),
        np.array([10 + r for r in sorted({r for r, _ in pairs})], dtype=np.int32),
    )
)


@settings(max_examples=200, deadline=None)
@given(st.lists(POSTINGS, max_size=5))
def test_a_synonym_group_is_one_posting_list(lists: list[Postings]) -> None:
    """Every chunk of any name once, rowid ascending, its counts added, its length kept."""
    merged = merge_postings(lists)
    expected: dict[int, int] = {}
    for p in lists:
        for r, tf in zip(p.rowids.tolist(), p.tf.tolist(), strict=True):
            expected[r] = expected.get(r, 0) + tf
    assert merged.rowids.tolist() == sorted(expected)
    assert merged.tf.tolist() == [expected[r] for r in sorted(expected)]
    assert merged.doc_len.tolist() == [10 + r for r in sorted(expected)]


def test_the_vector_leg_embeds_the_query_with_the_entitys_other_names(
    tmp_path: Path, recording_provider: Any
) -> None:
    """Both legs: the keyword leg searches the synonym group, the vector leg embeds the
    question followed by the other names (a note that uses one of them is near it)."""
    provider = recording_provider
    with make_memory(workspace=workspace(tmp_path), state_dir=tmp_path / "s", config=MemoryConfig(provider="recording")) as mem:
        mem.sync()
        mem.search("What did our CTO say about Kafka?")
        assert provider.queries[-1] == "What did our CTO say about Kafka? (Dmitri Volkov, Dima)"
        mem.search("groceries and laundry")
        assert provider.queries[-1] == "groceries and laundry"  # no entity named: unchanged



def test_names_and_current_values_on_postgres(pg_database: str, tmp_path: Path) -> None:
    """The same expansion over the PostgreSQL store (graph rows and generation through the protocol)."""
    from memmw.config import StoreConfig

    config = MemoryConfig(provider="none", store=StoreConfig(backend="postgres", dsn=pg_database))
    with make_memory(workspace=workspace(tmp_path), state_dir=tmp_path / "s", config=config) as mem:
        mem.sync()
        assert "memory/2026-08-26.md" in top(mem, "What did our CTO say about Kafka?")
        paths = top(mem, "What time is standup now?")
        assert paths.index("memory/2026-10-05.md") < paths.index("MEMORY.md")


def test_a_hybrid_search_reads_the_entity_names_once(
    tmp_path: Path, monkeypatch  # type: ignore[no-untyped-def]
) -> None:
    """The vector text and the keyword leg's synonym groups share one read of the names
    (on PostgreSQL each read costs round trips)."""
    from memmw.search.searcher import Searcher

    calls: list[int] = []
    real = Searcher.alias_index

    def counted(self: Searcher, store: object) -> object:
        calls.append(1)
        return real(self, store)  # type: ignore[arg-type]

    monkeypatch.setattr(Searcher, "alias_index", counted)
    with make_memory(workspace=workspace(tmp_path), state_dir=tmp_path / "s", config=MemoryConfig(provider="fake")) as mem:
        mem.sync()
        calls.clear()
        result = mem.search_result("What did our CTO say about Kafka?")
        assert result.mode == "hybrid" and calls == [1]
