"""Schema of the index, versioned by append-only migrations."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

from memmw.errors import IndexStoreError

#: Append-only: never edit a released step, add a new one.
MIGRATIONS: tuple[str, ...] = (
    # 1: files, chunks, embedding cache, vectors. Chunk rowids are never reused
    # (AUTOINCREMENT), so derived KNN tables can be refreshed by set difference.
    """
    CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE files (
        id INTEGER PRIMARY KEY,
        path TEXT NOT NULL,
        source TEXT NOT NULL DEFAULT 'memory',
        hash TEXT NOT NULL,
        mtime REAL NOT NULL,
        size INTEGER NOT NULL,
        decay_ts REAL,
        UNIQUE (path, source)
    );
    CREATE TABLE chunks (
        rowid INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
        path TEXT NOT NULL,
        source TEXT NOT NULL,
        start_line INTEGER NOT NULL,
        end_line INTEGER NOT NULL,
        hash TEXT NOT NULL,
        model TEXT NOT NULL,
        text TEXT NOT NULL,
        line_map TEXT,
        importance INTEGER,
        terms BLOB NOT NULL,
        n_terms INTEGER NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX chunks_file ON chunks(file_id);
    CREATE INDEX chunks_path ON chunks(path);
    CREATE INDEX chunks_source ON chunks(source);
    CREATE TABLE embedding_cache (
        provider TEXT NOT NULL,
        model TEXT NOT NULL,
        provider_key TEXT NOT NULL,
        hash TEXT NOT NULL,
        dims INTEGER NOT NULL,
        embedding BLOB NOT NULL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (provider, model, provider_key, hash)
    );
    CREATE INDEX embedding_cache_updated ON embedding_cache(updated_at);
    CREATE TABLE chunk_vectors (
        chunk_rowid INTEGER PRIMARY KEY REFERENCES chunks(rowid) ON DELETE CASCADE,
        embedding BLOB NOT NULL
    );
    """,
    # 2: the knowledge graph derived from the notes (rows cascade with their file) and
    # the activation of its entries, keyed by a stable key so it survives rebuilds.
    """
    CREATE TABLE graph_entities (
        id INTEGER PRIMARY KEY,
        file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
        path TEXT NOT NULL,
        line INTEGER NOT NULL,
        entity_key TEXT NOT NULL,
        name TEXT NOT NULL,
        kind TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX graph_entities_key ON graph_entities(entity_key);
    CREATE INDEX graph_entities_file ON graph_entities(file_id);
    CREATE TABLE graph_aliases (
        id INTEGER PRIMARY KEY,
        file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
        path TEXT NOT NULL,
        line INTEGER NOT NULL,
        entity_key TEXT NOT NULL,
        alias TEXT NOT NULL,
        alias_key TEXT NOT NULL
    );
    CREATE INDEX graph_aliases_key ON graph_aliases(alias_key);
    CREATE INDEX graph_aliases_file ON graph_aliases(file_id);
    CREATE TABLE graph_facts (
        id INTEGER PRIMARY KEY,
        file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
        path TEXT NOT NULL,
        line INTEGER NOT NULL,
        entity_key TEXT NOT NULL,
        entity TEXT NOT NULL,
        key TEXT NOT NULL,
        key_norm TEXT NOT NULL,
        value TEXT NOT NULL,
        valid_from TEXT,
        retracted INTEGER NOT NULL DEFAULT 0,
        importance INTEGER,
        origin TEXT NOT NULL,
        session_kind TEXT NOT NULL,
        observed_at REAL,
        private INTEGER NOT NULL,
        supersedes_key TEXT NOT NULL,
        stable_key TEXT NOT NULL,
        current INTEGER NOT NULL DEFAULT 1
    );
    CREATE INDEX graph_facts_entity ON graph_facts(entity_key);
    CREATE INDEX graph_facts_supersedes ON graph_facts(supersedes_key);
    CREATE INDEX graph_facts_file ON graph_facts(file_id);
    CREATE TABLE graph_relations (
        id INTEGER PRIMARY KEY,
        file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
        path TEXT NOT NULL,
        line INTEGER NOT NULL,
        subject_key TEXT NOT NULL,
        subject TEXT NOT NULL,
        predicate TEXT NOT NULL,
        object_key TEXT NOT NULL,
        object TEXT NOT NULL,
        retracted INTEGER NOT NULL DEFAULT 0,
        importance INTEGER,
        origin TEXT NOT NULL,
        session_kind TEXT NOT NULL,
        observed_at REAL,
        private INTEGER NOT NULL,
        stable_key TEXT NOT NULL
    );
    CREATE INDEX graph_relations_subject ON graph_relations(subject_key);
    CREATE INDEX graph_relations_object ON graph_relations(object_key);
    CREATE INDEX graph_relations_file ON graph_relations(file_id);
    CREATE TABLE graph_triggers (
        id INTEGER PRIMARY KEY,
        file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
        path TEXT NOT NULL,
        line INTEGER NOT NULL,
        phrases TEXT NOT NULL,
        text TEXT NOT NULL,
        importance INTEGER,
        origin TEXT NOT NULL,
        private INTEGER NOT NULL
    );
    CREATE INDEX graph_triggers_file ON graph_triggers(file_id);
    CREATE TABLE graph_cooccurrences (
        chunk_rowid INTEGER NOT NULL REFERENCES chunks(rowid) ON DELETE CASCADE,
        a_key TEXT NOT NULL,
        b_key TEXT NOT NULL,
        PRIMARY KEY (chunk_rowid, a_key, b_key)
    );
    CREATE INDEX graph_cooccurrences_a ON graph_cooccurrences(a_key);
    CREATE TABLE graph_activation (
        stable_key TEXT PRIMARY KEY,
        activation REAL NOT NULL,
        hits INTEGER NOT NULL DEFAULT 0,
        last_access REAL,
        updated_at REAL NOT NULL
    );
    """,
    # 3: persisted keyword postings and statistics (memmw.store.sqlite.postings), and
    # each chunk's distinct term hashes in their own table (``chunks.terms`` stays
    # empty: rows of text alone pack SQLite pages far better). The old rows cannot
    # serve search, so the identity is dropped and the next sync rebuilds.
    """
    CREATE TABLE postings (
        source TEXT NOT NULL,
        term INTEGER NOT NULL,
        seg INTEGER NOT NULL,
        n INTEGER NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (source, term, seg)
    ) WITHOUT ROWID;
    CREATE TABLE keyword_stats (
        source TEXT PRIMARY KEY,
        chunks INTEGER NOT NULL,
        terms INTEGER NOT NULL
    );
    CREATE TABLE chunk_terms (
        chunk_rowid INTEGER PRIMARY KEY REFERENCES chunks(rowid) ON DELETE CASCADE,
        hashes BLOB NOT NULL
    );
    DELETE FROM meta WHERE key = 'identity'
    """,
    # 4: deleted chunks whose postings are still stored (memmw.store.sqlite.postings):
    # reads skip them; a flush purges them from the segments once they are many.
    """
    CREATE TABLE postings_dead (
        source TEXT NOT NULL,
        chunk_rowid INTEGER NOT NULL,
        hashes BLOB NOT NULL,
        PRIMARY KEY (source, chunk_rowid)
    ) WITHOUT ROWID;
    -- Reads list the tombstones on every query: without the hashes, a few pages.
    CREATE INDEX postings_dead_rowids ON postings_dead(source, chunk_rowid)
    """,
    # 5: every search asks for the newest dated memory (the reference age of decay).
    """
    CREATE INDEX files_decay_ts ON files(decay_ts)
    """,
    # 6: the vector matrix in blocks of 512 rowids (a fresh process reads a few hundred
    # rows, not one per chunk). Triggers mark the blocks a vector write touches; a
    # write transaction rebuilds them before it commits, and readers read a block still
    # marked from chunk_vectors, so blocks are never stale whoever wrote the vectors.
    """
    CREATE TABLE vector_blocks (
        source TEXT NOT NULL,
        block INTEGER NOT NULL,
        dims INTEGER NOT NULL,
        rowids BLOB NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (source, block, dims)
    ) WITHOUT ROWID;
    CREATE TABLE vector_dirty (block INTEGER PRIMARY KEY);
    CREATE TRIGGER chunk_vectors_added AFTER INSERT ON chunk_vectors BEGIN
        INSERT OR IGNORE INTO vector_dirty(block) VALUES (NEW.chunk_rowid >> 9);
    END;
    CREATE TRIGGER chunk_vectors_changed AFTER UPDATE ON chunk_vectors BEGIN
        INSERT OR IGNORE INTO vector_dirty(block) VALUES (OLD.chunk_rowid >> 9);
        INSERT OR IGNORE INTO vector_dirty(block) VALUES (NEW.chunk_rowid >> 9);
    END;
    CREATE TRIGGER chunk_vectors_removed AFTER DELETE ON chunk_vectors BEGIN
        INSERT OR IGNORE INTO vector_dirty(block) VALUES (OLD.chunk_rowid >> 9);
    END;
    CREATE TRIGGER chunks_removed AFTER DELETE ON chunks BEGIN
        INSERT OR IGNORE INTO vector_dirty(block) VALUES (OLD.rowid >> 9);
    END;
    CREATE TRIGGER chunks_moved AFTER UPDATE OF source ON chunks BEGIN
        INSERT OR IGNORE INTO vector_dirty(block) VALUES (OLD.rowid >> 9);
    END;
    INSERT OR IGNORE INTO vector_dirty(block) SELECT DISTINCT chunk_rowid >> 9 FROM chunk_vectors
    """,
    # 7: the postings version, replaced by every write of segments: searches keep the
    # segments they read in the process under it (memmw.store.cache). Being a migration,
    # it also keeps an older memmw, which would write segments without replacing it,
    # from opening the index.
    """
    INSERT OR REPLACE INTO meta(key, value) VALUES ('postings_version', lower(hex(randomblob(16))))
    """,
)


def statements(script: str) -> Iterator[str]:
    """The SQL statements of ``script`` (a ``;`` inside a trigger body does not end one)."""
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \n;"):
                yield pending
            pending = ""
    if pending.strip(" \n;"):
        yield pending


def fts_ddl(tokenizer: str) -> str:
    """DDL of the FTS5 table; its rowid is ``chunks.rowid``.

    With ``unicode61`` the indexed column holds memmw's search terms (so CJK bigrams are
    searchable); with ``trigram`` it holds the raw text for substring matching.
    """
    tok = "trigram" if tokenizer == "trigram" else "unicode61 remove_diacritics 2"
    return f"CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(body, tokenize='{tok}')"


def schema_version(conn: sqlite3.Connection) -> int:
    """The applied schema version (0 for an empty database)."""
    has_meta = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'"
    ).fetchone()
    if not has_meta:
        return 0
    row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    return int(row[0]) if row else 0


def migrate(conn: sqlite3.Connection, fts_tokenizer: str) -> int:
    """Apply the missing migrations in one transaction; returns the resulting version.

    Raises:
        IndexStoreError: the database is newer than this memmw (downgrade).
    """
    version = schema_version(conn)
    if version > len(MIGRATIONS):
        raise IndexStoreError(
            f"index schema version {version} is newer than this memmw supports "
            f"({len(MIGRATIONS)}); upgrade memmw or run 'memmw reset'"
        )
    if version == len(MIGRATIONS):
        return version
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = schema_version(conn)
        for step in MIGRATIONS[version:]:
            for statement in statements(step):
                conn.execute(statement)
        if version == 0:
            conn.execute(fts_ddl(fts_tokenizer))
        conn.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)",
            (str(len(MIGRATIONS)),),
        )
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return len(MIGRATIONS)


DERIVED_TABLES = (
    "vector_blocks",
    "vector_dirty",
    "chunk_vectors",
    "chunks_fts",
    "postings",
    "postings_dead",
    "keyword_stats",
    "chunk_terms",
    "chunks",
    "files",
    "embedding_cache",
)
#: Tables that are not rebuilt from the notes: copied into a rebuilt index.
KEPT_ACROSS_REBUILDS = ("embedding_cache", "graph_activation")
