"""Graph rows derived from parsed notes, store-neutral: keys, provenance, supersession, co-occurrence.

Every store writes the same rows; only how it keeps them differs (``memmw.store.sqlite.graph``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memmw.config import Source
from memmw.notes.provenance import provenance_for
from memmw.notes.syntax import ParsedNote, implicit_aliases, normalize_key, normalize_name
from memmw.store.terms import term_hash
from memmw.text.analysis import terms

#: Activation of an entry the first time sync sees it (the bottom of "warm").
INITIAL_ACTIVATION = 1.0
#: Activation kept per day without access (the daily decay step).
DECAY_PER_DAY = 0.9
DAY_S = 86_400.0
#: Shortest name matched in chunk text for co-occurrences (shorter ones are too noisy).
MIN_COOCCURRENCE_NAME = 3


def stable_key(*parts: str) -> str:
    """A key that survives rebuilds: sha1 of the normalised parts."""
    return hashlib.sha1("\x1f".join(parts).encode("utf-8")).hexdigest()


def fact_stable_key(entity_key: str, key_norm: str, value: str) -> str:
    """Stable key of one fact value."""
    return "f:" + stable_key(entity_key, key_norm, normalize_name(value))


def relation_stable_key(subject_key: str, predicate: str, object_key: str) -> str:
    """Stable key of one relation."""
    return "r:" + stable_key(subject_key, normalize_key(predicate), object_key)


def entity_stable_key(entity_key: str) -> str:
    """Stable key of an entity."""
    return "e:" + entity_key


@dataclass(frozen=True)
class NoteRows:
    """The graph rows of one note, without the store's own file reference.

    Attributes:
        entities: ``(path, line, entity_key, name, kind)``.
        aliases: ``(path, line, entity_key, alias, alias_key)``.
        facts: ``(path, line, entity_key, entity, key, key_norm, value, valid_from,
            retracted, importance, origin, session_kind, observed_at, private,
            supersedes_key, stable_key)``.
        relations: ``(path, line, subject_key, subject, predicate, object_key, object,
            retracted, importance, origin, session_kind, observed_at, private, stable_key)``.
        triggers: ``(path, line, phrases joined by "; ", text, importance, origin, private)``.
    """

    entities: list[tuple[Any, ...]] = field(default_factory=list)
    aliases: list[tuple[Any, ...]] = field(default_factory=list)
    facts: list[tuple[Any, ...]] = field(default_factory=list)
    relations: list[tuple[Any, ...]] = field(default_factory=list)
    triggers: list[tuple[Any, ...]] = field(default_factory=list)


def note_rows(path: str, source: str, note: ParsedNote) -> NoteRows:
    """The rows a store keeps for ``note`` (a file of ``source`` at ``path``)."""
    prov = provenance_for(path, source)
    return NoteRows(
        entities=[(path, e.line, e.key, e.name, e.kind) for e in note.entities],
        aliases=[
            (path, a.line, normalize_name(a.entity), a.alias, normalize_name(a.alias))
            for a in note.aliases
        ],
        facts=[
            (
                path,
                f.line,
                f.entity_key,
                f.entity,
                f.key,
                f.key_norm,
                f.value,
                f.valid_from,
                int(f.retracted),
                f.importance,
                prov.origin,
                prov.session_kind,
                prov.observed_at,
                int(prov.private),
                # Observations accumulate; other keys hold one current value.
                f"{f.entity_key}\x1f{f.key_norm}"
                + (f"\x1f{normalize_name(f.value)}" if f.observation else ""),
                fact_stable_key(f.entity_key, f.key_norm, f.value),
            )
            for f in note.facts
        ],
        relations=[
            (
                path,
                r.line,
                normalize_name(r.subject),
                r.subject,
                r.predicate,
                normalize_name(r.object),
                r.object,
                int(r.retracted),
                r.importance,
                prov.origin,
                prov.session_kind,
                prov.observed_at,
                int(prov.private),
                relation_stable_key(normalize_name(r.subject), r.predicate, normalize_name(r.object)),
            )
            for r in note.relations
        ],
        triggers=[
            (path, t.line, "; ".join(t.phrases), t.text, t.importance, prov.origin, int(prov.private))
            for t in note.triggers
        ],
    )


def _order_date(valid_from: str | None, observed_at: float | None) -> str:
    """When a value became true, as sortable text ("" for undated evergreen notes)."""
    if valid_from:
        return valid_from
    if observed_at is not None:
        return dt.datetime.fromtimestamp(observed_at, dt.timezone.utc).date().isoformat()
    return ""


def current_fact_ids(
    facts: Iterable[tuple[int, str, str | None, float | None, str, int, int]],
) -> list[int]:
    """Ids of the current value of every entity+key: the newest dated one wins.

    ``facts`` are ``(id, supersedes_key, valid_from, observed_at, path, line, retracted)``.
    Undated values (curated files) are older than any dated one; among equals the later
    file and line win. Retracted values are never current.
    """
    groups: dict[str, list[tuple[str, str, int, int]]] = {}
    for fid, key, valid_from, observed, path, line, retracted in facts:
        if retracted:
            continue
        groups.setdefault(key, []).append((_order_date(valid_from, observed), path, line, fid))
    return [max(rows)[3] for rows in groups.values()]


@dataclass(frozen=True)
class CooccurrenceMatcher:
    """Finds which entities a chunk names together (names and aliases).

    Attributes:
        signature: Changes whenever the set of names does.
        usable: The names it matches (long enough), each with its entity key.
    """

    signature: str
    names: Mapping[str, str]
    pattern: re.Pattern[str] | None
    usable: Mapping[str, str]

    def pairs(self, text: str) -> list[tuple[str, str]]:
        """``(a_key, b_key)`` pairs (a < b) of the entities ``text`` names."""
        if self.pattern is None:
            return []
        found = sorted({self.names[m] for m in self.pattern.findall(normalize_name(text))})
        return [(a, b) for i, a in enumerate(found) for b in found[i + 1 :]]


def cooccurrence_matcher(
    entity_names: Iterable[tuple[str, str]], alias_keys: Iterable[tuple[str, str]]
) -> CooccurrenceMatcher:
    """The matcher for ``(entity_key, name)`` rows and ``(entity_key, alias_key)`` rows."""
    entity_names = list(entity_names)
    names: dict[str, str] = {}
    for key, name in entity_names:
        names.setdefault(normalize_name(name), key)
    for key, alias in alias_keys:
        names.setdefault(alias, key)
    display = dict(entity_names)
    for first, key in implicit_aliases(display).items():
        names.setdefault(first, key)
    usable = sorted((n for n in names if len(n) >= MIN_COOCCURRENCE_NAME), key=len, reverse=True)
    signature = stable_key(*(f"{n}={names[n]}" for n in sorted(usable)))
    pattern = (
        re.compile(r"(?<!\w)(" + "|".join(re.escape(n) for n in usable) + r")(?!\w)")
        if usable
        else None
    )
    return CooccurrenceMatcher(
        signature=signature, names=names, pattern=pattern, usable={n: names[n] for n in usable}
    )


#: The meta key of the names (and their keys) the co-occurrences were last found with.
COOC_NAMES_KEY = "graph_cooc_names"


def cooc_names_value(matcher: CooccurrenceMatcher) -> str:
    """``COOC_NAMES_KEY``'s value for ``matcher``: its signature and names."""
    return json.dumps(
        {"signature": matcher.signature, "names": sorted(matcher.usable.items())},
        ensure_ascii=False,
        separators=(",", ":"),
    )


