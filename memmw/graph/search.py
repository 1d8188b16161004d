"""Four-phase fact search and entity matching over a graph snapshot (no model calls)."""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memmw.config import FACT_MATCH_THRESHOLD, FACT_SEARCH_MAX_RESULTS
from memmw.graph.model import Fact, Graph, Relation, importance_of, retained, tier
from memmw.notes.syntax import normalize_name
from memmw.text.analysis import STOP_WORDS, normalize, query_terms, terms
from memmw.text.translit import to_latin

#: Query words -> the fact keys they ask about (the "intent" of phase 1).
INTENTS: dict[str, tuple[str, ...]] = {}
for _words, _keys in (
    (
        "where live lives living based reside resides located city town wohnt wohnen lebt "
        "vit habite vive mora 住 住在 哪里 どこ",
        "city town location home address lives_in based_in country residence wohnort lives",
    ),
    ("when birthday born birth geburtstag anniversaire cumpleaños aniversário 生日 誕生日",
     "birthday born birth_date date_of_birth geburtstag"),
    ("email mail e-mail", "email e_mail mail"),
    ("phone call number mobile telefon téléphone teléfono 电话", "phone mobile telephone number"),
    ("work works job employer company employed arbeitet travaille trabaja",
     "employer company works_at works_for job role title"),
    ("role title position job does responsible", "role title position job responsibility"),
    ("prefer prefers preference like likes favorite favourite drink eat diet allergic allergy",
     "preference preferences likes favorite favourite drink diet allergy allergies dislikes"),
    ("lead leads owner owns manages responsible", "lead leads owner manages manager"),
    ("timezone time zone", "timezone time_zone tz"),
    ("deadline due launch ship release", "deadline due launch release status"),
    ("status state progress", "status state phase"),
    ("stack database language framework tech", "stack database language framework tech"),
    ("partner wife husband spouse married", "partner spouse wife husband married_to"),
    ("budget cost price", "budget cost price"),
):
    for _w in _words.split():
        INTENTS.setdefault(_w, ())
        INTENTS[_w] = tuple(dict.fromkeys(INTENTS[_w] + tuple(_keys.split())))
#: Words asking for past values: superseded facts are included then.
HISTORY_WORDS = frozenset(
    "previous previously before used former formerly old earlier past history früher vorher "
    "avant antes".split()
)
#: Fuzzy matches must reach this (0..100); names in lower case need a closer match.
DEFAULT_THRESHOLD = FACT_MATCH_THRESHOLD
LOWERCASE_FUZZY_MIN = 85


def _ratio() -> Callable[[str, str], float]:
    """rapidfuzz's ``fuzz.ratio`` when installed (fast), else difflib's (same 0..100 scale)."""
    try:
        from rapidfuzz import fuzz

        return lambda a, b: float(fuzz.ratio(a, b))
    except ImportError:  # the [graph] extra is optional; difflib gives the same scale
        return lambda a, b: 100.0 * difflib.SequenceMatcher(None, a, b).ratio()


_RATIO: Callable[[str, str], float] | None = None


def similarity(a: str, b: str) -> float:
    """Similarity of two strings, 0..100 (Indel ratio)."""
    global _RATIO
    if _RATIO is None:
        _RATIO = _ratio()
    return _RATIO(a, b)


@dataclass(frozen=True, kw_only=True)
class EntityMatch:
    """An entity named (or nearly named) in a text."""

    key: str
    name: str
    score: float
    matched: str


def match_entities(
    text: str, graph: Graph, *, threshold: float = DEFAULT_THRESHOLD, fuzzy: bool = True
) -> list[EntityMatch]:
    """Entities named in ``text`` by name or alias: exact (100) or fuzzy (>= threshold).

    Fuzzy candidates are 1-3 word spans of the text that are not stop words; a span
    written in lower case must score at least 85, so ordinary words ("about") do not
    match names ("Abbott"). A name written in Cyrillic or Greek is also matched in Latin
    letters (``Дмитрий Волков`` finds ``Dmitri Volkov``).
    """
    found = _match_entities(text, graph, threshold=threshold, fuzzy=fuzzy)
    latin = to_latin(text)
    if latin != text:
        best = {m.key: m for m in found}
        for m in _match_entities(latin, graph, threshold=threshold, fuzzy=fuzzy):
            if m.key not in best or best[m.key].score < m.score:
                best[m.key] = m
        found = sorted(best.values(), key=lambda m: -m.score)
    return found


