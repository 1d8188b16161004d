"""Derived knowledge-graph tables: written by sync from the notes, never edited by hand."""

from __future__ import annotations

import itertools
import logging
import math
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from memmw.config import Source
from memmw.notes.syntax import ParsedNote, parse_note
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

log = logging.getLogger(__name__)


def clear_file(conn: sqlite3.Connection, file_id: int) -> None:
    """Delete the graph rows of one file (inside the caller's transaction)."""
    for table in ("graph_entities", "graph_aliases", "graph_facts", "graph_relations", "graph_triggers"):
        conn.execute(f"DELETE FROM {table} WHERE file_id=?", (file_id,))


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
        clear_file(conn, file_id)
    if source != Source.MEMORY:
        return
    note = parsed if parsed is not None else parse_note(text, path)
    rows = note_rows(path, source, note)
    conn.executemany(
        "INSERT INTO graph_entities(file_id, path, line, entity_key, name, kind) VALUES (?,?,?,?,?,?)",
        [(file_id, *row) for row in rows.entities],
    )
    conn.executemany(
        "INSERT INTO graph_aliases(file_id, path, line, entity_key, alias, alias_key)"
        " VALUES (?,?,?,?,?,?)",
        [(file_id, *row) for row in rows.aliases],
    )
    conn.executemany(
        "INSERT INTO graph_facts(file_id, path, line, entity_key, entity, key, key_norm, value,"
        " valid_from, retracted, importance, origin, session_kind, observed_at, private,"
        " supersedes_key, stable_key) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        [(file_id, *row) for row in rows.facts],
    )
    conn.executemany(
        "INSERT INTO graph_relations(file_id, path, line, subject_key, subject, predicate,"
        " object_key, object, retracted, importance, origin, session_kind, observed_at, private,"
        " stable_key) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        [(file_id, *row) for row in rows.relations],
    )
    conn.executemany(
        "INSERT INTO graph_triggers(file_id, path, line, phrases, text, importance, origin, private)"
        " VALUES (?,?,?,?,?,?,?,?)",
        [(file_id, *row) for row in rows.triggers],
    )


def refresh_supersession(conn: sqlite3.Connection) -> int:
    """Mark the current value of every entity+key: the newest dated one wins.

    Undated values (curated files) are older than any dated one; among equals the later
    file and line win. Retracted values are never current. Returns how many are current.
    """
    current = current_fact_ids(
        conn.execute(
            "SELECT id, supersedes_key, valid_from, observed_at, path, line, retracted"
            " FROM graph_facts"
        )
    )
    conn.execute("UPDATE graph_facts SET current=0")
    for start in range(0, len(current), 500):
        part = current[start : start + 500]
        conn.execute(
            f"UPDATE graph_facts SET current=1 WHERE id IN ({','.join('?' * len(part))})", part
        )
    return len(current)


