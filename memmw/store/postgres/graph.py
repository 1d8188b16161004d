"""Knowledge-graph rows of one namespace in PostgreSQL (the SQLite store's rules, same keys)."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from memmw.graph.provenance import provenance_for
from memmw.graph.syntax import ParsedNote, implicit_aliases, normalize_name
from memmw.store.protocol import GraphRows
from memmw.store.sqlite.graph import (
    DAY_S,
    DECAY_PER_DAY,
    INITIAL_ACTIVATION,
    MIN_COOCCURRENCE_NAME,
    fact_stable_key,
    relation_stable_key,
    stable_key,
)
from memmw.store.sqlite.graph import _order_date as order_date

if TYPE_CHECKING:
    import psycopg

_NOTE_TABLES = ("graph_entities", "graph_aliases", "graph_facts", "graph_relations", "graph_triggers")


def clear(conn: psycopg.Connection[Any], ns: int) -> None:
    """Delete the namespace's graph rows except activation (use, not content)."""
    for table in (*_NOTE_TABLES, "graph_cooccurrences"):
        conn.execute(f"DELETE FROM memmw.{table} WHERE namespace_id = %s", (ns,))


def write_note(
    conn: psycopg.Connection[Any],
    ns: int,
    *,
    path: str,
    source: str,
    parsed: ParsedNote | None,
    fresh: bool = False,
) -> None:
    """Replace the graph rows of one indexed file (None: just clear them)."""
    row = conn.execute(
        "SELECT id FROM memmw.files WHERE namespace_id = %s AND path = %s AND source = %s",
        (ns, path, source),
    ).fetchone()
    if row is None:
        return
    file_id = int(row[0])
    if not fresh:
        for table in _NOTE_TABLES:
            conn.execute(f"DELETE FROM memmw.{table} WHERE file_id = %s", (file_id,))
    if source != "memory" or parsed is None:
        return
    note = parsed
    prov = provenance_for(path, source)
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO memmw.graph_entities (namespace_id, file_id, path, line, entity_key,"
            " name, kind) VALUES (%s, %s, %s, %s, %s, %s, %s)",
            [(ns, file_id, path, e.line, e.key, e.name, e.kind) for e in note.entities],
        )
        cur.executemany(
            "INSERT INTO memmw.graph_aliases (namespace_id, file_id, path, line, entity_key,"
            " alias, alias_key) VALUES (%s, %s, %s, %s, %s, %s, %s)",
            [
                (ns, file_id, path, a.line, normalize_name(a.entity), a.alias,
                 normalize_name(a.alias))
                for a in note.aliases
            ],
        )
        cur.executemany(
            "INSERT INTO memmw.graph_facts (namespace_id, file_id, path, line, entity_key, entity,"
            " key, key_norm, value, valid_from, retracted, importance, origin, session_kind,"
            " observed_at, private, supersedes_key, stable_key)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            [
                (
                    ns,
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
        cur.executemany(
            "INSERT INTO memmw.graph_relations (namespace_id, file_id, path, line, subject_key,"
            " subject, predicate, object_key, object, retracted, importance, origin,"
            " session_kind, observed_at, private, stable_key)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            [
                (
                    ns,
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
                    relation_stable_key(
                        normalize_name(r.subject), r.predicate, normalize_name(r.object)
                    ),
                )
                for r in note.relations
            ],
        )
        cur.executemany(
            "INSERT INTO memmw.graph_triggers (namespace_id, file_id, path, line, phrases, text,"
            " importance, origin, private) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
            [
                (ns, file_id, path, t.line, "; ".join(t.phrases), t.text, t.importance,
                 prov.origin, int(prov.private))
                for t in note.triggers
            ],
        )


def refresh_supersession(conn: psycopg.Connection[Any], ns: int) -> int:
    """Mark the current value of every entity+key (the newest dated one wins)."""
    groups: dict[str, list[tuple[str, str, int, int]]] = {}
    for fid, key, valid_from, observed, path, line, retracted in conn.execute(
        "SELECT id, supersedes_key, valid_from, observed_at, path, line, retracted"
        " FROM memmw.graph_facts WHERE namespace_id = %s",
        (ns,),
    ).fetchall():
        if retracted:
            continue
        groups.setdefault(key, []).append((order_date(valid_from, observed), path, line, fid))
    current = [max(rows)[3] for rows in groups.values()]
    conn.execute(
        "UPDATE memmw.graph_facts SET current = (id = ANY(%s))::integer WHERE namespace_id = %s",
        (current, ns),
    )
    return len(current)


def _meta(conn: psycopg.Connection[Any], ns: int, key: str) -> str | None:
    row = conn.execute(
        "SELECT value FROM memmw.meta WHERE namespace_id = %s AND key = %s", (ns, key)
    ).fetchone()
    return None if row is None else str(row[0])


def _set_meta(conn: psycopg.Connection[Any], ns: int, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO memmw.meta (namespace_id, key, value) VALUES (%s, %s, %s)"
        " ON CONFLICT (namespace_id, key) DO UPDATE SET value = excluded.value",
        (ns, key, value),
    )


def refresh_cooccurrences(conn: psycopg.Connection[Any], ns: int) -> int:
    """Update which entities are named together in a chunk; returns chunks scanned.

    Only chunks added since the last run are scanned when the set of names is unchanged.
    """
    names: dict[str, str] = {}
    entities = conn.execute(
        "SELECT entity_key, name FROM memmw.graph_entities WHERE namespace_id = %s ORDER BY id",
        (ns,),
    ).fetchall()
    for key, name in entities:
        names.setdefault(normalize_name(name), key)
    for key, alias in conn.execute(
        "SELECT entity_key, alias_key FROM memmw.graph_aliases WHERE namespace_id = %s"
        " ORDER BY id",
        (ns,),
    ).fetchall():
        names.setdefault(alias, key)
    display = {key: name for key, name in entities}
    for first, key in implicit_aliases(display).items():
        names.setdefault(first, key)
    usable = sorted((n for n in names if len(n) >= MIN_COOCCURRENCE_NAME), key=len, reverse=True)
    signature = stable_key(*(f"{n}={names[n]}" for n in sorted(usable)))
    last = _meta(conn, ns, "graph_cooc_rowid")
    after = int(last or 0) if _meta(conn, ns, "graph_names") == signature else 0
    if after == 0:
        conn.execute("DELETE FROM memmw.graph_cooccurrences WHERE namespace_id = %s", (ns,))
    row = conn.execute(
        "SELECT coalesce(max(rowid), 0) FROM memmw.chunks WHERE namespace_id = %s", (ns,)
    ).fetchone()
    _set_meta(conn, ns, "graph_names", signature)
    _set_meta(conn, ns, "graph_cooc_rowid", str(int(row[0]) if row else 0))
    if not usable:
        return 0
    pattern = re.compile(r"(?<!\w)(" + "|".join(re.escape(n) for n in usable) + r")(?!\w)")
    rows: list[tuple[int, int, str, str]] = []
    scanned = 0
    for rowid, text in conn.execute(
        "SELECT rowid, text FROM memmw.chunks WHERE namespace_id = %s AND source = 'memory'"
        " AND rowid > %s",
        (ns, after),
    ).fetchall():
        scanned += 1
        found = sorted({names[m] for m in pattern.findall(normalize_name(text))})
        rows.extend((ns, rowid, a, b) for i, a in enumerate(found) for b in found[i + 1 :])
    if rows:
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO memmw.graph_cooccurrences (namespace_id, chunk_rowid, a_key, b_key)"
                " VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                rows,
            )
    return scanned