def _match_entities(
    text: str, graph: Graph, *, threshold: float, fuzzy: bool
) -> list[EntityMatch]:
    found: dict[str, EntityMatch] = {}
    norm = normalize_name(text)
    pattern = graph.name_pattern
    if pattern is not None:
        for m in pattern.finditer(norm):
            key = graph.names[m.group(0)]
            found.setdefault(
                key, EntityMatch(key=key, name=graph.entities[key].name, score=100.0, matched=m.group(0))
            )
    if not fuzzy or not graph.names:
        return sorted(found.values(), key=lambda m: -m.score)
    words = [w.strip(".,;:!?\"'()[]") for w in text.split()]
    spans: list[tuple[str, bool]] = []
    for size in (1, 2, 3):
        for i in range(len(words) - size + 1):
            chunk = [w for w in words[i : i + size] if w]
            if len(chunk) != size or any(normalize(w) in STOP_WORDS for w in chunk):
                continue
            span = " ".join(chunk)
            if len(span) < (3 if chunk[0][:1].isupper() else 5):
                continue  # short lower-case words ("use") are never fuzzy names
            spans.append((span, chunk[0][:1].isupper()))
    by_first: dict[str, list[str]] = {}
    for name in graph.fuzzy_names:
        by_first.setdefault(name[:1], []).append(name)
    for span, capitalised in spans:
        key_span = normalize_name(span)
        need = threshold if capitalised else max(threshold, LOWERCASE_FUZZY_MIN)
        best: tuple[float, str] | None = None
        for name in by_first.get(key_span[:1], ()):
            if abs(len(name) - len(key_span)) > max(len(name), len(key_span)) // 2:
                continue
            score = similarity(key_span, name)
            if score >= need and (best is None or score > best[0]):
                best = (score, name)
        if best is not None:
            ent = graph.names[best[1]]
            if ent not in found or found[ent].score < best[0]:
                found[ent] = EntityMatch(
                    key=ent, name=graph.entities[ent].name, score=best[0], matched=span
                )
    return sorted(found.values(), key=lambda m: -m.score)


@dataclass(frozen=True, kw_only=True)
class FactHit:
    """One result of the fact search.

    Attributes:
        kind: ``fact`` or ``relation``.
        phase: 1 entity+intent, 2 the entity's facts, 3 full-text facts, 4 full-text relations.
        text: ``Entity: key = value`` or ``Subject predicate Object``.
        citation: ``path#L<line>``.
        current: False for a superseded value (kept as history).
        retained: False when importance retention has expired it (ranked last, never injected).
    """

    kind: str
    phase: int
    score: float
    entity: str
    key: str
    value: str
    text: str
    path: str
    line: int
    citation: str
    current: bool
    valid_from: str | None
    origin: str
    private: bool
    activation: float
    tier: str
    importance: float
    retained: bool
    stable_key: str
    entity_key: str

    def to_payload(self, *, citations: bool = True) -> dict[str, Any]:
        """The tool payload item (camelCase keys)."""
        item: dict[str, Any] = {
            "kind": self.kind,
            "phase": self.phase,
            "score": round(self.score, 4),
            "entity": self.entity,
            "key": self.key,
            "value": self.value,
            "text": self.text,
            "current": self.current,
            "tier": self.tier,
            "activation": round(self.activation, 3),
            "importance": self.importance,
            "origin": self.origin,
        }
        if self.valid_from:
            item["validFrom"] = self.valid_from
        if not self.retained:
            item["expired"] = True
        if citations:
            item["citation"] = self.citation
            item["path"] = self.path
            item["line"] = self.line
        return item


