"""Knowledge-graph rows of one namespace in PostgreSQL (derived by ``memmw.store.graphrows``)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memmw.config import Source
from memmw.notes.syntax import ParsedNote
from memmw.store.graphrows import (
    COOC_NAMES_KEY,
    DAY_S,
    DECAY_PER_DAY,
    INITIAL_ACTIVATION,
    chunks_to_rescan,
    cooc_names_value,
    cooccurrence_matcher,
    current_fact_ids,
    note_rows,
)
from memmw.store.protocol import GraphRows

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
    if source != Source.MEMORY or parsed is None:
        return
    rows = note_rows(path, source, parsed)
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO memmw.graph_entities (namespace_id, file_id, path, line, entity_key,"
            " name, kind) VALUES (%s, %s, %s, %s, %s, %s, %s)",
            [(ns, file_id, *row) for row in rows.entities],
        )
        cur.executemany(
            "INSERT INTO memmw.graph_aliases (namespace_id, file_id, path, line, entity_key,"
            " alias, alias_key) VALUES (%s, %s, %s, %s, %s, %s, %s)",
            [(ns, file_id, *row) for row in rows.aliases],
        )
        cur.executemany(
            "INSERT INTO memmw.graph_facts (namespace_id, file_id, path, line, entity_key, entity,"
            " key, key_norm, value, valid_from, retracted, importance, origin, session_kind,"
            " observed_at, private, supersedes_key, stable_key)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            [(ns, file_id, *row) for row in rows.facts],
        )
        cur.executemany(
            "INSERT INTO memmw.graph_relations (namespace_id, file_id, path, line, subject_key,"
            " subject, predicate, object_key, object, retracted, importance, origin,"
            " session_kind, observed_at, private, stable_key)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            [(ns, file_id, *row) for row in rows.relations],
        )
        cur.executemany(
            "INSERT INTO memmw.graph_triggers (namespace_id, file_id, path, line, phrases, text,"
            " importance, origin, private) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
            [(ns, file_id, *row) for row in rows.triggers],
        )


def refresh_supersession(conn: psycopg.Connection[Any], ns: int) -> int:
    """Mark the current value of every entity+key (the newest dated one wins)."""
    facts = conn.execute(
        "SELECT id, supersedes_key, valid_from, observed_at, path, line, retracted"
        " FROM memmw.graph_facts WHERE namespace_id = %s",
        (ns,),
    ).fetchall()
    current = current_fact_ids(facts)
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


def refresh_cooccurrences(
    conn: psycopg.Connection[Any],
    ns: int,
    postings: Callable[[list[int], Sequence[str]], Mapping[int, Any]] | None = None,
) -> int:
    """Update which entities are named together in a chunk; returns chunks scanned.

    Scanned: the chunks added since the last run, and when the names changed, the older
    chunks that may name a changed one (``memmw.store.sqlite.graph.refresh_cooccurrences``
    says how), or every chunk when that is not known.
    """
    matcher = cooccurrence_matcher(
        conn.execute(
            # Insertion order, as SQLite reads them (the first name of a key wins).
            "SELECT entity_key, name FROM memmw.graph_entities WHERE namespace_id = %s"
            " ORDER BY id",
            (ns,),
        ).fetchall(),
        conn.execute(
            "SELECT entity_key, alias_key FROM memmw.graph_aliases WHERE namespace_id = %s"
            " ORDER BY id",
            (ns,),
        ).fetchall(),
    )
    after = int(_meta(conn, ns, "graph_cooc_rowid") or 0)
    names = _meta(conn, ns, "graph_names")
    again: set[int] | None = set()
    if names != matcher.signature:
        again = chunks_to_rescan(
            _meta(conn, ns, COOC_NAMES_KEY), names, matcher, postings,
            lambda: _underscored(conn, ns, after),
        )
    if again is None:
        after = 0
        conn.execute("DELETE FROM memmw.graph_cooccurrences WHERE namespace_id = %s", (ns,))
    row = conn.execute(
        "SELECT coalesce(max(rowid), 0) FROM memmw.chunks WHERE namespace_id = %s", (ns,)
    ).fetchone()
    _set_meta(conn, ns, "graph_names", matcher.signature)
    _set_meta(conn, ns, "graph_cooc_rowid", str(int(row[0]) if row else 0))
    _set_meta(conn, ns, COOC_NAMES_KEY, cooc_names_value(matcher))
    older = sorted(r for r in again or () if r <= after)
    if older:
        conn.execute(
            "DELETE FROM memmw.graph_cooccurrences WHERE namespace_id = %s"
            " AND chunk_rowid = ANY(%s::bigint[])",
            (ns, older),
        )
    if matcher.pattern is None:
        return 0
    rows: list[tuple[int, int, str, str]] = []
    scanned = 0
    for rowid, text in conn.execute(
        "SELECT rowid, text FROM memmw.chunks WHERE namespace_id = %s AND source = 'memory'"
        " AND (rowid > %s OR rowid = ANY(%s::bigint[]))",
        (ns, after, older),
    ).fetchall():
        scanned += 1
        rows.extend((ns, rowid, a, b) for a, b in matcher.pairs(text))
    if rows:
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO memmw.graph_cooccurrences (namespace_id, chunk_rowid, a_key, b_key)"
                " VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                rows,
            )
    return scanned


def _underscored(conn: psycopg.Connection[Any], ns: int, upto: int) -> list[int]:
    """Memory chunks up to rowid ``upto`` whose text has a ``_``."""
    return [
        int(r[0])
        for r in conn.execute(
            "SELECT rowid FROM memmw.chunks WHERE namespace_id = %s AND source = 'memory'"
            " AND rowid <= %s AND strpos(text, '_') > 0",
            (ns, upto),
        ).fetchall()
    ]


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
            "SELECT entity_key, alias, path FROM memmw.graph_aliases WHERE namespace_id = %(ns)s"
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