def seed_activation(conn: psycopg.Connection[Any], ns: int, now: float | None = None) -> None:
    """Give entries seen for the first time their initial activation."""
    stamp = time.time() if now is None else now
    for select in (
        "SELECT DISTINCT stable_key FROM memmw.graph_facts WHERE namespace_id = %s",
        "SELECT DISTINCT stable_key FROM memmw.graph_relations WHERE namespace_id = %s",
        "SELECT DISTINCT 'e:' || entity_key FROM memmw.graph_entities WHERE namespace_id = %s",
    ):
        conn.execute(
            "INSERT INTO memmw.graph_activation (namespace_id, stable_key, activation, hits,"
            f" updated_at) SELECT %s, k, %s, 0, %s FROM ({select}) AS s(k)"
            " ON CONFLICT DO NOTHING",
            (ns, INITIAL_ACTIVATION, stamp, ns),
        )


def decay_activation(
    conn: psycopg.Connection[Any], ns: int, *, now: float | None = None
) -> bool:
    """Run the daily decay step if a day has passed since the last one."""
    stamp = time.time() if now is None else now
    last = _meta(conn, ns, "graph_decay_at")
    if last is None:
        _set_meta(conn, ns, "graph_decay_at", repr(stamp))
        return False
    days = math.floor((stamp - float(last)) / DAY_S)
    if days < 1:
        return False
    conn.execute(
        "UPDATE memmw.graph_activation SET activation = activation * %s, updated_at = %s"
        " WHERE namespace_id = %s",
        (DECAY_PER_DAY**days, stamp, ns),
    )
    _set_meta(conn, ns, "graph_decay_at", repr(float(last) + days * DAY_S))
    return True


