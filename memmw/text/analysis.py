"""Text primitives: UTF-16 lengths, CJK weights, search terms and stop words."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable
from functools import lru_cache
from itertools import chain
from typing import Any, Generic, TypeVar

#: The one CJK table: the code point ranges the reference weighs as "non-Latin" (about
#: one token per character): CJK radicals, punctuation, kana, bopomofo, compatibility
#: jamo and ideographs; Yi; Hangul syllables; compatibility ideographs; the supplementary
#: ideograph planes. Chunk weights, token estimates and CJK term splitting all use it.
WIDE_RANGES: tuple[tuple[int, int], ...] = (
    (0x2E80, 0x9FFF),
    (0xA000, 0xA4FF),
    (0xAC00, 0xD7AF),
    (0xF900, 0xFAFF),
    (0x20000, 0x2FA1F),
)
_WIDE_CLASS = "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in WIDE_RANGES)
_WORD = re.compile(r"\w+")
_WIDE = re.compile(f"[{_WIDE_CLASS}]")
# Letters of these scripts (inside a \w run) are written without spaces between words,
# so they are indexed as character unigrams + bigrams.
_CJK_RUN = re.compile(f"[{_WIDE_CLASS}]+")
_HAS_CJK = re.compile(f"[{_WIDE_CLASS}]")


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units (how the original counts characters)."""
    if text.isascii():
        return len(text)
    # surrogatepass: a lone surrogate in the string counts as the one unit it is.
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def cut_utf16(text: str, limit: int, *, from_end: bool = False) -> str:
    """The longest prefix (or suffix) of ``text`` within ``limit`` UTF-16 units.

    Never splits a surrogate pair.
    """
    if limit <= 0:
        return ""
    if len(text) * 2 <= limit or utf16_len(text) <= limit:
        return text
    used = 0
    if from_end:
        for i in range(len(text) - 1, -1, -1):
            used += 2 if ord(text[i]) > 0xFFFF else 1
            if used > limit:
                return text[i + 1 :]
        return text
    for i, ch in enumerate(text):
        used += 2 if ord(ch) > 0xFFFF else 1
        if used > limit:
            return text[:i]
    return text


def is_wide(ch: str) -> bool:
    """True for characters the chunker weighs as non-Latin (CJK, Hangul, Yi, ...)."""
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in WIDE_RANGES)


def weight(text: str) -> int:
    """Chunking weight: code points plus 3 for each non-Latin character (~1 token each)."""
    if text.isascii():
        return len(text)
    return len(text) + 3 * len(_WIDE.findall(text))


def has_cjk(text: str) -> bool:
    """True if ``text`` contains a character of :data:`WIDE_RANGES` (CJK, Hangul, Yi)."""
    return _HAS_CJK.search(text) is not None


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    # PyStemmer (the Snowball C code; 2 ms to import) on CPython, else snowballstemmer's
    # pure Python port of the same algorithm (identical stems; 30 ms to import, as it
    # loads every language). Imported on first use so ``import memmw`` needs only numpy.
    try:
        import Stemmer

        return Stemmer.Stemmer("english")
    except ImportError:
        from snowballstemmer.english_stemmer import EnglishStemmer

        return EnglishStemmer()


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    """The English Snowball (Porter2) stem of a case-folded word.

    Only ASCII letter words longer than three letters change, so identifiers, numbers
    and non-English words keep their exact form. "painted", "painting", "paints" and
    "paint" share one term.
    """
    if len(word) <= 3 or not word.isascii() or not word.isalpha():
        return word
    stemmed: str = _stemmer().stemWord(word)
    return stemmed


@lru_cache(maxsize=200_000)
def _word_terms(word: str) -> tuple[str, ...]:
    """Terms of one ``\\w+`` run: its stem, or CJK runs split into unigrams and bigrams."""
    if not _HAS_CJK.search(word):
        return (stem(word),)
    out: list[str] = []
    pos = 0
    for m in _CJK_RUN.finditer(word):
        if m.start() > pos:
            out.append(word[pos : m.start()])
        run = m.group()
        out.extend(run)
        out.extend(run[i : i + 2] for i in range(len(run) - 1))
        pos = m.end()
    if pos < len(word):
        out.append(word[pos:])
    return tuple(out)


def normalize(text: str) -> str:
    """NFKC and case folding, so full-width and case variants match."""
    return unicodedata.normalize("NFKC", text).casefold()


def terms(text: str) -> list[str]:
    """Search terms of ``text``, in order, with repeats.

    Words are runs of letters, digits and ``_`` (NFKC, case-folded). Runs of CJK,
    kana or Hangul become character unigrams and bigrams, so Chinese, Japanese and
    Korean text is searchable without a word segmenter.
    """
    return list(chain.from_iterable(map(_word_terms, _WORD.findall(normalize(text)))))


