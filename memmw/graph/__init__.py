"""Active memory's knowledge graph: facts, relations and aliases derived from the Markdown.

The Markdown grammar the graph is parsed with lives in :mod:`memmw.notes` (the store
depends on it, never on this package).

Internal package: not part of the public API (see ``memmw`` and docs/architecture.md).
"""
