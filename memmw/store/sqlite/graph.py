"""Derived knowledge-graph tables: written by sync from the notes, never edited by hand."""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import math
import re
import sqlite3
import time
from collections.abc import Iterable

from memmw.graph.provenance import provenance_for
from memmw.graph.syntax import (
    ParsedNote,
    implicit_aliases,
    normalize_key,
    normalize_name,
    parse_note,
)

log = logging.getLogger(__name__)

#: Bump when the parser changes what it extracts: indexes then re-derive the graph.
GRAPH_VERSION = "4"
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


def write_note(
    conn: sqlite3.Connection,
    *,
    path: str,
    source: str,
    text: str,
    parsed: ParsedNote | None = None,
    fresh: bool = False,
) -> None:
    """Replace the graph rows of one indexed file (inside the caller's transaction).

    ``fresh``: the file row was just written, so it has no graph rows to delete.
    """
    row = conn.execute("SELECT id FROM files WHERE path=? AND source=?", (path, source)).fetchone()
    if row is None:
        return
    file_id = int(row[0])
    if not fresh:
        for table in ("graph_entities", "graph_aliases", "graph_facts", "graph_relations", "graph_triggers"):
            conn.execute(f"DELETE FROM {table} WHERE file_id=?", (file_id,))
    if source != "memory":
        return
    note = parsed if parsed is not None else parse_note(text, path)
    prov = provenance_for(path, source)
    conn.executemany(
        "INSERT INTO graph_entities(file_id, path, line, entity_key, name, kind) VALUES (?,?,?,?,?,?)",
        [(file_id, path, e.line, e.key, e.name, e.kind) for e in note.entities],
    )
    conn.executemany(
        "INSERT INTO graph_aliases(file_id, path, line, entity_key, alias, alias_key)"
        " VALUES (?,?,?,?,?,?)",
        [
            (file_id, path, a.line, normalize_name(a.entity), a.alias, normalize_name(a.alias))
            for a in note.aliases
        ],
    )
    conn.executemany(
        "INSERT INTO graph_facts(file_id, path, line, entity_key, entity, key, key_norm, value,"
        " valid_from, retracted, importance, origin, session_kind, observed_at, private,"
        " supersedes_key, stable_key) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        [
            (
                file_id,
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
    )
    conn.executemany(
        "INSERT INTO graph_relations(file_id, path, line, subject_key, subject, predicate,"
        " object_key, object, retracted, importance, origin, session_kind, observed_at, private,"
        " stable_key) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        [
            (
                file_id,
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
    )
    conn.executemany(
        "INSERT INTO graph_triggers(file_id, path, line, phrases, text, importance, origin, private)"
        " VALUES (?,?,?,?,?,?,?,?)",
        [
            (file_id, path, t.line, "; ".join(t.phrases), t.text, t.importance, prov.origin, int(prov.private))
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


def refresh_supersession(conn: sqlite3.Connection) -> int:
    """Mark the current value of every entity+key: the newest dated one wins.

    Undated values (curated files) are older than any dated one; among equals the later
    file and line win. Retracted values are never current. Returns how many are current.
    """
    groups: dict[str, list[tuple[str, str, int, int]]] = {}
    for fid, key, valid_from, observed, path, line, retracted in conn.execute(
        "SELECT id, supersedes_key, valid_from, observed_at, path, line, retracted FROM graph_facts"
    ):
        if retracted:
            continue
        groups.setdefault(key, []).append((_order_date(valid_from, observed), path, line, fid))
    current = [max(rows)[3] for rows in groups.values()]
    conn.execute("UPDATE graph_facts SET current=0")
    for start in range(0, len(current), 500):
        part = current[start : start + 500]
        conn.execute(
            f"UPDATE graph_facts SET current=1 WHERE id IN ({','.join('?' * len(part))})", part
        )
    return len(current)


def refresh_cooccurrences(conn: sqlite3.Connection) -> int:
    """Update which entities are named together in a chunk (names and aliases).

    When the set of names is unchanged only chunks added since the last run are scanned
    (chunk rowids only grow, and a chunk's rows go with it); otherwise all are.
    Returns how many chunks were scanned.
    """
    names: dict[str, str] = {}
    for key, name in conn.execute("SELECT entity_key, name FROM graph_entities"):
        names.setdefault(normalize_name(name), key)
    for key, alias in conn.execute("SELECT entity_key, alias_key FROM graph_aliases"):
        names.setdefault(alias, key)
    display = {key: name for key, name in conn.execute("SELECT entity_key, name FROM graph_entities")}
    for first, key in implicit_aliases(display).items():
        names.setdefault(first, key)
    usable = sorted((n for n in names if len(n) >= MIN_COOCCURRENCE_NAME), key=len, reverse=True)
    signature = stable_key(*(f"{n}={names[n]}" for n in sorted(usable)))
    meta = dict(
        conn.execute("SELECT key, value FROM meta WHERE key IN ('graph_names', 'graph_cooc_rowid')")
    )
    after = int(meta.get("graph_cooc_rowid", 0)) if meta.get("graph_names") == signature else 0
    if after == 0:
        conn.execute("DELETE FROM graph_cooccurrences")
    top = conn.execute("SELECT COALESCE(MAX(rowid), 0) FROM chunks").fetchone()[0]
    conn.executemany(
        "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
        [("graph_names", signature), ("graph_cooc_rowid", str(top))],
    )
    if not usable:
        return 0
    pattern = re.compile(r"(?<!\w)(" + "|".join(re.escape(n) for n in usable) + r")(?!\w)")
    rows: list[tuple[int, str, str]] = []
    scanned = 0
    for rowid, text in conn.execute(
        "SELECT rowid, text FROM chunks WHERE source='memory' AND rowid > ?", (after,)
    ):
        scanned += 1
        found = sorted({names[m] for m in pattern.findall(normalize_name(text))})
        rows.extend((rowid, a, b) for i, a in enumerate(found) for b in found[i + 1 :])
    conn.executemany("INSERT OR IGNORE INTO graph_cooccurrences VALUES (?,?,?)", rows)
    return scanned


def seed_activation(conn: sqlite3.Connection, now: float | None = None) -> None:
    """Give entries seen for the first time their initial activation."""
    stamp = time.time() if now is None else now
    for table in ("graph_facts", "graph_relations"):
        conn.execute(
            "INSERT OR IGNORE INTO graph_activation(stable_key, activation, hits, updated_at)"
            f" SELECT DISTINCT stable_key, ?, 0, ? FROM {table}",
            (INITIAL_ACTIVATION, stamp),
        )
    conn.execute(
        "INSERT OR IGNORE INTO graph_activation(stable_key, activation, hits, updated_at)"
        " SELECT DISTINCT 'e:' || entity_key, ?, 0, ? FROM graph_entities",
        (INITIAL_ACTIVATION, stamp),
    )


def decay_activation(
    conn: sqlite3.Connection, *, now: float | None = None, per_day: float = DECAY_PER_DAY
) -> bool:
    """Run the decay step if a day has passed since the last one. Returns True if it ran.

    Activation is multiplied by ``per_day`` for each whole day since the last step.
    """
    stamp = time.time() if now is None else now
    row = conn.execute("SELECT value FROM meta WHERE key='graph_decay_at'").fetchone()
    if row is None:
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('graph_decay_at', ?)", (repr(stamp),))
        return False
    days = math.floor((stamp - float(row[0])) / DAY_S)
    if days < 1:
        return False
    conn.execute(
        "UPDATE graph_activation SET activation = activation * ?, updated_at = ?",
        (per_day**days, stamp),
    )
    conn.execute(
        "INSERT OR REPLACE INTO meta(key, value) VALUES ('graph_decay_at', ?)",
        (repr(float(row[0]) + days * DAY_S),),
    )
    return True


def copy_activation(source: sqlite3.Connection, target: sqlite3.Connection) -> None:
    """Carry activation and the decay clock into a rebuilt index."""
    target.executemany(
        "INSERT OR REPLACE INTO graph_activation VALUES (?,?,?,?,?)",
        source.execute(
            "SELECT stable_key, activation, hits, last_access, updated_at FROM graph_activation"
        ),
    )
    row = source.execute("SELECT value FROM meta WHERE key='graph_decay_at'").fetchone()
    if row is not None:
        target.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('graph_decay_at', ?)", row)


def bump_activation(
    conn: sqlite3.Connection, keys: Iterable[str], *, amount: float, now: float | None = None
) -> int:
    """Raise the activation of accessed entries (inside the caller's transaction)."""
    stamp = time.time() if now is None else now
    rows = [(k, INITIAL_ACTIVATION + amount, stamp, stamp, amount, stamp, stamp) for k in set(keys)]
    conn.executemany(
        "INSERT INTO graph_activation(stable_key, activation, hits, last_access, updated_at)"
        " VALUES (?, ?, 1, ?, ?) ON CONFLICT(stable_key) DO UPDATE SET"
        " activation = activation + ?, hits = hits + 1, last_access = ?, updated_at = ?",
        rows,
    )
    return len(rows)


__all__ = [
    "GRAPH_VERSION",
    "bump_activation",
    "copy_activation",
    "decay_activation",
    "entity_stable_key",
    "fact_stable_key",
    "refresh_cooccurrences",
    "refresh_supersession",
    "relation_stable_key",
    "seed_activation",
    "stable_key",
    "write_note",
]
