"""The derived index: the store protocol, its SQLite implementation and the packed term format.

Internal package: not part of the public API (see ``memmw`` and docs/architecture.md).
"""
