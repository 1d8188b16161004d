"""The workspace: which Markdown files are memory, reading and appending them, transcripts and file locks.

Internal package: not part of the public API (see ``memmw`` and docs/architecture.md).
"""
