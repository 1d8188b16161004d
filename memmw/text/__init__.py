"""Text: search terms and stemming, chunking, token counts.

Internal package: not part of the public API (see ``memmw`` and docs/architecture.md).
"""