def changed_names(
    previous: str | None, signature: str | None, matcher: CooccurrenceMatcher
) -> list[str] | None:
    """The names whose chunks may pair entities otherwise than when ``previous`` (a
    ``COOC_NAMES_KEY`` value) was stored: added, removed, or naming another entity. None
    when that is not known (every chunk is scanned again): no value, or one stored with
    another signature than ``signature`` (``graph_names``, which software that does not
    keep the names may have written since).

    A chunk whose text names none of them pairs the same entities as before: the matcher
    takes, at each place of the text, the longest name found there, and a name absent
    from the text is tried nowhere, under either set of names.
    """
    if previous is None or signature is None:
        return None
    try:
        stored = json.loads(previous)
        if stored["signature"] != signature:
            return None
        before = {str(n): str(k) for n, k in stored["names"]}
    except (ValueError, TypeError, KeyError):
        return None
    now = matcher.usable
    return sorted(n for n in before.keys() | now.keys() if before.get(n) != now.get(n))


def chunks_to_rescan(
    previous: str | None,
    signature: str | None,
    matcher: CooccurrenceMatcher,
    postings: Callable[[list[int], Sequence[str]], Mapping[int, Any]] | None,
    underscored: Callable[[], Iterable[int]],
) -> set[int] | None:
    """The chunks to scan again for ``matcher`` (None: every chunk): those that may name
    a name changed since ``previous`` was stored (``changed_names``, ``chunks_naming``
    over the memory source's ``postings(hashes, sources)``)."""
    changed = changed_names(previous, signature, matcher)
    if changed is None or postings is None:
        return None
    return chunks_naming(
        changed, lambda hashes: postings(hashes, (Source.MEMORY,)), underscored
    )


def chunks_naming(
    names: Iterable[str],
    postings: Callable[[list[int]], Mapping[int, Any]],
    underscored: Callable[[], Iterable[int]],
) -> set[int] | None:
    """Rowids of every chunk whose text may name one of ``names`` (a superset), from the
    keyword index: the chunks holding all of a name's terms, and the chunks with a ``_``
    (the name matcher reads ``_`` as a space, the keyword index as a letter, so ``x_name``
    holds no term of ``name``). None when a name has no term (scan every chunk).

    ``postings(hashes)``: the live postings of the memory source by term hash (terms with
    none absent); ``underscored()``: rowids of the memory chunks whose text has a ``_``.
    """
    out: set[int] = set()
    for name in names:
        hashes = list(dict.fromkeys(term_hash(t) for t in terms(name)))
        if not hashes:
            return None
        found = postings(hashes)
        if len(found) < len(hashes):
            continue  # a term no chunk holds: no chunk names it
        lists = sorted((found[h].rowids for h in hashes), key=len)
        rows = lists[0]
        for other in lists[1:]:
            rows = np.intersect1d(rows, other, assume_unique=True)
        out.update(int(r) for r in rows.tolist())
    out.update(int(r) for r in underscored())
    return out
