"""The memmw exception tree: every error the library raises to its users derives from MemmwError.

::

    MemmwError
    ├── ConfigError (ValueError)           a setting or call argument is malformed
    │   └── ToolArgumentError              a tool argument is malformed (as an error payload)
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
        │   └── MissingApiKeyError         (memmw.embeddings.exceptions)
        ├── BatchUnavailableError          (memmw.embeddings.exceptions)
        ├── CircuitOpenError               (memmw.embeddings.breaker)
        ├── QueryTimeoutError              (memmw.embeddings.query)
        └── InvalidVectorError             (memmw.store.vectors)

Errors in parentheses after a name are standard exceptions a class also derives from, so
code that caught them before keeps working. The five provider subclasses at the bottom
live beside the code that raises them; every other class is defined here and re-exported
from the top-level ``memmw`` package. Internal module.
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