def bump_activation(
    conn: psycopg.Connection[Any], ns: int, keys: Iterable[str], amount: float
) -> int:
    """Raise the activation of accessed entries and record the access."""
    stamp = time.time()
    rows = [(ns, k, INITIAL_ACTIVATION + amount, stamp, stamp, amount, stamp, stamp)
            for k in sorted(set(keys))]
    if rows:
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO memmw.graph_activation (namespace_id, stable_key, activation, hits,"
                " last_access, updated_at) VALUES (%s, %s, %s, 1, %s, %s)"
                " ON CONFLICT (namespace_id, stable_key) DO UPDATE SET"
                " activation = memmw.graph_activation.activation + %s,"
                " hits = memmw.graph_activation.hits + 1, last_access = %s, updated_at = %s",
                rows,
            )
    return len(rows)


def read_rows(conn: psycopg.Connection[Any], ns: int) -> GraphRows:
    """Every graph row of the namespace, as ``memmw.graph.model.load_graph`` reads them."""

    def q(sql: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in conn.execute(sql, {"ns": ns}).fetchall()]

    return GraphRows(
        entities=q(
            "SELECT entity_key, name, kind, path, line FROM memmw.graph_entities"
            " WHERE namespace_id = %(ns)s ORDER BY path, line, id"
        ),
        aliases=q(
            "SELECT entity_key, alias FROM memmw.graph_aliases WHERE namespace_id = %(ns)s"
            " ORDER BY path, line, id"
        ),
        facts=q(
            "SELECT id, entity_key, entity, key, key_norm, value, path, line, valid_from,"
            " retracted, importance, origin, session_kind, observed_at, private, current,"
            " stable_key FROM memmw.graph_facts WHERE namespace_id = %(ns)s"
            " ORDER BY path, line, id"
        ),
        relations=q(
            "SELECT id, subject_key, subject, predicate, object_key, object, path, line,"
            " retracted, importance, origin, observed_at, private, stable_key"
            " FROM memmw.graph_relations WHERE namespace_id = %(ns)s ORDER BY path, line, id"
        ),
        triggers=q(
            "SELECT path, line, phrases, text, importance, origin, private"
            " FROM memmw.graph_triggers WHERE namespace_id = %(ns)s ORDER BY path, line, id"
        ),
        entity_paths=q(
            "SELECT entity_key, path FROM memmw.graph_entities WHERE namespace_id = %(ns)s"
            " UNION ALL SELECT entity_key, path FROM memmw.graph_facts"
            " WHERE namespace_id = %(ns)s"
        ),
        cooccurrences=q(
            "SELECT a_key, b_key, count(*) FROM memmw.graph_cooccurrences"
            " WHERE namespace_id = %(ns)s GROUP BY a_key, b_key ORDER BY a_key, b_key"
        ),
        activation=q(
            "SELECT stable_key, activation, last_access FROM memmw.graph_activation"
            " WHERE namespace_id = %(ns)s ORDER BY stable_key"
        ),
    )
