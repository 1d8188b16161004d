"""The graph as read from the index: entities, facts, relations, triggers and activation."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

from memmw.notes.syntax import implicit_aliases, normalize_name
from memmw.store.protocol import GraphRows
from memmw.text.analysis import has_cjk, terms
from memmw.workspace.files import is_private_path

DAY_S = 86_400.0
#: Activation tiers (hot > 2.0, warm 1.0-2.0, cool < 1.0).
HOT, WARM = 2.0, 1.0
#: Retention by importance: >= 0.8 permanent, 0.4-0.8 kept 30 days, < 0.4 kept 7 days.
PERMANENT_IMPORTANCE, MEDIUM_IMPORTANCE = 0.8, 0.4
MEDIUM_DAYS, LOW_DAYS = 30, 7


def tier(activation: float) -> str:
    """``hot``, ``warm`` or ``cool``."""
    if activation > HOT:
        return "hot"
    return "warm" if activation >= WARM else "cool"


def importance_of(raw: int | None, origin: str) -> float:
    """0..1 importance: ``<!-- importance: N -->`` is N/10.

    Without one, an entry written in the fact syntax is durable by intent (0.8,
    permanent); the parser gives ``[category]`` observations 6 (kept 30 days). Untrusted
    origins never count as permanent.
    """
    if raw is not None:
        return max(1, min(10, int(raw))) / 10
    return 0.8 if origin in ("owner", "agent") else 0.6


def retained(importance: float, born: float | None, last_access: float | None, now: float) -> bool:
    """Whether an entry is still injected and ranked normally (the Markdown is never touched).

    Age counts from the later of the note's date and the last access; undated curated
    entries never expire.
    """
    if importance >= PERMANENT_IMPORTANCE or born is None:
        return True
    start = max(born, last_access or 0.0)
    days = (now - start) / DAY_S
    return days <= (MEDIUM_DAYS if importance >= MEDIUM_IMPORTANCE else LOW_DAYS)


def _date_ts(valid_from: str | None, observed_at: float | None) -> float | None:
    if valid_from:
        try:
            return dt.datetime.fromisoformat(valid_from).replace(tzinfo=dt.timezone.utc).timestamp()
        except ValueError:
            pass
    return observed_at


@dataclass(frozen=True, kw_only=True)
class Entity:
    """An entity with its names and where it is named."""

    key: str
    name: str
    kind: str
    aliases: tuple[str, ...]
    citations: tuple[str, ...]
    private: bool


@dataclass(frozen=True, kw_only=True)
class Fact:
    """One fact row with its provenance and state."""

    id: int
    entity_key: str
    entity: str
    key: str
    key_norm: str
    value: str
    path: str
    line: int
    valid_from: str | None
    retracted: bool
    importance_raw: int | None
    origin: str
    session_kind: str
    observed_at: float | None
    private: bool
    current: bool
    stable_key: str

    @property
    def citation(self) -> str:
        """``path#L<line>``."""
        return f"{self.path}#L{self.line}"

    @property
    def born(self) -> float | None:
        """When the value became known (its date, else the note's date)."""
        return _date_ts(self.valid_from, self.observed_at)

    @property
    def text(self) -> str:
        """``Entity: key = value``."""
        return f"{self.entity}: {self.key} = {self.value}"


@dataclass(frozen=True, kw_only=True)
class Relation:
    """One relation row with its provenance."""

    id: int
    subject_key: str
    subject: str
    predicate: str
    object_key: str
    object: str
    path: str
    line: int
    retracted: bool
    importance_raw: int | None
    origin: str
    observed_at: float | None
    private: bool
    stable_key: str

    @property
    def citation(self) -> str:
        """``path#L<line>``."""
        return f"{self.path}#L{self.line}"

    @property
    def text(self) -> str:
        """``Subject predicate Object``."""
        return f"{self.subject} {self.predicate.replace('_', ' ')} {self.object}"


@dataclass(frozen=True, kw_only=True)
class Trigger:
    """An entry recalled when one of its phrases appears in a message."""

    path: str
    line: int
    phrases: tuple[str, ...]
    text: str
    importance_raw: int | None
    origin: str
    private: bool

    @property
    def citation(self) -> str:
        """``path#L<line>``."""
        return f"{self.path}#L{self.line}"


