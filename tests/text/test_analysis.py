"""Text primitives: UTF-16 lengths, CJK weights, search terms, stop words."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memmw.text.analysis import (
    STOP_WORDS,
    WIDE_RANGES,
    cut_utf16,
    has_cjk,
    is_wide,
    normalize,
    query_terms,
    terms,
    utf16_len,
    weight,
)
from memmw.text.tokens import estimate_tokens

EMOJI = "\U0001f600"  # outside the BMP: two UTF-16 units
EXT_B = "\U00020000"  # CJK extension B: wide and outside the BMP


def test_utf16_len_counts_surrogate_pairs() -> None:
    assert utf16_len("") == 0
    assert utf16_len("abc") == 3
    assert utf16_len("é漢") == 2
    assert utf16_len(f"a{EMOJI}b") == 4
    assert utf16_len(EXT_B * 3) == 6
    sample = f"x{EMOJI}漢{EXT_B}"
    assert utf16_len(sample) == len(sample.encode("utf-16-le")) // 2
    assert utf16_len("a\ud800b") == 3  # a lone surrogate is one unit


@given(st.text())
def test_utf16_len_counts_code_units(text: str) -> None:
    assert utf16_len(text) == sum(2 if ord(ch) > 0xFFFF else 1 for ch in text)


def test_cut_utf16_never_splits_a_pair() -> None:
    text = f"a{EMOJI}b"
    assert cut_utf16(text, 0) == ""
    assert cut_utf16(text, 1) == "a"
    assert cut_utf16(text, 2) == "a"  # the pair needs two units
    assert cut_utf16(text, 3) == f"a{EMOJI}"
    assert cut_utf16(text, 4) == text
    assert cut_utf16(text, 100) == text
    for limit in range(12):
        cut = cut_utf16(EMOJI * 5, limit)
        assert cut == EMOJI * (limit // 2)
        cut.encode("utf-8")  # no lone surrogate


def test_weight_counts_non_latin_as_four() -> None:
    assert weight("") == 0
    assert weight("hello") == 5
    assert weight("café Ω") == 6  # Latin-1 and Greek are not "wide"
    assert weight("漢字") == 8
    assert weight("ひらがな") == 16
    assert weight("한국어") == 12
    assert weight(EXT_B) == 4
    assert weight(EMOJI) == 1
    assert weight("a漢b") == 6
    assert is_wide("\u2e80") and is_wide("\u9fff") and is_wide("\uac00")
    assert not is_wide("\u2e7f") and not is_wide("a")


def test_has_cjk() -> None:
    assert has_cjk("東京") and has_cjk("カタカナ") and has_cjk("서울") and has_cjk("abc漢")
    assert not has_cjk("hello, world") and not has_cjk("Ωμέγα")


def test_normalize_folds_case_and_width() -> None:
    assert normalize("ＡＢＣ Straße") == "abc strasse"


def test_terms_split_words() -> None:
    assert terms("Hello, WORLD_1 café! 8080/tcp") == ["hello", "world_1", "café", "8080", "tcp"]
    assert terms("") == []
    assert terms("\"'()*:-") == []
    assert terms("ＴＯＫＹＯ") == ["tokyo"]


def test_terms_of_cjk_runs_are_unigrams_and_bigrams() -> None:
    assert terms("北京烤鸭") == ["北", "京", "烤", "鸭", "北京", "京烤", "烤鸭"]
    assert terms("ミケ") == ["ミ", "ケ", "ミケ"]
    assert terms("서울에") == ["서", "울", "에", "서울", "울에"]
    assert terms("猫") == ["猫"]
    # Latin and CJK in one word run are separated.
    assert terms("Tokyo東京") == ["tokyo", "東", "京", "東京"]
    assert terms("東京2026年") == ["東", "京", "東京", "2026", "年"]


def test_query_terms_drop_stop_words_and_repeats() -> None:
    assert query_terms("What is the gateway port and the gateway host?") == [
        "gateway",
        "port",
        "host",
    ]
    # Only stop words: search for them anyway rather than for nothing.
    assert query_terms("what is it") == ["what", "is", "it"]
    assert query_terms("x y gateway") == ["gateway"]  # one-letter Latin terms dropped
    assert query_terms("我的猫") == ["猫", "我的", "的猫"]
    assert query_terms("") == []
    assert query_terms('" NEAR( * - : ((') == ["near"]


@pytest.mark.parametrize("word", ["the", "and", "的", "は", "이"])
def test_stop_words_cover_several_languages(word: str) -> None:
    assert word in STOP_WORDS


def test_terms_use_the_snowball_english_stemmer() -> None:
    assert terms("painted painting paints paint") == ["paint"] * 4
    assert terms("generously running allergies allergy") == [
        "generous", "run", "allergi", "allergi",
    ]
    # Short words, identifiers and non-ASCII words keep their exact form.
    assert terms("gas api_keys café résumés") == ["gas", "api_keys", "café", "résumés"]


@pytest.mark.parametrize(
    "question", ["When does Mila start at daycare?", "where were these dogs before having them"]
)
def test_query_stop_words_are_dropped_before_stemming(question: str) -> None:
    # "does" would stem to "doe" and "before" to "befor": neither may become a term.
    kept = query_terms(question)
    assert not {"doe", "wher", "befor", "have", "these", "where"} & set(kept)


def test_when_does_mila_start_keeps_only_content_terms() -> None:
    assert query_terms("When does Mila start at daycare?") == ["mila", "start", "daycar"]


def test_the_c_and_pure_python_snowball_stemmers_agree() -> None:
    # Both are installed by the test extra: a missing one is a broken setup, not a skip.
    import Stemmer
    from snowballstemmer.english_stemmer import EnglishStemmer

    c_stemmer = Stemmer.Stemmer("english")
    english = EnglishStemmer()
    words = "allergies generously painting daycare running happiness organizational".split()
    assert [c_stemmer.stemWord(w) for w in words] == [english.stemWord(w) for w in words]


@given(st.characters())
def test_one_cjk_table_for_weights_terms_and_token_estimates(ch: str) -> None:
    # The chunk weight, the CJK term splitting and the token estimate agree on every
    # character (they used three different tables).
    assert has_cjk(ch) == is_wide(ch) == (weight(ch) == 4)
    assert estimate_tokens(ch) == 1


def test_wide_ranges_are_the_references() -> None:
    assert WIDE_RANGES == (
        (0x2E80, 0x9FFF),
        (0xA000, 0xA4FF),
        (0xAC00, 0xD7AF),
        (0xF900, 0xFAFF),
        (0x20000, 0x2FA1F),
    )
    yi = "\ua000\ua001\ua002"
    assert terms(yi) == ["\ua000", "\ua001", "\ua002", "\ua000\ua001", "\ua001\ua002"]
    assert estimate_tokens(yi) == 3
    assert estimate_tokens("\uff21\uff22\uff23\uff24") == 1  # full-width Latin: 4 chars a token


def test_cut_utf16_from_the_end_never_splits_a_pair() -> None:
    text = f"a{EMOJI}b"
    assert cut_utf16(text, 1, from_end=True) == "b"
    assert cut_utf16(text, 2, from_end=True) == "b"  # the pair needs two units
    assert cut_utf16(text, 3, from_end=True) == f"{EMOJI}b"
    assert cut_utf16(text, 4, from_end=True) == text
    assert cut_utf16(text, 0, from_end=True) == ""


# -- fast paths used by indexing and MMR: equal to the definitions they shortcut ----------

import re  # noqa: E402
from collections import Counter  # noqa: E402

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from memmw.text.analysis import (  # noqa: E402
    split_words,
    term_frequencies,
)

_TEXT = st.text(
    st.sampled_from(list("ab Zé’-_ 1\n中文猫ミケ한국𠀀ꀀ\u3000")) | st.characters(), max_size=60
)


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_fast_term_paths_equal_their_definitions(text: str) -> None:
    assert term_frequencies(text) == dict(Counter(terms(text)))
    # ASCII text takes a translate + split path: the same words as \w+ on normalized text.
    assert split_words(text) == (re.findall(r"\w+", normalize(text)), has_cjk(normalize(text)))
    assert weight(text) == len(text) + 3 * sum(1 for ch in text if is_wide(ch))