def _recall_fields(
    stable_key: str,
    importance_raw: int | None,
    origin: str,
    born: float | None,
    graph: Graph,
    now: float,
) -> dict[str, Any]:
    """Activation, tier, importance and retention of one entry (facts and relations alike)."""
    activation = graph.activation_of(stable_key)
    importance = importance_of(importance_raw, origin)
    return {
        "activation": activation,
        "tier": tier(activation),
        "importance": importance,
        "retained": retained(importance, born, graph.last_access.get(stable_key), now),
    }


def _fact_hit(fact: Fact, phase: int, score: float, graph: Graph, now: float) -> FactHit:
    return FactHit(
        kind="fact",
        phase=phase,
        score=score,
        entity=fact.entity,
        key=fact.key,
        value=fact.value,
        text=fact.text,
        path=fact.path,
        line=fact.line,
        citation=fact.citation,
        current=fact.current,
        valid_from=fact.valid_from,
        origin=fact.origin,
        private=fact.private,
        **_recall_fields(
            fact.stable_key, fact.importance_raw, fact.origin, fact.born, graph, now
        ),
        stable_key=fact.stable_key,
        entity_key=fact.entity_key,
    )


def _relation_hit(rel: Relation, phase: int, score: float, graph: Graph, now: float) -> FactHit:
    return FactHit(
        kind="relation",
        phase=phase,
        score=score,
        entity=rel.subject,
        key=rel.predicate,
        value=rel.object,
        text=rel.text,
        path=rel.path,
        line=rel.line,
        citation=rel.citation,
        current=True,
        valid_from=None,
        origin=rel.origin,
        private=rel.private,
        **_recall_fields(
            rel.stable_key, rel.importance_raw, rel.origin, rel.observed_at, graph, now
        ),
        stable_key=rel.stable_key,
        entity_key=rel.subject_key,
    )


#: Activation moves an entry within its band, never across: relevance comes first.
_TIER_BONUS = {"hot": 0.05, "warm": 0.0, "cool": -0.05}
#: Score bands. The phases generate candidates; the order is by score, so a strong
#: full-text match (at least half the query's weight) outranks an entity's unrelated
#: facts, while the facts a question asks about (phase 1) always come first.
PHASE1 = 3.0
PHASE2_RELATED = 2.0
STRONG_TEXT = 0.5
STRONG_BONUS = 1.0
PHASE2_OTHER = 1.0


def _overlap(query: set[str], doc: frozenset[str] | set[str], idf: dict[str, float]) -> float:
    """idf-weighted share of the query's terms found in the document, 0..1."""
    if not query:
        return 0.0
    total = sum(idf.get(t, 1.0) for t in query)
    return sum(idf.get(t, 1.0) for t in query & doc) / total if total else 0.0