STOP_WORDS = frozenset(
    """
    a about above after again against all am an and any are aren't as at be because been
    before being below between both but by can could did do does doing don't down during
    each few for from further had has have having he her here hers herself him himself his
    how i if in into is it its itself just let's me more most my myself no nor not of off on
    once only or other our ours ourselves out over own same she should so some such than
    that the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves s t d ll m re ve also get got did does done
    ever much many may might must shall us one ones thing things like really yes yeah
    el la los las un una unos unas y o de del en por para con que se es le les des et du au
    o os as um uma e do da dos das em no na nos nas der die das und ist ein eine zu den
    ich du er sie es wir ihr mich mir dich dir uns euch sich wie wo wer wann warum welche
    welcher welches im am um auf aus bei nach von vor für über ohne durch bis auch nur
    sehr nicht kein keine habe haben bist sind waren wird werden kann können soll muss
    dem des einen einem einer je il elle nous vous ils elles une est sont qui quoi où quand
    pourquoi dans sur avec pas ne cette ces mon mes ton ta tes sa ses aux yo tú él ella
    qué quién dónde cuándo cómo está están su sus mi mis tu tus
    的 了 是 在 和 有 我 你 他 她 它 们 这 那 吗 呢 吧 啊 也 就 都 而 及 与 什 么 什么 怎 怎么 哪 哪里 谁
    の に は を が で と た し て も な い ます です
    이 그 저 은 는 을 를 에 의 와 과 도 로 으로
    """.split()
)


def query_terms(text: str) -> list[str]:
    """Unique search terms of a query with stop words dropped.

    Stop words are recognised on the words as written (before stemming), so "does" or
    "where" never turn into terms such as "doe". Falls back to all unique terms when the
    query has only stop words, so "what is it" still searches for something.
    """
    kept: list[str] = []
    every: list[str] = []
    for word in _WORD.findall(normalize(text)):
        word_terms = _word_terms(word)
        every.extend(word_terms)
        if word in STOP_WORDS:
            continue
        kept.extend(t for t in word_terms if t not in STOP_WORDS and not (t.isascii() and len(t) < 2))
    return list(dict.fromkeys(kept or every))


# ASCII text: case-fold and turn every byte that is not a word character (or a newline)
# into a space in one C pass, so ``split`` finds the same words as ``\w+`` on
# NFKC-case-folded text (for ASCII, NFKC changes nothing and case folding is ``lower``)
# at a fraction of the cost.
_ASCII_FOLD = bytes(
    ch + 32 if 65 <= ch <= 90 else ch if chr(ch).isalnum() or ch in (10, 95) else 32
    for ch in range(128)
) + b" " * 128


def fold_ascii(text: str) -> str:
    """ASCII ``text`` lowercased, each character that is not a letter, digit, ``_`` or
    newline made a space: its ``split()`` gives the words :func:`terms` finds, and its
    lines stay where they were."""
    return text.encode("ascii").translate(_ASCII_FOLD).decode("ascii")


def split_words(text: str) -> tuple[list[str], bool]:
    """The words of ``text`` in order, and whether it has CJK.

    Words are what :func:`terms` splits (``\\w+`` runs of NFKC case-folded text). Without
    CJK, each word is exactly one term (its :func:`stem`), so callers can map words
    through a cache instead of deriving terms word by word.
    """
    if text.isascii():
        return fold_ascii(text).split(), False
    norm = normalize(text)
    return _WORD.findall(norm), _HAS_CJK.search(norm) is not None


_V = TypeVar("_V")


class WordMemo(dict[str, _V], Generic[_V]):
    """``fn(word)`` of each word, computed on first use and kept.

    A corpus has far fewer distinct words than word occurrences, so mapping words through
    a memo (``map(memo.__getitem__, words)``, a dict lookup in C per word) takes the
    per-word Python work out of hot loops; twice as fast as an ``lru_cache`` hit here.
    Bounded: cleared when it holds ``limit`` entries (hostile input of ever new words).
    """

    def __init__(self, fn: Callable[[str], _V], limit: int) -> None:
        super().__init__()
        self._fn = fn
        self._limit = limit

    def __missing__(self, word: str) -> _V:
        if len(self) >= self._limit:
            self.clear()
        value = self[word] = self._fn(word)
        return value


def term_frequencies(text: str) -> dict[str, int]:
    """``Counter(terms(text))``, computed once per distinct word (indexing hot path)."""
    words, cjk = split_words(text)
    out: dict[str, int] = {}
    for word, n in Counter(words).items():
        for term in _word_terms(word) if cjk else (stem(word),):
            out[term] = out.get(term, 0) + n
    return out
