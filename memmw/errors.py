"""The memmw exception tree: every error the library raises derives from MemmwError."""

from __future__ import annotations


class MemmwError(Exception):
    """Base class of every error memmw raises."""


class ConfigError(MemmwError, ValueError):
    """A configuration value is missing, malformed or out of range."""


class PathPolicyError(MemmwError, PermissionError):
    """A path is outside what memmw may read or write (escape, symlink, not Markdown)."""


class ContentPolicyError(MemmwError, ValueError):
    """Text memmw refuses to write (too large, NUL bytes, control characters, not UTF-8)."""


class IndexStoreError(MemmwError):
    """The derived SQLite index could not be opened, migrated or written."""


class IndexCorruptError(IndexStoreError):
    """The index file is damaged (not a database, malformed) and could not be rebuilt.

    The Markdown files are the source of truth and are untouched: ``memmw reset`` then
    ``memmw index`` rebuilds the index from them.
    """


class IndexBusyError(IndexStoreError):
    """Another process holds the writer lock of this index."""


class ProviderError(MemmwError):
    """An embedding provider failed (network, quota, bad answer)."""


class ProviderUnavailableError(ProviderError):
    """An embedding provider cannot start: missing extra, key or model file."""


__all__ = [
    "ConfigError",
    "ContentPolicyError",
    "IndexBusyError",
    "IndexCorruptError",
    "IndexStoreError",
    "MemmwError",
    "PathPolicyError",
    "ProviderError",
    "ProviderUnavailableError",
]