@dataclass
class Graph:
    """A read-only snapshot of the graph tables plus activation (``stable_key -> value``)."""

    entities: dict[str, Entity] = field(default_factory=dict)
    facts: list[Fact] = field(default_factory=list)
    relations: list[Relation] = field(default_factory=list)
    triggers: list[Trigger] = field(default_factory=list)
    cooccurrences: dict[tuple[str, str], int] = field(default_factory=dict)
    activation: dict[str, float] = field(default_factory=dict)
    last_access: dict[str, float] = field(default_factory=dict)

    def activation_of(self, stable_key: str) -> float:
        """Activation of an entry (1.0, warm, when never seen)."""
        return self.activation.get(stable_key, 1.0)

    @cached_property
    def names(self) -> dict[str, str]:
        """Normalised name or alias -> entity key (names win over aliases)."""
        out: dict[str, str] = {}
        for key, entity in self.entities.items():
            for alias in entity.aliases:
                out.setdefault(normalize_name(alias), key)
        for key, entity in self.entities.items():
            out[normalize_name(entity.name)] = key
        full = {key: e.name for key, e in self.entities.items()}
        for first, key in implicit_aliases(full).items():
            out.setdefault(first, key)
        return out

    @cached_property
    def fuzzy_names(self) -> list[str]:
        """The normalised names a misspelling may match: all but one-word roles written in
        lower case (``designer`` would match "design"), which only match as written."""
        role_like = {
            normalize_name(alias)
            for entity in self.entities.values()
            for alias in entity.aliases
            if len(alias.split()) == 1 and alias[:1].islower()
        }
        names = {normalize_name(e.name) for e in self.entities.values()}
        return [n for n in self.names if n in names or n not in role_like]

    @cached_property
    def name_pattern(self) -> re.Pattern[str] | None:
        """One regex finding any name or alias in normalised text (word-bounded)."""
        names = sorted((n for n in self.names if n), key=len, reverse=True)
        if not names:
            return None
        parts = [re.escape(n) if has_cjk(n) else rf"(?<!\w){re.escape(n)}(?!\w)" for n in names]
        return re.compile("|".join(parts))

    @cached_property
    def fact_terms(self) -> list[frozenset[str]]:
        """Search terms of each fact (entity, key, value), parallel to ``facts``."""
        return [frozenset(terms(f"{f.entity} {f.key.replace('_', ' ')} {f.value}")) for f in self.facts]

    @cached_property
    def relation_terms(self) -> list[frozenset[str]]:
        """Search terms of each relation, parallel to ``relations``."""
        return [frozenset(terms(r.text)) for r in self.relations]

    @cached_property
    def term_postings(self) -> dict[str, tuple[list[int], list[int]]]:
        """Term -> (indices of facts, indices of relations) containing it."""
        out: dict[str, tuple[list[int], list[int]]] = {}
        for i, ts in enumerate(self.fact_terms):
            for t in ts:
                out.setdefault(t, ([], []))[0].append(i)
        for i, ts in enumerate(self.relation_terms):
            for t in ts:
                out.setdefault(t, ([], []))[1].append(i)
        return out

    def facts_of(self, entity_key: str) -> list[Fact]:
        """The entity's facts."""
        return self._facts_by_entity.get(entity_key, [])

    def relations_of(self, entity_key: str) -> list[Relation]:
        """Relations where the entity is subject or object."""
        return self._relations_by_entity.get(entity_key, [])

    def related(self, entity_key: str) -> list[tuple[str, int]]:
        """Entities named in the same chunks, most often first."""
        out = [
            (b if a == entity_key else a, n)
            for (a, b), n in self.cooccurrences.items()
            if entity_key in (a, b)
        ]
        return sorted(out, key=lambda item: -item[1])

    @cached_property
    def _facts_by_entity(self) -> dict[str, list[Fact]]:
        out: dict[str, list[Fact]] = {}
        for fact in self.facts:
            out.setdefault(fact.entity_key, []).append(fact)
        return out

    @cached_property
    def _relations_by_entity(self) -> dict[str, list[Relation]]:
        out: dict[str, list[Relation]] = {}
        for rel in self.relations:
            out.setdefault(rel.subject_key, []).append(rel)
            if rel.object_key != rel.subject_key:
                out.setdefault(rel.object_key, []).append(rel)
        return out


