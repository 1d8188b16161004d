"""The PostgreSQL + pgvector store: many agents (namespaces) and hosts in one database.

Needs the ``postgres`` extra (psycopg 3, psycopg-pool, pgvector), imported on first use;
nothing here is imported by ``import memmw``.
"""

from memmw.store.postgres.backend import PostgresStore as PostgresStore
from memmw.store.postgres.backend import create_postgres_store as create_postgres_store
