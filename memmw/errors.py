"""The memmw exception tree: every error the library raises to its users derives from MemmwError.

::

    MemmwError
    ├── ConfigError (ValueError)           a setting or call argument is malformed
    │   ├── ToolArgumentError              a tool argument is malformed (as an error payload)
    │   └── ArchiveError                   a backup archive that cannot be restored
    ├── PathPolicyError (PermissionError)  a path memmw may not read or write
    ├── ContentPolicyError (ValueError)    text memmw refuses to write
    ├── FileReadError                      a file that cannot be indexed (binary, too large)
    ├── FileBusyError (OSError)            another memmw writer holds the note too long
    ├── ForgetError                        an entry that cannot be retracted
    ├── NoteEditError (ValueError)         a line edit refused: no such line, or it changed
    ├── WiringError                        memmw wired so that memory would be lost silently
    ├── IndexStoreError                    the derived index cannot be opened or written
    │   ├── IndexCorruptError              the index is damaged and could not be rebuilt
    │   └── IndexBusyError                 another process holds the writer lock
    └── ProviderError                      an embedding provider failed
        ├── ProviderUnavailableError       a provider cannot start (extra, key, model file)
        │   └── MissingApiKeyError         a remote provider has no API key
        ├── BatchUnavailableError          a provider's batch API failed (plain requests follow)
        ├── CircuitOpenError               the provider failed repeatedly; calls fail at once
        ├── QueryTimeoutError              a query embedding missed the search's deadline
        └── InvalidVectorError             a provider's vector must not be stored

Errors in parentheses after a name are standard exceptions a class also derives from, so
code that caught them before keeps working. Every class is defined here and re-exported
from the top-level ``memmw`` package (the modules that raise some of them re-export those
too, so older imports keep working); ``tests/test_errors.py`` fails on a memmw error class
defined anywhere else. Internal module.
"""

from __future__ import annotations


class MemmwError(Exception):
    """Base class of every error memmw raises."""


class ConfigError(MemmwError, ValueError):
    """A configuration value or call argument is missing, malformed or out of range."""


class ToolArgumentError(ConfigError):
    """A tool argument is missing or malformed (reported to the model as an error payload)."""


class PathPolicyError(MemmwError, PermissionError):
    """A path is outside what memmw may read or write (escape, symlink, not Markdown)."""


class ContentPolicyError(MemmwError, ValueError):
    """Text memmw refuses to write (too large, NUL bytes, control characters, not UTF-8)."""


class FileReadError(MemmwError):
    """A file that cannot be indexed (binary, not UTF-8, unreadable, too large)."""


class FileBusyError(MemmwError, OSError):
    """Another memmw writer held a note's append lock past the timeout (``errno.EBUSY``)."""


class ForgetError(MemmwError):
    """An entry cannot be retracted (no such line, not a list entry, already retracted)."""


class NoteEditError(MemmwError, ValueError):
    """A line edit of a note was refused: no such line, or it no longer holds what was cited."""


class WiringError(MemmwError):
    """memmw is wired into the host so that memory would be lost silently.

    Raised for a compaction that happened without the flush that must precede it (a
    summarizer listed before memmw, or one that triggers below the flush threshold), and
    for a flush that is due with no model to run it.
    """


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


class MissingApiKeyError(ProviderUnavailableError):
    """A remote provider has no API key; ``auto`` skips to the next provider on this error."""


class BatchUnavailableError(ProviderError):
    """A provider batch API failed; the caller falls back to plain requests.

    Attributes:
        timed_out: True when the batch did not finish within the configured time.
        not_available: True when the endpoint says batch mode is not available at all.
    """

    def __init__(self, message: str, *, timed_out: bool = False, not_available: bool = False):
        super().__init__(message)
        self.timed_out = timed_out
        self.not_available = not_available


class CircuitOpenError(ProviderError):
    """The provider failed repeatedly; calls fail at once until a probe succeeds."""


class QueryTimeoutError(ProviderError):
    """The query embedding did not come back within the search's deadline.

    The search answers keyword-only (``SearchResult.partial``) instead of waiting.
    """


class InvalidVectorError(ProviderError):
    """A provider answered with a vector that must not be stored (NaN, zero, wrong size)."""


class ArchiveError(ConfigError):
    """A backup archive that cannot be restored (damaged, tampered, unknown format)."""