def search_facts(
    graph: Graph,
    query: str,
    *,
    max_results: int = FACT_SEARCH_MAX_RESULTS,
    threshold: float = DEFAULT_THRESHOLD,
    include_history: bool | None = None,
    include_private: bool = True,
    injectable_only: bool = False,
    now: float | None = None,
    matches: list[EntityMatch] | None = None,
) -> list[FactHit]:
    """Four-phase search: entity+intent, the entity's facts, full-text facts, full-text relations.

    Each phase only adds entries the earlier ones did not return. Results are ordered by
    score (the activation tier nudges it by 0.05): what the question asks about first, then the
    entity's facts that share words with it, strong full-text matches, the entity's
    other facts, then weak full-text matches. Retracted entries never appear;
    superseded values appear only with ``include_history`` (default: when the query asks
    about the past, "previous", "used to", ...); expired entries rank last.

    Args:
        graph: The snapshot.
        query: Free text.
        max_results: At most this many hits.
        threshold: Fuzzy entity-matching threshold (0..100).
        include_history: Also return superseded values.
        include_private: False drops entries from private files (group sessions).
        injectable_only: Only owner- or agent-written entries.
        now: Epoch seconds for retention (default: the clock).
        matches: Pre-computed entity matches of ``query``.
    """
    stamp = time.time() if now is None else now
    words = re.findall(r"\w+", normalize(query)) + terms(query)
    history = include_history if include_history is not None else bool(HISTORY_WORDS & set(words))
    qterms = set(query_terms(query))
    intent_keys = {k for w in words for k in INTENTS.get(w, ())}
    ents = matches if matches is not None else match_entities(query, graph, threshold=threshold)

    def allowed_fact(f: Fact) -> bool:
        if f.retracted or (not f.current and not history):
            return False
        if not include_private and f.private:
            return False
        return not injectable_only or f.origin in ("owner", "agent")

    def allowed_rel(r: Relation) -> bool:
        if r.retracted or (not include_private and r.private):
            return False
        return not injectable_only or r.origin in ("owner", "agent")

    hits: list[FactHit] = []
    seen: set[tuple[str, str, int, str]] = set()

    def add(hit: FactHit) -> None:
        ident = (hit.kind, hit.path, hit.line, hit.stable_key)
        if ident in seen:
            return
        seen.add(ident)
        hits.append(dataclasses.replace(hit, score=hit.score + _TIER_BONUS[hit.tier]))

    # Phases 1 and 2: the named entities' facts (those the question asks about first).
    for match in ents:
        strength = match.score / 100
        for fact in graph.facts_of(match.key):
            if not allowed_fact(fact):
                continue
            key_terms = set(terms(fact.key.replace("_", " ")))
            asked = fact.key_norm in intent_keys or bool(key_terms & (qterms | intent_keys))
            value_hit = _overlap(qterms, set(terms(fact.value)), {})
            current_bonus = 0.0 if fact.current else -0.05
            if asked:
                score = PHASE1 + strength + value_hit * 0.5 + current_bonus
                add(_fact_hit(fact, 1, score, graph, stamp))
            elif value_hit > 0:
                add(_fact_hit(fact, 2, PHASE2_RELATED + value_hit + current_bonus, graph, stamp))
            else:
                add(_fact_hit(fact, 2, PHASE2_OTHER + strength * 0.4 + current_bonus, graph, stamp))
        for rel in graph.relations_of(match.key):
            if not allowed_rel(rel):
                continue
            rel_terms = set(terms(rel.predicate.replace("_", " ")))
            asked = bool(rel_terms & (qterms | intent_keys))
            score = PHASE1 + strength if asked else PHASE2_OTHER + strength * 0.4
            add(_relation_hit(rel, 1 if asked else 2, score, graph, stamp))
    # Phases 3 and 4: full text over every fact, then every relation (through postings,
    # so only entries sharing a term with the query are looked at).
    if qterms:
        postings = graph.term_postings
        n = len(graph.facts) + len(graph.relations) or 1
        idf = {}
        fact_ids: set[int] = set()
        rel_ids: set[int] = set()
        for t in qterms:
            facts_with, rels_with = postings.get(t, ([], []))
            # Terms no entry has weigh most: a question about something else stays weak.
            idf[t] = math.log(1 + n / (1 + len(facts_with) + len(rels_with)))
            fact_ids.update(facts_with)
            rel_ids.update(rels_with)
        for i in sorted(fact_ids):
            fact = graph.facts[i]
            if allowed_fact(fact):
                s = _overlap(qterms, graph.fact_terms[i], idf)
                add(_fact_hit(fact, 3, s + (STRONG_BONUS if s >= STRONG_TEXT else 0.0), graph, stamp))
        for i in sorted(rel_ids):
            rel = graph.relations[i]
            if allowed_rel(rel):
                s = _overlap(qterms, graph.relation_terms[i], idf)
                add(_relation_hit(rel, 4, s + (STRONG_BONUS if s >= STRONG_TEXT else 0.0), graph, stamp))
    hits.sort(key=lambda h: (not h.retained, -h.score, h.phase, h.path, h.line))
    return hits[:max_results]
