"""The engine: the ``Memory`` facade, keeping the index fresh, the file watcher.

Internal package: not part of the public API (see ``memmw`` and docs/architecture.md).
"""
