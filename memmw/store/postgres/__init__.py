"""The PostgreSQL + pgvector store: many agents (namespaces) and hosts in one database.

Needs the ``postgres`` extra (psycopg 3, psycopg-pool, pgvector), imported on first use;
nothing here is imported by ``import memmw``.
"""

from memmw.store.postgres.backend import PostgresStore, create_postgres_store

__all__ = ["PostgresStore", "create_postgres_store"]
