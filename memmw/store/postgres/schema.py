"""Schema of the PostgreSQL store, versioned by append-only migrations."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memmw.errors import IndexStoreError

if TYPE_CHECKING:
    import psycopg

#: Every table lives in this schema, so memmw shares a database with other applications.
SCHEMA = "memmw"

#: Advisory lock key (two int4 halves) taken while migrating: hosts starting together
#: migrate one after the other.
MIGRATION_LOCK = (0x6D656D, 1)
#: First half of the per-namespace writer lock key (the second half is the namespace id).
WRITER_LOCK_CLASS = 0x6D656D + 1

#: Append-only: never edit a released step, add a new one.
MIGRATIONS: tuple[str, ...] = (
    # 1: namespaces (one per agent, or a shared one), their meta, files, chunks with
    # postings for BM25, vectors (pgvector, dimension per row so namespaces may differ),
    # the embedding cache (per namespace: agents never see each other's rows), and the
    # knowledge graph derived from the notes (rows cascade with their file; activation is
    # keyed by a stable key so it survives rebuilds).
    """
    CREATE TABLE memmw.namespaces (
        id serial PRIMARY KEY,
        name text NOT NULL UNIQUE,
        created_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE TABLE memmw.meta (
        namespace_id integer NOT NULL REFERENCES memmw.namespaces(id) ON DELETE CASCADE,
        key text NOT NULL,
        value text NOT NULL,
        PRIMARY KEY (namespace_id, key)
    );
    CREATE TABLE memmw.writers (
        namespace_id integer PRIMARY KEY REFERENCES memmw.namespaces(id) ON DELETE CASCADE,
        host text NOT NULL,
        pid integer NOT NULL,
        backend_pid integer NOT NULL,
        what text NOT NULL DEFAULT '',
        since timestamptz NOT NULL DEFAULT now()
    );
    CREATE TABLE memmw.files (
        id bigserial PRIMARY KEY,
        namespace_id integer NOT NULL REFERENCES memmw.namespaces(id) ON DELETE CASCADE,
        path text NOT NULL,
        source text NOT NULL,
        hash text NOT NULL,
        mtime double precision NOT NULL,
        size bigint NOT NULL,
        decay_ts double precision,
        UNIQUE (namespace_id, path, source)
    );
    CREATE TABLE memmw.chunks (
        rowid bigserial PRIMARY KEY,
        namespace_id integer NOT NULL,
        id text NOT NULL,
        file_id bigint NOT NULL REFERENCES memmw.files(id) ON DELETE CASCADE,
        path text NOT NULL,
        source text NOT NULL,
        start_line integer NOT NULL,
        end_line integer NOT NULL,
        hash text NOT NULL,
        model text NOT NULL,
        text text NOT NULL,
        line_map text,
        importance integer,
        terms bytea NOT NULL,
        n_terms integer NOT NULL,
        updated_at double precision NOT NULL,
        UNIQUE (namespace_id, id)
    );
    CREATE INDEX chunks_namespace_source ON memmw.chunks (namespace_id, source, rowid);
    CREATE INDEX chunks_file ON memmw.chunks (file_id);
    CREATE TABLE memmw.postings (
        namespace_id integer NOT NULL,
        term_hash bigint NOT NULL,
        chunk_rowid bigint NOT NULL,
        source text NOT NULL,
        tf integer NOT NULL,
        doc_len integer NOT NULL,
        PRIMARY KEY (namespace_id, term_hash, chunk_rowid) INCLUDE (source, tf, doc_len)
    );
    CREATE TABLE memmw.source_stats (
        namespace_id integer NOT NULL REFERENCES memmw.namespaces(id) ON DELETE CASCADE,
        source text NOT NULL,
        n_docs bigint NOT NULL,
        total_len bigint NOT NULL,
        PRIMARY KEY (namespace_id, source)
    );
    CREATE TABLE memmw.chunk_vectors (
        chunk_rowid bigint PRIMARY KEY REFERENCES memmw.chunks(rowid) ON DELETE CASCADE,
        namespace_id integer NOT NULL,
        source text NOT NULL,
        dims integer NOT NULL,
        embedding vector NOT NULL
    );
    CREATE INDEX chunk_vectors_namespace ON memmw.chunk_vectors (namespace_id, dims);
    CREATE TABLE memmw.embedding_cache (
        namespace_id integer NOT NULL REFERENCES memmw.namespaces(id) ON DELETE CASCADE,
        provider text NOT NULL,
        model text NOT NULL,
        provider_key text NOT NULL,
        hash text NOT NULL,
        dims integer NOT NULL,
        embedding vector NOT NULL,
        updated_at double precision NOT NULL,
        PRIMARY KEY (namespace_id, provider, model, provider_key, hash)
    );
    CREATE INDEX embedding_cache_updated ON memmw.embedding_cache (namespace_id, updated_at);
    CREATE TABLE memmw.graph_entities (
        id bigserial PRIMARY KEY,
        namespace_id integer NOT NULL,
        file_id bigint NOT NULL REFERENCES memmw.files(id) ON DELETE CASCADE,
        path text NOT NULL,
        line integer NOT NULL,
        entity_key text NOT NULL,
        name text NOT NULL,
        kind text NOT NULL DEFAULT ''
    );
    CREATE INDEX graph_entities_ns ON memmw.graph_entities (namespace_id, entity_key);
    CREATE INDEX graph_entities_file ON memmw.graph_entities (file_id);
    CREATE TABLE memmw.graph_aliases (
        id bigserial PRIMARY KEY,
        namespace_id integer NOT NULL,
        file_id bigint NOT NULL REFERENCES memmw.files(id) ON DELETE CASCADE,
        path text NOT NULL,
        line integer NOT NULL,
        entity_key text NOT NULL,
        alias text NOT NULL,
        alias_key text NOT NULL
    );
    CREATE INDEX graph_aliases_ns ON memmw.graph_aliases (namespace_id, alias_key);
    CREATE INDEX graph_aliases_file ON memmw.graph_aliases (file_id);
    CREATE TABLE memmw.graph_facts (
        id bigserial PRIMARY KEY,
        namespace_id integer NOT NULL,
        file_id bigint NOT NULL REFERENCES memmw.files(id) ON DELETE CASCADE,
        path text NOT NULL,
        line integer NOT NULL,
        entity_key text NOT NULL,
        entity text NOT NULL,
        key text NOT NULL,
        key_norm text NOT NULL,
        value text NOT NULL,
        valid_from text,
        retracted integer NOT NULL DEFAULT 0,
        importance integer,
        origin text NOT NULL,
        session_kind text NOT NULL,
        observed_at double precision,
        private integer NOT NULL,
        supersedes_key text NOT NULL,
        stable_key text NOT NULL,
        current integer NOT NULL DEFAULT 1
    );
    CREATE INDEX graph_facts_ns ON memmw.graph_facts (namespace_id, entity_key);
    CREATE INDEX graph_facts_file ON memmw.graph_facts (file_id);
    CREATE TABLE memmw.graph_relations (
        id bigserial PRIMARY KEY,
        namespace_id integer NOT NULL,
        file_id bigint NOT NULL REFERENCES memmw.files(id) ON DELETE CASCADE,
        path text NOT NULL,
        line integer NOT NULL,
        subject_key text NOT NULL,
        subject text NOT NULL,
        predicate text NOT NULL,
        object_key text NOT NULL,
        object text NOT NULL,
        retracted integer NOT NULL DEFAULT 0,
        importance integer,
        origin text NOT NULL,
        session_kind text NOT NULL,
        observed_at double precision,
        private integer NOT NULL,
        stable_key text NOT NULL
    );
    CREATE INDEX graph_relations_ns ON memmw.graph_relations (namespace_id, subject_key);
    CREATE INDEX graph_relations_file ON memmw.graph_relations (file_id);
    CREATE TABLE memmw.graph_triggers (
        id bigserial PRIMARY KEY,
        namespace_id integer NOT NULL,
        file_id bigint NOT NULL REFERENCES memmw.files(id) ON DELETE CASCADE,
        path text NOT NULL,
        line integer NOT NULL,
        phrases text NOT NULL,
        text text NOT NULL,
        importance integer,
        origin text NOT NULL,
        private integer NOT NULL
    );
    CREATE INDEX graph_triggers_ns ON memmw.graph_triggers (namespace_id);
    CREATE INDEX graph_triggers_file ON memmw.graph_triggers (file_id);
    CREATE TABLE memmw.graph_cooccurrences (
        namespace_id integer NOT NULL,
        chunk_rowid bigint NOT NULL REFERENCES memmw.chunks(rowid) ON DELETE CASCADE,
        a_key text NOT NULL,
        b_key text NOT NULL,
        PRIMARY KEY (chunk_rowid, a_key, b_key)
    );
    CREATE INDEX graph_cooccurrences_ns ON memmw.graph_cooccurrences (namespace_id);
    CREATE TABLE memmw.graph_activation (
        namespace_id integer NOT NULL REFERENCES memmw.namespaces(id) ON DELETE CASCADE,
        stable_key text NOT NULL,
        activation double precision NOT NULL,
        hits integer NOT NULL DEFAULT 0,
        last_access double precision,
        updated_at double precision NOT NULL,
        PRIMARY KEY (namespace_id, stable_key)
    );
    """,
    # 2: keyword postings as segments (``memmw.store.segments``): a query reads a few rows
    # per term instead of one row per posting. Namespaces rebuild (their index identity
    # names the postings layout).
    """
    DROP TABLE memmw.postings;
    CREATE TABLE memmw.postings_segments (
        namespace_id integer NOT NULL,
        source text NOT NULL,
        term_hash bigint NOT NULL,
        seg bigint NOT NULL,
        n integer NOT NULL,
        data bytea NOT NULL,
        PRIMARY KEY (namespace_id, source, term_hash, seg)
    );
    ALTER TABLE memmw.postings_segments ALTER COLUMN data SET STORAGE EXTERNAL;
    CREATE TABLE memmw.postings_dead (
        namespace_id integer NOT NULL,
        source text NOT NULL,
        chunk_rowid bigint NOT NULL,
        hashes bytea NOT NULL,
        PRIMARY KEY (namespace_id, source, chunk_rowid)
    );
    """,
    # 3: what every search reads besides its terms' segments, in a few index entries: the
    # newest dated memory (the reference age of decay) by an index instead of a scan of
    # the namespace's files, and the tombstoned rowids of each source as one int64 array
    # (big-endian) next to its statistics instead of one row each (``postings_dead``
    # keeps the rows, with their term hashes, for the purge).
    """
    CREATE INDEX files_namespace_decay ON memmw.files (namespace_id, decay_ts);
    ALTER TABLE memmw.source_stats ADD COLUMN dead bytea NOT NULL DEFAULT ''::bytea;
    ALTER TABLE memmw.source_stats ALTER COLUMN dead SET STORAGE EXTERNAL;
    INSERT INTO memmw.source_stats (namespace_id, source, n_docs, total_len)
        SELECT DISTINCT namespace_id, source, 0, 0 FROM memmw.postings_dead
        ON CONFLICT (namespace_id, source) DO NOTHING;
    UPDATE memmw.source_stats s SET dead = d.rowids FROM (
        SELECT namespace_id, source, string_agg(int8send(chunk_rowid), ''::bytea) AS rowids
        FROM memmw.postings_dead GROUP BY namespace_id, source
    ) d WHERE s.namespace_id = d.namespace_id AND s.source = d.source
    """,
)


def schema_version(conn: psycopg.Connection[Any]) -> int:
    """The applied schema version (0 for a database memmw never used)."""
    row = conn.execute("SELECT to_regclass('memmw.migrations') IS NOT NULL").fetchone()
    if row is None or not row[0]:
        return 0
    row = conn.execute("SELECT coalesce(max(version), 0) FROM memmw.migrations").fetchone()
    return int(row[0]) if row else 0


def migrate(conn: psycopg.Connection[Any]) -> int:
    """Apply the missing migrations, one transaction each; returns the resulting version.

    Runs under a transaction-level advisory lock so that hosts starting at the same time
    migrate one after the other. ``conn`` must be in autocommit mode.

    Raises:
        IndexStoreError: the database is newer than this memmw (a downgrade).
    """
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", MIGRATION_LOCK)
        # pgvector: a managed server may need an administrator to create it once.
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS memmw.migrations"
            " (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        version = schema_version(conn)
        if version > len(MIGRATIONS):
            raise IndexStoreError(
                f"the PostgreSQL store has schema version {version}, newer than this memmw "
                f"supports ({len(MIGRATIONS)}); upgrade memmw"
            )
        for number, step in enumerate(MIGRATIONS[version:], start=version + 1):
            with conn.transaction():
                for statement in step.split(";"):
                    if statement.strip():
                        conn.execute(statement.encode())
                conn.execute("INSERT INTO memmw.migrations (version) VALUES (%s)", (number,))
    return len(MIGRATIONS)
