"""The SQLite store: connection, schema migrations, rows, vectors, sync and knowledge-graph tables.

Internal package: not part of the public API (see ``memmw`` and docs/architecture.md).
"""