def load_graph(rows: GraphRows, visible: Callable[[str], bool] | None = None) -> Graph:
    """Build the graph from the rows a store returns (``StoreReader.graph_rows``).

    With ``visible`` (a session's privacy gate, path -> bool), rows of other files are
    left out: their names, aliases, citations, facts, relations and triggers.
    """
    if visible is not None:
        rows = _visible_rows(rows, visible)
    graph = Graph()
    names: dict[str, tuple[str, str, int, str]] = {}
    citations: dict[str, list[str]] = {}
    private: dict[str, bool] = {}
    for key, name, kind, path, line in rows.entities:
        names.setdefault(key, (name, kind, line, path))
        citations.setdefault(key, []).append(f"{path}#L{line}")
    aliases: dict[str, list[str]] = {}
    for key, alias, *_alias_path in rows.aliases:
        if alias not in aliases.setdefault(key, []):
            aliases[key].append(alias)
    for row in rows.facts:
        fact = Fact(
            id=row[0],
            entity_key=row[1],
            entity=row[2],
            key=row[3],
            key_norm=row[4],
            value=row[5],
            path=row[6],
            line=row[7],
            valid_from=row[8],
            retracted=bool(row[9]),
            importance_raw=row[10],
            origin=row[11],
            session_kind=row[12],
            observed_at=row[13],
            private=bool(row[14]),
            current=bool(row[15]),
            stable_key=row[16],
        )
        graph.facts.append(fact)
        names.setdefault(fact.entity_key, (fact.entity, "", fact.line, fact.path))
    for row in rows.relations:
        graph.relations.append(
            Relation(
                id=row[0],
                subject_key=row[1],
                subject=row[2],
                predicate=row[3],
                object_key=row[4],
                object=row[5],
                path=row[6],
                line=row[7],
                retracted=bool(row[8]),
                importance_raw=row[9],
                origin=row[10],
                observed_at=row[11],
                private=bool(row[12]),
                stable_key=row[13],
            )
        )
        names.setdefault(row[1], (row[2], "", row[7], row[6]))
    for path, line, phrases, text, importance, origin, priv in rows.triggers:
        graph.triggers.append(
            Trigger(
                path=path,
                line=line,
                phrases=tuple(p for p in phrases.split("; ") if p),
                text=text,
                importance_raw=importance,
                origin=origin,
                private=bool(priv),
            )
        )
    # An entity is private when every place naming it is a private file.
    for key, path in rows.entity_paths:
        private[key] = private.get(key, True) and is_private_path(path)
    for key, (name, kind, _line, _path) in names.items():
        graph.entities[key] = Entity(
            key=key,
            name=name,
            kind=kind,
            aliases=tuple(aliases.get(key, ())),
            citations=tuple(citations.get(key, ())),
            private=private.get(key, False),
        )
    for a, b, n in rows.cooccurrences:
        graph.cooccurrences[(a, b)] = int(n)
    for key, activation, last in rows.activation:
        graph.activation[key] = float(activation)
        if last is not None:
            graph.last_access[key] = float(last)
    return graph


def _visible_rows(rows: GraphRows, visible: Callable[[str], bool]) -> GraphRows:
    """The rows of the files ``visible`` accepts (each distinct path asked once)."""
    verdicts: dict[str, bool] = {}

    def ok(path: object) -> bool:
        key = str(path)
        if key not in verdicts:
            verdicts[key] = bool(visible(key))
        return verdicts[key]

    entities = [r for r in rows.entities if ok(r[3])]
    aliases = [r for r in rows.aliases if len(r) > 2 and ok(r[2])]
    facts = [r for r in rows.facts if ok(r[6])]
    relations = [r for r in rows.relations if ok(r[6])]
    keys = {r[0] for r in entities} | {r[1] for r in facts}
    keys |= {r[1] for r in relations} | {r[4] for r in relations}
    return dataclasses.replace(
        rows,
        entities=entities,
        aliases=aliases,
        facts=facts,
        relations=relations,
        triggers=[r for r in rows.triggers if ok(r[0])],
        entity_paths=[r for r in rows.entity_paths if ok(r[1])],
        cooccurrences=[r for r in rows.cooccurrences if r[0] in keys and r[1] in keys],
    )
