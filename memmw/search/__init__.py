"""Search: the keyword and vector legs, fusion, decay, importance, MMR and snippets.

Internal package: not part of the public API (see ``memmw`` and docs/architecture.md).
"""