def refresh_cooccurrences(
    conn: sqlite3.Connection, postings: Callable[[list[int], Sequence[str]], Mapping[int, Any]] | None = None
) -> int:
    """Update which entities are named together in a chunk (names and aliases).

    Scanned: the chunks added since the last run, and when the names changed, the older
    chunks that may name a changed one (found through ``postings``, the store's keyword
    postings by term hash and source; ``graphrows.chunks_to_rescan``), or every chunk when
    that is not known. Returns how many chunks were scanned.
    """
    matcher = cooccurrence_matcher(
        conn.execute("SELECT entity_key, name FROM graph_entities"),
        conn.execute("SELECT entity_key, alias_key FROM graph_aliases"),
    )
    signature = matcher.signature
    meta = dict(
        conn.execute(
            "SELECT key, value FROM meta WHERE key IN ('graph_names', 'graph_cooc_rowid', ?)",
            (COOC_NAMES_KEY,),
        )
    )
    after = int(meta.get("graph_cooc_rowid", 0))
    again: set[int] | None = set()
    if meta.get("graph_names") != signature:
        again = chunks_to_rescan(
            meta.get(COOC_NAMES_KEY), meta.get("graph_names"), matcher, postings,
            lambda: _underscored(conn, after),
        )
    if again is None:
        after = 0
        conn.execute("DELETE FROM graph_cooccurrences")
    top = conn.execute("SELECT COALESCE(MAX(rowid), 0) FROM chunks").fetchone()[0]
    conn.executemany(
        "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
        [("graph_names", signature), ("graph_cooc_rowid", str(top)),
         (COOC_NAMES_KEY, cooc_names_value(matcher))],
    )
    older = sorted(r for r in again or () if r <= after)
    # The older chunks to scan again, in batches (each loses its rows first), then the
    # new ones (streamed: after a full reset that is every chunk).
    texts: list[Iterable[tuple[int, str]]] = []
    for start in range(0, len(older), 500):
        part = older[start : start + 500]
        marks = ",".join("?" * len(part))
        conn.execute(f"DELETE FROM graph_cooccurrences WHERE chunk_rowid IN ({marks})", part)
        if matcher.pattern is not None:
            texts.append(conn.execute(
                f"SELECT rowid, text FROM chunks WHERE source='memory' AND rowid IN ({marks})",
                part,
            ).fetchall())
    if matcher.pattern is None:
        return 0
    texts.append(conn.execute(
        "SELECT rowid, text FROM chunks WHERE source='memory' AND rowid > ?", (after,)
    ))
    rows: list[tuple[int, str, str]] = []
    scanned = 0
    for rowid, text in itertools.chain.from_iterable(texts):
        scanned += 1
        rows.extend((rowid, a, b) for a, b in matcher.pairs(text))
    conn.executemany("INSERT OR IGNORE INTO graph_cooccurrences VALUES (?,?,?)", rows)
    return scanned


def _underscored(conn: sqlite3.Connection, upto: int) -> list[int]:
    """Memory chunks up to rowid ``upto`` whose text has a ``_``."""
    return [
        int(r[0])
        for r in conn.execute(
            "SELECT rowid FROM chunks WHERE source='memory' AND rowid <= ?"
            " AND instr(text, '_') > 0",
            (upto,),
        )
    ]


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


def read_rows(conn: sqlite3.Connection) -> GraphRows:
    """Every graph row, as ``memmw.graph.model.load_graph`` reads them (one snapshot)."""
    return GraphRows(
        entities=conn.execute(
            "SELECT entity_key, name, kind, path, line FROM graph_entities ORDER BY path, line"
        ).fetchall(),
        aliases=conn.execute(
            "SELECT entity_key, alias, path FROM graph_aliases ORDER BY path, line"
        ).fetchall(),
        facts=conn.execute(
            "SELECT id, entity_key, entity, key, key_norm, value, path, line, valid_from, retracted,"
            " importance, origin, session_kind, observed_at, private, current, stable_key"
            " FROM graph_facts ORDER BY path, line"
        ).fetchall(),
        relations=conn.execute(
            "SELECT id, subject_key, subject, predicate, object_key, object, path, line, retracted,"
            " importance, origin, observed_at, private, stable_key FROM graph_relations"
            " ORDER BY path, line"
        ).fetchall(),
        triggers=conn.execute(
            "SELECT path, line, phrases, text, importance, origin, private FROM graph_triggers"
        ).fetchall(),
        entity_paths=conn.execute(
            "SELECT entity_key, path FROM graph_entities UNION ALL"
            " SELECT entity_key, path FROM graph_facts"
        ).fetchall(),
        cooccurrences=conn.execute(
            "SELECT a_key, b_key, COUNT(*) FROM graph_cooccurrences GROUP BY a_key, b_key"
        ).fetchall(),
        activation=conn.execute(
            "SELECT stable_key, activation, last_access FROM graph_activation"
        ).fetchall(),
    )


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
