"""The PostgreSQL + pgvector store: many agents (namespaces) and hosts in one database.

Needs the ``postgres`` extra (psycopg 3, psycopg-pool, pgvector); nothing here is imported by
``import memmw``.
"""
