"""The SQLite store: connection, schema migrations, rows, vectors, sync and knowledge-graph tables."""
