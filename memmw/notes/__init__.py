"""The Markdown grammar of notes: fact syntax and the provenance of derived rows.

Pure functions of a note's text and path (no index, no I/O beyond path rules): the store
and the indexer depend on this grammar only, never on the knowledge graph's model or
search. Internal package: not part of the public API (see ``memmw`` and
docs/architecture.md).
"""
